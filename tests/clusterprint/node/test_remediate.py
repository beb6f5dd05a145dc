"""The remediation loop as a module and as a process, on fake Slurm output and a fake API.

What real slurmctld must show is in tests/slurm/test_remediation.py; here are the pieces a
real cluster makes slow to reach. The decisions are plain data (``decide``): each counting
rule at its boundary and on both sides of it. Then the faults: a slow API that acts after
the loop stopped waiting, clock jumps, a reset while the service runs, an unreadable state
file, answers the API should not give; each also with the program run as a process, as
the controller runs it (the rendered program with common.py beside it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from clusterprint.node import common, remediate
from clusterprint.render import remediation
from tests.support.compute_fake import FakeCompute
from tests.support.remediation_fakes import (
    ECC,
    STAMP,
    START,
    FakeSlurm,
    Journal,
    config_for,
    fake_scontrol,
    node_line,
    scontrol_log,
    write_config,
)

GROUP = "c-nodeset-a4-group-abc1234"
BOOT = "boot-1"
T0 = 1_000_000.0


def at(seconds: float = 0.0, wall: float | None = None, boot: str = BOOT) -> remediate.Reading:
    """The clock ``seconds`` after T0 on boot ``boot`` (the wall clock agreeing unless
    ``wall`` says otherwise)."""
    return remediate.Reading(T0 + seconds if wall is None else wall, 10_000 + seconds, boot)


def names(count: int, nodeset: str = "a4") -> list[str]:
    return [f"{nodeset}-{nodeset}-{i:04d}" for i in range(1, count + 1)]


def vms(*nodes: str, status: str = "RUNNING") -> dict[str, remediate.Group]:
    return {"a4": remediate.Group({n: status for n in nodes}, dict.fromkeys(nodes, GROUP))}


def parsed(*lines: str) -> list[common.SlurmNode]:
    return common.parse_nodes("\n".join(lines))


def acts(actions: list) -> list:
    """The actions but the log lines."""
    return [a for a in actions if not isinstance(a, remediate.Note)]


def notes(actions: list, severity: str) -> list[str]:
    return [a.message for a in actions if isinstance(a, remediate.Note)
            and a.severity == severity]


# --- Slurm's view --------------------------------------------------------------------------

def test_a_drained_node_with_a_check_reason_is_unhealthy():
    (node,) = parsed(node_line(reason=f"{ECC}; cp:disk: / has 2 GiB free"))
    assert node.reason == f"{ECC}; cp:disk: / has 2 GiB free" and node.features == ("a4",)
    assert remediate.unhealthy(node) and not node.busy


def test_a_down_star_node_is_not_responding_and_unhealthy_whatever_its_reason():
    (node,) = parsed(node_line(state="DOWN+DYNAMIC_NORM*", reason=""))
    assert node.down and node.not_responding and remediate.unhealthy(node)


@pytest.mark.parametrize("state", ["DOWN+DRAIN+REBOOT_ISSUED", "IDLE+DRAIN+REBOOT_REQUESTED"])
def test_a_rebooting_node_is_left_to_slurm(state):
    assert not remediate.unhealthy(parsed(node_line(state=state))[0])


def test_a_node_drained_by_hand_is_not_unhealthy():
    assert not remediate.unhealthy(parsed(node_line(reason="disk swap by the admin"))[0])


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


def test_the_loops_note_always_fits_and_is_never_cut_off():
    long = "; ".join(f"cp:gpu-ecc: {i} uncorrected errors on GPU {i}" for i in range(20))
    marked = remediate.with_reason(long, "cp:protected: remediation stopped after 3 failures")
    assert len(marked) <= common.REASON_MAX
    assert marked.endswith("; cp:protected: remediation stopped after 3 failures")
    assert remediate.with_reason(marked, "cp:protected: again") == marked


# --- Decisions: the hourly limit -----------------------------------------------------------

def test_reboots_count_against_the_hourly_limit_until_exactly_an_hour_later():
    """Share 0.5 of 4: two an hour. The third drained node waits; at 3599 s it still waits,
    at 3600 s the first reboot's place is free again."""
    config = config_for("reboot", share=0.5)
    lines = [node_line(n) for n in names(3)]
    actions, state = remediate.decide(parsed(*lines), vms(), remediate.State(), at(0), config)
    assert acts(actions) == [remediate.Reboot(n, f"{ECC}; cp:reboot: issued")
                             for n in names(2)]
    assert notes(actions, "WARNING") == [
        "nodeset a4: its 2 remediations this hour are taken, 1 more nodes wait"]
    assert len(state.actions["a4"]) == 2
    # The first two are rebooting; the third is still drained.
    rebooting = [node_line(n, state="IDLE+DRAIN+REBOOT_ISSUED") for n in names(2)]
    actions, later = remediate.decide(parsed(*rebooting, lines[2]), vms(), state, at(3599),
                                      config)
    assert acts(actions) == []
    actions, _ = remediate.decide(parsed(*rebooting, lines[2]), vms(), state, at(3600), config)
    assert acts(actions) == [remediate.Reboot(names(3)[2], f"{ECC}; cp:reboot: issued")]


def test_draining_costs_nothing_of_the_hour():
    config = config_for("drain", share=0.1)
    actions, state = remediate.decide(parsed(*map(node_line, names(4))), vms(),
                                      remediate.State(), at(0), config)
    assert acts(actions) == [] and state.actions == {}
    assert {t.action for t in state.nodes.values()} == {"drain"}


def test_a_down_node_is_reset_directly_as_slurm_refuses_to_reboot_it():
    config = config_for("reboot")
    actions, _ = remediate.decide(parsed(node_line(state="DOWN+DYNAMIC_NORM*", reason="")),
                                  vms(names(1)[0]), remediate.State(), at(0), config)
    assert acts(actions) == [remediate.Reset("a4-a4-0001")]


def test_a_host_report_and_the_recreation_after_it_cost_one_place():
    """One an hour: the report takes it, the recreation that follows costs nothing more,
    and the second node waits all the while."""
    config = config_for("replace", share=0.1, report=True)
    lines = [node_line(n) for n in names(2)]
    actions, state = remediate.decide(parsed(*lines), vms(*names(2)), remediate.State(),
                                      at(0), config)
    assert acts(actions) == [remediate.Report("a4-a4-0001", ECC)]
    actions, _ = remediate.decide(parsed(*lines), vms(*names(2)), state,
                                  at(config.report_wait_s), config)
    assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]


# --- Decisions: waits ----------------------------------------------------------------------

def test_a_host_report_is_followed_by_a_recreation_exactly_at_report_wait_s():
    config = config_for("replace", report=True)
    lines = [node_line()]
    _, state = remediate.decide(parsed(*lines), vms(names(1)[0]), remediate.State(), at(0),
                                config)
    assert state.nodes["a4-a4-0001"].action == "report"
    actions, state_before = remediate.decide(parsed(*lines), vms(names(1)[0]), state,
                                             at(config.report_wait_s - 1), config)
    assert acts(actions) == [] and state_before.nodes["a4-a4-0001"].action == "report"
    actions, after = remediate.decide(parsed(*lines), vms(names(1)[0]), state,
                                      at(config.report_wait_s), config)
    assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]
    assert after.nodes["a4-a4-0001"].action == "recreate"
    # The report stopped the VM: no need to wait.
    actions, _ = remediate.decide(parsed(*lines), vms(names(1)[0], status="TERMINATED"),
                                  state, at(60), config)
    assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]


