"""network.* rules: CIDRs that parse and never overlap, MTU advice, existing networks."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

A3MEGA = {"slurm.nodesets[0].machine_type": "a3-megagpu-8g"}
A3ULTRA = {"slurm.nodesets[0].machine_type": "a3-ultragpu-8g"}
NETWORK = "projects/my-project/global/networks/net"
SUBNETWORK = "projects/my-project/regions/us-central1/subnetworks/sub"
EXISTING = {"network.existing": NETWORK, "network.existing_subnetwork": SUBNETWORK}
PEER = "projects/other-proj/global/networks/peer"


def peering(name, peer_network):
    """A peering entry."""
    return {"name": name, "peer_network": peer_network}


PSA = "network.private_service_access"


def lustre(*names: str) -> dict:
    """Lustre entries of the smallest tier-500 size, one per name."""
    return {"storage.lustre": [{"name": n, "filesystem": n, "capacity_gib": 18000}
                               for n in names]}


REFUSED = [
    pytest.param("network.psa-size", f"{PSA}.prefix_length",
                 {**lustre("scratch"), f"{PSA}.prefix_length": Here(24)}, "error", 1,
                 id="/24-cannot-hold-filestore-and-a-lustre-/23"),
    pytest.param("network.psa-size", f"{PSA}.range",
                 {**lustre("scratch"), f"{PSA}.range": Here("10.200.0.0/23")}, "error", 1,
                 id="a-/23-range-holds-lustre-but-not-filestore-too"),
    pytest.param("network.psa-size", f"{PSA}.prefix_length",
                 {**lustre("home", "scratch"), "storage.home": {"lustre": "home"},
                  f"{PSA}.prefix_length": Here(23)}, "error", 1, id="two-lustre-in-a-/23"),
    pytest.param("network.psa-size", PSA,
                 {**lustre(*(f"s{i}" for i in range(8))), PSA: Here({})}, "error", 1,
                 id="eight-lustre-and-filestore-overflow-the-default-/20"),
    pytest.param("network.cidr", "network.subnet_cidr",
                 {"network.subnet_cidr": Here("10.0.0.1/20")}, "error", 1, id="host-bits-set"),
    pytest.param("network.cidr", "network.subnet_cidr",
                 {"network.subnet_cidr": Here("10.0.0.256/20")}, "error", 1,
                 id="octet-over-255"),
    pytest.param("network.cidr", "network.gpu_subnets_cidr",
                 {"network.gpu_subnets_cidr": Here("10.300.0.0/16")}, "error", 1,
                 id="not-an-address"),
    pytest.param("network.cidr", "network.ssh_source_ranges[1]",
                 {"network.ssh_source_ranges": ["35.235.240.0/20", Here("35.235.240.0/99")]},
                 "error", 1, id="ssh-source-not-a-cidr"),
    pytest.param("network.cidr", "network.private_service_access.range",
                 {"network.private_service_access.range": Here("10.200.0.0/33")}, "error", 1,
                 id="psa-prefix-too-long"),
    pytest.param("network.cidr-overlap", "network.gpu_subnets_cidr",
                 {**A3MEGA, "network.subnet_cidr": "10.128.0.0/20",
                  "network.gpu_subnets_cidr": Here("10.128.0.0/16")}, "error", 1,
                 id="gpu-range-covers-subnet"),
    pytest.param("network.cidr-overlap", "network.private_service_access.range",
                 {"network.private_service_access.range": Here("10.0.8.0/21")}, "error", 1,
                 id="psa-inside-default-subnet"),
    pytest.param("network.gpu-subnets-size", "network.gpu_subnets_cidr",
                 {**A3MEGA, "network.gpu_subnets_cidr": Here("10.128.0.0/27")}, "error", 1,
                 id="/27-cannot-hold-8-/29s"),
    pytest.param("network.gpu-subnets-size", "network.gpu_subnets_cidr",
                 {**A3ULTRA, "network.gpu_subnets_cidr": Here("10.128.0.0/28")}, "error", 1,
                 id="roce-subnets-too-small"),
    pytest.param("network.gpu-subnets-size", "network.gpu_subnets_cidr",
                 {**A3ULTRA, "network.gpu_subnets_cidr": Here("10.128.0.0/26")}, "error", 1,
                 id="roce-needs-9-subnets-with-the-extra-gvnic"),
    pytest.param("network.gpu-fabric", "slurm.nodesets[1].machine_type",
                 {**A3MEGA, "slurm.nodesets[1]": {"name": "ultra", "count": 1,
                                                  "machine_type": Here("a3-ultragpu-8g")},
                  "slurm.partitions[0].nodesets": ["cpu", "ultra"]}, "error", 1,
                 id="tcpxo-and-rdma-in-one-cluster"),
    pytest.param("network.mtu-recommended", "network.mtu",
                 {**A3MEGA, "network.mtu": Here(8896)}, "warning", 1, id="a3mega-at-8896"),
    pytest.param("network.mtu-recommended", "network.mtu",
                 {**A3ULTRA, "network.mtu": Here(1460)}, "warning", 1, id="a3ultra-at-1460"),
    pytest.param("network.existing", "network.existing",
                 {"network.existing": Here(NETWORK)}, "error", 1, id="network-without-subnetwork"),
    pytest.param("network.existing-project", "network.existing",
                 {"project": "my-project",
                  "network.existing": Here("projects/host-project/global/networks/shared"),
                  "network.existing_subnetwork": SUBNETWORK}, "error", 1, id="shared-vpc-host"),
    pytest.param("network.existing-ignored", "network.mtu",
                 {"network.existing": NETWORK, "network.existing_subnetwork": SUBNETWORK,
                  "network.mtu": Here(8896)}, "warning", 1, id="mtu-of-existing"),
    pytest.param("network.existing", "network.existing_subnetwork",
                 {"network.existing_subnetwork": Here(SUBNETWORK)}, "error", 1,
                 id="subnetwork-without-network"),
    pytest.param("network.range-size", "network.subnet_cidr",
                 {"network.subnet_cidr": Here("10.0.0.0/30")}, "error", 1, id="subnet-below-/29"),
    pytest.param("network.range-size", "network.private_service_access.range",
                 {"network.private_service_access.range": Here("10.200.0.0/25")}, "error", 1,
                 id="psa-range-below-/24"),
    pytest.param("network.psa", "network.private_service_access",
                 {"network.private_service_access": Here(
                     {"prefix_length": 20, "range": "10.200.0.0/20"})}, "error", 1,
                 id="prefix-and-range"),
    pytest.param("network.peerings", "network.peerings[0].peer_network",
                 {**EXISTING, "network.peerings": [peering("self", Here(NETWORK))]}, "error", 1,
                 id="peers-with-its-own-network"),
    pytest.param("network.peerings", "network.peerings[1].peer_network",
                 {"network.peerings": [peering("a", PEER), peering("b", Here(PEER))]}, "error", 1,
                 id="two-peerings-to-one-network"),
    pytest.param("network.peerings", "network.peerings[2].peer_network",
                 {**EXISTING, "network.peerings": [peering("a", PEER), peering("b", PEER),
                                                   peering("c", Here(NETWORK))]}, "error", 2,
                 id="twice-and-to-itself"),
]

ACCEPTED = [
    pytest.param("network.psa-size", {**lustre("scratch"), f"{PSA}.prefix_length": 22},
                 id="filestore-and-one-lustre-in-a-/22"),
    pytest.param("network.psa-size", {**lustre("home"), "storage.home": {"lustre": "home"},
                                      f"{PSA}.range": "10.200.0.0/23"},
                 id="one-lustre-fills-a-/23-exactly"),
    pytest.param("network.psa-size", {"storage.home.filestore.tier": "BASIC_HDD",
                                      f"{PSA}.prefix_length": 24}, id="basic-filestore-in-a-/24"),
    pytest.param("network.psa-size", {**lustre(*(f"s{i}" for i in range(7)))},
                 id="seven-lustre-and-filestore-in-the-default-/20"),
    pytest.param("network.range-size", {"network.subnet_cidr": "10.0.0.0/29",
                                        "network.private_service_access.range": "10.200.0.0/24"},
                 id="smallest-subnet-and-psa-range"),
    pytest.param("network.gpu-fabric",
                 {**A3ULTRA, "slurm.nodesets[1]": {"name": "b200", "count": 1,
                                                   "machine_type": "a4-highgpu-8g"},
                  "slurm.partitions[0].nodesets": ["cpu", "b200"]},
                 id="a3ultra-and-a4-share-the-roce-fabric"),
    pytest.param("network.cidr", {"network.subnet_cidr": "10.1.0.0/16",
                                  "network.ssh_source_ranges": ["0.0.0.0/0"]}, id="cidrs"),
    pytest.param("network.cidr-overlap", {"network.subnet_cidr": "10.128.0.0/20"},
                 id="cpu-only-needs-no-gpu-range"),
    pytest.param("network.cidr-overlap", {"network.ssh_source_ranges": ["10.0.0.0/8"]},
                 id="ssh-sources-may-cover-the-subnet"),
    pytest.param("network.cidr-overlap", {**A3MEGA, "network.private_service_access.range":
                                          "10.200.0.0/20"}, id="disjoint-ranges"),
    pytest.param("network.gpu-subnets-size",
                 {**A3MEGA, "network.gpu_subnets_cidr": "10.128.0.0/26"}, id="8-/29s-in-a-/26"),
    pytest.param("network.gpu-subnets-size",
                 {**A3MEGA, "network.gpu_networks": "none", "network.gpu_subnets_cidr":
                  "10.128.0.0/28"}, id="no-gpu-networks"),
    pytest.param("network.mtu-recommended", {**A3MEGA, "network.mtu": 8244},
                 id="a3mega-at-8244"),
    pytest.param("network.mtu-recommended", {**A3MEGA}, id="mtu-unset"),
    pytest.param("network.mtu-recommended", {"network.mtu": 1300}, id="cpu-at-range-minimum"),
    pytest.param("network.mtu-recommended", {"network.mtu": 8896}, id="cpu-at-range-maximum"),
    pytest.param("network.existing", {"network.existing": NETWORK,
                                      "network.existing_subnetwork": SUBNETWORK}, id="pair"),
    pytest.param("network.existing-project",
                 {"project": "my-project", "network.existing": NETWORK,
                  "network.existing_subnetwork": SUBNETWORK}, id="same-project"),
    pytest.param("network.existing-ignored", {"network.mtu": 8896}, id="mtu-of-new-network"),
    pytest.param("network.psa", {"network.private_service_access.range": "10.200.0.0/20"},
                 id="range-only"),
    pytest.param("network.peerings",
                 {**EXISTING, "network.peerings": [
                     peering("a", PEER), peering("b", "projects/other-proj/global/networks/peer2"),
                     peering("c", "projects/third-proj/global/networks/net")]},
                 id="distinct-peers-of-an-existing-network"),
    pytest.param("network.peerings", {"network.peerings": [peering("a", NETWORK)]},
                 id="a-created-network-peers-with-any-other"),
]

#: Several problems of one rule in one blueprint: each is reported, none twice.
REFUSED += [
    pytest.param("network.open-firewall", "network.ssh_source_ranges[0]",
                 {"network.ssh_source_ranges": [Here("0.0.0.0/0")]}, "error", 1,
                 id="ssh-from-anywhere"),
    pytest.param("network.open-firewall", "network.ssh_source_ranges[1]",
                 {"network.ssh_source_ranges": ["10.0.0.0/8", Here("0.0.0.0/1"), "128.0.0.0/1"]},
                 "error", 1, id="ssh-from-anywhere-in-halves"),
    pytest.param("network.open-firewall", "network.gpu_subnets_cidr",
                 {"slurm.nodesets[0].machine_type": "a3-megagpu-8g",
                  "network.gpu_subnets_cidr": Here("8.0.0.0/8")}, "error", 1,
                 id="gpu-subnets-of-public-addresses"),
    pytest.param("network.open-firewall", "network.private_service_access.range",
                 {"storage.lustre": [{"name": "s", "filesystem": "s", "capacity_gib": 18000}],
                  "network.private_service_access.range": Here("8.0.0.0/12")}, "error", 1,
                 id="lustre-reached-from-a-public-psa-range"),
    pytest.param("network.ssh-wide", "network.ssh_source_ranges[0]",
                 {"network.ssh_source_ranges": [Here("8.8.0.0/20")]}, "warning", 1,
                 id="ssh-from-sixteen-sites"),
    pytest.param("network.cidr", "network.ssh_source_ranges[0]",
                 {"network.subnet_cidr": "10.0.0.1/20", "network.gpu_subnets_cidr": "10.0.0.0/64",
                  "network.ssh_source_ranges": [Here("999.0.0.0/8"), "1.2.3.4/8"]}, "error", 4,
                 id="every-bad-cidr"),
    pytest.param("network.range-size", "network.private_service_access.range",
                 {"network.subnet_cidr": "10.0.0.0/30",
                  "network.private_service_access.range": Here("10.200.0.0/25")}, "error", 2,
                 id="subnet-and-psa-out-of-range"),
    pytest.param("network.cidr-overlap", "network.private_service_access.range",
                 {**A3MEGA, "network.gpu_subnets_cidr": "10.0.0.0/16",
                  "network.subnet_cidr": "10.0.0.0/20",
                  "network.private_service_access.range": Here("10.0.0.0/24")}, "error", 3,
                 id="three-ranges-overlapping-each-other"),
    pytest.param("network.gpu-fabric", "slurm.nodesets[2].machine_type",
                 {**A3MEGA,
                  "slurm.nodesets[1]": {"name": "ultra", "count": 1,
                                        "machine_type": "a3-ultragpu-8g"},
                  "slurm.nodesets[2]": {"name": "b200", "count": 1,
                                        "machine_type": Here("a4-highgpu-8g")},
                  "slurm.partitions[0].nodesets": ["cpu", "ultra", "b200"]}, "error", 2,
                 id="each-nodeset-off-the-first-fabric"),
    pytest.param("network.mtu-recommended", "network.mtu",
                 {**A3MEGA, "network.gpu_networks": "none", "network.mtu": Here(1500),
                  "slurm.nodesets[1]": {"name": "ultra", "count": 1,
                                        "machine_type": "a3-ultragpu-8g"},
                  "slurm.partitions[0].nodesets": ["cpu", "ultra"]}, "warning", 2,
                 id="one-warning-per-family"),
    pytest.param("network.existing-project", "network.existing_subnetwork",
                 {"project": "cluster-proj", **EXISTING,
                  "network.existing_subnetwork": Here(SUBNETWORK)}, "error", 2,
                 id="network-and-subnetwork-of-another-project"),
    pytest.param("network.existing-ignored", "network.subnet_cidr",
                 {**EXISTING, "network.mtu": 8896, "network.subnet_cidr": Here("10.0.0.0/20")},
                 "warning", 2, id="mtu-and-subnet-both-ignored"),
]
ACCEPTED += [
    pytest.param("network.open-firewall", {"network.ssh_source_ranges": ["8.8.0.0/16",
                                                                         "35.235.240.0/20"]},
                 id="ssh-from-a-slash-16-and-iap"),
    pytest.param("network.open-firewall",
                 {"network.private_service_access.range": "8.0.0.0/12"},
                 id="a-psa-range-without-lustre-gets-no-lnet-rule"),
    pytest.param("network.ssh-wide", {"network.ssh_source_ranges": ["8.8.8.0/24"]},
                 id="ssh-from-one-site"),
    pytest.param("network.range-size", {"network.subnet_cidr": "10.0.0.0/29",
                                        "network.private_service_access.range":
                                            "10.200.0.0/24",
                                        "storage.home.filestore.tier": "BASIC_HDD"},
                 id="smallest-subnet-and-psa-range"),
    pytest.param("network.range-size", {"network.subnet_cidr": "10.0.0.0/8",
                                        "network.gpu_subnets_cidr": "172.16.0.0/16",
                                        "network.private_service_access.range":
                                            "192.168.0.0/16"},
                 id="largest-subnet"),
    pytest.param("network.cidr-overlap", {"network.subnet_cidr": "10.0.0.0/20",
                                          "network.private_service_access.range":
                                              "10.0.16.0/20"},
                 id="adjacent-ranges-touch-but-do-not-overlap"),
    pytest.param("network.gpu-subnets-size", {**A3MEGA,
                                              "network.gpu_subnets_cidr": "10.128.0.0/26"},
                 id="/26-holds-exactly-8-/29s"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


@pytest.mark.parametrize("mtu", [1299, 8897])
def test_mtu_outside_the_vpc_range_is_refused_by_the_model(rules_check, mtu):
    hit = rules_check.refused({"network.mtu": Here(mtu)}, "schema.range", "network.mtu")
    assert hit.finding.message == f"{mtu} is out of range"


def test_host_bits_hint_gives_the_network_address(rules_check):
    hit = rules_check.refused({"network.subnet_cidr": Here("10.0.0.1/20")}, "network.cidr",
                              "network.subnet_cidr")
    assert hit.finding.hint == "try 10.0.0.0/20"


def test_overlap_names_the_other_key(rules_check):
    hit = rules_check.refused({"network.private_service_access.range": Here("10.0.8.0/21")},
                              "network.cidr-overlap", "network.private_service_access.range")
    assert hit.finding.message == "10.0.8.0/21 overlaps 10.0.0.0/20 of network.subnet_cidr"


def test_default_mtu_follows_the_gpu_family(make_text, check):
    assert check(make_text(A3MEGA)).blueprint.mtu == 8244
    assert check(make_text(A3ULTRA)).blueprint.mtu == 8896
    assert check(make_text()).blueprint.mtu == 8896


def test_repeated_peering_names_the_first(rules_check):
    hit = rules_check.refused({"network.peerings": [peering("a", PEER), peering("b", Here(PEER))]},
                              "network.peerings", "network.peerings[1].peer_network")
    assert hit.finding.message == f"peerings[0] already peers with {PEER}"


def test_psa_size_says_what_each_producer_takes(rules_check):
    hit = rules_check.refused({**lustre("scratch"), f"{PSA}.prefix_length": Here(24)},
                              "network.psa-size", f"{PSA}.prefix_length")
    assert hit.finding.message == ("a /24 range holds 256 addresses, but Filestore ZONAL a /26 "
                                   "and Lustre scratch a /23 take 576")
    assert hit.finding.hint == "use a prefix length of 22 or shorter"


def test_a_roce_vpc_takes_no_firewall_but_the_extra_gvnic_subnet_does(rules_check):
    hit = rules_check.refused({"slurm.nodesets[0].machine_type": "a3-ultragpu-8g",
                               "zone": "us-central1-b",
                               "network.gpu_subnets_cidr": Here("8.0.0.0/8")},
                              "network.open-firewall", "network.gpu_subnets_cidr")
    assert hit.finding.message == (
        "the firewall rule of each subnet made from it would admit more than a /16's worth of "
        "public addresses: 8.128.0.0/12, which the policy no-open-firewall refuses")
    assert hit.finding.hint == "use a private range: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
