"""The remediation loop as a module and as a process, on fake Slurm output and a fake API.

What real slurmctld must show is in tests/slurm/test_remediation.py; here are the pieces
a real cluster makes slow to reach: a DOWN node, a node failing again after its
remediation, the RebootProgram's exit status, the state file written whole.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.node import remediate
from tests.support.compute_fake import FakeCompute

#: One node as Debian's Slurm 22.05 `scontrol show node -o` printed it here.
LINE = ("NodeName=a4-a4-0001 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
        "CPULoad=5.60 AvailableFeatures=a4 ActiveFeatures=a4 Gres=gpu:8 NodeAddr=127.0.0.1 "
        "NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  "
        "RealMemory=24105 AllocMem=0 FreeMem=21133 Sockets=1 Boards=1 "
        "State=IDLE+DRAIN+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
        "MCS_label=N/A Partitions=a4  BootTime=2026-12-01T09:28:18 "
        "SlurmdStartTime=2026-12-01T10:31:52 LastBusyTime=2026-12-01T10:31:52 "
        "CfgTRES=cpu=2,mem=24105M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 "
        "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
        "Reason=cp:gpu-ecc: 3 uncorrected errors on GPU 5; cp:disk: / has 2 GiB free "
        "[root@2026-12-01T10:31:53]")
GROUP = "c-nodeset-a4-group-abc1234"


def test_parses_state_flags_features_start_time_and_the_whole_reason():
    (node,) = remediate.parse_nodes(LINE + "\n")
    assert node.name == "a4-a4-0001" and node.features == ("a4",)
    assert node.state == {"IDLE", "DRAIN", "DYNAMIC_NORM"}
    assert node.reason == "cp:gpu-ecc: 3 uncorrected errors on GPU 5; cp:disk: / has 2 GiB free"
    assert node.slurmd_start == "2026-12-01T10:31:52"
    assert node.checked_failed and node.unhealthy and not node.busy


def test_a_down_star_node_is_not_responding_and_unhealthy_whatever_its_reason():
    line = LINE.replace("IDLE+DRAIN+DYNAMIC_NORM", "DOWN+DYNAMIC_NORM*").split(" Reason=")[0]
    (node,) = remediate.parse_nodes(line)
    assert node.down and node.not_responding and node.unhealthy and node.reason == ""


def test_a_rebooting_node_is_left_to_slurm():
    (node,) = remediate.parse_nodes(LINE.replace("IDLE+DRAIN", "DOWN+DRAIN+REBOOT_ISSUED"))
    assert not node.unhealthy


@pytest.mark.parametrize(("reason", "fault"), [
    ("cp:gpu-ecc: 3 uncorrected errors on GPU 5", True),
    ("cp:disk: / has 2 GiB free; cp:gpu-xid: Xid 79 on GPU 3 (fell off the bus)", True),
    ("cp:gpu-tools: dcgmi is not on PATH", False),
    ("cp:mount: /home did not answer within 10s", False),
])
def test_only_gpu_faults_report_the_host(reason, fault):
    assert remediate.host_fault(reason) is fault


@pytest.mark.parametrize(("share", "nodes", "per_hour"), [
    (0.1, 4, 1), (0.1, 10, 1), (0.1, 19, 1), (0.1, 20, 2), (0.5, 4, 2), (1.0, 4, 4)])
def test_the_hourly_bound_rounds_down_but_lets_one_node_through(share, nodes, per_hour):
    config = config_for("reboot", share=share, nodes=nodes)
    assert config.per_hour(config.nodesets["a4"]) == per_hour


class FakeSlurm(remediate.Slurm):
    """Nodes from scontrol lines; every command the loop runs, recorded."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.commands = lines, []
        super().__init__(self._run)

    def _run(self, argv: list[str]) -> str:
        self.commands.append(argv)
        return "\n".join(self.lines) if argv[:3] == ["scontrol", "show", "node"] else ""


def config_for(on_failure: str, share: float = 1.0, nodes: int = 4, state: Path | None = None,
               fake: FakeCompute | None = None) -> remediate.Config:
    raw = {"project": "p", "zone": "z", "state_file": str(state or "/nonexistent/state.json"),
           "max_share_per_hour": share, "protect_after_failures": 3, "replace_timeout_s": 1800,
           "report_wait_s": 900, "watch_s": 3600, "interval_s": 60,
           "nodesets": {"a4": {"base_instance_name": "c-a4", "nodes": nodes,
                               "on_failure": on_failure, "report_faulty_host": False}},
           **(fake.config() if fake else {})}
    return remediate.Config(**{**raw, "nodesets": {
        "a4": remediate.NodesetPolicy(name="a4", **raw["nodesets"]["a4"])}})