@pytest.mark.parametrize("busy", ["IDLE+COMPLETING+DRAIN", "MIXED+DRAIN", "ALLOCATED+DRAIN"])
def test_a_node_with_jobs_still_ending_is_replaced_only_once_they_end(busy):
    config = config_for("replace")
    actions, state = remediate.decide(parsed(node_line(state=busy)), vms(names(1)[0]),
                                      remediate.State(), at(0), config)
    assert acts(actions) == [] and state.actions == {} and state.nodes == {}
    assert notes(actions, "INFO") == [
        "a4-a4-0001: waiting for its jobs to end before replacing it"]
    actions, _ = remediate.decide(parsed(node_line(state="IDLE+DRAIN")), vms(names(1)[0]),
                                  state, at(60), config)
    assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]


def test_a_replacement_times_out_exactly_at_replace_timeout_s():
    config = config_for("replace")
    _, state = remediate.decide(parsed(node_line()), vms(names(1)[0]), remediate.State(),
                                at(0), config)
    actions, kept = remediate.decide(parsed(node_line()), vms(names(1)[0]), state,
                                     at(config.replace_timeout_s - 1), config)
    assert acts(actions) == [] and kept.failures == {}
    actions, gave_up = remediate.decide(parsed(node_line()), vms(names(1)[0]), state,
                                        at(config.replace_timeout_s), config)
    assert acts(actions) == [remediate.SetState("a4-a4-0001", "down", (
        f"{ECC}; cp:replace-timeout: no registration 1800s after the replace"))]
    assert gave_up.failures == {"a4": 1} and gave_up.nodes["a4-a4-0001"].action == "gave-up"


def test_a_rebooted_node_that_is_still_down_is_not_reset_again():
    """A DOWN node's reset brings it back in minutes: the next pass waits for its slurmd
    to register (or ResumeTimeout), it does not reset it again and count a failure."""
    config = config_for("reboot")
    down = node_line(state="DOWN+DYNAMIC_NORM*", reason="")
    group = vms("a4-a4-0001")
    _, state = remediate.decide(parsed(down), group, remediate.State(), at(0), config)
    actions, state = remediate.decide(parsed(down), group, state, at(60), config)
    assert acts(actions) == [] and state.failures == {}
    back = node_line(state="IDLE+DYNAMIC_NORM", reason="", start="2026-12-01T11:00:00")
    _, state = remediate.decide(parsed(back), group, state, at(120), config)
    assert state.nodes == {} and state.returned["a4-a4-0001"].action == "reboot"


@pytest.mark.parametrize(("after", "failures"), [(-1, 2), (0, 0)])
def test_failing_again_within_watch_s_of_coming_back_is_a_failure_and_after_it_is_not(
        after, failures):
    config = config_for("reboot")
    state = remediate.State(returned={"a4-a4-0001": remediate.Returned(at(0), "a4", "reboot")},
                            failures={"a4": 1})
    actions, state = remediate.decide(parsed(node_line()), vms(), state,
                                      at(config.watch_s + after), config)
    assert state.failures == {"a4": failures}
    assert any(isinstance(a, remediate.Reboot) for a in actions)


def test_an_hour_healthy_forgives_the_nodesets_failures():
    config = config_for("reboot")
    healthy = parsed(node_line(state="IDLE+DYNAMIC_NORM", reason=""))
    state = remediate.State(returned={"a4-a4-0001": remediate.Returned(at(0), "a4", "reboot")},
                            failures={"a4": 2})
    _, kept = remediate.decide(healthy, vms(), state, at(config.watch_s - 1), config)
    _, forgiven = remediate.decide(healthy, vms(), state, at(config.watch_s), config)
    assert kept.failures == {"a4": 2} and forgiven.failures == {"a4": 0}


# --- Decisions: protection -----------------------------------------------------------------

def timed_out(count: int) -> remediate.State:
    """``count`` recreations in flight since T0, none registered."""
    return remediate.State(nodes={n: remediate.Track("recreate", at(0), "a4", ECC,
                                                     "2026-12-01T10:31:52")
                                  for n in names(count)})


@pytest.mark.parametrize("limit", [2, 3])
def test_a_nodeset_is_protected_exactly_at_protect_after_failures(limit):
    config = config_for("replace", nodes=8, protect_after_failures=limit)
    lines = [node_line(n) for n in names(limit)]
    # One failure short: not protected.
    actions, state = remediate.decide(parsed(*lines[:limit - 1]), vms(*names(limit)),
                                      timed_out(limit - 1), at(1800), config)
    assert state.failures == {"a4": limit - 1} and state.protected == {}
    assert notes(actions, "ALERT") == []
    actions, state = remediate.decide(parsed(*lines), vms(*names(limit)), timed_out(limit),
                                      at(1800), config)
    assert state.failures == {"a4": limit} and list(state.protected) == ["a4"]
    (alert,) = notes(actions, "ALERT")
    assert f"{limit} failed remediations in a row" in alert
    assert "clusterprint-remediate --reset a4" in alert
    # The next pass acts on none of them and says why in each drained or down node's reason.
    down = [node_line(n, state="DOWN+DYNAMIC_NORM") for n in names(limit)]
    actions, _ = remediate.decide(parsed(*down, node_line(names(8)[7])), vms(*names(8)),
                                  state, at(2 * 3600), config)
    assert {type(a) for a in acts(actions)} == {remediate.SetState}
    assert all(f"cp:protected: remediation stopped after {limit} failures" in a.reason
               for a in acts(actions))


def test_every_action_is_counted_by_nodeset_and_kind_and_the_count_outlives_the_hour():
    config = config_for("replace", nodes=8, protect_after_failures=3)
    _, state = remediate.decide(parsed(*map(node_line, names(3))), vms(*names(3)),
                                timed_out(3), at(1800), config)
    assert state.counts == {"a4": {"timeout": 3, "protect": 1}}
    # A day later, drained again: the hour's list is emptied, the counts only grow.
    state = remediate.State(counts=state.counts)
    _, state = remediate.decide(parsed(node_line()), vms(*names(1)), state, at(86400),
                                config_for("replace"))
    assert state.counts == {"a4": {"timeout": 3, "protect": 1, "recreate": 1}}
    _, state = remediate.decide(parsed(node_line()), vms(), remediate.State(), at(0),
                                config_for("drain"))
    assert state.counts == {"a4": {"drain": 1}}
    assert set(remediate.COUNTED) >= {"drain", "recreate", "timeout", "protect"}


def test_decide_leaves_the_state_it_is_given_as_it_was():
    state = timed_out(2)
    before = json.dumps(asdict(state), sort_keys=True)
    remediate.decide(parsed(*map(node_line, names(2))), vms(*names(2)), state, at(1800),
                     config_for("replace"))
    assert json.dumps(asdict(state), sort_keys=True) == before


# --- Decisions: the clock jumps ------------------------------------------------------------

@pytest.mark.parametrize(("now", "acts_again"), [
    (at(60, wall=T0 - 7200), False),                    # wall clock back two hours
    (at(60, wall=T0 + 7200), False),                    # wall clock forward two hours
    (at(3600, wall=T0 - 86400), True),                  # an hour passed, whatever the wall says
    (at(60, wall=T0 - 7200, boot="boot-2"), False),     # rebooted, stamp in the future
    (at(-9000, wall=T0 + 7200, boot="boot-2"), False),  # rebooted 1000 s ago, wall forward
    (at(-6400, wall=T0 + 3600, boot="boot-2"), True),   # rebooted an hour ago, an hour later
])
def test_a_clock_jump_never_frees_a_place_of_the_hour(now, acts_again):
    """One an hour; the first node's reboot at T0; the second node asks at ``now``."""
    config = config_for("reboot", share=0.1)
    lines = [node_line(n) for n in names(2)]
    actions, state = remediate.decide(parsed(*lines), vms(), remediate.State(), at(0), config)
    assert len(acts(actions)) == 1
    rebooting = node_line(names(1)[0], state="IDLE+DRAIN+REBOOT_ISSUED")
    actions, _ = remediate.decide(parsed(rebooting, lines[1]), vms(), state, now, config)
    assert bool(acts(actions)) is acts_again


