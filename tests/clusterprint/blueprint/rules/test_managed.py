"""managed.* rules: what the Cluster Director API can express."""

import re
from dataclasses import replace

import pytest

from clusterprint.blueprint.findings import Fix, format_path, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.managed import NO_MANAGED_FIX, as_managed_mode_sees_it
from clusterprint.blueprint.validate import check_text
from clusterprint.facts import machines
from clusterprint.facts.catalog import MANAGED_UNSUPPORTED_KEYS
from tests.support.blueprint_texts import (
    MINIMAL,
    Here,
    apply_overrides,
    blueprint_text,
    table_tests,
)

MANAGED = {"orchestrator": "managed", "slurm.nodesets[0].machine_type": "a3-megagpu-8g"}
NS = "slurm.nodesets[0]"
BLOCK = "projects/my-project/reservations/r/reservationBlocks/b"
LOGIN = "slurm.login"


def lustre(index: int, capacity, tier: int = 500) -> dict:
    """A Lustre entry at ``storage.lustre[index]`` (valid for its tier unless said)."""
    return {f"storage.lustre[{index}]": {"name": f"scratch{index}", "filesystem": f"fs{index}",
                                         "performance_tier": tier, "capacity_gib": capacity}}


def second_nodeset(machine_type) -> dict:
    """A second nodeset, in the partition, of ``machine_type``."""
    return {"slurm.nodesets[1]": {"name": "more", "count": 1, "machine_type": machine_type},
            "slurm.partitions[0].nodesets": ["cpu", "more"]}

REFUSED = [
    pytest.param("managed.cluster-id", "name", {**MANAGED, "name": Here("a3mega-prod")},
                 "error", 1, id="hyphen"),
    pytest.param("managed.cluster-id", "name", {**MANAGED, "name": Here("abcdefghijk")},
                 "error", 1, id="eleven-characters"),
    *[pytest.param("managed.machine-type", f"{where}.machine_type",
                   {**MANAGED, f"{where}.machine_type": Here(machine)}, "error", 1, id=case)
      for where, machine, case in ((NS, "a3-highgpu-8g", "a3-high-unsupported"),
                                   (NS, "c2-standard-8", "cpu-type-outside-n2"),
                                   (LOGIN, "n2-standard-48", "login-over-32-vcpus"),
                                   (LOGIN, "n2-highmem-4", "login-not-n2-standard"))],
    pytest.param("managed.machine-type", "slurm.nodesets[1].machine_type",
                 {**MANAGED, f"{NS}.machine_type": "n2d-standard-8",
                  **second_nodeset(Here("g2-standard-8"))}, "error", 2,
                 id="every-nodeset-outside-the-list"),
    pytest.param("managed.login-count", f"{LOGIN}.count",
                 {**MANAGED, f"{LOGIN}.count": Here(0)}, "error", 1, id="no-login-node"),
    pytest.param("managed.region", "region",
                 {**MANAGED, "region": Here("europe-west2"), "zone": "europe-west2-a"},
                 "error", 1, id="london"),
    pytest.param("managed.lustre-capacity", "storage.lustre[0].capacity_gib",
                 {**MANAGED, **lustre(0, Here(9_000), tier=1000)}, "error", 1,
                 id="tier-1000-minimum-below-the-api"),
    pytest.param("managed.lustre-capacity", "storage.lustre[1].capacity_gib",
                 {**MANAGED, **lustre(0, 7_776_000), **lustre(1, Here(9_000), tier=1000)},
                 "error", 2, id="every-lustre-outside-the-range"),
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
    pytest.param("managed.machine-type", {**MANAGED, f"{NS}.machine_type": "n2-standard-128",
                                          **second_nodeset("n2-highcpu-96")},
                 id="largest-n2-shapes"),
    pytest.param("managed.machine-type", {**MANAGED, f"{NS}.machine_type": "n2-highmem-2",
                                          f"{LOGIN}.machine_type": "n2-standard-32"},
                 id="login-at-32-vcpus"),
    pytest.param("managed.machine-type", {f"{NS}.machine_type": "c2-standard-8",
                                          f"{LOGIN}.machine_type": "n2-standard-48"},
                 id="self-managed-any-type"),
    pytest.param("managed.login-count", {**MANAGED, f"{LOGIN}.count": 1}, id="one-login-node"),
    pytest.param("managed.login-count", {f"{LOGIN}.count": 0}, id="self-managed-no-login"),
    pytest.param("managed.region", {**MANAGED, "region": "us-west3", "zone": "us-west3-a"},
                 id="salt-lake-city"),
    pytest.param("managed.region", {"region": "europe-west2", "zone": "europe-west2-a"},
                 id="self-managed-any-region"),
    pytest.param("managed.lustre-capacity",
                 {**MANAGED, **lustre(0, 18_000), **lustre(1, 7_632_000)},
                 id="both-ends-of-the-range"),
    pytest.param("managed.lustre-capacity", lustre(0, 9_000, tier=1000),
                 id="self-managed-tier-1000-minimum"),
    pytest.param("managed.unsupported-key", {**MANAGED}, id="defaults-unset"),
    pytest.param("managed.unsupported-key", {"network.mtu": 8896, f"{NS}.placement": "compact"},
                 id="self-managed-sets-them"),
]

