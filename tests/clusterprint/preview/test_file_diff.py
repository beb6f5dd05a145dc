"""clusterprint diff shows a change to the Slurm files as each file's unified diff, in the
terminal and in --json, with the exit status it always had."""

from __future__ import annotations

import json

import pytest

from clusterprint.cli.main import main
from clusterprint.preview.file_diff import slurm_file_diffs
from tests.support.paths import BLUEPRINTS

CPU_SMALL = BLUEPRINTS / "cpu-small.yaml"
SLURM_CONFIG = "metadata.clusterprint-slurm-config"
NEW_NODESET = ("  partitions:\n",
               "    - name: big\n      machine_type: n2-standard-8\n      count: 1\n"
               "  partitions:\n    - name: bigmem\n      nodesets: [big]\n")


def changed(tmp_path, old: str, new: str) -> str:
    text = CPU_SMALL.read_text()
    assert old in text
    path = tmp_path / "changed.yaml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


def slurm_inputs(report: dict) -> dict[str, dict]:
    """The Slurm files' input change of each resource that has one, by resource name."""
    return {c["name"]: i for c in report["changes"] for i in c["inputs"]
            if i["path"] == SLURM_CONFIG}


def test_a_new_max_time_is_one_changed_line_of_slurm_conf_on_both_nodes(tmp_path, capsys):
    new = changed(tmp_path, 'max_time: "1:00:00"', 'max_time: "4:00:00"')
    assert main(["diff", str(CPU_SMALL), new, "--json"]) == 0
    found = slurm_inputs(json.loads(capsys.readouterr().out))
    assert set(found) == {"cpu-small-controller-vm", "cpu-small-login-0"}
    for change in found.values():
        (file,) = change["files"]
        assert file["name"] == "slurm.conf"
        assert file["diff"].startswith("--- a/slurm.conf\n+++ b/slurm.conf\n@@ ")
        removed = [x for x in file["diff"].splitlines() if x.startswith("-") and
                   not x.startswith("---")]
        added = [x for x in file["diff"].splitlines() if x.startswith("+") and
                 not x.startswith("+++")]
        assert len(removed) == len(added) == 1
        assert "MaxTime=1:00:00" in removed[0] and "MaxTime=4:00:00" in added[0]
        assert isinstance(change["old"], str) and isinstance(change["new"], str)


def test_a_new_nodeset_shows_its_lines_in_the_files_the_controller_serves(tmp_path, capsys):
    new = changed(tmp_path, *NEW_NODESET)
    assert main(["diff", str(CPU_SMALL), new]) == 0
    text = capsys.readouterr().out
    controller = text.split(" cpu-small-controller-vm ", 1)[1].split("\n ~ ", 1)[0]
    assert f"{SLURM_CONFIG}: Slurm files changed: " in controller
    added = [line.strip() for line in controller.splitlines()
             if line.strip().startswith("+") and not line.strip().startswith("+++")]
    assert any(line.startswith("+PartitionName=bigmem") for line in added)
    assert any("big" in line and line.startswith(("+NodeSet", "+NodeName")) for line in added)
    assert "chars) -> " not in controller.split("metadata.startup-script")[0]


def test_the_markdown_report_carries_the_same_diff(tmp_path, capsys):
    new = changed(tmp_path, 'max_time: "1:00:00"', 'max_time: "4:00:00"')
    assert main(["diff", str(CPU_SMALL), new, "--format", "markdown"]) == 0
    files = capsys.readouterr().out.split("#### Slurm files", 1)[1]
    assert "`slurm.conf` on `cpu-small-controller-vm`:\n\n```diff\n--- a/slurm.conf" in files


@pytest.mark.parametrize("path", ["metadata.startup-script", "labels.x"])
def test_other_inputs_carry_no_files(path):
    assert slurm_file_diffs(path, '{"a": "1\\n"}', '{"a": "2\\n"}') == ()
