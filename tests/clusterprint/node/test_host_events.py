"""The host-event watch as a module and, through the remediation loop, as a process.

Preempted and stopped VMs marked DOWN (never on missing data, never a node the loop acts
on), maintenance windows and ends of run as reservations that follow their window and are
never duplicated, the opt-out, and an instance list that fails or answers nonsense
changing nothing. The API is tests/support/compute_fake.py's; Slurm is a fake scontrol.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from clusterprint.contract import naming
from clusterprint.node import common, host_events, remediate
from clusterprint.render import remediation
from tests.support.compute_fake import FakeCompute
from tests.support.remediation_fakes import (
    ECC,
    FakeSlurm,
    config_for,
    fake_scontrol,
    node_line,
    scontrol_log,
    write_config,
)

GROUP = "a4-nodeset-a4-group-abc1234"
NOW = 1_796_238_000.0  # 2026-12-02T19:00:00Z
HOUR = 3600.0
NODESETS = {"a4": host_events.Watched("a4", naming.vm_names("a4", "a4"))}
SPOT = {"scheduling": {"provisioningModel": "SPOT"}}


def query_of(path: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(path.partition("?")[2])


def rfc3339(stamp: float) -> str:
    return host_events.time.strftime("%Y-%m-%dT%H:%M:%SZ", host_events.time.gmtime(stamp))


def notice(start: float, end: float | None = None) -> dict:
    """What instances.list says of a VM with a maintenance window coming."""
    window = {"type": "SCHEDULED", "canReschedule": True, "windowStartTime": rfc3339(start),
              "maintenanceStatus": "PENDING"}
    if end is not None:
        window["windowEndTime"] = rfc3339(end)
    return {"resourceStatus": {"upcomingMaintenance": window}}


def nodes(*lines: str) -> list[common.SlurmNode]:
    return common.parse_nodes("\n".join(lines))


def up(name: str = "a4-a4-0001", state: str = "ALLOCATED+DYNAMIC_NORM") -> str:
    return node_line(name, state, reason="")


def acts(actions: list) -> list:
    return [a for a in actions if not isinstance(a, host_events.Note)]


def decide(slurm: list[common.SlurmNode], vms: dict | None, reservations=None,
           busy: set[str] = frozenset(), nodesets=NODESETS) -> list:
    return acts(host_events.decide(slurm, {"a4": vms}, reservations or {}, set(busy), NOW,
                                   nodesets))


def vm(status: str = "RUNNING", **kwargs) -> host_events.Vm:
    return host_events.Vm("a4-a4-0001", status, **kwargs)


# --- Preempted and stopped VMs -----------------------------------------------------------

def test_a_preempted_spot_vm_is_down_in_slurm_with_the_reason():
    for status in ("STOPPING", "TERMINATED"):
        assert decide(nodes(up()), {"a4-a4-0001": vm(status, spot=True)}) == [
            host_events.SetState("a4-a4-0001", "down", "cp:host-event: preempted")]


def test_a_vm_compute_engine_stopped_is_down_with_its_status():
    for status in ("STOPPED", "TERMINATED", "SUSPENDED", "SUSPENDING"):
        assert decide(nodes(up()), {"a4-a4-0001": vm(status)}) == [
            host_events.SetState("a4-a4-0001", "down", f"cp:host-event: stopped: {status}")]


def test_an_operators_drain_reason_is_kept_before_the_event():
    line = node_line("a4-a4-0001", "MIXED+DRAIN+DYNAMIC_NORM", reason="disk swap")
    assert decide(nodes(line), {"a4-a4-0001": vm("TERMINATED")}) == [host_events.SetState(
        "a4-a4-0001", "down", "disk swap; cp:host-event: stopped: TERMINATED")]


def test_an_elastic_node_is_powered_down_so_its_job_requeues_and_it_can_resume_again():
    line = up("a4-a4-e00001", "ALLOCATED+CLOUD")
    assert decide(nodes(line), {"a4-a4-e00001": host_events.Vm(
        "a4-a4-e00001", "TERMINATED", spot=True)}) == [host_events.SetState(
            "a4-a4-e00001", "power_down_force", "cp:host-event: preempted")]


@pytest.mark.parametrize("line, busy", [
    (node_line("a4-a4-0001", "DOWN+DYNAMIC_NORM", reason="cp:host-event: preempted"), ()),
    (node_line("a4-a4-0001", "DOWN+DYNAMIC_NORM", reason="Not responding"), ()),
    (up("a4-a4-e00001", "IDLE+CLOUD+POWERED_DOWN"), ()),
    (up("a4-a4-e00001", "IDLE+CLOUD+POWERING_DOWN"), ()),
    (up("a4-a4-0001", "IDLE+REBOOT_ISSUED+DYNAMIC_NORM"), ()),
    # The loop recreates the VM (it goes STOPPING): its own action, not an event.
    (node_line("a4-a4-0001", "IDLE+DRAIN+DYNAMIC_NORM", reason=ECC), ("a4-a4-0001",)),
])
def test_a_node_already_down_powered_off_rebooting_or_in_the_loops_hands_is_left(line, busy):
    name = line.split()[0].split("=")[1]
    assert decide(nodes(line), {name: host_events.Vm(name, "TERMINATED", spot=True)},
                  busy=set(busy)) == []


def test_missing_data_marks_nothing():
    """A VM the list does not show, or a list that failed: no node goes down."""
    assert decide(nodes(up()), {}) == []
    assert decide(nodes(up()), None) == []
    # A node of no watched nodeset is nobody's.
    assert decide(nodes(node_line("x-1", "IDLE", reason="", feature="other")),
                  {"x-1": host_events.Vm("x-1", "TERMINATED")}) == []


def test_a_running_vm_is_no_event():
    assert decide(nodes(up()), {"a4-a4-0001": vm("RUNNING", spot=True)}) == []


# --- Maintenance windows and ends of run ------------------------------------------------------

def test_a_maintenance_window_becomes_a_reservation_at_the_window():
    window = (NOW + HOUR, NOW + 2 * HOUR)
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=window)}) == [
        host_events.Reserve("cp-maintenance-a4-a4-0001", "a4-a4-0001", *window)]


def test_a_window_already_open_is_reserved_from_now():
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=(NOW - 60, NOW + HOUR))}) == [
        host_events.Reserve("cp-maintenance-a4-a4-0001", "a4-a4-0001", None, NOW + HOUR)]


def test_an_end_of_run_is_reserved_for_its_last_minutes():
    ends = NOW + 5 * HOUR
    assert decide(nodes(up()), {"a4-a4-0001": vm(ends=ends)}) == [host_events.Reserve(
        "cp-end-of-run-a4-a4-0001", "a4-a4-0001", ends - host_events.END_MARGIN_S, ends)]


def reservation(start: float, end: float, name: str = "cp-maintenance-a4-a4-0001",
                node: str = "a4-a4-0001") -> dict[str, host_events.Reservation]:
    return {name: host_events.Reservation(name, node, start, end)}


def test_a_reservation_in_place_is_not_made_again():
    window = (NOW + HOUR, NOW + 2 * HOUR)
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=window)},
                  reservation(window[0] + 1, window[1] - 1)) == []
    # One created as "now" while the window was open reads back with its real start.
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=(NOW - 600, NOW + HOUR))},
                  reservation(NOW - 300, NOW + HOUR)) == []


def test_a_window_that_moved_is_reserved_again_where_it_now_is():
    window = (NOW + 3 * HOUR, NOW + 4 * HOUR)
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=window)},
                  reservation(NOW + HOUR, NOW + 2 * HOUR)) == [
        host_events.Unreserve("cp-maintenance-a4-a4-0001"),
        host_events.Reserve("cp-maintenance-a4-a4-0001", "a4-a4-0001", *window)]


def test_a_window_that_went_away_loses_its_reservation_unless_the_list_failed():
    kept = reservation(NOW + HOUR, NOW + 2 * HOUR)
    assert decide(nodes(up()), {"a4-a4-0001": vm()}, kept) == [
        host_events.Unreserve("cp-maintenance-a4-a4-0001")]
    assert decide(nodes(up()), None, kept) == []
    # One that ended is Slurm's to purge; another's reservation is never touched.
    assert decide(nodes(up()), {"a4-a4-0001": vm()}, reservation(NOW - 2 * HOUR, NOW)) == []
    assert host_events.parse_reservations(json.dumps({"reservations": [
        {"name": "a4-a4-0001_maintenance", "node_list": "a4-a4-0001"}]})) == {}


def test_a_nodeset_that_opted_out_gets_no_reservation_and_loses_its_old_ones():
    opted_out = {"a4": host_events.Watched("a4", naming.vm_names("a4", "a4"),
                                           reservations=False)}
    window = (NOW + HOUR, NOW + 2 * HOUR)
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=window)},
                  nodesets=opted_out) == []
    assert decide(nodes(up()), {"a4-a4-0001": vm(window=window)}, reservation(*window),
                  nodesets=opted_out) == [host_events.Unreserve("cp-maintenance-a4-a4-0001")]


def test_no_reservation_changes_when_slurm_did_not_list_them():
    assert acts(host_events.decide(nodes(up()), {"a4": {"a4-a4-0001": vm(
        window=(NOW + HOUR, NOW + 2 * HOUR))}}, None, set(), NOW, NODESETS)) == []


def test_the_reservation_command_is_a_maintenance_reservation_on_the_node():
    argv = host_events.reserve_argv(host_events.Reserve(
        "cp-maintenance-a4-a4-0001", "a4-a4-0001", NOW + HOUR, NOW + 2 * HOUR + 30), NOW)
    assert argv[:3] == ["scontrol", "create", "reservation"]
    assert {"reservationname=cp-maintenance-a4-a4-0001", "nodes=a4-a4-0001", "users=root",
            "duration=61", "flags=maint,ignore_jobs",
            f"starttime={host_events.format_time(NOW + HOUR)}"} == set(argv[3:])
    now = host_events.reserve_argv(host_events.Reserve("r", "n", None, NOW + 90), NOW)
    assert "starttime=now" in now and "duration=2" in now


# --- Reading the answers ------------------------------------------------------------------

def test_rfc3339_times_as_the_api_writes_them():
    assert host_events.epoch("2026-12-02T19:00:00Z", "t") == NOW
    assert host_events.epoch("2026-12-02T11:00:00.500-08:00", "t") == NOW + 0.5
    assert host_events.epoch("2026-12-02T19:00:00.000000000+00:00", "t") == NOW
    for bad in ("2026-12-02 19:00", "2026-13-02T19:00:00Z", 1796238000, None, "soon"):
        with pytest.raises(host_events.Nonsense):
            host_events.epoch(bad, "t")


def test_an_instance_is_read_with_its_window_and_end_of_run():
    item = {"name": "a4-a4-0001", "status": "RUNNING", **SPOT,
            "resourceStatus": {**notice(NOW, NOW + HOUR)["resourceStatus"],
                               "scheduling": {"terminationTimestamp": rfc3339(NOW + 9 * HOUR)}}}
    assert host_events.parse_vm(item) == host_events.Vm(
        "a4-a4-0001", "RUNNING", True, (NOW, NOW + HOUR), NOW + 9 * HOUR)
    # No window end: the toolkit's three hours.
    assert host_events.parse_vm({"name": "v", "status": "RUNNING", **notice(NOW)}).window == (
        NOW, NOW + host_events.WINDOW_DEFAULT_S)
    assert host_events.parse_vm({"name": "v", "status": "RUNNING",
                                 "scheduling": {"preemptible": True}}).spot


@pytest.mark.parametrize("items", [
    [7],
    [{"name": "a4-a4-0001"}],
    [{"name": "a4-a4-0001", "status": "RUNNING", "resourceStatus": "soon"}],
    [{"name": "a4-a4-0001", "status": "RUNNING", **notice(NOW)} | {
        "resourceStatus": {"upcomingMaintenance": {"windowStartTime": "tomorrow"}}}],
    [{"name": "a4-a4-0001", "status": "RUNNING", **notice(NOW + HOUR, NOW)}],
    [{"name": "a4-a4-0001", "status": "RUNNING"}, {"name": "a4-a4-0001", "status": "RUNNING"}],
])
def test_a_list_that_makes_no_sense_is_refused_whole(items):
    with pytest.raises(host_events.Nonsense):
        host_events.parse_vms(items)


def test_reservations_are_read_from_scontrols_json():
    text = json.dumps({"reservations": [
        {"name": "cp-maintenance-a4-a4-0001", "node_list": "a4-a4-0001",
         "start_time": {"set": True, "infinite": False, "number": 100},
         "end_time": {"set": True, "infinite": False, "number": 200},
         "flags": ["MAINT", "IGNORE_JOBS"]},
        {"name": "admins", "node_list": "a4-a4-0002"}]})
    assert host_events.parse_reservations(text) == {"cp-maintenance-a4-a4-0001": (
        host_events.Reservation("cp-maintenance-a4-a4-0001", "a4-a4-0001", 100.0, 200.0))}
    for bad in ("", "No reservations in the system", json.dumps({"reservations": [
            {"name": "cp-end-of-run-x", "node_list": "x", "start_time": {}}]})):
        with pytest.raises(host_events.Nonsense):
            host_events.parse_reservations(bad)


# --- Through the remediation loop ------------------------------------------------------------

@pytest.fixture
def fake():
    api = FakeCompute("p", "z", groups={GROUP: ("a4-a4", {
        "a4-a4-0001": "RUNNING", "a4-a4-0002": "RUNNING"})})
    # Another nodeset whose name starts alike: never listed nor acted on.
    api.groups["a4-nodeset-a4-x-group-1"] = ("a4-a4-x", {"a4-a4-x-0001": "TERMINATED"})
    yield api
    api.stop()


def config(fake: FakeCompute, tmp_path: Path, reservations: bool = True) -> remediate.Config:
    return remediate.Config(
        project="p", zone="z", state_file=str(tmp_path / "state.json"),
        max_share_per_hour=1.0, **fake.config(), sizes_url="",  # no scale-down here
        nodesets={"a4": remediate.NodesetPolicy("a4", "a4-a4", naming.vm_names("a4", "a4"), 2,
                                                "drain", False,
                                                maintenance_reservations=reservations)})


def errors(journal: io.StringIO) -> list[str]:
    """The ERROR lines' messages of a journal the loop wrote (common.Log's lines)."""
    entries = [json.loads(line.split(">", 1)[1]) for line in journal.getvalue().splitlines()]
    return [e["message"] for e in entries if e["severity"] == "ERROR"]


def one_pass(fake, tmp_path, slurm, settings: remediate.Config | None = None,
             **kwargs) -> io.StringIO:
    journal = io.StringIO()
    clock = remediate.Reading(NOW, 10_000, "boot")
    remediate.Remediator(settings or config(fake, tmp_path, **kwargs), slurm, common.Compute(
        "p", "z", fake.config()["api"], fake.config()["token_url"], 5), clock=lambda: clock,
        log=common.Log("remediate", journal)).run_once()
    return journal


def test_one_pass_lists_each_nodeset_once_with_a_name_filter_and_few_fields(fake, tmp_path):
    fake.vms_page_size = 1  # two VMs of a4 (a4-x's is not a4's): two pages, one list
    fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    fake.vm_details["a4-a4-0001"] = SPOT
    slurm = FakeSlurm([up("a4-a4-0001"), up("a4-a4-0002", "IDLE+DYNAMIC_NORM"),
                       node_line("a4-a4-x-0001", "IDLE", reason="", feature="a4-x")])
    journal = one_pass(fake, tmp_path, slurm)
    listed = fake.verbs("instances")
    assert len(listed) == 2 and errors(journal) == []
    query = query_of(listed[0].path)
    assert query["filter"] == ['name eq "a4-a4-([a-z0-9]{4}|e[0-9]{5})"']
    assert query["fields"] == [common.VM_FIELDS] and query["maxResults"] == ["500"]
    assert [q.get("pageToken") for q in map(
        query_of, (c.path for c in listed))] == [None, ["1"]]
    assert slurm.changes() == [["scontrol", "update", "nodename=a4-a4-0001", "state=down",
                                "reason=cp:host-event: preempted"]]


def test_a_down_host_event_node_is_the_loops_next_pass_as_any_down_cp_node(fake, tmp_path):
    """Marked DOWN, then the loop's on_failure (drain: tracked, left DOWN); never marked
    twice, no API action taken, no remediation place spent."""
    fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    fake.vm_details["a4-a4-0001"] = SPOT
    slurm = FakeSlurm([node_line("a4-a4-0001", "DOWN+DYNAMIC_NORM",
                                 reason="cp:host-event: preempted")])
    one_pass(fake, tmp_path, slurm)
    assert slurm.changes() == []
    state = remediate.State.load(str(tmp_path / "state.json"))
    assert state.nodes["a4-a4-0001"].action == "drain" and state.actions == {}


#: Cluster c's nodesets whose names start alike.
ALIKE = ("gpu", "gpu-big")


@pytest.fixture
def alike():
    """Each nodeset of ALIKE with a static VM and an elastic one, in their own groups."""
    api = FakeCompute("p", "z")
    for nodeset in ALIKE:
        static = naming.base_instance_name("c", nodeset)
        api.groups[f"c-nodeset-{nodeset}-group-1"] = (static, {f"{static}-ab12": "RUNNING"})
        api.groups[f"c-nodeset-{nodeset}-elastic-1"] = (
            naming.elastic_base_instance_name("c", nodeset),
            {naming.elastic_nodes("c", nodeset, 1): "RUNNING"})
    yield api
    api.stop()


def preempt(fake: FakeCompute, vm: str) -> None:
    """The fake's Spot VM ``vm`` terminated by Compute Engine."""
    group = next(g for g, (_, vms) in fake.groups.items() if vm in vms)
    fake.groups[group][1][vm] = "TERMINATED"
    fake.vm_details[vm] = SPOT


