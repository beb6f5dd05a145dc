"""The remediation loop against real slurmctld and a fake Compute API, one pass at a time.

Each on_failure value, the wait for jobs, the replacement timeout, the hourly rate limit
at its bound, protected mode and its reset, stale-node clean-up, and a restarted loop
that does not act twice. The clock is the test's: an hour passes in one assignment.
"""

from __future__ import annotations

import json

import pytest

from clusterprint.render import remediation
from tests.support.remediation_cluster import GROUP, Remediation, blueprint

ECC = "cp:gpu-ecc: 3 uncorrected errors on GPU 5"


@pytest.fixture
def fleet(local_slurm, tmp_path):
    """Starts a Remediation on a blueprint; stops its fake API afterwards."""
    made = []

    def make(*args, **kwargs) -> Remediation:
        made.append(Remediation.start(local_slurm, tmp_path, blueprint(*args, **kwargs)))
        return made[-1]

    yield make
    for setup in made:
        setup.fake.stop()


def acting_calls(setup: Remediation) -> list[tuple[str, str]]:
    """(verb, VM) of every call that changes something."""
    calls = []
    for call in setup.fake.calls:
        if call.verb in ("reset", "reportHostAsFaulty"):
            calls.append((call.verb, call.path.split("/instances/")[1].split("/")[0]))
        elif call.verb == "recreateInstances":
            calls += [(call.verb, i.rsplit("/", 1)[-1]) for i in call.body["instances"]]
    return calls


def test_drain_leaves_the_node_drained_with_its_reason(fleet):
    setup = fleet("drain")
    setup.add_vm("a4-a4-0001")
    setup.drain("a4-a4-0001", f"{ECC}; cp:disk: / has 2.0 GiB free, needs 10")
    setup.pass_once()
    setup.pass_once()
    node = setup.node("a4-a4-0001")
    assert node.drained and node.reason == f"{ECC}; cp:disk: / has 2.0 GiB free, needs 10"
    assert acting_calls(setup) == []
    assert setup.state()["nodes"]["a4-a4-0001"]["action"] == "drain"


def test_a_node_drained_by_hand_is_not_touched(fleet):
    setup = fleet("replace", share=1.0)
    setup.add_vm("a4-a4-0001")
    setup.drain("a4-a4-0001", "disk swap by the admin")
    setup.pass_once()
    assert acting_calls(setup) == [] and setup.node("a4-a4-0001").drained


def test_reboot_runs_the_reboot_program_on_the_controller_and_the_node_returns(fleet):
    """slurmctld runs the RebootProgram (reboot_from_controller), which resets the VM
    through the API; the fake reset restarts the node's slurmd reporting a reboot, and
    Slurm's nextstate=RESUME puts it back in service: the whole chain but the VM."""
    setup = fleet("reboot")
    setup.add_vm("a4-a4-0001", keep_running=True)
    setup.fake.on_reset = lambda vm: setup.restart_slurmd(vm, "-b")
    setup.drain("a4-a4-0001", ECC)
    setup.pass_once()
    setup.wait_for("a4-a4-0001", lambda n: not n.drained and not n.rebooting
                   and "IDLE" in n.state, "back in service after its reboot")
    assert acting_calls(setup) == [("reset", "a4-a4-0001")]
    setup.pass_once()
    state = setup.state()
    assert state["nodes"] == {} and state["returned"]["a4-a4-0001"]["action"] == "reboot"


def test_a_failing_node_is_replaced_only_once_its_jobs_end_and_resumed_when_back(fleet):
    setup = fleet("replace", share=1.0)
    setup.add_vm("a4-a4-0001", keep_running=True)
    job = setup.cluster.run("sbatch", "--parsable", "-w", "a4-a4-0001", "-o", "/dev/null",
                            "--wrap", "sleep 300").strip()
    setup.wait_for("a4-a4-0001", lambda n: n.busy, "running the job")
    setup.drain("a4-a4-0001", ECC)
    setup.pass_once()
    assert acting_calls(setup) == [], "replaced under a running job"
    setup.cluster.run("scancel", job)
    setup.wait_for("a4-a4-0001", lambda n: not n.busy, "done with the job")
    setup.fake.on_recreate = setup.restart_slurmd
    setup.pass_once()
    # Not reservation-bound: no host report, the group recreates the VM (same name).
    assert acting_calls(setup) == [("recreateInstances", "a4-a4-0001")]
    assert setup.fake.verbs("recreateInstances")[0].path.endswith(
        f"/instanceGroupManagers/{GROUP}/recreateInstances")
    setup.wait_for("a4-a4-0001", lambda n: n.slurmd_start
                   != setup.state()["nodes"]["a4-a4-0001"]["slurmd_start"], "registered again")
    setup.pass_once()
    node = setup.node("a4-a4-0001")
    assert not node.drained and "IDLE" in node.state
    assert setup.state()["returned"]["a4-a4-0001"]["action"] == "recreate"


def test_a_reservation_bound_gpu_fault_reports_the_host_before_recreating(fleet):
    setup = fleet("replace", share=1.0, reservation_bound=True)
    setup.add_vm("a4-a4-0001")
    setup.drain("a4-a4-0001", ECC)
    setup.pass_once()
    report = setup.fake.verbs("reportHostAsFaulty")
    assert acting_calls(setup) == [("reportHostAsFaulty", "a4-a4-0001")]
    assert report[0].body == {"disruptionSchedule": "IMMEDIATE", "faultReasons": [
        {"behavior": "UNRECOVERABLE_GPU_ERROR", "description": ECC}]}
    setup.pass_once()
    assert len(acting_calls(setup)) == 1, "recreated while the report runs"
    # The report stops the VM: now the group recreates it.
    setup.fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    setup.pass_once()
    assert acting_calls(setup)[1:] == [("recreateInstances", "a4-a4-0001")]


