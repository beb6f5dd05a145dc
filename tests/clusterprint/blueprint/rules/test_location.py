"""location.* rules: one zone inside the region."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

SUBNET = "projects/my-project/regions/{}/subnetworks/sub"
EXISTING = {"network.existing": "projects/my-project/global/networks/net"}
NS = "slurm.nodesets[0]"

REFUSED = [
    pytest.param("location.zone-in-region", "zone", {"zone": Here("us-east1-b")}, "error", 1,
                 id="zone-of-another-region"),
    pytest.param("location.zone-in-region", "zone", {"zone": Here("us-central2-a")}, "error", 1,
                 id="region-prefix-is-not-enough"),
    pytest.param("location.existing-subnetwork-region", "network.existing_subnetwork",
                 {**EXISTING, "network.existing_subnetwork": Here(SUBNET.format("europe-west1"))},
                 "error", 1, id="subnetwork-in-another-region"),
    pytest.param("location.machine-zone", f"{NS}.machine_type",
                 {f"{NS}.machine_type": Here("a4-highgpu-8g")}, "error", 1,
                 id="a4-in-a-zone-of-its-region-without-it"),
    pytest.param("location.machine-zone", f"{NS}.machine_type",
                 {"region": "us-east1", "zone": "us-east1-c",
                  f"{NS}.machine_type": Here("a3-megagpu-8g")}, "error", 1,
                 id="a3mega-in-a-region-without-it"),
    pytest.param("location.machine-zone", "slurm.nodesets[1].machine_type",
                 {f"{NS}.machine_type": "a4-highgpu-8g",
                  "slurm.nodesets[1]": {"name": "ultra", "count": 1,
                                        "machine_type": Here("a3-ultragpu-8g")},
                  "slurm.partitions[0].nodesets": ["cpu", "ultra"]}, "error", 2,
                 id="two-gpu-nodesets-neither-in-the-zone"),
    pytest.param("location.machine-zone", f"{NS}.machine_type",
                 {"zone_unlisted": True, f"{NS}.machine_type": Here("a4-highgpu-8g")},
                 "warning", 1, id="zone-unlisted-lets-a-zone-newer-than-the-table-through"),
    pytest.param("location.zone-known", "zone", {"zone": Here("us-central1-q"),
                                                 "slurm.nodesets[0].machine_type": "e2-standard-4",
                                                 "slurm.controller.machine_type": "e2-standard-8",
                                                 "slurm.login.machine_type": "e2-standard-2"},
                 "error", 1, id="a-zone-the-region-does-not-have-whatever-the-types"),
    pytest.param("location.machine-zone", "zone_unlisted", {"zone_unlisted": Here(True)},
                 "warning", 1, id="zone-unlisted-with-nothing-to-let-through"),
]

ACCEPTED = [
    pytest.param("location.zone-in-region", {"zone": "us-central1-f"}, id="zone-in-region"),
    pytest.param("location.existing-subnetwork-region",
                 {**EXISTING, "network.existing_subnetwork": SUBNET.format("us-central1")},
                 id="subnetwork-in-region"),
    pytest.param("location.machine-zone", {"zone": "us-central1-b",
                                           f"{NS}.machine_type": "a4-highgpu-8g"},
                 id="a4-in-the-one-zone-of-its-region"),
    pytest.param("location.zone-known", {"zone": "us-central1-q", "zone_unlisted": True},
                 id="a-zone-newer-than-the-table"),
    pytest.param("location.zone-known", {"region": "xx-north9", "zone": "xx-north9-a"},
                 id="a-region-the-table-does-not-know-is-not-checked"),
    pytest.param("location.machine-zone", {"slurm.controller.machine_type": "e2-standard-8"},
                 id="a-type-the-zone-table-does-not-list-is-not-checked"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_zone_hint_names_both_ways_out(rules_check):
    hit = rules_check.refused({"zone": Here("us-east1-b")}, "location.zone-in-region", "zone")
    assert hit.finding.message == "zone us-east1-b is not in region us-central1"
    assert hit.finding.hint == "try us-central1-a, or region us-east1"


def test_machine_zone_hint_names_the_zones_of_the_region_or_the_regions(rules_check):
    hit = rules_check.refused({f"{NS}.machine_type": Here("a4-highgpu-8g")},
                              "location.machine-zone", f"{NS}.machine_type")
    assert hit.finding.message == "a4-highgpu-8g is not offered in zone us-central1-a"
    assert hit.finding.hint == ("did you mean us-central1-b? zones of us-central1 that offer "
                                "it: us-central1-b; if the catalog's zone table is older than "
                                "the zone's offer, set zone_unlisted: true")
    far = rules_check.refused({"region": "us-east1", "zone": "us-east1-c",
                               f"{NS}.machine_type": Here("a3-ultragpu-8g")},
                              "location.machine-zone", f"{NS}.machine_type")
    assert far.finding.hint == ("us-east1 has none; regions that do: asia-south1, asia-south2, "
                                "europe-west1, europe-west4, us-central1, us-east4, us-east5, "
                                "us-south1, us-west1; if the catalog's zone table is older than "
                                "the zone's offer, set zone_unlisted: true")


def test_a_default_controller_type_the_zone_lacks_names_the_same_shape_it_has(check, make_text):
    """C2, the controller's default, is not in every GPU zone: the hint names N2 there."""
    checked = check(make_text({"region": "us-south1", "zone": "us-south1-b",
                               f"{NS}.machine_type": "a4-highgpu-8g"}))
    assert checked.exit_code == 1
    assert [f.finding.hint for f in checked.findings] == [
        "us-south1-b offers n2-standard-8: set slurm.controller.machine_type to one; if the "
        "catalog's zone table is older than the zone's offer, set zone_unlisted: true"]


def test_zone_unlisted_turns_the_error_into_a_warning_that_says_how_to_check(rules_check):
    hit = rules_check.refused({"zone_unlisted": True, f"{NS}.machine_type": Here("a4-highgpu-8g")},
                              "location.machine-zone", f"{NS}.machine_type", "warning")
    assert hit.finding.message == ("a4-highgpu-8g is not offered in zone us-central1-a as far "
                                   "as the catalog's zone table knows; zone_unlisted says it is")
    assert hit.finding.hint == ("check it is: gcloud compute machine-types list "
                                "--filter=name=a4-highgpu-8g --zones=us-central1-a")


def test_an_unknown_zone_is_told_the_closest_of_its_region(rules_check):
    hit = rules_check.refused({"zone": Here("us-central1-q")}, "location.zone-known", "zone")
    assert hit.finding.hint.startswith("did you mean us-central1-")
    assert hit.finding.hint.endswith("if the zone is newer than the table, set zone_unlisted: "
                                     "true")


def test_a_zone_its_region_lacks_is_one_error_not_one_more_per_machine_type(check, make_text):
    """A typo in the zone is one line to fix: the types are not told the zone lacks them."""
    checked = check(make_text({"zone": "us-central1-z", f"{NS}.machine_type": "a3-megagpu-8g"}))
    assert [(f.finding.rule, f.finding.path) for f in checked.findings] == [
        ("location.zone-known", ("zone",))]