def test_a_stamp_of_an_older_loop_is_read_and_never_trusted_alone():
    """A state file of the loop before stamps carried the boot: wall-clock seconds."""
    stamp = remediate.Reading.from_json(T0, "since")
    assert remediate.elapsed(stamp, at(7200, boot="boot-2")) == 7200
    assert remediate.elapsed(stamp, remediate.Reading(T0 + 7200, 30, "boot-2")) == 30


# --- Acting in batches ---------------------------------------------------------------------

@pytest.fixture
def fake():
    api = FakeCompute("p", "z", groups={GROUP: ("c-a4", {n: "RUNNING" for n in names(8)})})
    yield api
    api.stop()


def compute_of(config: remediate.Config) -> common.Compute:
    return common.Compute("p", "z", config.api, config.token_url, config.http_timeout_s)




def remediator(config, slurm, now, log=None):
    return remediate.Remediator(config, slurm, compute_of(config), clock=lambda: now[0],
                                log=log or Journal())


def test_like_actions_go_in_one_call(fake):
    """Three recreations: one recreateInstances; two nodes marked alike: one scontrol."""
    config = config_for("replace", api=fake.config())
    slurm = FakeSlurm([])
    remediate.apply([remediate.Recreate(GROUP, n) for n in names(3)]
                    + [remediate.SetState(n, "drain", "cp:protected: x") for n in names(2)]
                    + [remediate.SetState("a4-a4-0003", "down", "cp:protected: x")],
                    slurm, compute_of(config), Journal())
    (call,) = fake.verbs("recreateInstances")
    assert call.body == {"instances": [f"zones/z/instances/{n}" for n in names(3)]}
    assert slurm.changes() == [
        ["scontrol", "update", "nodename=a4-a4-0001,a4-a4-0002", "state=drain",
         "reason=cp:protected: x"],
        ["scontrol", "update", "nodename=a4-a4-0003", "state=down", "reason=cp:protected: x"]]


def test_a_pass_over_many_drained_nodes_makes_calls_by_the_actions_not_the_nodes(fake,
                                                                                tmp_path):
    fake.page_size = 3  # eight VMs: three pages
    config = config_for("replace", share=0.5, nodes=8, state=tmp_path / "s.json",
                        api=fake.config())
    remediator(config, FakeSlurm([node_line(n) for n in names(8)]), [at(0)]).run_once()
    # The host-event watch adds one instances.list for the nodeset, whatever its size.
    assert [c.verb for c in fake.calls] == ["instanceGroupManagers"] + [
        "listManagedInstances"] * 3 + ["recreateInstances", "instances"]
    assert len(fake.verbs("recreateInstances")[0].body["instances"]) == 4


def test_a_nodeset_over_several_groups_is_listed_whole_and_recreated_through_each_holder(
        fake, tmp_path):
    """A nodeset past one group's limit has groups of one VM name: every group's VMs are
    the nodeset's, and each VM is recreated through the group that holds it."""
    second = GROUP.replace("group", "group-2")
    fake.groups = {GROUP: ("c-a4", {n: "RUNNING" for n in names(4)}),
                   "other-group": ("c-b", {"c-b-0001": "RUNNING"}),
                   second: ("c-a4", {n: "RUNNING" for n in names(8)[4:]})}
    config = config_for("replace", nodes=8, state=tmp_path / "s.json", api=fake.config())
    drained = ["a4-a4-0002", "a4-a4-0007"]
    remediator(config, FakeSlurm([node_line(n) for n in drained]), [at(0)]).run_once()
    assert {c.path.split("/")[-2]: c.body["instances"]
            for c in fake.verbs("recreateInstances")} == {
        GROUP: ["zones/z/instances/a4-a4-0002"], second: ["zones/z/instances/a4-a4-0007"]}
    assert not [c for c in fake.calls if "other-group" in c.path]


def test_a_nodeset_whose_second_group_does_not_answer_deletes_no_node(fake, tmp_path):
    """A list that misses one group would make that group's nodes look deleted."""
    second = GROUP.replace("group", "group-2")
    fake.groups[second] = ("c-a4", {"a4-a4-0009": "RUNNING"})
    fake.answers["listManagedInstances"] = lambda call: (
        (500, b"{}") if second in call.path else (200, json.dumps({"managedInstances": [
            {"instance": f"zones/z/instances/{n}", "instanceStatus": "RUNNING"}
            for n in names(8)]}).encode()))
    config = config_for("replace", nodes=9, state=tmp_path / "s.json", api=fake.config())
    down = node_line("a4-a4-0009", state="DOWN+DYNAMIC_NORM", reason="Not responding")
    slurm = FakeSlurm([down])
    journal = Journal()
    remediator(config, slurm, [at(0)], journal).run_once()
    assert not [c for c in slurm.changes() if c[:2] == ["scontrol", "delete"]]
    assert any("cannot list the VMs of nodeset a4" in m for m in journal.severities("ERROR"))


# --- Faults: a slow API, a killed pass -----------------------------------------------------

def test_a_slow_api_that_acts_after_the_loop_stopped_waiting_still_counts(fake, tmp_path):
    """One an hour, three drained nodes; the API recreates, then answers after the
    client's timeout. Passes within the hour: exactly one recreation reached the API."""
    fake.delay["recreateInstances"] = 1.0
    config = config_for("replace", share=0.1, state=tmp_path / "s.json", api=fake.config(),
                        http_timeout_s=0.3)
    slurm, now, log = FakeSlurm([node_line(n) for n in names(3)]), [at(0)], Journal()
    for minute in range(4):
        now[0] = at(60 * minute)
        remediator(config, slurm, now, log).run_once()
    assert len(fake.verbs("recreateInstances")) == 1
    assert any("timed out" in m for m in log.severities("ERROR"))
    assert len(remediate.State.load(config.state_file).actions["a4"]) == 1


def test_a_call_the_api_refused_is_tried_again_and_its_place_stays_spent(fake, tmp_path):
    config = config_for("replace", share=0.5, state=tmp_path / "s.json", api=fake.config())
    slurm, now = FakeSlurm([node_line(n) for n in names(1)]), [at(0)]
    fake.failing.add("recreateInstances")
    remediator(config, slurm, now).run_once()
    fake.failing.clear()
    now[0] = at(60)
    remediator(config, slurm, now).run_once()
    assert len(fake.verbs("recreateInstances")) == 2
    assert len(remediate.State.load(config.state_file).actions["a4"]) == 2


def installed(tmp_path: Path) -> Path:
    """The program as the controller has it: remediate.py with host_events.py,
    scale_down.py and common.py beside it (the renderer's set)."""
    for path, text in remediation.programs(str(tmp_path / "program")).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return tmp_path / "program" / "remediate.py"