def test_a_full_disk_is_not_reported_as_a_host_fault(fleet):
    setup = fleet("replace", share=1.0, reservation_bound=True)
    setup.add_vm("a4-a4-0001")
    setup.drain("a4-a4-0001", "cp:disk: / has 2.0 GiB free, needs 10")
    setup.pass_once()
    assert acting_calls(setup) == [("recreateInstances", "a4-a4-0001")]


def test_rate_limit_stops_at_its_bound_and_a_replacement_that_never_registers_times_out(fleet):
    """Share 0.5 of four nodes: two an hour; the others stay drained and wait."""
    setup = fleet("replace", share=0.5)
    names = [f"a4-a4-000{i}" for i in range(1, 5)]
    for name in names:
        setup.add_vm(name)
        setup.drain(name, ECC)
    start = setup.now
    setup.pass_once()
    assert acting_calls(setup) == [("recreateInstances", n) for n in names[:2]]
    setup.now += 1200
    setup.pass_once()
    assert len(acting_calls(setup)) == 2, "past the hour's bound"
    assert all(setup.node(n).drained for n in names)
    # An hour on: the first two never registered again (the fake recreates nothing),
    # they are DOWN saying why; the window has room for the other two.
    setup.now = start + 3601
    setup.pass_once()
    assert acting_calls(setup)[2:] == [("recreateInstances", n) for n in names[2:]]
    for name in names[:2]:
        node = setup.node(name)
        assert node.down and f"{ECC}; cp:replace-timeout: no registration 1800s" in node.reason
    assert setup.state()["failures"]["a4"] == 2


def test_protected_mode_stops_the_loop_alerts_says_why_and_reset_leaves_it(fleet, capfd):
    setup = fleet("replace", share=1.0)
    names = [f"a4-a4-000{i}" for i in range(1, 5)]
    for name in names:
        setup.add_vm(name)
        setup.drain(name, ECC)
    setup.pass_once()
    setup.now += remediation.REPLACE_TIMEOUT_S + 1
    setup.pass_once()  # four timeouts: protected at the third
    logged = capfd.readouterr().err
    # <1>: the journal's PRIORITY for the line, ALERT (syslog level 1).
    alerts = [json.loads(line[3:]) for line in logged.splitlines() if line.startswith("<1>{")]
    assert len(alerts) == 1 and alerts[0]["nodeset"] == "a4"
    assert "clusterprint-remediate --reset a4" in alerts[0]["message"]
    setup.pass_once()
    for name in names:
        assert "cp:protected: remediation stopped after 4 failures" in setup.node(name).reason
    # A node that fails again gets no action while the nodeset is protected.
    setup.cluster.run("scontrol", "update", "nodename=a4-a4-0001", "state=resume")
    setup.drain("a4-a4-0001", ECC)
    setup.now += 2 * 3600
    setup.pass_once()
    assert len(acting_calls(setup)) == 4
    assert "cp:protected" in setup.node("a4-a4-0001").reason
    # The operator's way out, as a process: the command the controller installs runs it.
    setup.run_program("--reset", "a4")
    assert "protected" not in setup.node("a4-a4-0001").reason
    assert setup.state()["protected"] == {} and "a4" not in setup.state()["failures"]
    setup.pass_once()
    assert acting_calls(setup)[4:] == [("recreateInstances", "a4-a4-0001")]


def test_stale_nodes_whose_vm_is_gone_are_deleted_and_no_others(fleet):
    setup = fleet("drain")
    for name in ("a4-a4-0001", "a4-a4-0002", "a4-a4-0003", "a4-a4-0004"):
        setup.add_vm(name)
    for name in ("a4-a4-0001", "a4-a4-0002", "a4-a4-0004"):
        setup.cluster.run("scontrol", "update", f"nodename={name}", "state=down",
                          "reason=not responding")
    # 0001's and 0004's VMs were deleted; 0002's still exists (DOWN, but its VM is there);
    # 0003 is up.
    for name in ("a4-a4-0001", "a4-a4-0004"):
        del setup.fake.groups[GROUP][1][name]
    setup.fake.failing.add("listManagedInstances")
    setup.pass_once()
    assert setup.node("a4-a4-0001") is not None, "deleted without knowing the VMs"
    setup.fake.failing.clear()
    setup.pass_once()  # both in one scontrol delete
    assert setup.node("a4-a4-0001") is None and setup.node("a4-a4-0004") is None
    assert setup.node("a4-a4-0002") is not None and setup.node("a4-a4-0003") is not None


def test_a_restarted_loop_does_not_act_twice(fleet):
    """Two processes with --once, the state file between them."""
    setup = fleet("replace", share=1.0)
    setup.add_vm("a4-a4-0001")
    setup.drain("a4-a4-0001", ECC)
    for _ in range(2):
        setup.run_program("--once", "--now", str(setup.now))
    assert acting_calls(setup) == [("recreateInstances", "a4-a4-0001")]
    assert setup.state()["nodes"]["a4-a4-0001"]["action"] == "recreate"
