"""location.* rules: one zone inside the region."""

import pytest

from tests.clusterprint.blueprint_texts import Here, table_tests

SUBNET = "projects/my-project/regions/{}/subnetworks/sub"
EXISTING = {"network.existing": "projects/my-project/global/networks/net"}

REFUSED = [
    pytest.param("location.zone-in-region", "zone", {"zone": Here("us-east1-b")}, "error", 1,
                 id="zone-of-another-region"),
    pytest.param("location.zone-in-region", "zone", {"zone": Here("us-central2-a")}, "error", 1,
                 id="region-prefix-is-not-enough"),
    pytest.param("location.existing-subnetwork-region", "network.existing_subnetwork",
                 {**EXISTING, "network.existing_subnetwork": Here(SUBNET.format("europe-west1"))},
                 "error", 1, id="subnetwork-in-another-region"),
]

ACCEPTED = [
    pytest.param("location.zone-in-region", {"zone": "us-central1-f"}, id="zone-in-region"),
    pytest.param("location.existing-subnetwork-region",
                 {**EXISTING, "network.existing_subnetwork": SUBNET.format("us-central1")},
                 id="subnetwork-in-region"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_zone_hint_names_both_ways_out(rules_check):
    hit = rules_check.refused({"zone": Here("us-east1-b")}, "location.zone-in-region", "zone")
    assert hit.finding.message == "zone us-east1-b is not in region us-central1"
    assert hit.finding.hint == "try us-central1-a, or region us-east1"