def test_a_pass_killed_while_the_api_acts_has_counted_its_action(fake, tmp_path):
    """The process dies during the call (the API acts, no answer came): the next process
    finds the action counted and the node in flight, and calls nothing again."""
    fake.delay["recreateInstances"] = 30
    env = fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text("\n".join(node_line(n) for n in names(3)))
    config = write_config(tmp_path / "c.json", config_for(
        "replace", share=0.1, state=tmp_path / "s.json", api=fake.config()))
    argv = [sys.executable, str(installed(tmp_path)), "--config", str(config), "--once",
            "--now", str(T0)]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not fake.verbs("recreateInstances") and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    again = subprocess.run(argv[:-1] + [str(T0 + 600)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert len(fake.verbs("recreateInstances")) == 1


def test_a_clock_jump_as_a_process_lets_nothing_more_through(fake, tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text("\n".join(node_line(n) for n in names(2)))
    config = write_config(tmp_path / "c.json", config_for(
        "replace", share=0.1, state=tmp_path / "s.json", api=fake.config()))

    def once(wall: float, uptime: float) -> None:
        subprocess.run([sys.executable, str(installed(tmp_path)), "--config", str(config),
                        "--once", "--now", str(wall), "--uptime", str(uptime), "--boot-id",
                        BOOT], env=env, check=True, capture_output=True, timeout=60)

    once(T0, 500)
    once(T0 - 7200, 560)         # the wall clock back two hours
    once(T0 + 7200, 620)         # and forward two hours
    assert len(fake.verbs("recreateInstances")) == 1
    once(T0 + 3600, 500 + 3600)  # an hour on the boot's clock
    assert len(fake.verbs("recreateInstances")) == 2


# --- Faults: the state file ----------------------------------------------------------------

BAD_STATES = {
    "not JSON": b"{not json",
    "empty": b"",
    "cut short": json.dumps({"nodes": {}, "failures": {"a4": 1}}).encode()[:20],
    "not UTF-8": b'{"failures": {"a4": 1}}\xff',
    "a list": b"[1, 2]",
    "a wrong type": json.dumps({"failures": {"a4": "1"}}).encode(),
    "a wrong shape": json.dumps({"nodes": {"a4-a4-0001": {"action": "recreate"}}}).encode(),
    "an unknown key": json.dumps({"nodez": {}}).encode(),
    "an unknown action": json.dumps({"nodes": {"a4-a4-0001": {
        "action": "explode", "since": 1.0, "nodeset": "a4", "reason": "", "slurmd_start": ""}}}
    ).encode(),
    "too deep": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("data", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_an_unreadable_state_file_protects_every_nodeset_until_a_reset(fake, tmp_path, data):
    state = tmp_path / "s.json"
    state.write_bytes(data)
    config = config_for("replace", state=state, api=fake.config(), nodesets=("a4", "b4"))
    fake.groups["c-nodeset-b4-group-abc"] = ("c-b4", {"b4-b4-0001": "RUNNING"})
    slurm = FakeSlurm([node_line(), node_line("b4-b4-0001", feature="b4")])
    log, now = Journal(), [at(0)]
    loop = remediator(config, slurm, now, log)
    for _ in range(3):
        loop.run_once()
    assert fake.verbs("recreateInstances") == []
    (alert,) = log.severities("ALERT")
    assert str(state) in alert and "--reset NODESET" in alert
    assert state.read_bytes() == data, "the bad file was written over"
    note = f"{ECC}; cp:protected: state file unreadable"
    assert slurm.changes() == 3 * [["scontrol", "update", "nodename=a4-a4-0001,b4-b4-0001",
                                    "state=drain", f"reason={note}"]]
    # The reset puts the file aside and frees a4 only.
    slurm.lines = [node_line(reason=note), node_line("b4-b4-0001", feature="b4", reason=note)]
    loop.reset("a4")
    assert Path(f"{state}.corrupt").read_bytes() == data
    assert list(remediate.State.load(str(state)).protected) == ["b4"]
    assert slurm.changes()[-1] == ["scontrol", "update", "nodename=a4-a4-0001", "state=drain",
                                   f"reason={ECC}"]
    slurm.lines = [node_line(), slurm.lines[1]]
    loop.run_once()
    assert fake.verbs("recreateInstances")[0].body == {
        "instances": ["zones/z/instances/a4-a4-0001"]}


def test_a_write_cut_short_leaves_the_last_whole_state(fake, tmp_path, monkeypatch):
    state = tmp_path / "s.json"
    config = config_for("replace", share=1.0, state=state, api=fake.config())
    slurm = FakeSlurm([node_line(n) for n in names(2)])
    remediator(config, slurm, [at(0)]).run_once()
    saved = state.read_bytes()

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    slurm.lines.append(node_line(names(3)[2]))
    with pytest.raises(OSError):
        remediator(config, slurm, [at(60)]).run_once()
    assert state.read_bytes() == saved and remediate.State.load(str(state)).nodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "s.json.lock"]
    assert len(fake.verbs("recreateInstances")) == 1, "acted without counting it first"


def test_a_reader_during_the_loops_writes_always_finds_a_whole_state(tmp_path):
    path = str(tmp_path / "s.json")
    seen, done = [], threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.append(remediate.State.load(path))
            except remediate.BadState as exc:
                seen.append(exc)
            # hand the GIL back: a reader that never sleeps makes each of the writer's
            # system calls wait out a switch interval, and the test takes a minute
            time.sleep(0)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for count in range(300):
            remediate.State(failures={"a4": count}, actions={"a4": [at(i) for i in range(50)]}
                            ).save(path)
    finally:
        done.set()
        reader.join()
    assert seen and not [s for s in seen if isinstance(s, Exception)]


# --- Faults: what the API answers ----------------------------------------------------------

def list_page(token: str) -> tuple[int, bytes]:
    return 200, json.dumps({"managedInstances": [], "nextPageToken": token}).encode()


COUNTER = iter(range(10**6))
HOSTILE = {
    "HTML": ("listManagedInstances", (200, b"<html><body>Service Unavailable</body></html>")),
    "an empty answer": ("listManagedInstances", (200, b"")),
    "a list": ("listManagedInstances", (200, b"[]")),
    "no instance": ("listManagedInstances",
                    (200, json.dumps({"managedInstances": [{"status": "RUNNING"}]}).encode())),
    "a number for an instance": ("listManagedInstances", (200, json.dumps(
        {"managedInstances": [{"instance": 7}]}).encode())),
    "items not a list": ("instanceGroupManagers", (200, json.dumps({"items": "all"}).encode())),
    "a group without a name": ("instanceGroupManagers", (200, json.dumps(
        {"items": [{"baseInstanceName": "c-a4"}]}).encode())),
    "a page token that repeats": ("listManagedInstances", list_page("again")),
    "page tokens that never end": ("listManagedInstances",
                                   lambda call: list_page(str(next(COUNTER)))),
    "a token of no string": ("token", (200, json.dumps({"access_token": 5}).encode())),
    "an expiry of no number": ("token", (200, json.dumps(
        {"access_token": "fake", "expires_in": "soon"}).encode())),
    "a token server in trouble": ("token", (503, b"<html>busy</html>")),
}


@pytest.mark.parametrize(("verb", "answer"), HOSTILE.values(), ids=HOSTILE.keys())
def test_an_unexpected_api_answer_ends_the_pass_with_an_error_and_the_next_retries(
        fake, tmp_path, verb, answer):
    config = config_for("replace", state=tmp_path / "s.json", api=fake.config())
    fake.answers[verb] = answer
    log, slurm = Journal(), FakeSlurm([node_line()])
    started = time.monotonic()
    remediator(config, slurm, [at(0)], log).run_once()
    assert time.monotonic() - started < 10
    (error,) = log.severities("ERROR")
    assert error.startswith("cannot list the VMs of nodeset a4: ") and "\n" not in error
    assert fake.verbs("recreateInstances") == []
    del fake.answers[verb]
    remediator(config, slurm, [at(60)], log).run_once()
    assert len(fake.verbs("recreateInstances")) == 1


def test_an_unexpected_answer_as_a_process_is_one_line_and_no_traceback(fake, tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text(node_line())
    config = write_config(tmp_path / "c.json", config_for(
        "replace", state=tmp_path / "s.json", api=fake.config()))
    fake.answers["listManagedInstances"] = list_page("again")
    done = subprocess.run([sys.executable, str(installed(tmp_path)), "--config", str(config),
                           "--once", "--now", str(T0)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("<3>") and "nextPageToken" in json.loads(line[3:])["message"]


def test_an_api_that_does_not_answer_ends_the_pass_in_its_timeout(fake, tmp_path):
    fake.delay["instanceGroupManagers"] = 5
    config = config_for("replace", state=tmp_path / "s.json", api=fake.config(),
                        http_timeout_s=0.3)
    log = Journal()
    started = time.monotonic()
    remediator(config, FakeSlurm([node_line()]), [at(0)], log).run_once()
    assert time.monotonic() - started < 3 and len(log.severities("ERROR")) == 1


def test_a_token_said_to_last_for_ever_is_fetched_again_within_the_hour(fake, monkeypatch):
    fake.answers["token"] = (200, json.dumps({"access_token": "fake",
                                              "expires_in": 10**12}).encode())
    compute = compute_of(config_for("replace", api=fake.config()))
    compute.instances(GROUP)
    clock = time.monotonic() + common.TOKEN_LIFETIME_MAX_S
    monkeypatch.setattr(time, "monotonic", lambda: clock)
    compute.instances(GROUP)
    assert fake.tokens == 2


# --- The service while an operator resets ----------------------------------------------------

@pytest.mark.parametrize("before", ["protected", "corrupt"])
def test_a_reset_takes_effect_while_the_service_runs(fake, tmp_path, before):
    """The service (the program as a process, a pass a second) and an operator's
    ``--reset`` from another process: the next pass acts on the nodeset, and the service
    never writes its own older state over the reset."""
    env = fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text(node_line())
    state = tmp_path / "s.json"
    config = write_config(tmp_path / "c.json", config_for(
        "replace", state=state, api=fake.config(), interval_s=1))
    if before == "protected":
        remediate.State(failures={"a4": 3}, protected={"a4": remediate.Protection(
            at(0), "3 failed remediations in a row")}).save(str(state))
    else:
        state.write_bytes(b'{"nodes": {"a4-a4-0001": ')
    program = installed(tmp_path)
    service = subprocess.Popen([sys.executable, str(program), "--config", str(config)],
                               env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(scontrol_log(tmp_path)) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.5)  # passes while protected: nothing recreated
        assert fake.verbs("recreateInstances") == [] and service.poll() is None
        subprocess.run([sys.executable, str(program), "--config", str(config), "--reset",
                        "a4"], env=env, check=True, capture_output=True, timeout=60)
        while not fake.verbs("recreateInstances") and time.monotonic() < deadline + 30:
            time.sleep(0.1)
        time.sleep(2.5)
        assert len(fake.verbs("recreateInstances")) == 1
        saved = remediate.State.load(str(state))
        assert saved.protected == {} and saved.nodes["a4-a4-0001"].action == "recreate"
        assert service.poll() is None, "the service stopped"
    finally:
        service.send_signal(signal.SIGTERM)
        _, err = service.communicate(timeout=30)
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("<1>")]) == (
        1 if before == "corrupt" else 0)


def test_a_reset_of_a_nodeset_the_config_does_not_name_changes_nothing(tmp_path):
    config = write_config(tmp_path / "c.json", config_for("replace", state=tmp_path / "s.json"))
    done = subprocess.run([sys.executable, "-m", "clusterprint.node.remediate", "--config",
                           str(config), "--reset", "a5"], capture_output=True, text=True,
                          env=fake_scontrol(tmp_path))
    assert done.returncode == 2 and "no nodeset a5" in done.stderr
    assert not (tmp_path / "s.json").exists()


# --- The config ------------------------------------------------------------------------------

def test_the_config_round_trips_and_keeps_the_programs_defaults(tmp_path):
    config = config_for("replace")
    path = write_config(tmp_path / "c.json", config)
    assert remediate.Config.load(str(path)) == config
    assert config.protect_after_failures == 3 and config.replace_timeout_s == 1800


@pytest.mark.parametrize(("change", "said"), [
    ({"max_share_per_hour": "0.1"}, "max_share_per_hour: expected int or float"),
    ({"interval_s": True}, "interval_s: expected int, got bool"),
    ({"nodesets": {"a4": {"base_instance_name": "c-a4", "vm_names": "c-a4-.+", "nodes": "4",
                          "on_failure": "drain", "report_faulty_host": False}}}, "nodes"),
    ({"nodesets": {"a4": {"base_instance_name": "c-a4", "vm_names": "c-a4-.+", "nodes": 4,
                          "on_failure": "burn", "report_faulty_host": False}}},
     "on_failure 'burn'"),
    ({"watch": 3600}, "unknown key 'watch'"),
])
def test_a_config_of_the_wrong_types_is_refused_in_one_line(tmp_path, change, said):
    raw = {**config_for("drain").to_json(), **change}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(common.BadJSON, match=said):
        remediate.Config.load(str(path))
    done = subprocess.run([sys.executable, "-m", "clusterprint.node.remediate", "--config",
                           str(path), "--once"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and said.split(":")[0] in done.stderr


# --- The RebootProgram and the loop over several passes --------------------------------------

def test_the_reboot_program_resets_each_node_and_fails_when_one_reset_fails(fake, tmp_path):
    config = write_config(tmp_path / "remediate.json", config_for("reboot", api=fake.config()))
    argv = [sys.executable, "-m", "clusterprint.node.remediate", "--config", str(config),
            "--reboot", "a4-a4-0001,a4-a4-0002"]
    assert subprocess.run(argv, capture_output=True).returncode == 0
    assert [c.path.split("/instances/")[1] for c in fake.verbs("reset")] == [
        "a4-a4-0001/reset", "a4-a4-0002/reset"]
    fake.failing.add("reset")
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 1 and "cannot reset the VM of a4-a4-0001" in done.stderr


def test_failing_again_soon_after_a_reboot_counts_and_a_healthy_hour_forgives(fake, tmp_path):
    config = config_for("reboot", state=tmp_path / "s.json", api=fake.config())
    healthy = node_line(state="IDLE+DYNAMIC_NORM", reason="", start="2026-12-01T10:40:00")
    slurm, now = FakeSlurm([node_line()]), [at(0)]
    remediator(config, slurm, now).run_once()            # rebooted
    slurm.lines = [healthy]
    now[0] = at(600)
    remediator(config, slurm, now).run_once()            # back in service
    slurm.lines = [node_line(start="2026-12-01T10:40:00", stamp="root@2026-12-01T10:50:00")]
    now[0] = at(1200)
    remediator(config, slurm, now).run_once()            # failed again within the hour
    assert remediate.State.load(config.state_file).failures == {"a4": 1}
    slurm.lines = [node_line(state="IDLE+DYNAMIC_NORM", reason="", start="2026-12-01T11:00:00")]
    now[0] = at(1800)
    remediator(config, slurm, now).run_once()
    now[0] = at(1800 + 3600)
    remediator(config, slurm, now).run_once()            # an hour healthy since
    assert remediate.State.load(config.state_file).failures == {"a4": 0}


def test_a_recreated_vm_that_fails_its_first_check_is_not_resumed(fake, tmp_path):
    """The health check runs as slurmd starts: a new drain is a failed replacement."""
    config = config_for("replace", state=tmp_path / "s.json", api=fake.config())
    slurm, now = FakeSlurm([node_line()]), [at(0)]
    remediator(config, slurm, now).run_once()
    assert len(fake.verbs("recreateInstances")) == 1
    slurm.lines = [node_line(start="2026-12-01T10:50:00", stamp="root@2026-12-01T10:50:01")]
    now[0] = at(600)
    remediator(config, slurm, now).run_once()
    assert not [c for c in slurm.commands if "state=resume" in c]
    assert remediate.State.load(config.state_file).failures == {"a4": 1}
    assert len(fake.verbs("recreateInstances")) == 2


def test_a_recreated_vm_that_registers_healthy_is_resumed(fake, tmp_path):
    config = config_for("replace", state=tmp_path / "s.json", api=fake.config())
    slurm, now = FakeSlurm([node_line()]), [at(0)]
    remediator(config, slurm, now).run_once()
    slurm.lines = [node_line(start="2026-12-01T10:50:00")]  # its old reason, a new slurmd
    now[0] = at(600)
    remediator(config, slurm, now).run_once()
    assert slurm.changes() == [["scontrol", "update", "nodename=a4-a4-0001", "state=resume"]]
    assert remediate.State.load(config.state_file).returned["a4-a4-0001"].action == "recreate"


# --- What an operator reads: each decision's log line, call and reason ----------------------

def note(message: str, severity: str = "INFO", **fields: object) -> remediate.Note:
    return remediate.Note(message, severity, fields)


def test_a_drain_and_a_wait_for_jobs_each_log_their_node_and_action():
    actions, _ = remediate.decide(parsed(node_line()), vms(), remediate.State(), at(0),
                                  config_for("drain"))
    assert actions == [note(f"a4-a4-0001 stays drained: {ECC}", node="a4-a4-0001",
                            action="drain")]
    actions, _ = remediate.decide(parsed(node_line(state="MIXED+DRAIN")), vms("a4-a4-0001"),
                                  remediate.State(), at(0), config_for("replace"))
    assert actions == [note("a4-a4-0001: waiting for its jobs to end before replacing it",
                            node="a4-a4-0001", action="wait")]


def test_a_replacement_names_its_group_logs_the_reason_and_tracks_it():
    actions, state = remediate.decide(parsed(node_line()), vms("a4-a4-0001"),
                                      remediate.State(), at(0), config_for("replace"))
    assert actions == [remediate.Recreate(GROUP, "a4-a4-0001"), note(
        f"recreating a4-a4-0001 through its instance group: {ECC}", node="a4-a4-0001",
        action="recreate")]
    assert state.nodes["a4-a4-0001"].reason == ECC
    assert state.nodes["a4-a4-0001"].action == "recreate"
    assert state.actions == {"a4": [at(0)]}


def test_the_rate_limit_counts_the_waiting_nodes_of_each_nodeset():
    config = config_for("reboot", share=0.25, nodesets=("a4", "b4"))
    lines = [node_line(n) for n in names(3)] + [node_line(n, feature="b4")
                                                for n in names(2, "b4")]
    actions, _ = remediate.decide(parsed(*lines), {}, remediate.State(), at(0), config)
    assert notes(actions, "WARNING") == [
        "nodeset a4: its 1 remediations this hour are taken, 2 more nodes wait",
        "nodeset b4: its 1 remediations this hour are taken, 1 more nodes wait"]


def recreated(action: str = "recreate", reason: str = ECC) -> remediate.State:
    return remediate.State(nodes={"a4-a4-0001": remediate.Track(
        action, at(0), "a4", reason, START, STAMP)},
        actions={"a4": [at(0)]})


def test_a_replaced_node_that_registers_is_resumed_and_watched():
    line = node_line(state="IDLE+DRAIN+DYNAMIC_NORM", start="2026-12-01T11:00:00")
    actions, state = remediate.decide(parsed(line), vms("a4-a4-0001"), recreated(), at(600),
                                      config_for("replace"))
    assert actions == [remediate.SetState("a4-a4-0001", "resume"), note(
        "a4-a4-0001 registered again after its replacement: resumed", node="a4-a4-0001",
        action="resume")]
    assert state.nodes == {}
    assert state.returned == {"a4-a4-0001": remediate.Returned(at(600), "a4", "recreate")}


@pytest.mark.parametrize(("action", "what"), [("recreate", "replace"), ("reboot", "reboot")])
def test_a_timeout_sets_the_node_down_with_its_reason_and_logs_the_failure(action, what):
    config = config_for("replace" if action == "recreate" else "reboot")
    actions, state = remediate.decide(parsed(node_line()), vms("a4-a4-0001"),
                                      recreated(action), at(1800), config)
    why = f"a4-a4-0001 did not register within 1800s of its {what}"
    assert actions == [
        note(f"nodeset a4: failed remediation 1 of 3: {why}", "WARNING", nodeset="a4",
             action="failure"),
        remediate.SetState("a4-a4-0001", "down", f"{ECC}; cp:{what}-timeout: no "
                                                 f"registration 1800s after the {what}"),
        note("a4-a4-0001 did not come back: DOWN", "ERROR", node="a4-a4-0001",
             action="timeout")]
    assert state.nodes["a4-a4-0001"] == replace(recreated(action).nodes["a4-a4-0001"],
                                                action="gave-up", since=at(1800))
    assert state.failures == {"a4": 1}


def test_the_failure_that_protects_a_nodeset_alerts_and_stamps_the_protection():
    config = config_for("reboot")
    state = recreated("reboot")
    state.failures["a4"] = 2
    actions, later = remediate.decide(parsed(node_line()), vms(), state, at(1800), config)
    why = "a4-a4-0001 did not register within 1800s of its reboot"
    assert note(f"nodeset a4 is protected: 3 failed remediations in a row (last: {why}); the "
                "loop no longer reboots or replaces its nodes. Leave with: "
                "clusterprint-remediate --reset a4", "ALERT", nodeset="a4",
                action="protect") in actions
    assert later.protected == {"a4": remediate.Protection(
        at(1800), f"3 failed remediations in a row, last: {why}")}
    # Its drained nodes say so in their reasons, with the failures counted.
    assert remediate.SetState("a4-a4-0001", "drain", f"{ECC}; cp:protected: remediation "
                              "stopped after 3 failures") in actions


def test_failing_again_soon_names_the_node_and_what_was_done_in_the_failure():
    state = remediate.State(returned={"a4-a4-0001": remediate.Returned(at(0), "a4", "reboot")})
    actions, _ = remediate.decide(parsed(node_line()), vms(), state, at(100),
                                  config_for("reboot"))
    assert notes(actions, "WARNING") == [
        "nodeset a4: failed remediation 1 of 3: a4-a4-0001 failed again 100s after its reboot"]


def test_protection_marks_only_drained_or_down_nodes_and_counts_no_failures_as_zero():
    state = remediate.State(protected={"a4": remediate.Protection(at(0), "by hand")})
    lines = [node_line("a4-a4-0001"), node_line("a4-a4-0002", state="IDLE", reason=""),
             node_line("a4-a4-0003", state="DOWN+DYNAMIC_NORM", reason="")]
    actions, _ = remediate.decide(parsed(*lines), vms(*names(3)), state, at(0),
                                  config_for("reboot"))
    note_ = "cp:protected: remediation stopped after 0 failures"
    assert acts(actions) == [remediate.SetState("a4-a4-0001", "drain", f"{ECC}; {note_}"),
                             remediate.SetState("a4-a4-0003", "down", note_)]



def test_a_node_a_reset_left_with_protected_reset_is_marked_when_protected_again():
    state = remediate.State(protected={"a4": remediate.Protection(at(0), "by hand")})
    lines = [node_line("a4-a4-0001", reason="cp:protected-reset"),
             node_line("a4-a4-0002", reason=f"{ECC}; cp:protected: remediation stopped")]
    actions, _ = remediate.decide(parsed(*lines), vms(*names(2)), state, at(0),
                                  config_for("reboot"))
    note_ = "cp:protected: remediation stopped after 0 failures"
    assert acts(actions) == [remediate.SetState("a4-a4-0001", "drain",
                                                f"cp:protected-reset; {note_}")]

# --- Following an action in flight ------------------------------------------------------------

def test_a_drain_ends_when_an_operator_resumes_the_node_and_not_before():
    state = recreated("drain")
    _, kept = remediate.decide(parsed(node_line()), vms(), state, at(60), config_for("drain"))
    assert set(kept.nodes) == {"a4-a4-0001"}
    _, kept = remediate.decide(parsed(node_line(state="DOWN+DYNAMIC_NORM")), vms("a4-a4-0001"),
                               state, at(60), config_for("drain"))
    assert set(kept.nodes) == {"a4-a4-0001"}
    _, ended = remediate.decide(parsed(node_line(state="IDLE", reason="")), vms(), state,
                                at(60), config_for("drain"))
    assert ended.nodes == {}


def test_a_node_left_down_is_acted_on_again_only_once_an_operator_resumed_it():
    state = recreated("gave-up")
    actions, kept = remediate.decide(parsed(node_line(state="DOWN+DRAIN+DYNAMIC_NORM")),
                                     vms("a4-a4-0001"), state, at(7200), config_for("reboot"))
    assert acts(actions) == [] and kept.nodes["a4-a4-0001"].action == "gave-up"
    # Resumed by hand, it fails its check again: a fresh reboot, counted.
    actions, again = remediate.decide(parsed(node_line()), vms("a4-a4-0001"), state, at(7200),
                                      config_for("reboot"))
    assert acts(actions) == [remediate.Reboot("a4-a4-0001", f"{ECC}; cp:reboot: issued")]
    assert again.nodes["a4-a4-0001"].action == "reboot"


@pytest.mark.parametrize(("vm_status", "outcome", "recreates"), [
    ("RUNNING", "", False), (None, "", False), ("STOPPING", "", True), ("RUNNING", "refused",
                                                                        True)])
def test_a_reported_host_is_recreated_early_only_when_its_vm_stopped_or_the_report_failed(
        vm_status, outcome, recreates):
    state = recreated("report", reason=ECC)
    state.nodes["a4-a4-0001"] = replace(state.nodes["a4-a4-0001"], outcome=outcome)
    group = vms() if vm_status is None else vms("a4-a4-0001", status=vm_status)
    actions, later = remediate.decide(parsed(node_line(reason="cp:other: now")), group, state,
                                      at(60), config_for("replace", report=True))
    if recreates:
        assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]
        assert later.nodes["a4-a4-0001"].reason == ECC  # the reason it was reported for
    else:
        assert acts(actions) == []


# --- The operator's reset, in the test process ---------------------------------------------

PROTECTED_NOTE = "cp:protected: remediation stopped after 3 failures"


class FailingSlurm(FakeSlurm):
    """scontrol that refuses every change."""

    def _run(self, argv: list[str]) -> str:
        out = super()._run(argv)
        if argv[:3] != ["scontrol", "show", "node"]:
            raise common.CommandFailed(f"{' '.join(argv[:2])}: exit status 1")
        return out


def protected_both(path: Path) -> None:
    remediate.State(failures={"a4": 3, "b4": 3}, protected={
        n: remediate.Protection(at(0), "3 failed remediations in a row") for n in ("a4", "b4")
    }).save(str(path))


def test_a_reset_frees_its_nodeset_only_and_takes_the_note_off_its_nodes(tmp_path):
    state = tmp_path / "s.json"
    protected_both(state)
    config = config_for("reboot", state=state, nodesets=("a4", "b4"))
    slurm = FakeSlurm([
        node_line("a4-a4-0001", reason=f"{ECC}; {PROTECTED_NOTE}"),
        node_line("a4-a4-0002", state="DOWN+DYNAMIC_NORM", reason=PROTECTED_NOTE),
        node_line("a4-a4-0003", reason=ECC),
        node_line("b4-b4-0001", feature="b4", reason=f"{ECC}; {PROTECTED_NOTE}")])
    log = Journal()
    remediator(config, slurm, [at(60)], log).reset("a4")
    assert slurm.changes() == [
        ["scontrol", "update", "nodename=a4-a4-0001", "state=drain", f"reason={ECC}"],
        ["scontrol", "update", "nodename=a4-a4-0002", "state=down",
         "reason=cp:protected-reset"]]
    saved = remediate.State.load(str(state))
    assert list(saved.protected) == ["b4"] and saved.failures == {"b4": 3}
    assert log.entries == [{"message": "nodeset a4 left protected mode", "severity": "INFO",
                            "nodeset": "a4", "action": "reset"}]


def test_a_reset_whose_scontrol_fails_logs_the_error_in_the_loops_log(tmp_path):
    state = tmp_path / "s.json"
    protected_both(state)
    config = config_for("reboot", state=state, nodesets=("a4", "b4"))
    slurm = FailingSlurm([node_line(reason=f"{ECC}; {PROTECTED_NOTE}")])
    log = Journal()
    remediator(config, slurm, [at(60)], log).reset("a4")
    assert log.entries[0] == {
        "message": "setstate of a4-a4-0001 failed: scontrol update: exit status 1",
        "severity": "ERROR", "nodes": "a4-a4-0001"}
    assert list(remediate.State.load(str(state)).protected) == ["b4"]


def test_a_reset_of_a_corrupt_state_file_says_what_it_kept_aside(tmp_path):
    state = tmp_path / "s.json"
    state.write_bytes(b"{")
    config = config_for("reboot", state=state, nodesets=("a4", "b4"))
    log = Journal()
    remediator(config, FakeSlurm([]), [at(60)], log).reset("a4")
    (warning,) = [e for e in log.entries if e["severity"] == "WARNING"]
    assert warning["message"].startswith(f"state file {state} was unreadable (")
    assert warning["message"].endswith(
        f"): kept as {state}.corrupt; the other nodesets stay protected until each is reset")
    assert {k: v for k, v in warning.items() if k != "message"} == {
        "severity": "WARNING", "action": "reset", "state_file": str(state)}
    saved = remediate.State.load(str(state))
    assert list(saved.protected) == ["b4"]
    assert saved.protected["b4"].note == "state file unreadable"
    assert saved.protected["b4"].why.startswith("state file unreadable: ")


def test_a_reset_waits_for_the_state_files_lock(tmp_path):
    state = tmp_path / "s.json"
    protected_both(state)
    config = config_for("reboot", state=state, nodesets=("a4", "b4"))
    loop = remediator(config, FakeSlurm([]), [at(60)])
    with common.locked(state):
        worker = threading.Thread(target=loop.reset, args=("a4",))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive(), "the reset did not wait for the pass holding the lock"
        assert sorted(remediate.State.load(str(state)).protected) == ["a4", "b4"]
    worker.join(10)
    assert list(remediate.State.load(str(state)).protected) == ["b4"]


def test_an_unreadable_state_file_is_alerted_once_naming_the_file_and_the_way_out(
        fake, tmp_path):
    state = tmp_path / "s.json"
    state.write_bytes(b"{")
    config = config_for("reboot", state=state, api=fake.config())
    log = Journal()
    loop = remediator(config, FakeSlurm([node_line()]), [at(0)], log)
    loop.run_once()
    loop.run_once()
    (alert,) = [e for e in log.entries if e["severity"] == "ALERT"]
    assert alert["message"].startswith(f"state file {state} is unreadable (")
    assert alert["message"].endswith("): no node is rebooted or replaced until an operator "
                                     "runs clusterprint-remediate --reset NODESET")
    assert {k: v for k, v in alert.items() if k != "message"} == {
        "severity": "ALERT", "action": "protect", "state_file": str(state)}


# --- Acting: what each failure says, and what is tried again ---------------------------------

def test_a_note_is_logged_as_decided(fake):
    log = Journal()
    remediate.apply([remediate.Note("m", "WARNING", {"node": "a4-a4-0001"})], FakeSlurm([]),
                    compute_of(config_for("reboot", api=fake.config())), log)
    assert log.entries == [{"message": "m", "severity": "WARNING", "node": "a4-a4-0001"}]


def test_a_host_report_sends_the_nodes_reason_for_its_vm(fake):
    remediate.apply([remediate.Report("a4-a4-0001", ECC)], FakeSlurm([]),
                    compute_of(config_for("replace", api=fake.config())), Journal())
    (call,) = fake.calls
    assert (call.method, call.verb) == ("POST", "reportHostAsFaulty")
    assert call.path.endswith("/instances/a4-a4-0001/reportHostAsFaulty")
    assert call.body == {"disruptionSchedule": "IMMEDIATE", "faultReasons": [
        {"behavior": "UNRECOVERABLE_GPU_ERROR", "description": ECC}]}


def by_node(refuse: str) -> Callable:
    """An API that refuses the node ``refuse`` (HTTP 403) and answers HTML for any other."""
    def answer(call):
        if f"/{refuse}/" in call.path:
            return 403, b'{"error": "no"}'
        return 200, b"<html>"
    return answer


def test_only_calls_the_api_refused_are_tried_again(fake):
    """A refused reset or report did nothing; an answer the loop cannot read may have acted;
    a reboot that scontrol failed did nothing; a failed scontrol update is not retried."""
    fake.answers["reset"] = by_node("a4-a4-0001")
    fake.answers["reportHostAsFaulty"] = by_node("a4-a4-0003")
    fake.answers["recreateInstances"] = (200, b"<html>")
    log = Journal()
    refused = remediate.apply(
        [remediate.Reset("a4-a4-0001"), remediate.Reset("a4-a4-0002"),
         remediate.Report("a4-a4-0003", ECC), remediate.Report("a4-a4-0004", ECC),
         remediate.Reboot("a4-a4-0005", "r"), remediate.Reboot("a4-a4-0006", "r"),
         remediate.Recreate(GROUP, "a4-a4-0007"), remediate.SetState("a4-a4-0008", "drain")],
        FailingSlurm([]), compute_of(config_for("reboot", api=fake.config())), log)
    assert refused == {"a4-a4-0001", "a4-a4-0003", "a4-a4-0005", "a4-a4-0006"}
    errors = [(e["message"].split(": ")[0], e.get("node", e.get("nodes")))
              for e in log.entries if e["severity"] == "ERROR"]
    assert errors == [
        ("reset of a4-a4-0001 failed", "a4-a4-0001"), ("reset of a4-a4-0002 failed",
                                                       "a4-a4-0002"),
        ("report of a4-a4-0003 failed", "a4-a4-0003"), ("report of a4-a4-0004 failed",
                                                        "a4-a4-0004"),
        ("reboot of a4-a4-0005,a4-a4-0006 failed", "a4-a4-0005,a4-a4-0006"),
        ("recreate of a4-a4-0007 failed", "a4-a4-0007"),
        ("setstate of a4-a4-0008 failed", "a4-a4-0008")]
    assert log.entries[0]["message"] == (
        'reset of a4-a4-0001 failed: POST instances/a4-a4-0001/reset: HTTP 403: {"error": "no"}')


def test_a_reboot_asks_slurm_for_a_reboot_as_soon_as_the_jobs_end_then_resume():
    slurm = FakeSlurm([])
    remediate.apply([remediate.Reboot(n, "cp:x; cp:reboot: issued") for n in names(2)],
                    slurm, common.Compute("p", "z"), Journal())
    assert slurm.changes() == [["scontrol", "reboot", "ASAP", "nextstate=RESUME",
                                "reason=cp:x; cp:reboot: issued", "a4-a4-0001,a4-a4-0002"]]


# --- The Compute API client: the calls made, the errors said ---------------------------------

def test_listing_a_group_pages_through_it_with_posts_and_counts_each_call(fake):
    statuses = {"a4-a4-0001": "RUNNING", "a4-a4-0002": "STOPPING", "a4-a4-0003": "CREATING"}
    fake.groups[GROUP] = ("c-a4", statuses)
    fake.page_size = 2
    compute = compute_of(config_for("replace", api=fake.config()))
    assert compute.groups("c-a4") == [GROUP]
    assert compute.instances(GROUP) == statuses
    prefix = "/compute/v1/projects/p/zones/z/"
    assert [(c.method, c.path) for c in fake.calls] == [
        ("GET", f"{prefix}instanceGroupManagers"),
        ("POST", f"{prefix}instanceGroupManagers/{GROUP}/listManagedInstances"),
        ("POST", f"{prefix}instanceGroupManagers/{GROUP}/listManagedInstances?pageToken=2")]
    assert all(c.raw == b"" and c.content_type == "application/json" for c in fake.calls)
    assert compute.calls == 3
    compute.reset("a4-a4-0001")
    assert fake.calls[-1].content_type == "application/json" and compute.calls == 4


def test_a_page_token_is_quoted_a_vm_being_created_has_no_status_and_no_list_is_empty(fake):
    pages = {"": {"managedInstances": [{"instance": "x/zones/z/instances/a4-a4-0001"}],
                  "nextPageToken": "a b"},
             "?pageToken=a%20b": {}}
    fake.answers["listManagedInstances"] = lambda call: (
        200, json.dumps(pages[call.path.partition("listManagedInstances")[2]]).encode())
    compute = compute_of(config_for("replace", api=fake.config()))
    assert compute.instances(GROUP) == {"a4-a4-0001": ""}


def test_a_group_whose_answer_is_larger_than_a_read_is_read_whole(fake):
    fake.groups[GROUP] = ("c-a4", {f"a4-a4-{i:04d}": "RUNNING" for i in range(3000)})
    fake.page_size = 3000
    compute = compute_of(config_for("replace", api=fake.config()))
    assert len(compute.instances(GROUP)) == 3000


def compute_error(fake: FakeCompute, verb: str, answer: object, call: Callable) -> str:
    fake.answers[verb] = answer
    with pytest.raises(common.ComputeError) as caught:
        call(compute_of(config_for("replace", api=fake.config())))
    return str(caught.value)


LIST = f"instanceGroupManagers/{GROUP}/listManagedInstances"


@pytest.mark.parametrize(("answer", "said"), [
    ((200, b"[]"), f"POST {LIST}'s answer: expected dict, got list"),
    ((200, json.dumps({"managedInstances": "all"}).encode()),
     f"{LIST}: managedInstances: expected list, got str"),
    ((200, json.dumps({"managedInstances": [7]}).encode()),
     f"{LIST}: an item of managedInstances: expected dict, got int"),
    ((200, json.dumps({"nextPageToken": 5}).encode()), "nextPageToken: expected str, got int"),
    (list_page("t" * 60), f"{LIST}: nextPageToken {common.clip('t' * 60, 40)} repeats"),
    (lambda call: list_page(str(next(COUNTER))), f"{LIST}: more than 100 pages"),
])
def test_an_answer_the_api_should_not_give_is_said_in_the_error(fake, answer, said):
    assert compute_error(fake, "listManagedInstances", answer,
                         lambda c: c.instances(GROUP)) == said


def test_an_error_status_says_the_call_without_its_page_token_and_what_the_api_said(fake):
    def second_page_fails(call):
        if "pageToken" in call.path:
            return 500, b"\xff" + b"x" * 400
        return list_page("2")
    said = compute_error(fake, "listManagedInstances", second_page_fails,
                         lambda c: c.instances(GROUP))
    assert said == common.clip(f"POST {LIST}: HTTP 500: \ufffd" + "x" * 299, 400)


def test_a_note_longer_than_half_a_reason_is_cut_to_half_and_the_reason_keeps_the_rest():
    extra = "cp:reboot-timeout: " + "x" * common.REASON_MAX
    half = common.clip(extra, common.REASON_MAX // 2)
    assert remediate.with_reason("", extra) == half
    marked = remediate.with_reason("cp:disk: " + "y" * common.REASON_MAX, extra)
    assert marked.endswith(f"; {half}") and len(marked) == common.REASON_MAX


def test_a_node_left_down_after_a_replacement_is_replaced_again_once_resumed_by_hand():
    actions, _ = remediate.decide(parsed(node_line()), vms("a4-a4-0001"), recreated("gave-up"),
                                  at(7200), config_for("replace"))
    assert acts(actions) == [remediate.Recreate(GROUP, "a4-a4-0001")]