def test_each_nodeset_lists_only_its_own_vms_so_anothers_odd_vm_does_not_stop_its_watch(
        alike, tmp_path):
    """gpu's static and elastic VMs preempted, while gpu-big's VM answers nonsense: gpu's
    list holds neither of gpu-big's VMs, so both of gpu's nodes go down."""
    preempt(alike, "c-gpu-ab12")
    preempt(alike, "c-gpu-e00001")
    alike.vm_details["c-gpu-big-ab12"] = {"scheduling": "spot"}  # not an object
    slurm = FakeSlurm([
        node_line("c-gpu-ab12", "ALLOCATED+DYNAMIC_NORM", reason="", feature="gpu"),
        node_line("c-gpu-e00001", "ALLOCATED+CLOUD", reason="", feature="gpu"),
        node_line("c-gpu-big-ab12", "ALLOCATED+DYNAMIC_NORM", reason="", feature="gpu-big"),
        node_line("c-gpu-big-e00001", "ALLOCATED+CLOUD", reason="", feature="gpu-big")])
    settings = config_for("drain", state=tmp_path / "state.json", api=alike.config(),
                          nodesets=ALIKE)
    journal = one_pass(alike, tmp_path, slurm, settings)
    assert [query_of(c.path)["filter"] for c in alike.verbs("instances")] == [
        ['name eq "c-gpu-([a-z0-9]{4}|e[0-9]{5})"'],
        ['name eq "c-gpu-big-([a-z0-9]{4}|e[0-9]{5})"']]
    assert slurm.changes() == [
        ["scontrol", "update", "nodename=c-gpu-ab12", "state=down",
         "reason=cp:host-event: preempted"],
        ["scontrol", "update", "nodename=c-gpu-e00001", "state=power_down_force",
         "reason=cp:host-event: preempted"]]
    (error,) = errors(journal)
    assert error.startswith("host events: cannot list the VMs of nodeset gpu-big: ")


