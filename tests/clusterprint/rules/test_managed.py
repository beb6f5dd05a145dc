"""managed.* rules: what the Cluster Director API can express."""

import pytest

from tests.clusterprint.blueprint_texts import Here, table_tests

MANAGED = {"orchestrator": "managed", "slurm.nodesets[0].machine_type": "a3-megagpu-8g"}
NS = "slurm.nodesets[0]"
BLOCK = "projects/my-project/reservations/r/reservationBlocks/b"

REFUSED = [
    pytest.param("managed.cluster-id", "name", {**MANAGED, "name": Here("a3mega-prod")},
                 "error", 1, id="hyphen"),
    pytest.param("managed.cluster-id", "name", {**MANAGED, "name": Here("abcdefghijk")},
                 "error", 1, id="eleven-characters"),
    pytest.param("managed.machine-type", f"{NS}.machine_type",
                 {**MANAGED, f"{NS}.machine_type": Here("a3-highgpu-8g")}, "error", 1,
                 id="a3-high-unsupported"),
    pytest.param("managed.filestore-tier", "storage.home.filestore.tier",
                 {**MANAGED, "storage.home.filestore": {"tier": Here("BASIC_HDD"),
                                                        "capacity_gib": 1024}},
                 "error", 1, id="basic-hdd"),
    pytest.param("managed.reservation-block", f"{NS}.reservation",
                 {**MANAGED, f"{NS}.provisioning": "reservation",
                  f"{NS}.reservation": Here(BLOCK)},
                 "error", 1, id="block"),
    pytest.param("managed.unsupported-key", "network.mtu",
                 {**MANAGED, "network.mtu": Here(8244)}, "error", 1, id="mtu"),
    pytest.param("managed.unsupported-key", "network.peerings",
                 {**MANAGED, "network.peerings": Here(
                     [{"name": "p", "peer_network": "projects/other-proj/global/networks/n"}])},
                 "error", 1, id="peerings"),
    pytest.param("managed.unsupported-key", "network.private_service_access",
                 {**MANAGED, "network.private_service_access": Here({"prefix_length": 20})},
                 "error", 1, id="psa"),
    pytest.param("managed.unsupported-key", "slurm.controller",
                 {**MANAGED, "slurm.controller": Here({"machine_type": "c2-standard-8"})},
                 "error", 1, id="controller"),
    pytest.param("managed.unsupported-key", "slurm.partitions[0].max_time",
                 {**MANAGED, "slurm.partitions[0].max_time": Here("1-00:00:00")}, "error", 1,
                 id="partition-max-time"),
    pytest.param("managed.unsupported-key", "network.ssh_source_ranges",
                 {**MANAGED, "network.ssh_source_ranges": Here(["0.0.0.0/0"])}, "error", 1,
                 id="ssh-sources"),
    pytest.param("managed.unsupported-key", f"{NS}.placement",
                 {**MANAGED, f"{NS}.placement": Here("none")}, "error", 1,
                 id="placement-even-at-its-default"),
]

ACCEPTED = [
    pytest.param("managed.filestore-tier",
                 {**MANAGED, "storage.home.filestore": {"tier": "REGIONAL", "capacity_gib": 1024}},
                 id="regional"),
    pytest.param("managed.filestore-tier",
                 {"storage.home.filestore": {"tier": "BASIC_HDD", "capacity_gib": 1024}},
                 id="self-managed-basic-hdd"),
    pytest.param("managed.reservation-block",
                 {**MANAGED, f"{NS}.provisioning": "reservation",
                  f"{NS}.reservation": "projects/my-project/reservations/r"}, id="whole"),
    pytest.param("managed.cluster-id", {**MANAGED, "name": "abcdefghij"}, id="ten-characters"),
    pytest.param("managed.cluster-id", {"name": "a3mega-prod"}, id="self-managed-any-name"),
    pytest.param("managed.machine-type", {**MANAGED, f"{NS}.machine_type": "a4-highgpu-8g"},
                 id="a4"),
    pytest.param("managed.machine-type", {f"{NS}.machine_type": "a3-highgpu-8g"},
                 id="self-managed-a3-high"),
    pytest.param("managed.unsupported-key", {**MANAGED}, id="defaults-unset"),
    pytest.param("managed.unsupported-key", {"network.mtu": 8896, f"{NS}.placement": "compact"},
                 id="self-managed-sets-them"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_unsupported_key_says_so(rules_check):
    hit = rules_check.refused({**MANAGED, "network.mtu": Here(8244)}, "managed.unsupported-key",
                              "network.mtu")
    assert hit.finding.message == "the managed orchestrator cannot express this key"
    assert hit.finding.hint == "remove it, or use orchestrator: self-managed"


def test_cluster_id_hint_offers_a_name_that_fits(rules_check):
    hit = rules_check.refused({**MANAGED, "name": Here("a3mega-prod")}, "managed.cluster-id",
                              "name")
    assert hit.finding.hint == "at most 10 lowercase letters and digits, e.g. a3megaprod"
