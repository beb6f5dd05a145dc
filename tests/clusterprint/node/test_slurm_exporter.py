"""The Slurm exporter as a module and as a process: figures from Slurm's answers, the
remediation loop's record, and a scrape that says ``clusterprint_slurm_up 0`` with no
Slurm figure when Slurm gives nothing it can read."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from clusterprint.node import common, remediate, slurm_exporter
from clusterprint.render import remediation
from tests.support.local_slurm import free_port
from tests.support.prometheus_text import parse

#: ``scontrol show nodes --json`` of Slurm 26.05, cut to the fields the exporter reads (as
#: the real daemons answer in tests/slurm/test_slurm_exporter.py).
NODES = {"nodes": [
    {"name": "a4-a4-0001", "state": ["IDLE", "DYNAMIC_NORM"], "active_features": ["a4"],
     "gres": "gpu:b200:8(S:0)", "gres_used": "gpu:b200:0(IDX:N/A)"},
    {"name": "a4-a4-0002", "state": ["MIXED", "DRAIN", "DYNAMIC_NORM"],
     "active_features": ["a4"], "gres": "gpu:b200:8(S:0)", "gres_used": "gpu:b200:2(IDX:0-1)"},
    {"name": "a4-a4-0003", "state": ["ALLOCATED"], "active_features": ["a4"],
     "gres": "gpu:b200:8(S:0)", "gres_used": "gpu:b200:8(IDX:0-7)"},
    {"name": "a4-a4spot-e00001", "state": ["IDLE", "CLOUD", "POWERED_DOWN"],
     "active_features": ["a4spot"], "gres": "gpu:b200:8(S:0)", "gres_used": "gpu:b200:0"},
    {"name": "a4-a4spot-e00002", "state": ["DOWN", "NOT_RESPONDING"],
     "active_features": ["a4spot"], "gres": "gpu:b200:8(S:0)", "gres_used": ""},
    {"name": "elsewhere", "state": ["IDLE"], "active_features": ["other"], "gres": "",
     "gres_used": ""},
], "errors": [], "warnings": []}
JOBS = "RUNNING|a4\nPENDING|a4\nPENDING|a4,a4spot\nPENDING|nowhere\n"
PARTITIONS = "a4\na4spot\na4\n"


def config(tmp_path: Path, **values) -> slurm_exporter.Config:
    return slurm_exporter.Config(**{"nodesets": ["a4", "a4spot"],
                                    "state_file": str(tmp_path / "state.json"), "port": 0,
                                    **values})


def slurm(nodes: object = NODES, jobs: str = JOBS, partitions: str = PARTITIONS,
          fail: str = ""):
    """Slurm's three commands, answering these (``fail``: the command that fails)."""
    def run(argv: list[str]) -> str:
        if fail and argv[0] == fail:
            raise common.CommandFailed(f"{argv[0]} failed (exit 1): Unable to contact slurm "
                                       "controller (connect failure)")
        return {"scontrol": json.dumps(nodes), "sinfo": partitions}.get(argv[0], jobs)
    return run


def scrape(tmp_path: Path, **kwargs) -> dict:
    return parse(slurm_exporter.Exporter(config(tmp_path), slurm(**kwargs),
                                         common.Log("test", io.StringIO())).scrape())


def test_nodes_count_per_nodeset_and_state_and_gpus_per_nodeset(tmp_path):
    families = scrape(tmp_path)
    assert families["clusterprint_slurm_up"].value() == 1
    nodes = families["clusterprint_slurm_nodes"]
    assert {dict(k)["state"]: v for k, v in nodes.where(nodeset="a4").items() if v} == {
        "idle": 1, "drained": 1, "allocated": 1}
    assert {dict(k)["state"]: v for k, v in nodes.where(nodeset="a4spot").items() if v} == {
        "powered_down": 1, "down": 1}
    # Every state of every nodeset has a figure, zeros too: a query's ratio has its series.
    assert len(nodes.samples) == 2 * len(slurm_exporter.NODE_STATES)
    assert families["clusterprint_slurm_gpus"].value(nodeset="a4") == 24
    assert families["clusterprint_slurm_gpus_allocated"].value(nodeset="a4") == 10
    assert families["clusterprint_slurm_gpus_allocated"].value(nodeset="a4spot") == 0