@pytest.mark.parametrize("verb, answer", [
    ("instances", (500, b'{"error": {}}')),
    ("instances", (200, b"<html>oops</html>")),
    ("instances", (200, json.dumps({"items": [{"name": "a4-a4-0001"}]}).encode())),
    ("instances", (200, json.dumps({"items": [{"name": "a4-a4-0001", "status": "TERMINATED",
                                               **notice(NOW)}], "nextPageToken": "x"}
                                   ).encode())),
])
def test_a_list_that_fails_or_makes_no_sense_changes_nothing_and_logs_an_error(
        fake, tmp_path, verb, answer):
    fake.answers[verb] = answer
    fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    slurm = FakeSlurm([up("a4-a4-0001")])
    journal = one_pass(fake, tmp_path, slurm)
    assert slurm.changes() == []
    assert any("cannot list the VMs of nodeset a4" in e for e in errors(journal))


def test_the_loop_as_a_process_marks_the_preempted_node_and_reserves_the_window(
        fake, tmp_path):
    """The rendered set of programs, run as the service runs them, on a fake scontrol."""
    folder = tmp_path / "program"
    for path, text in remediation.programs(str(folder)).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    env = fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text("\n".join([up("a4-a4-0001"), up("a4-a4-0002")]))
    fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    fake.vm_details["a4-a4-0001"] = SPOT
    fake.vm_details["a4-a4-0002"] = notice(NOW + HOUR, NOW + 2 * HOUR)
    path = write_config(tmp_path / "c.json", config(fake, tmp_path))
    done = subprocess.run([sys.executable, str(folder / "remediate.py"), "--config",
                           str(path), "--once", "--now", str(NOW)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    log = scontrol_log(tmp_path)
    assert log[0] == ["scontrol", "update", "nodename=a4-a4-0001", "state=down",
                      "reason=cp:host-event: preempted"]
    assert log[1][:4] == ["scontrol", "create", "reservation",
                          "reservationname=cp-maintenance-a4-a4-0002"]
    assert '"severity": "ERROR"' not in done.stderr
    assert '"action": "host-event"' in done.stderr and '"action": "reserve"' in done.stderr
