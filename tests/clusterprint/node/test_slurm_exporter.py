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
#: ``squeue --all --json`` of Slurm 26.05, cut to the fields the exporter reads (as the real
#: daemons answer in tests/slurm/test_slurm_exporter.py): a job's state is its base state
#: among its flags; a pending job array's record holds its tasks' expression.
JOBS = {"jobs": [
    {"job_id": 1, "job_state": ["RUNNING"], "partition": "a4", "array_task_string": ""},
    {"job_id": 2, "job_state": ["PENDING"], "partition": "a4", "array_task_string": ""},
    {"job_id": 3, "job_state": ["PENDING"], "partition": "a4,a4spot",
     "array_task_string": ""},
    {"job_id": 4, "job_state": ["PENDING"], "partition": "nowhere", "array_task_string": ""},
    {"job_id": 5, "job_state": ["COMPLETED", "COMPLETING"], "partition": "a4",
     "array_task_string": ""},
], "errors": [], "warnings": []}
PARTITIONS = "a4\na4spot\na4\n"


def config(tmp_path: Path, **values) -> slurm_exporter.Config:
    return slurm_exporter.Config(**{"nodesets": ["a4", "a4spot"],
                                    "state_file": str(tmp_path / "state.json"), "port": 0,
                                    **values})


def slurm(nodes: object = NODES, jobs: object = JOBS, partitions: str = PARTITIONS,
          fail: str = ""):
    """Slurm's three commands, answering these (``fail``: the command that fails; a text
    answer as it is, anything else as JSON)."""
    def run(argv: list[str]) -> str:
        if fail and argv[0] == fail:
            raise common.CommandFailed(f"{argv[0]} failed (exit 1): Unable to contact slurm "
                                       "controller (connect failure)")
        answer = {"scontrol": nodes, "sinfo": partitions, "squeue": jobs}[argv[0]]
        return answer if isinstance(answer, str) else json.dumps(answer)
    return run


def jobs(*records: dict) -> dict:
    """squeue's JSON answer of these job records, each with the fields the exporter reads."""
    return {"jobs": [{"partition": "a4", "array_task_string": "", **r} for r in records]}


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


def test_a_job_counts_by_its_base_state_whatever_flag_slurm_prints_for_it(tmp_path):
    # A job on elastic nodes that are booting runs, CONFIGURING: squeue's text prints that
    # flag, not RUNNING, and ``--states=RUNNING`` leaves the job out.
    counted = scrape(tmp_path, jobs=jobs(
        {"job_state": ["RUNNING", "CONFIGURING", "POWER_UP_NODE"]},
        {"job_state": ["PENDING", "REQUEUE_HOLD"]},
        {"job_state": ["COMPLETED", "COMPLETING"]}))["clusterprint_slurm_jobs"]
    assert counted.value(partition="a4", state="running") == 1
    assert counted.value(partition="a4", state="pending") == 1


def test_a_pending_job_array_counts_each_task_it_holds(tmp_path):
    counted = scrape(tmp_path, jobs=jobs(
        {"job_state": ["PENDING"], "array_task_string": "1-400:3%5"},
        {"job_state": ["PENDING"], "array_task_string": "1,5,9-11"},
        {"job_state": ["RUNNING"], "array_task_string": ""}))["clusterprint_slurm_jobs"]
    assert counted.value(partition="a4", state="pending") == 134 + 5
    assert counted.value(partition="a4", state="running") == 1


@pytest.mark.parametrize(("expression", "tasks"), [
    ("", 1), ("7", 1), ("1-3", 3), ("1-400:3", 134), ("1-400:3%5", 134), ("2-9:4", 2),
    ("1,5,9-11,20-30:2", 11)])
def test_array_tasks_reads_slurms_task_expressions(expression, tasks):
    assert slurm_exporter.array_tasks(expression) == tasks


@pytest.mark.parametrize("expression", ["1,3,5,...", "3-1", "1-9:0", "a", "1-", ",", "1;2"])
def test_array_tasks_refuses_what_is_no_task_expression(expression):
    with pytest.raises(slurm_exporter.SlurmUnreadable):
        slurm_exporter.array_tasks(expression)


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
    {"jobs": {"jobs": [], "errors": [{"error": "Unable to contact slurm controller"}]}},
    {"jobs": {"meta": {}}},
    {"jobs": jobs({"job_state": []})},
    {"jobs": jobs({"job_state": ["PENDING"], "partition": ""})},
    {"jobs": jobs({"job_state": ["PENDING"], "array_task_string": "1,3,5,7,..."})},
], ids=["scontrol-fails", "squeue-fails", "sinfo-fails", "no-partition", "json-errors",
        "no-nodes-key", "no-state", "gpu-without-count", "gres-not-text", "squeue-garbage",
        "squeue-errors", "no-jobs-key", "job-without-state", "job-without-partition",
        "array-cut"])
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


#: A job array's task expression longer than squeue's 64 characters: whole only with
#: SLURM_BITSTR_LEN=0 (``1,3,...``, 40 tasks, otherwise).
LONG_ARRAY = ",".join(str(task) for task in range(1, 80, 2))


def fake_slurm(tmp_path: Path, nodes: str, jobs: str, code: int = 0) -> dict[str, str]:
    """scontrol, sinfo and squeue on PATH printing these answers (exit ``code``); squeue
    cuts a job array's expression as the real one does unless SLURM_BITSTR_LEN is 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    cut = jobs.replace(LONG_ARRAY, LONG_ARRAY[:60] + "...")
    for command, answer in (("scontrol", nodes), ("squeue", jobs), ("squeue-cut", cut),
                            ("sinfo", PARTITIONS if nodes else "")):
        (tmp_path / f"{command}.out").write_text(answer)
    for command in ("scontrol", "sinfo", "squeue"):
        out = f"{tmp_path / command}.out"
        if command == "squeue":
            out = f'{tmp_path}/squeue$([ "$SLURM_BITSTR_LEN" = 0 ] || echo -cut).out'
        (bin_dir / command).write_text(f'#!/bin/sh\ncat "{out}"\nexit {code}\n')
        (bin_dir / command).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def write_config(tmp_path: Path, port: int = 0) -> Path:
    path = tmp_path / "exporter.json"
    path.write_text(json.dumps(config(tmp_path, port=port).__dict__))
    return path


def test_once_prints_one_scrape_from_the_installed_program(tmp_path):
    env = fake_slurm(tmp_path, json.dumps(NODES), json.dumps(jobs(
        {"job_state": ["PENDING"], "array_task_string": LONG_ARRAY})))
    done = subprocess.run([sys.executable, str(installed(tmp_path)), "--config",
                           str(write_config(tmp_path)), "--once"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    families = parse(done.stdout)
    assert families["clusterprint_slurm_up"].value() == 1
    assert families["clusterprint_slurm_nodes"].value(nodeset="a4", state="drained") == 1
    # squeue ran with the array's whole expression: each task counted.
    assert families["clusterprint_slurm_jobs"].value(partition="a4", state="pending") == 40


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
    env = fake_slurm(tmp_path, json.dumps(NODES), json.dumps(JOBS))
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
