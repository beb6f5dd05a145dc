"""Generated blueprints whose names try to collide: what validates must also plan soundly.

Each blueprint draws its nodesets, Lustre entries, buckets and peerings from names that
derive one another's resource names (a Lustre entry ``home``, a bucket named like a
Lustre entry, nodesets ``x`` and ``x-template``, peerings named like GPU subnets).
A blueprint the validator accepts must plan with one resource per logical name, one
managed storage resource per id, no firewall without a source and no resource over
GCE's label limit; one refused only by ``names.derived-collision`` must really collide
when planned regardless. The CLI keeps its contract on a few of them: exit 1 with the
findings on stderr, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text
from clusterprint.contract import naming
from clusterprint.facts import catalog
from clusterprint.preview.plan import Plan, plan_program
from tests.support.blueprint_texts import LINE_FORMAT, MINIMAL, apply_overrides, to_yaml
from tests.support.paths import ROOT

#: Nodesets beside one named x: its children's names, and the storage children's.
NODESETS = ["x-template", "x-group", "x-placement", "x-resize", "home", "lnet"]
LUSTRE = ["home", "lnet", "scratch", "x", "bucket-0", "bucket-1"]
BUCKETS = ["home", "lnet", "scratch", "ckpts", "bucket-0"]
PEERINGS = ["gvnic-1", "gpu-0", "rdma-0", "vpc", "subnet", "ssh", "internal", "x"]
MACHINES = ["n2-standard-4", "n2-standard-4", "a3-megagpu-8g", "a3-ultragpu-8g"]
SSH = [None, [], ["10.10.0.0/16"]]
LABEL_KEYS = ["team", "cost-center", "env", "owner", naming.CLUSTER_LABEL]
FIREWALL = "gcp:compute/firewall:Firewall"
MANAGED_CLUSTER = "gcp:hypercomputecluster/cluster:Cluster"


@st.composite
def blueprints(draw) -> dict:
    """Blueprint data whose entry names are drawn to derive each other's names."""
    managed = draw(st.booleans())
    # Unique within each list: a repeat is names.unique's, tested on its own.
    nodesets = draw(st.permutations(
        ["x", *draw(st.lists(st.sampled_from(NODESETS), max_size=2, unique=True))]))
    lustre = draw(st.lists(st.sampled_from(LUSTRE), max_size=2, unique=True))
    buckets = draw(st.lists(st.sampled_from(BUCKETS), max_size=2, unique=True))
    data = {
        "orchestrator": "managed" if managed else "self-managed",
        "project": "my-project",
        # A zone that offers every drawn machine type, so a draw is refused for its names only.
        "zone": "us-central1-b",
        "labels": {key: "v" for key in draw(st.lists(st.sampled_from(LABEL_KEYS), max_size=2))},
        "slurm.nodesets": [
            {"name": name, "machine_type": draw(st.sampled_from(MACHINES)), "count": 2,
             "provisioning": draw(st.sampled_from(["on-demand", "flex-start"])),
             **({} if managed else {"placement": draw(st.sampled_from(["compact", "none"]))})}
            for name in nodesets],
        "slurm.partitions": [{"name": "debug", "nodesets": nodesets}],
        "storage.lustre": [{"name": name, "filesystem": f"fs{i}", "capacity_gib": 18000}
                           for i, name in enumerate(lustre)],
        "storage.buckets": [{"bucket": name, "create": draw(st.booleans())}
                            for name in buckets],
    }
    if lustre and draw(st.booleans()):
        data["storage.home"] = {"lustre": lustre[0]}
    if not managed:
        data["network.peerings"] = [
            {"name": name, "peer_network": f"projects/other-proj/global/networks/n{i}"}
            for i, name in enumerate(draw(st.lists(st.sampled_from(PEERINGS), max_size=2,
                                                   unique=True)))]
        ssh = draw(st.sampled_from(SSH))
        if ssh is not None:
            data["network.ssh_source_ranges"] = ssh
    return apply_overrides(MINIMAL, data)


def plan_of(bp: Blueprint) -> Plan:
    """The blueprint's plan, in-process, whatever the rules say of it."""
    from clusterprint.components.cluster import TrainingCluster
    from clusterprint.components.managed import ManagedTrainingCluster

    kind = ManagedTrainingCluster if bp.orchestrator == "managed" else TrainingCluster
    return plan_program(lambda: kind(bp.name, bp))


def collisions(plan: Plan) -> list[str]:
    """Logical names planned twice, and managed storage ids given twice."""
    names = Counter(r.name for r in plan.resources)
    ids = Counter(s["id"] for r in plan.resources if r.type == MANAGED_CLUSTER
                  for s in r.inputs.get("storageResources", []))
    return sorted(n for n, c in names.items() if c > 1) + sorted(i for i, c in ids.items()
                                                                  if c > 1)


def assert_sound(plan: Plan, bp: Blueprint) -> None:
    """What a valid blueprint's plan must never hold."""
    assert not collisions(plan)
    for res in plan.resources:
        if res.type == FIREWALL:
            assert res.inputs.get("sourceRanges") or res.inputs.get("sourceTags"), res.name
        labels = res.inputs.get("labels")
        if isinstance(labels, dict):
            assert len(labels) <= catalog.MAX_LABELS, res.name
            assert labels[naming.CLUSTER_LABEL] == bp.name, res.name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blueprints())
def test_generated_blueprints_plan_soundly_or_are_refused(data):
    checked = check_text("bp.yaml", to_yaml(data))
    lines = [f.line_text() for f in checked.findings]
    assert all(LINE_FORMAT.match(line) for line in lines), lines
    errors = {f.finding.rule for f in checked.findings if f.finding.severity == "error"}
    event(f"{data['orchestrator']}: " + (", ".join(sorted(errors)) or "valid"))
    if checked.ok:
        assert_sound(plan_of(checked.blueprint), checked.blueprint)
        return
    assert checked.exit_code == 1 and errors, lines
    if errors == {"names.derived-collision"}:
        assert collisions(plan_of(checked.blueprint)), lines


#: Blueprints refused for collisions, as the CLI reads them from a file.
COLLIDING = {
    "lustre-home": {"storage.lustre": [{"name": "home", "filesystem": "fs",
                                        "capacity_gib": 18000}]},
    "nodeset-template": {"slurm.nodesets[1]": {"name": "cpu-template",
                                               "machine_type": "n2-standard-4", "count": 1},
                         "slurm.partitions[0].nodesets[1]": "cpu-template"},
    "managed-bucket-id": {"orchestrator": "managed", "storage.buckets": [{"bucket": "ckpts"}],
                          "storage.lustre": [{"name": "bucket-0", "filesystem": "fs",
                                              "capacity_gib": 18000}]},
}


def run_plan(tmp_path: Path, data: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "bp.yaml"
    path.write_text(to_yaml(data))
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", "plan", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(COLLIDING))
def test_plan_refuses_colliding_names_with_findings_not_a_traceback(tmp_path, case):
    result = run_plan(tmp_path, apply_overrides(MINIMAL, COLLIDING[case]))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert errors and all(LINE_FORMAT.match(line) for line in errors), result.stderr
    assert any("would clash with" in line for line in errors), result.stderr


def test_plan_of_an_empty_ssh_list_has_no_ssh_rule(tmp_path):
    result = run_plan(tmp_path, apply_overrides(MINIMAL, {"network.ssh_source_ranges": []}))
    assert result.returncode == 0, result.stderr
    assert "demo-network-internal" in result.stdout
    assert "demo-network-ssh" not in result.stdout
