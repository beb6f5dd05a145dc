"""clusterprint diff of managed blueprints: what the Cluster Director API cannot update.

The API marks compute, storage and network configs Immutable, so changing one takes a
new cluster, and a new cluster is a new /home: data loss, exit 3, as in self-managed
mode. What the API updates (node counts, nodesets it adds) stays an update.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.cli.main import main
from tests.support.paths import ROOT
from tests.support.plans import plan_of_file

MANAGED = ROOT / "tests" / "components" / "blueprints" / "managed.yaml"
CLUSTER = "a4managed-cluster"


@pytest.fixture(scope="module")
def managed_plan(tmp_path_factory) -> str:
    """The managed blueprint's plan, saved once as `plan --json` writes it."""
    path = tmp_path_factory.mktemp("plans") / "managed.json"
    path.write_text(plan_of_file(MANAGED).json_text())
    return str(path)


def edited(tmp_path: Path, old: str, new: str) -> str:
    """The managed blueprint with one edit, written next to the test."""
    text = MANAGED.read_text()
    assert old in text, f"{old!r} is not in {MANAGED.name}"
    path = tmp_path / "new.yaml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


def diff_json(capsys, old: str, new: str, *flags: str) -> tuple[int, dict]:
    code = main(["diff", old, new, "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


def cluster_change(report: dict) -> dict:
    (change,) = [c for c in report["changes"] if c["name"] == CLUSTER]
    return change


def test_a_changed_compute_config_replaces_the_cluster_and_its_data(
        tmp_path, capsys, managed_plan):
    new = edited(tmp_path, "      provisioning: flex-start", "      provisioning: spot")
    code, report = diff_json(capsys, managed_plan, new)
    cluster = cluster_change(report)
    assert cluster["action"] == "replace"
    forcing = {c["path"] for c in cluster["inputs"] if c["forcesReplacement"]}
    assert forcing == {"computeResources[flex].config.newFlexStartInstances.machineType",
                       "computeResources[flex].config.newFlexStartInstances.maxDuration",
                       "computeResources[flex].config.newFlexStartInstances.zone",
                       "computeResources[flex].config.newSpotInstances.machineType",
                       "computeResources[flex].config.newSpotInstances.terminationAction",
                       "computeResources[flex].config.newSpotInstances.zone"}
    assert code == 3 and cluster["dataLoss"] is True


def test_growing_managed_lustre_is_data_loss_exit_3_unless_allowed(tmp_path):
    """As a process, the way CI runs it: blueprint against blueprint."""
    new = edited(tmp_path, "capacity_gib: 18000", "capacity_gib: 36000")
    argv = [sys.executable, "-m", "clusterprint.cli", "diff", str(MANAGED), new]
    refused = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 3, refused.stderr
    assert "DATA LOSS" in refused.stdout and f"replace  {CLUSTER}" in refused.stdout
    assert ('storageResources[scratch].config.newLustre.capacityGb: "18000" -> "36000"  '
            '(forces replacement)' in refused.stdout)
    allowed = subprocess.run([*argv, "--allow-data-loss"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert allowed.returncode == 0, allowed.stderr
    assert "allowed by --allow-data-loss" in allowed.stdout


def test_removing_managed_lustre_is_data_loss(tmp_path, capsys, managed_plan):
    lustre = ("  lustre:\n    - name: scratch\n      filesystem: scratch\n"
              "      performance_tier: 500\n      capacity_gib: 18000\n")
    code, report = diff_json(capsys, managed_plan, edited(tmp_path, lustre, ""))
    assert code == 3
    assert cluster_change(report)["action"] == "replace" and report["dataLoss"] is True


def test_resizing_a_managed_nodeset_is_an_update(tmp_path, capsys, managed_plan):
    code, report = diff_json(capsys, managed_plan,
                             edited(tmp_path, "count: 2\n      max_count: 6",
                                    "count: 3\n      max_count: 6"))
    assert code == 0 and report["dataLoss"] is False
    cluster = cluster_change(report)
    assert cluster["action"] == "update"
    assert {"path": "orchestrator.slurm.nodeSets[a4].staticNodeCount", "old": "2", "new": "3",
            "forcesReplacement": False} in cluster["inputs"]


def test_a_nodeset_added_before_the_others_is_an_update(tmp_path, capsys, managed_plan):
    """Compute resources and nodesets match by id: an insertion moves no other one."""
    added = ("  nodesets:\n    - name: cpu\n      machine_type: n2-standard-8\n"
             "      count: 1\n")
    partition = "  partitions:\n    - name: cpu\n      nodesets: [cpu]\n"
    new = edited(tmp_path, "  nodesets:\n", added)
    Path(new).write_text(Path(new).read_text().replace("  partitions:\n", partition, 1))
    code, report = diff_json(capsys, managed_plan, new)
    assert code == 0 and report["dataLoss"] is False
    cluster = cluster_change(report)
    assert cluster["action"] == "update"
    changed = {c["path"].split(".")[0] for c in cluster["inputs"]}
    assert "computeResources[cpu]" in changed
    assert not {p for p in changed if p.startswith("computeResources[a4")}