@pytest.fixture
def fake():
    api = FakeCompute("p", "z", groups={GROUP: ("c-a4", {"a4-a4-0001": "RUNNING"})})
    yield api
    api.stop()


def loop(config, slurm, fake, now):
    compute = remediate.Compute("p", "z", config.api, config.token_url)
    return remediate.Remediator(config, slurm, compute, clock=lambda: now[0])


def test_a_down_node_is_reset_directly_as_slurm_refuses_to_reboot_it(fake, tmp_path):
    down = LINE.replace("IDLE+DRAIN+DYNAMIC_NORM", "DOWN+DYNAMIC_NORM*").split(" Reason=")[0]
    slurm, now = FakeSlurm([down]), [1000.0]
    loop(config_for("reboot", state=tmp_path / "s.json", fake=fake), slurm, fake, now).run_once()
    assert [c.verb for c in fake.calls if c.verb == "reset"] == ["reset"]
    assert not [c for c in slurm.commands if c[1] == "reboot"]


def test_failing_again_soon_after_a_reboot_counts_and_a_healthy_hour_forgives(fake, tmp_path):
    config = config_for("reboot", state=tmp_path / "s.json", fake=fake)
    healthy = LINE.replace("IDLE+DRAIN", "IDLE").split(" Reason=")[0]
    slurm, now = FakeSlurm([LINE]), [1000.0]
    loop(config, slurm, fake, now).run_once()            # rebooted
    slurm.lines = [healthy]
    now[0] += 600
    loop(config, slurm, fake, now).run_once()            # back in service
    slurm.lines = [LINE]
    now[0] += 600
    loop(config, slurm, fake, now).run_once()            # failed again within the hour
    state = json.loads((tmp_path / "s.json").read_text())
    assert state["failures"] == {"a4": 1}
    slurm.lines = [healthy]
    now[0] += 600
    loop(config, slurm, fake, now).run_once()
    now[0] += 3600
    loop(config, slurm, fake, now).run_once()            # an hour healthy since
    assert json.loads((tmp_path / "s.json").read_text())["failures"] == {"a4": 0}


def test_the_state_file_is_replaced_whole_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "deep" / "state.json"
    state = remediate.State(failures={"a4": 2})
    state.save(str(path))
    state.failures["a4"] = 3
    state.save(str(path))
    assert json.loads(path.read_text())["failures"] == {"a4": 3}
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]
    assert remediate.State.load(str(path)).failures == {"a4": 3}


def test_the_reboot_program_resets_each_node_and_fails_when_one_reset_fails(fake, tmp_path):
    config = tmp_path / "remediate.json"
    raw = config_for("reboot", fake=fake)
    config.write_text(json.dumps({**raw.__dict__, "nodesets": {
        "a4": {k: v for k, v in raw.nodesets["a4"].__dict__.items() if k != "name"}}}))
    argv = [sys.executable, "-m", "clusterprint.node.remediate", "--config", str(config),
            "--reboot", "a4-a4-0001,a4-a4-0002"]
    assert subprocess.run(argv, capture_output=True).returncode == 0
    assert [c.path.split("/instances/")[1] for c in fake.verbs("reset")] == [
        "a4-a4-0001/reset", "a4-a4-0002/reset"]
    fake.failing.add("reset")
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 1 and "cannot reset the VM of a4-a4-0001" in done.stdout


def test_a_recreated_vm_that_fails_its_first_check_is_not_resumed(fake, tmp_path):
    """The health check runs as slurmd starts: a new drain is a failed replacement."""
    config = config_for("replace", state=tmp_path / "s.json", fake=fake)
    slurm, now = FakeSlurm([LINE]), [1000.0]
    loop(config, slurm, fake, now).run_once()
    assert [c.verb for c in fake.calls].count("recreateInstances") == 1
    again = LINE.replace("SlurmdStartTime=2026-12-01T10:31:52",
                         "SlurmdStartTime=2026-12-01T10:50:00")
    slurm.lines = [again.replace("root@2026-12-01T10:31:53", "root@2026-12-01T10:50:01")]
    now[0] += 600
    loop(config, slurm, fake, now).run_once()
    assert not [c for c in slurm.commands if "state=resume" in c]
    assert json.loads((tmp_path / "s.json").read_text())["failures"] == {"a4": 1}
    assert [c.verb for c in fake.calls].count("recreateInstances") == 2