def test_jobs_count_per_partition_and_a_job_of_two_partitions_in_each(tmp_path):
    jobs = scrape(tmp_path)["clusterprint_slurm_jobs"]
    assert jobs.value(partition="a4", state="running") == 1
    assert jobs.value(partition="a4", state="pending") == 2
    assert jobs.value(partition="a4spot", state="pending") == 1
    assert jobs.value(partition="a4spot", state="running") == 0
    assert not jobs.where(partition="nowhere")


@pytest.mark.parametrize("kwargs", [
    {"fail": "scontrol"}, {"fail": "squeue"}, {"fail": "sinfo"}, {"partitions": ""},
    {"nodes": {"nodes": [], "errors": [{"error": "Unable to contact slurm controller"}]}},
    {"nodes": {"meta": {}}},                                      # no nodes at all
    {"nodes": {"nodes": [{"name": "n1", "state": [], "active_features": ["a4"]}]}},
    {"nodes": {"nodes": [{"name": "n1", "state": ["IDLE"], "active_features": ["a4"],
                          "gres": "gpu:b200:many", "gres_used": ""}]}},
    {"nodes": {"nodes": [{"name": "n1", "state": ["IDLE"], "active_features": ["a4"],
                          "gres": 8, "gres_used": ""}]}},
    {"jobs": "squeue: error: Invalid user\n"},
], ids=["scontrol-fails", "squeue-fails", "sinfo-fails", "no-partition", "json-errors",
        "no-nodes-key", "no-state", "gpu-without-count", "gres-not-text", "squeue-garbage"])
def test_slurm_that_proves_nothing_is_up_0_and_no_slurm_figure(tmp_path, kwargs):
    families = scrape(tmp_path, **kwargs)
    assert families["clusterprint_slurm_up"].value() == 0
    assert not {name for name in families if name.startswith("clusterprint_slurm_")} - {
        "clusterprint_slurm_up"}
    # The loop's record is not Slurm's: it is still reported.
    assert families["clusterprint_remediation_protected"].value(nodeset="a4") == 0


def test_a_scontrol_answer_that_is_no_json_is_up_0(tmp_path):
    def run(argv):
        return "<html>" if argv[0] == "scontrol" else ""
    exporter = slurm_exporter.Exporter(config(tmp_path), run,
                                       common.Log("test", io.StringIO()))
    assert parse(exporter.scrape())["clusterprint_slurm_up"].value() == 0


def test_protected_nodesets_and_the_loops_counts_come_from_its_state_file(tmp_path):
    state = remediate.State(
        protected={"a4spot": remediate.Protection(remediate.Reading(1.0, 1.0, "b"), "3 failed")},
        counts={"a4": {"drain": 2, "recreate": 1}})
    state.save(str(tmp_path / "state.json"))
    families = scrape(tmp_path)
    protected = families["clusterprint_remediation_protected"]
    assert (protected.value(nodeset="a4"), protected.value(nodeset="a4spot")) == (0, 1)
    actions = families["clusterprint_remediation_actions"]
    assert actions.type == "counter"
    assert actions.value(nodeset="a4", action="drain") == 2
    assert actions.value(nodeset="a4", action="recreate") == 1
    assert actions.value(nodeset="a4spot", action="reboot") == 0
    assert len(actions.samples) == 2 * len(remediate.COUNTED)


@pytest.mark.parametrize("data", [b"{not json", b'{"nodes": 3}'])
def test_an_unreadable_state_file_reads_as_every_nodeset_protected_and_no_counts(tmp_path, data):
    (tmp_path / "state.json").write_bytes(data)
    families = scrape(tmp_path)
    assert set(families["clusterprint_remediation_protected"].samples.values()) == {1}
    assert "clusterprint_remediation_actions" not in families


