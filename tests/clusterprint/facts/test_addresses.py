"""facts.addresses: how many public addresses a list of ranges admits, and the two bounds."""

from clusterprint.facts import addresses


def test_an_address_counts_once_however_the_ranges_split_or_repeat_it():
    whole = addresses.public_sources(["8.0.0.0/15"])
    split = addresses.public_sources(["8.0.0.0/16", "8.1.0.0/16", "8.0.0.0/16"])
    assert [s.count for s in whole] == [s.count for s in split] == [131072]
    assert split[0].ranges == ("8.0.0.0/16", "8.1.0.0/16")


def test_iap_private_and_unreadable_ranges_count_nothing():
    assert addresses.public_sources(["35.235.240.0/20", "10.0.0.0/8", "192.168.0.0/16",
                                     "not-a-range", "fc00::/7"]) == []


def test_the_bounds_a_slash_16_open_and_a_slash_24_wide():
    assert addresses.open_to_internet(["8.8.0.0/16"]) == []
    assert [s.ranges for s in addresses.open_to_internet(["8.8.0.0/16", "9.9.9.9/32"])] == [
        ("8.8.0.0/16", "9.9.9.9/32")]
    assert addresses.wide_ssh(["8.8.8.0/24"]) == []
    assert [s.count for s in addresses.wide_ssh(["8.8.8.0/23"])] == [512]
    assert addresses.wide_ssh(["0.0.0.0/0"]) == []  # past the open bound: refused, not warned