#: Several problems of one rule in one blueprint: each is reported, none twice.
REFUSED += [
    pytest.param("managed.unsupported-key", "network.peerings",
                 {**MANAGED, "network.mtu": 8244, f"{NS}.placement": "none",
                  "network.peerings": Here([{"name": "p", "peer_network":
                                             "projects/other-proj/global/networks/n"}])},
                 "error", 3, id="every-key-the-api-cannot-express"),
    pytest.param("managed.reservation-block", "slurm.nodesets[1].reservation",
                 {**MANAGED, f"{NS}.provisioning": "reservation", f"{NS}.reservation": BLOCK,
                  "slurm.nodesets[1]": {"name": "b", "machine_type": "a3-megagpu-8g",
                                        "count": 1, "provisioning": "reservation",
                                        "reservation": Here(BLOCK)},
                  "slurm.partitions[0].nodesets": ["cpu", "b"]}, "error", 2,
                 id="every-nodeset-on-a-block"),
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


def test_machine_type_hint_names_what_the_api_runs(rules_check):
    hit = rules_check.refused({**MANAGED, f"{NS}.machine_type": Here("c2-standard-8")},
                              "managed.machine-type", f"{NS}.machine_type")
    assert hit.finding.message == "the managed API does not run c2-standard-8"
    gpus = sorted(m for m, f in machines.GPU_MACHINES.items() if f.managed)
    assert f"use {', '.join(gpus)} or an N2 type" in hit.finding.hint
    assert "a3-megagpu-8g" in gpus and "a3-highgpu-8g" not in gpus


def test_a_gpu_family_catalogued_as_managed_is_allowed(rules_check, monkeypatch):
    """The allow-list reads MachineFamily.managed: a new family (A4X) needs no second list."""
    # A made-up family: only ``managed`` matters to this rule.
    later = machines.MachineFamily(machine_type="a9-highgpu-8g", family="A9", gpu="nvidia-next",
                                   gres="next", gpus=8, nvlink=True, managed=True,
                                   price="made up", gpu_quota="NVIDIA_NEXT_GPUS")
    rules_check.refused({**MANAGED, f"{NS}.machine_type": Here(later.machine_type)},
                        "managed.machine-type", f"{NS}.machine_type")
    monkeypatch.setitem(machines.GPU_MACHINES, later.machine_type, later)
    rules_check.accepted({**MANAGED, f"{NS}.machine_type": later.machine_type},
                         "managed.machine-type")


def test_lustre_capacity_says_the_api_range(rules_check):
    hit = rules_check.refused({**MANAGED, **lustre(0, Here(7_776_000))},
                              "managed.lustre-capacity", "storage.lustre[0].capacity_gib")
    assert hit.finding.message == ("the managed API creates Lustre of 18000 to 7632000 GiB, "
                                   "not 7776000")
    assert hit.finding.hint == "use 18000 to 7632000 GiB, on the tier's steps"


# No hint that has the user set a key managed mode refuses.

def _tables() -> list:
    """Every REFUSED case of every other domain's rule table."""
    import importlib.util
    from pathlib import Path

    cases = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        if path.stem in ("test_managed", "test_registry"):
            continue
        spec = importlib.util.spec_from_file_location(f"managed_view_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases += [pytest.param(p.values[2], id=f"{path.stem[5:]}-{p.id}") for p in module.REFUSED]
    return cases


def _names_an_unsupported_key(text: str) -> list[str]:
    leaves = {key.split(".")[-1].removesuffix("[]") for key in MANAGED_UNSUPPORTED_KEYS}
    return [leaf for leaf in sorted(leaves) if re.search(rf"\b{leaf}\b", text)]


@pytest.mark.parametrize("overrides", _tables())
def test_no_finding_of_another_rule_sends_a_managed_user_to_a_refused_key(overrides):
    text = blueprint_text({**overrides, "orchestrator": "managed"})
    for located in check_text("bp.yaml", text).findings:
        finding = located.finding
        if finding.rule.startswith(("managed.", "schema.")):
            continue
        where = format_path(finding.path)
        assert not _names_an_unsupported_key(where), located.line_text()
        assert not _names_an_unsupported_key(finding.hint or ""), located.line_text()


def test_a_fix_managed_mode_cannot_take_leaves_the_hint(rules_check):
    managed = rules_check.refused({"orchestrator": "managed", f"{NS}.machine_type": "a3-megagpu-8g",
                                   **second_nodeset(Here("a4-highgpu-8g"))},
                                  "network.gpu-fabric", "slurm.nodesets[1].machine_type")
    assert managed.finding.hint == "one GPU fabric per cluster: split it in two"
    self_managed = rules_check.refused({f"{NS}.machine_type": "a3-megagpu-8g",
                                        **second_nodeset(Here("a4-highgpu-8g"))},
                                       "network.gpu-fabric", "slurm.nodesets[1].machine_type")
    assert self_managed.finding.hint.endswith(", or set network.gpu_networks: none")


def test_advice_on_a_key_managed_mode_does_not_use_is_not_given(check, make_text):
    text = make_text({**MANAGED, "network.mtu": 1500, f"{NS}.placement": "compact",
                      f"{NS}.count": 1})
    rules = {(f.finding.rule, format_path(f.finding.path)) for f in check(text).findings}
    assert ("managed.unsupported-key", "network.mtu") in rules
    assert ("managed.unsupported-key", f"{NS}.placement") in rules
    assert not {r for r, _ in rules} & {"network.mtu-recommended", "slurm.placement"}
    self_managed = {f.finding.rule for f in check(make_text(
        {"network.mtu": 1500, f"{NS}.machine_type": "a3-megagpu-8g",
         f"{NS}.placement": "compact", f"{NS}.count": 1})).findings}
    assert {"network.mtu-recommended", "slurm.placement"} <= self_managed


def test_a_finding_left_without_a_fix_says_managed_mode_cannot_change_it():
    bp = Blueprint.model_validate(apply_overrides(MINIMAL, {"orchestrator": "managed"}))
    only_refused = warning(("slurm", "nodesets", 0, "machine_type"), "x",
                           (Fix("set network.mtu: 1500", sets="network.mtu"),))
    (kept,) = as_managed_mode_sees_it(bp, [replace(only_refused, rule="network.example")])
    assert kept.hint == NO_MANAGED_FIX
