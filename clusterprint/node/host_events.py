"""Host events: what Compute Engine does to a nodeset's VMs, told to Slurm before it hurts.

The remediation loop (remediate.py) runs this once a pass, after its own decisions, with
one ``instances.list`` per nodeset (``common.Compute.vms``: a name filter, only the
fields read here, 500 VMs a page) and one ``scontrol show reservation --json``:

- A VM that Compute Engine stopped (status STOPPING, STOPPED, TERMINATED, SUSPENDING or
  SUSPENDED) under a node Slurm still counts as up is set DOWN at once with the reason
  ``cp:host-event: preempted`` (a Spot VM stopping or terminated: there is no other
  preemption flag on the instance, slurm-gcp's slurmsync.py reads it the same way) or
  ``cp:host-event: stopped: <status>``. Slurm requeues its batch jobs (JobRequeue=1, the
  default, slurm.conf.5) instead of waiting out SlurmdTimeout (600 s). An elastic node
  (power saving's, State=CLOUD) is powered down instead (POWER_DOWN_FORCE: requeued too,
  its VM deleted, the node ``idle~`` for the next resume).
  The node is then the remediation loop's like any other DOWN ``cp:`` node (its
  ``on_failure``, counted as today); with ReturnToService=2 a VM that Compute Engine
  restarts, or a group recreates, returns the node to service when its slurmd registers.
  A node the loop already acts on (tracked in its state) or Slurm reboots is left alone,
  so a recreation's own STOPPING never marks it again. A VM the list does not show is
  never a host event: missing data marks nothing.
- An upcoming host maintenance window (``resourceStatus.upcomingMaintenance``:
  ``windowStartTime``, ``windowEndTime``) becomes the Slurm reservation
  ``cp-maintenance-<node>`` (``flags=maint,ignore_jobs``) from the window's start to its
  end (180 minutes when the API gives no end), so no job starts that the maintenance would
  kill. The Cluster Toolkit's slurmsync.py ``sync_maintenance_reservation`` does the same
  with ``<node>_maintenance`` and a fixed 180 minutes (GoogleCloudPlatform/cluster-toolkit,
  community/modules/scheduler/schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts).
- A VM's end of run (``resourceStatus.scheduling.terminationTimestamp``: "time in future
  when the instance will be terminated", set for flex-start's maxRunDuration and a
  reservation's end) becomes ``cp-end-of-run-<node>`` for the last END_MARGIN_S before it.

A reservation's name is its node's, so passes and a restarted loop never duplicate one: a
window that moved is deleted and created again, one that passed or went away is deleted.
Only reservations named so are touched; a nodeset with ``maintenance_reservations: false``
gets none (and loses any it had). A list that failed or answered nonsense changes nothing
for its nodeset (an ERROR says why); a reservation listing that failed changes no
reservation. Marking a node DOWN costs no remediation place: it is what Slurm would do
after SlurmdTimeout, only sooner.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

if __package__:
    from clusterprint.node import common, scale_down
else:  # run as a file: common.py and scale_down.py lie beside it
    import common
    import scale_down

#: A node set DOWN (or powered down): the loop's one ``scontrol update`` action, shared with
#: scale-down and remediation (scale_down.py holds it: see there why not common.py).
SetState = scale_down.SetState

REASON = f"{common.PREFIX}host-event"
#: Instance statuses of a VM Compute Engine has stopped or is stopping (Compute v1
#: Instance.status: PROVISIONING, STAGING, RUNNING, STOPPING, SUSPENDING, SUSPENDED,
#: REPAIRING, TERMINATED; STOPPED is listed for the VMs of older API answers).
STOPPED = frozenset({"STOPPING", "STOPPED", "TERMINATED", "SUSPENDING", "SUSPENDED"})
#: A Spot VM in these is being or was preempted (SUSPENDED is a user's suspend).
PREEMPTED = frozenset({"STOPPING", "TERMINATED"})
MAINTENANCE = "cp-maintenance-"
END_OF_RUN = "cp-end-of-run-"
#: A window without an end: the toolkit's fixed reservation length (slurmsync.py).
WINDOW_DEFAULT_S = 180 * 60
#: How long before a VM's end of run no new job may start on it: time for the job's
#: epilog and Slurm's bookkeeping (the toolkit's flex end-of-life reservation is 10 min).
END_MARGIN_S = 600
#: An existing reservation within this of what is wanted is kept (scontrol has whole
#: seconds and a start in the past reads back as its real start).
TOLERANCE_S = 60
SCONTROL_TIMEOUT_S = 60

LOG = common.Log("host-events")


class Nonsense(ValueError):
    """An answer that proves nothing: the message names what was wrong."""


# --- What the API and scontrol say -----------------------------------------------------------

@dataclass(frozen=True)
class Vm:
    """One VM as instances.list showed it: its status, whether it is Spot, and the epoch
    seconds of its next maintenance window and its end of run (None: none known)."""

    name: str
    status: str
    spot: bool = False
    window: tuple[float, float] | None = None
    ends: float | None = None


@dataclass(frozen=True)
class Reservation:
    """One of this program's Slurm reservations: its node and span in epoch seconds."""

    name: str
    node: str
    start: float
    end: float


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?"
                      r"(?:([Zz])|([+-])(\d\d):(\d\d))")