def test_no_state_file_yet_is_nothing_protected_and_no_action(tmp_path):
    families = scrape(tmp_path)
    assert set(families["clusterprint_remediation_protected"].samples.values()) == {0}
    assert set(families["clusterprint_remediation_actions"].samples.values()) == {0}


def test_label_values_are_escaped_as_the_text_format_says():
    text = slurm_exporter.exposition([slurm_exporter.Sample(
        "clusterprint_slurm_jobs", (("partition", 'a"b\\c\nd'), ("state", "running")), 3)])
    assert parse(text)["clusterprint_slurm_jobs"].value(partition='a"b\\c\nd',
                                                        state="running") == 3


def test_every_metric_has_help_and_a_type_and_a_prefix():
    for name, metric in slurm_exporter.METRICS.items():
        assert name.startswith("clusterprint_") and not name.endswith("_total")
        assert metric.kind in ("gauge", "counter") and metric.help


# --- As a process ------------------------------------------------------------------------

def installed(tmp_path: Path) -> Path:
    """The exporter as the controller has it: beside the loop's modules and common.py."""
    folder = tmp_path / "program"
    for path, text in {**remediation.programs(str(folder)),
                       f"{folder}/slurm_exporter.py": Path(slurm_exporter.__file__).read_text()
                       }.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return folder / "slurm_exporter.py"


def fake_slurm(tmp_path: Path, nodes: str, jobs: str, code: int = 0) -> dict[str, str]:
    """scontrol, sinfo and squeue on PATH printing these answers (exit ``code``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for command, answer in (("scontrol", nodes), ("squeue", jobs),
                            ("sinfo", PARTITIONS if nodes else "")):
        (tmp_path / f"{command}.out").write_text(answer)
        (bin_dir / command).write_text(f"#!/bin/sh\ncat {tmp_path / command}.out\nexit {code}\n")
        (bin_dir / command).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def write_config(tmp_path: Path, port: int = 0) -> Path:
    path = tmp_path / "exporter.json"
    path.write_text(json.dumps(config(tmp_path, port=port).__dict__))
    return path


def test_once_prints_one_scrape_from_the_installed_program(tmp_path):
    env = fake_slurm(tmp_path, json.dumps(NODES), JOBS)
    done = subprocess.run([sys.executable, str(installed(tmp_path)), "--config",
                           str(write_config(tmp_path)), "--once"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    families = parse(done.stdout)
    assert families["clusterprint_slurm_up"].value() == 1
    assert families["clusterprint_slurm_nodes"].value(nodeset="a4", state="drained") == 1


def test_a_bad_config_stops_the_program_with_2(tmp_path):
    (tmp_path / "bad.json").write_text('{"nodesets": "a4"}')
    done = subprocess.run([sys.executable, str(installed(tmp_path)), "--config",
                           str(tmp_path / "bad.json"), "--once"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "cannot start" in done.stderr


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, "", ""


def test_the_service_serves_metrics_on_loopback_and_fails_closed_while_slurm_fails(tmp_path):
    env = fake_slurm(tmp_path, json.dumps(NODES), JOBS)
    port = free_port()
    service = subprocess.Popen([sys.executable, str(installed(tmp_path)), "--config",
                                str(write_config(tmp_path, port))], env=env,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        while True:
            try:
                status, kind, body = get(url)
                break
            except OSError:
                assert time.monotonic() < deadline and service.poll() is None
                time.sleep(0.1)
        assert status == 200 and kind == slurm_exporter.CONTENT_TYPE
        assert parse(body)["clusterprint_slurm_up"].value() == 1
        assert get(f"http://127.0.0.1:{port}/")[0] == 404
        # slurmctld stops answering: the next scrape says so and carries no Slurm figure.
        fake_slurm(tmp_path, "", "", code=1)
        families = parse(get(url)[2])
        assert families["clusterprint_slurm_up"].value() == 0
        assert "clusterprint_slurm_nodes" not in families
    finally:
        service.terminate()
        service.wait(timeout=10)
    assert "Slurm gave no figures" in service.stderr.read()