def epoch(text: object, what: str) -> float:
    """An RFC 3339 timestamp (as the Compute API writes them) in epoch seconds; Nonsense
    otherwise. Python 3.10's fromisoformat reads neither ``Z`` nor nine digits."""
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise Nonsense(f"{what}: not an RFC 3339 time: {common.clip(repr(text), 60)}")
    minutes = 0 if match[8] else int(match[10]) * 60 + int(match[11])
    offset = timezone(timedelta(minutes=-minutes if match[9] == "-" else minutes))
    try:
        moment = datetime(*(int(g) for g in match.groups()[:6]), tzinfo=offset)
    except ValueError:
        raise Nonsense(f"{what}: not a time: {text}") from None
    return moment.timestamp() + float(match[7] or 0)


def _object(value: object, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Nonsense(f"{what}: expected an object, got {type(value).__name__}")
    return value


def parse_vm(item: object) -> Vm:
    """One item of instances.list; Nonsense when a field read here has the wrong shape."""
    item = _object(item, "an instance")
    name, status = item.get("name"), item.get("status")
    if not isinstance(name, str) or not name or not isinstance(status, str):
        raise Nonsense("an instance without a string name and status")
    scheduling = _object(item.get("scheduling"), f"{name}: scheduling")
    spot = scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible") is True
    resource = _object(item.get("resourceStatus"), f"{name}: resourceStatus")
    window = None
    notice = _object(resource.get("upcomingMaintenance"), f"{name}: upcomingMaintenance")
    if notice:
        start = epoch(notice.get("windowStartTime"), f"{name}: windowStartTime")
        end = (epoch(notice["windowEndTime"], f"{name}: windowEndTime")
               if notice.get("windowEndTime") is not None else start + WINDOW_DEFAULT_S)
        if end <= start:
            raise Nonsense(f"{name}: a maintenance window that ends before it starts")
        window = (start, end)
    ends = _object(resource.get("scheduling"), f"{name}: resourceStatus.scheduling").get(
        "terminationTimestamp")
    return Vm(name, status, spot, window,
              None if ends is None else epoch(ends, f"{name}: terminationTimestamp"))


def parse_vms(items: Iterable[object]) -> dict[str, Vm]:
    """The list's VMs by name; Nonsense on any bad item or a name listed twice: one item
    that cannot be read makes the whole list unusable, never a partial one."""
    vms: dict[str, Vm] = {}
    for item in items:
        vm = parse_vm(item)
        if vm.name in vms:
            raise Nonsense(f"{vm.name} is listed twice")
        vms[vm.name] = vm
    return vms


def parse_reservations(text: str) -> dict[str, Reservation]:
    """``scontrol show reservation --json``: this program's reservations (by their name's
    prefix) by name. Nonsense when the answer is not that JSON or one of ours is odd."""
    try:
        answer = common.expect(common.load_json(text, "the reservations"), dict,
                               "the reservations")
        listed = common.expect(answer.get("reservations", []), list, "reservations")
    except common.BadJSON as exc:
        raise Nonsense(str(exc)) from None
    ours = {}
    for item in listed:
        item = _object(item, "a reservation")
        name = item.get("name")
        if not isinstance(name, str) or not name.startswith((MAINTENANCE, END_OF_RUN)):
            continue
        span = []
        for key in ("start_time", "end_time"):
            stamp = _object(item.get(key), f"{name}: {key}").get("number")
            if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
                raise Nonsense(f"reservation {name}: no {key}")
            span.append(float(stamp))
        node = item.get("node_list")
        if not isinstance(node, str):
            raise Nonsense(f"reservation {name}: no node_list")
        ours[name] = Reservation(name, node, *span)
    return ours


# --- Decisions --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Watched:
    """A nodeset as this program sees it: the regular expression of its VMs' whole names
    (``common.Compute.vms``) and whether it gets reservations."""

    name: str
    vm_names: str
    reservations: bool = True


@dataclass(frozen=True)
class Reserve:
    """``scontrol create reservation`` of ``name`` on the node; ``start`` None: now."""

    name: str
    node: str
    start: float | None
    end: float


@dataclass(frozen=True)
class Unreserve:
    """``scontrol delete reservation`` of one of this program's reservations."""

    name: str


#: One log line (a decision says what it did in the loop's journal).
Note = common.Note
Action = SetState | Reserve | Unreserve | Note


def note(message: str, severity: str = "INFO", **fields: object) -> Note:
    return Note(message, severity, fields)


def nodeset_of(node: common.SlurmNode, nodesets: dict[str, Watched]) -> Watched | None:
    """A node's nodeset, by its Slurm feature (the nodeset's name)."""
    return next((nodesets[f] for f in node.features if f in nodesets), None)


def up(node: common.SlurmNode) -> bool:
    """Whether Slurm counts the node as able to run jobs: not DOWN, not powered down."""
    return not node.down and not (node.state & {"POWERED_DOWN", "POWERING_DOWN",
                                                "POWER_DOWN", "POWERING_UP"})


def event_reason(vm: Vm) -> str:
    if vm.spot and vm.status in PREEMPTED:
        return f"{REASON}: preempted"
    return f"{REASON}: stopped: {vm.status}"


def with_reason(reason: str, extra: str) -> str:
    """The node's own reason (an operator's drain) kept before the event's."""
    parts = [p for p in reason.split(common.SEPARATOR) if p and not p.startswith(REASON)]
    return common.joined([*parts, extra]) if parts else extra


def wanted(node: str, vm: Vm, now: float) -> dict[str, tuple[float, float]]:
    """The reservations the VM's announced events call for, by name: (start, end)."""
    spans = {}
    if vm.window and vm.window[1] > now:
        spans[f"{MAINTENANCE}{node}"] = vm.window
    if vm.ends is not None and vm.ends > now:
        spans[f"{END_OF_RUN}{node}"] = (vm.ends - END_MARGIN_S, vm.ends)
    return spans


def same(have: Reservation, start: float, end: float, now: float) -> bool:
    """Whether an existing reservation already covers what is wanted (a start in the
    past was created as 'now': it matches any start that is due)."""
    if abs(have.end - end) > TOLERANCE_S:
        return False
    return abs(have.start - start) <= TOLERANCE_S or (start <= now and have.start <= now
                                                      + TOLERANCE_S)


def decide(nodes: list[common.SlurmNode], listed: dict[str, dict[str, Vm] | None],
           reservations: dict[str, Reservation] | None, busy: set[str], now: float,
           nodesets: dict[str, Watched]) -> list[Action]:
    """What to tell Slurm this pass. ``listed``: each nodeset's VMs, None where its list
    failed (then nothing about its nodes changes); ``reservations``: this program's, None
    where scontrol did not answer (then none is created or deleted); ``busy``: nodes the
    remediation loop is acting on, left alone."""
    actions: list[Action] = []
    want: dict[str, tuple[str, float, float]] = {}
    known: set[str] = set()  # nodes whose reservations this pass can judge
    for node in sorted(nodes, key=lambda n: n.name):
        nodeset = nodeset_of(node, nodesets)
        vms = listed.get(nodeset.name) if nodeset else None
        if vms is None:
            continue
        known.add(node.name)
        vm = vms.get(node.name)
        if vm is None:
            continue
        if (vm.status in STOPPED and up(node) and node.name not in busy
                and not node.rebooting):
            reason = event_reason(vm)
            state = "power_down_force" if "CLOUD" in node.state else "down"
            actions.append(SetState(node.name, state, with_reason(node.reason, reason)))
            actions.append(note(f"{node.name}: its VM is {vm.status}: {state.upper()} "
                                f"({reason})", "WARNING", node=node.name, action="host-event",
                                status=vm.status))
        if nodeset.reservations:
            for name, (start, end) in wanted(node.name, vm, now).items():
                want[name] = (node.name, start, end)
    if reservations is None:
        return actions
    for name, have in sorted(reservations.items()):
        if have.end <= now:
            continue  # Slurm purges a reservation that ended
        if name in want and same(have, want[name][1], want[name][2], now):
            del want[name]
        elif name in want or have.node in known or have.node not in {n.name for n in nodes}:
            actions.append(Unreserve(name))
            actions.append(note(f"reservation {name} removed: its window moved or passed",
                                node=have.node, action="unreserve"))
    for name, (node, start, end) in sorted(want.items()):
        actions.append(Reserve(name, node, start if start > now else None, end))
        actions.append(note(f"reservation {name} on {node} from "
                            f"{format_time(start)} to {format_time(end)}", node=node,
                            action="reserve"))
    return actions


def format_time(stamp: float) -> str:
    """A time as scontrol reads it: the local time of this host, which is slurmctld's."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(stamp))


# --- Acting ----------------------------------------------------------------------------------

def reserve_argv(action: Reserve, now: float) -> list[str]:
    start = action.start if action.start is not None else now
    minutes = max(1, -(-int(action.end - start) // 60))
    return ["scontrol", "create", "reservation", f"reservationname={action.name}",
            "users=root", f"nodes={action.node}",
            "starttime=" + ("now" if action.start is None else format_time(action.start)),
            f"duration={minutes}", "flags=maint,ignore_jobs"]


def apply(actions: list[Action], run: Callable[[list[str]], str], now: float,
          log: common.Log = LOG) -> None:
    """Carry the actions out: one ``scontrol update`` per state and reason, one command per
    reservation. A failure is logged, never raised: the next pass tries again."""
    marks: dict[tuple[str, str], list[str]] = {}
    reservations: list[list[str]] = []
    for action in actions:
        if isinstance(action, Note):
            log(action.message, action.severity, **action.fields)
        elif isinstance(action, SetState):
            marks.setdefault((action.state, action.reason), []).append(action.node)
        elif isinstance(action, Unreserve):
            reservations.append(["scontrol", "delete", f"reservationname={action.name}"])
        else:
            reservations.append(reserve_argv(action, now))
    downs = [SetState(names[0], state, reason).argv(names)
             for (state, reason), names in marks.items()]
    for argv in downs + reservations:
        try:
            run(argv)
        except common.CommandFailed as exc:
            log(f"{' '.join(argv[:3])}: {exc}", "ERROR", command=" ".join(argv))


def scontrol(argv: list[str]) -> str:
    return common.output(argv, SCONTROL_TIMEOUT_S)


def list_vms(compute: common.Compute, nodeset: Watched,
             log: common.Log = LOG) -> dict[str, Vm] | None:
    """The nodeset's VMs, or None (and an ERROR) when the list failed or made no sense."""
    try:
        return parse_vms(compute.vms(nodeset.vm_names))
    except (common.ComputeError, Nonsense) as exc:
        log(f"host events: cannot list the VMs of nodeset {nodeset.name}: {exc}; nothing "
            "about its nodes changes this pass", "ERROR", nodeset=nodeset.name)
        return None


def list_reservations(run: Callable[[list[str]], str],
                      log: common.Log = LOG) -> dict[str, Reservation] | None:
    try:
        return parse_reservations(run(["scontrol", "show", "reservation", "--json"]))
    except (common.CommandFailed, Nonsense) as exc:
        log(f"host events: cannot read Slurm's reservations: {exc}; none is changed this "
            "pass", "ERROR")
        return None


def watch(nodes: list[common.SlurmNode], nodesets: dict[str, Watched],
          compute: common.Compute, run: Callable[[list[str]], str], busy: set[str],
          now: float, log: common.Log = LOG) -> list[Action]:
    """One pass: list, decide, act; the actions it took, for the caller's tests and log."""
    listed = {name: list_vms(compute, nodeset, log) for name, nodeset in nodesets.items()}
    # Read even when every nodeset opted out: an opt-out removes the reservations it had.
    reservations = list_reservations(run, log)
    actions = decide(nodes, listed, reservations, busy, now, nodesets)
    apply(actions, run, now, log)
    return actions

