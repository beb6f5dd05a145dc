"""The controller's remediation loop: what happens to a node the health check drained.

Standard library only (it runs on the controller's stock python3, 3.10 or newer), with the
node programs' shared module (common.py) beside it. It acts only on nodes drained with a
``cp:`` reason (the health check's) or found DOWN and not responding, per their nodeset's
``on_failure``:

- ``drain``: leaves the node drained with its reason.
- ``reboot``: ``scontrol reboot ASAP nextstate=RESUME``; slurmctld runs the RebootProgram
  (this program with ``--reboot``, ``SlurmctldParameters=reboot_from_controller``), which
  resets the VM through the Compute API. A node that is DOWN (Slurm refuses to reboot it)
  is reset directly.
- ``replace``: once the node has no jobs, reports its host as faulty where Compute Engine
  supports it (and the reason is the GPUs'), then recreates the VM through its instance
  group, which keeps the name; the node is resumed when its slurmd registers again, or
  set DOWN with the reason after ``replace_timeout_s``.

At most ``max_share_per_hour`` of a nodeset (rounded down, at least one node) is rebooted
or replaced in any hour; a drain costs nothing, a report and the recreation that follows
it cost one. An action counts when it is decided, before the API or scontrol is called:
a call that times out after the API acted has still used its place. The hour is measured
on the boot's monotonic clock (CLOCK_BOOTTIME), so setting the wall clock never frees a
place; across a controller reboot an action counts until both the wall clock and the
time since boot say an hour has passed (an action stamped in the future is recent).

A remediation fails when a replaced or rebooted VM does not register in time, or when a
remediated node fails its check again within ``watch_s``; after
``protect_after_failures`` failures in a row a nodeset is protected: the loop stops acting
on it, logs an ALERT and says so in the reasons of its drained nodes, until
``--reset NODESET``. So a broken check cannot recycle a cluster. A state file that cannot
be read (corrupt, cut short, of another shape) protects every nodeset the same way, and is
left as it is until ``--reset`` puts it aside as ``FILE.corrupt``.

Each pass holds the state file's lock from reading it to recording what it did, so
``--reset`` (which takes the same lock) is never written over by a running loop. A pass
is two steps: ``decide`` is a pure function from Slurm's nodes, the groups' VMs, the state
and the clock to typed actions and the new state; ``apply`` carries them out in batches
(one ``recreateInstances`` per group, one ``scontrol update`` per state and reason), as
slurm-gcp's slurmsync.py groups its node actions.

The state also counts every action as it is decided, by nodeset and kind (``counts``), a
figure that only grows: the Slurm exporter (slurm_exporter.py) serves it to Cloud Monitoring.

DOWN dynamic nodes whose VM no longer exists in their instance group (it was deleted or
replaced under another name) are deleted from Slurm: they count against MaxNodeCount.

Each pass first runs scale-down (scale_down.py, its own state file under this lock): the
static groups' sizes follow each nodeset's desired count, and the nodes it drains for
that (``cp:scale-down``) are its own, never rebooted or replaced here.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

if __package__:
    from clusterprint.node import common, host_events, scale_down
else:
    import common
    import host_events
    import scale_down

PREFIX = common.PREFIX
#: What a protected nodeset's drained nodes carry in their reason.
PROTECTED = f"{PREFIX}protected"
#: Reason prefixes of GPU hardware faults, the ones worth reporting the host for; a
#: missing tool, a full disk or a lost mount is the VM's, not the host's.
HOST_FAULT_PREFIXES = (f"{PREFIX}gpu-",)
NOT_HOST_FAULTS = (f"{PREFIX}gpu-tools",)
#: reportHostAsFaulty's behavior for GPU faults (Compute API FaultReason.behavior).
GPU_FAULT_BEHAVIOR = "UNRECOVERABLE_GPU_ERROR"
#: The window the rate limit counts actions in.
HOUR_S = 3600
#: Nodes named in one recreateInstances call or scontrol command: a longer list is split.
BATCH_MAX = 500
#: This boot's id: stamps of the same boot compare their monotonic clocks.
BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: scontrol answers within this, or the pass is skipped.
SCONTROL_TIMEOUT_S = 60
ON_FAILURE = ("drain", "reboot", "replace")
#: What the state's ``counts`` tally per nodeset, each when decided (before it is taken):
#: the figures the Slurm exporter (slurm_exporter.py) serves as its actions counter.
COUNTED = ("drain", "reboot", "report", "recreate", "resume", "timeout", "delete", "protect")
#: What a node in flight can be waiting on (``gave-up``: left DOWN after a timeout).
TRACKED = ("drain", "reboot", "report", "recreate", "gave-up")

LOG = common.Log("remediate")


# --- Typed JSON ---------------------------------------------------------------------------

_SCALARS: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "bool": bool,
                                                "float": (int, float)}


def _value(kind: str, raw: object, what: str) -> object:
    """``raw`` as the annotation ``kind`` says (a scalar, ``dict[str, X]``, ``list[X]``
    or a record below), every type checked; BadJSON naming ``what`` otherwise."""
    if kind in _SCALARS:
        value = common.expect(raw, _SCALARS[kind], what)
        return float(value) if kind == "float" else value
    if kind.startswith("dict[str, "):
        items = common.expect(raw, dict, what)
        return {key: _value(kind[10:-1], item, f"{what}.{key}") for key, item in items.items()}
    if kind.startswith("list["):
        items = common.expect(raw, list, what)
        return [_value(kind[5:-1], item, f"{what}[{index}]") for index, item in enumerate(items)]
    return RECORDS[kind].from_json(raw, what)


def typed(cls: type, raw: object, what: str) -> object:
    """A dataclass from its JSON object: no unknown key, none missing that has no default,
    each value of its field's type."""
    raw = common.expect(raw, dict, what)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise common.BadJSON(f"{what}: unknown key {unknown[0]!r}")
    values = {}
    for name, spec in known.items():
        if name in raw:
            values[name] = _value(spec.type, raw[name], f"{what}.{name}")
        elif spec.default is MISSING and spec.default_factory is MISSING:
            raise common.BadJSON(f"{what}: no {name!r}")
    return cls(**values)


class Record:
    """A dataclass read with ``typed``."""

    @classmethod
    def from_json(cls, raw: object, what: str):
        return typed(cls, raw, what)


# --- The clock ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Reading(Record):
    """One reading of the clock, as every action and wait is stamped: the wall clock, the
    boot's monotonic clock (CLOCK_BOOTTIME: it counts suspend, never jumps) and the boot."""

    wall: float
    uptime: float
    boot: str

    @classmethod
    def from_json(cls, raw: object, what: str) -> Reading:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            # An older loop stamped the wall clock only: of no boot, so never trusted alone.
            return cls(float(raw), 0.0, "")
        return typed(cls, raw, what)


def elapsed(since: Reading, now: Reading) -> float:
    """Seconds from ``since`` to ``now``, never more than really passed: within one boot
    the monotonic clock's; across boots the smaller of the wall clock's and the time since
    this boot (the action was before it), none when the wall clock went back past it."""
    if since.boot and since.boot == now.boot:
        return max(now.uptime - since.uptime, 0.0)
    return max(min(now.wall - since.wall, now.uptime), 0.0)


def system_clock() -> Reading:
    try:
        boot = Path(BOOT_ID).read_text().strip()
    except OSError:
        boot = ""
    return Reading(time.time(), time.clock_gettime(time.CLOCK_BOOTTIME), boot)


# --- Configuration -----------------------------------------------------------------------

@dataclass(frozen=True)
class NodesetPolicy(Record):
    """What the loop does with one nodeset's failing nodes."""

    name: str
    base_instance_name: str
    #: A regular expression of the whole name of each of its VMs, static and elastic
    #: (clusterprint/contract/naming.py ``vm_names``): the host-event watch lists them by it.
    vm_names: str
    nodes: int
    on_failure: str
    report_faulty_host: bool
    #: Host maintenance and end-of-run notices become Slurm reservations (host_events.py).
    maintenance_reservations: bool = True

    def __post_init__(self) -> None:
        if self.on_failure not in ON_FAILURE:
            raise common.BadJSON(f"nodeset {self.name}: on_failure {self.on_failure!r} is "
                                 f"not one of {', '.join(ON_FAILURE)}")
        if self.nodes < 1:
            raise common.BadJSON(f"nodeset {self.name}: nodes must be at least 1")


@dataclass(frozen=True)
class Config(Record):
    """The loop's config (``/etc/slurm/clusterprint/remediate.json``): the renderer builds
    this object and writes it; the defaults are the program's."""

    project: str
    zone: str
    state_file: str
    nodesets: dict[str, NodesetPolicy]
    max_share_per_hour: float
    #: Failed remediations in a row before a nodeset is protected (AWS ParallelCluster's
    #: clustermgtd waits for 10 failed launches; a failed replacement costs more, so 3).
    protect_after_failures: int = 3
    #: How long a recreated or rebooted VM has to register, and slurm.conf's ResumeTimeout
    #: (rendered from this), which bounds a node's reboot the same way.
    replace_timeout_s: int = 1800
    #: How long a host-fault report may take before the VM is recreated anyway: the report
    #: takes 10 to 12 minutes (cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host).
    report_wait_s: int = 900
    #: A remediated node failing its check again within this long is a failed remediation.
    watch_s: int = 3600
    #: Seconds between passes.
    interval_s: int = 60
    #: Seconds one Compute API or metadata call may take.
    http_timeout_s: float = 30.0
    api: str = common.COMPUTE_API
    token_url: str = common.METADATA_TOKEN_URL
    #: Where each nodeset's desired count is read every pass (scale_down.py); empty: none
    #: is given, the loop resizes nothing.
    sizes_url: str = scale_down.SIZES_URL

    def __post_init__(self) -> None:
        if not 0 <= self.max_share_per_hour <= 1:
            raise common.BadJSON("max_share_per_hour must be between 0 and 1")
        if min(self.protect_after_failures, self.interval_s, self.http_timeout_s) <= 0:
            raise common.BadJSON("protect_after_failures, interval_s and http_timeout_s "
                                 "must be above 0")

    @classmethod
    def from_json(cls, raw: object, what: str = "the config") -> Config:
        raw = common.expect(raw, dict, what)
        nodesets = common.expect(raw.get("nodesets", {}), dict, f"{what}.nodesets")
        named = {name: {**common.expect(ns, dict, f"{what}.nodesets.{name}"), "name": name}
                 for name, ns in nodesets.items()}
        return typed(cls, {**raw, "nodesets": named}, what)

    @classmethod
    def load(cls, path: str) -> Config:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise common.BadJSON(f"{path}: {exc.strerror or exc}") from None
        return cls.from_json(common.load_json(data, path), path)

    def to_json(self) -> dict:
        raw = asdict(self)
        for nodeset in raw["nodesets"].values():
            del nodeset["name"]
        return raw

    def per_hour(self, nodeset: NodesetPolicy) -> int:
        """The most reboots or replacements of the nodeset in any hour."""
        return max(1, math.floor(self.max_share_per_hour * nodeset.nodes))


# --- State ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Track(Record):
    """An action in flight on one node, and what the node looked like when it was taken."""

    action: str
    since: Reading
    nodeset: str
    reason: str
    slurmd_start: str
    reason_stamp: str = ""
    #: "refused": the API or scontrol answered the call with an error (it did nothing)
    outcome: str = ""

    def __post_init__(self) -> None:
        if self.action not in TRACKED or self.outcome not in ("", "refused"):
            raise common.BadJSON(f"an action {self.action!r} ({self.outcome!r}) this program "
                                 "does not take")


@dataclass(frozen=True)
class Returned(Record):
    """A remediated node back in service: failing again within watch_s counts."""

    since: Reading
    nodeset: str
    action: str


@dataclass(frozen=True)
class Protection(Record):
    """Why and since when a nodeset is left alone; ``note`` is what its reasons say."""

    since: Reading
    why: str
    note: str = ""


RECORDS = {"Reading": Reading, "NodesetPolicy": NodesetPolicy, "Track": Track,
           "Returned": Returned, "Protection": Protection}


#: The state file exists and cannot be used (scale_down.py: shared with scale-down).
BadState = scale_down.BadState


@dataclass
class State(Record):
    """What survives a restart: actions in flight, the hour's actions, failures, protection."""

    nodes: dict[str, Track] = field(default_factory=dict)
    #: nodeset -> its reboots and replacements of the last hour
    actions: dict[str, list[Reading]] = field(default_factory=dict)
    #: nodeset -> failed remediations in a row
    failures: dict[str, int] = field(default_factory=dict)
    returned: dict[str, Returned] = field(default_factory=dict)
    protected: dict[str, Protection] = field(default_factory=dict)
    #: nodeset -> action (one of COUNTED) -> how many were decided since the file began: a
    #: counter that never drops, unlike ``actions``, which keeps only the last hour
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> State:
        """The saved state; an empty one when there is none; BadState when the file is
        unreadable, not JSON, or not the shape this program writes."""
        state = scale_down.load_state(path, lambda raw: typed(cls, raw, "the state"))
        return cls() if state is None else state

    def save(self, path: str) -> None:
        """Whole or not at all (scale_down.save_state)."""
        scale_down.save_state(path, self)


def unreadable_state(config: Config, why: str, now: Reading, spare: str = "") -> State:
    """The state a pass works on when the file cannot be read: every nodeset (but
    ``spare``, the one being reset) protected, so nothing is rebooted or replaced."""
    return State(protected={name: Protection(now, why, "state file unreadable")
                            for name in config.nodesets if name != spare})


# --- Decisions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """A nodeset's VMs as the API listed them, over all its instance groups (one per 2,000
    VMs): each VM's status, and the group that holds it."""

    vms: dict[str, str]
    holders: dict[str, str]


@dataclass(frozen=True)
class Reboot:
    """``scontrol reboot ASAP nextstate=RESUME`` with this reason."""

    node: str
    reason: str


@dataclass(frozen=True)
class Reset:
    """The VM reset through the API (Slurm will not reboot a DOWN node)."""

    node: str


@dataclass(frozen=True)
class Report:
    """reportHostAsFaulty for the node's VM."""

    node: str
    description: str


@dataclass(frozen=True)
class Recreate:
    """recreateInstances of the node's VM in its group."""

    group: str
    node: str


@dataclass(frozen=True)
class Delete:
    """``scontrol delete nodename=...``: a dynamic node whose VM is gone."""

    node: str


#: A node's state and reason (scale_down.py), and one log line (common.py): the actions
#: scale-down takes too.
SetState = scale_down.SetState
Note = common.Note

Action = Reboot | Reset | Report | Recreate | SetState | Delete | Note


def unhealthy(node: common.SlurmNode) -> bool:
    """What the loop acts on: a failed check, or DOWN without an answer; never a node
    Slurm is rebooting."""
    return not node.rebooting and (node.checked_failed or (node.down and node.not_responding))


def protected_note(reason: str) -> bool:
    """Whether one of the reasons is the protected note (``cp:protected: ...``), not the
    ``cp:protected-reset`` a reset leaves: a node reset once must be marked again when its
    nodeset is protected again."""
    return any(part.startswith(f"{PROTECTED}:") for part in reason.split(common.SEPARATOR))


def with_reason(reason: str, extra: str) -> str:
    """``reason`` with ``extra`` appended once (by its ``cp:name``), within REASON_MAX:
    the reason is cut, never the loop's note."""
    extra = common.clip(extra, common.REASON_MAX // 2)
    name = extra.split(": ", 1)[0] + ":"
    if any(part.startswith(name) for part in reason.split(common.SEPARATOR)):
        return common.clip(reason)
    if not reason:
        return extra
    room = common.REASON_MAX - len(common.SEPARATOR) - len(extra)
    return common.clip(reason, room) + common.SEPARATOR + extra


def host_fault(reason: str) -> bool:
    """Whether one of the reasons is a GPU hardware fault (not a missing tool)."""
    return any(p.startswith(HOST_FAULT_PREFIXES) and not p.startswith(NOT_HOST_FAULTS)
               for p in reason.split(common.SEPARATOR))


def nodeset_of(node: common.SlurmNode, config: Config) -> NodesetPolicy | None:
    return next((config.nodesets[f] for f in node.features if f in config.nodesets), None)


def decide(nodes: list[common.SlurmNode], groups: dict[str, Group | None], state: State,
           now: Reading, config: Config) -> tuple[list[Action], State]:
    """What to do this pass, and the state once it is done; ``state`` is left as it was.

    ``groups``: each nodeset's VMs, None where the API did not answer (then none of its
    VMs is recreated and no node deleted this pass)."""
    decided = _Pass(config, copy.deepcopy(state), now, groups)
    by_name = {node.name: node for node in nodes}
    for name in sorted(by_name):
        policy = nodeset_of(by_name[name], config)
        if policy is not None:
            decided.node(by_name[name], policy)
    for table in (decided.state.nodes, decided.state.returned):
        for name in [n for n in table if n not in by_name]:
            del table[name]
    decided.waiting_notes()
    for nodeset, protection in sorted(decided.state.protected.items()):
        decided.mark_protected(nodeset, protection, [
            n for n in nodes if (p := nodeset_of(n, config)) and p.name == nodeset])
    return decided.actions, decided.state


class _Pass:
    """``decide``'s working copy: the state it changes and the actions it adds."""

    def __init__(self, config: Config, state: State, now: Reading,
                 groups: dict[str, Group | None]) -> None:
        self.config, self.state, self.now, self.groups = config, state, now, groups
        self.actions: list[Action] = []
        self.waiting: dict[str, int] = {}

    def note(self, message: str, severity: str = "INFO", **fields: object) -> None:
        self.actions.append(Note(message, severity, fields))

    def since(self, stamp: Reading) -> float:
        return elapsed(stamp, self.now)

    def counted(self, nodeset: str, action: str) -> None:
        """One more ``action`` on the nodeset in the state's counts (saved before it is taken)."""
        counts = self.state.counts.setdefault(nodeset, {})
        counts[action] = counts.get(action, 0) + 1

    def node(self, node: common.SlurmNode, policy: NodesetPolicy) -> None:
        if "CLOUD" in node.state:
            # An elastic node is power saving's (capacity.py): a powered-down one has no VM
            # by design, a failing one is deleted when Slurm powers it down idle.
            return
        group = self.groups.get(policy.name)
        track = self.state.nodes.get(node.name)
        if (node.down and group is not None and node.name not in group.vms
                and "DYNAMIC_NORM" in node.state and policy.name not in self.state.protected
                and (track is None or track.action != "recreate")):
            self.state.nodes.pop(node.name, None)
            self.state.returned.pop(node.name, None)
            self.actions.append(Delete(node.name))
            self.counted(policy.name, "delete")
            self.note(f"deleting node {node.name}: its VM no longer exists", node=node.name,
                      action="delete")
        elif track is not None:
            self.follow(node, policy, track, group)
        elif unhealthy(node):
            self.start(node, policy, group)
        else:
            self.watch(node)

    def watch(self, node: common.SlurmNode) -> None:
        """A remediated node that stays healthy for watch_s ends its nodeset's failures."""
        back = self.state.returned.get(node.name)
        if back and self.since(back.since) >= self.config.watch_s:
            del self.state.returned[node.name]
            self.state.failures[back.nodeset] = 0

    def start(self, node: common.SlurmNode, policy: NodesetPolicy, group: Group | None) -> None:
        back = self.state.returned.pop(node.name, None)
        if back is not None:
            after = self.since(back.since)
            if after < self.config.watch_s:
                self.failed(policy.name, f"{node.name} failed again {int(after)}s after its "
                                         f"{back.action}")
            else:  # healthy for watch_s, whether or not a pass saw it so
                self.state.failures[back.nodeset] = 0
        if policy.name in self.state.protected:
            return
        if policy.on_failure == "drain":
            self.track(node, policy, "drain")
            self.counted(policy.name, "drain")
            self.note(f"{node.name} stays drained: {node.reason}", node=node.name,
                      action="drain")
            return
        if policy.on_failure == "replace" and node.busy:
            self.note(f"{node.name}: waiting for its jobs to end before replacing it",
                      node=node.name, action="wait")
            return
        if policy.on_failure == "replace" and (group is None or node.name not in group.vms):
            return
        if not self.allowed(policy):
            self.waiting[policy.name] = self.waiting.get(policy.name, 0) + 1
            return
        self.state.actions.setdefault(policy.name, []).append(self.now)
        if policy.on_failure == "reboot":
            self.track(node, policy, "reboot")
            self.counted(policy.name, "reboot")
            if node.down:  # scontrol reboot skips DOWN nodes: ReturnToService brings it
                self.actions.append(Reset(node.name))
            else:
                self.actions.append(Reboot(node.name,
                                           with_reason(node.reason, f"{PREFIX}reboot: issued")))
            self.note(f"rebooting {node.name}: {node.reason}", node=node.name, action="reboot")
        elif policy.report_faulty_host and host_fault(node.reason):
            self.track(node, policy, "report")
            self.counted(policy.name, "report")
            self.actions.append(Report(node.name, node.reason))
            self.note(f"reporting the host of {node.name} as faulty: {node.reason}",
                      node=node.name, action="report")
        else:
            self.recreate(node, policy, group, node.reason)

    def allowed(self, policy: NodesetPolicy) -> bool:
        recent = [s for s in self.state.actions.get(policy.name, [])
                  if self.since(s) < HOUR_S]
        self.state.actions[policy.name] = recent
        return len(recent) < self.config.per_hour(policy)

    def waiting_notes(self) -> None:
        for nodeset, count in sorted(self.waiting.items()):
            limit = self.config.per_hour(self.config.nodesets[nodeset])
            self.note(f"nodeset {nodeset}: its {limit} remediations this hour are taken, "
                      f"{count} more nodes wait", "WARNING", nodeset=nodeset,
                      action="rate-limit")

    def track(self, node: common.SlurmNode, policy: NodesetPolicy, action: str,
              reason: str | None = None) -> None:
        self.state.nodes[node.name] = Track(action, self.now, policy.name,
                                            node.reason if reason is None else reason,
                                            node.slurmd_start, node.reason_stamp)

    def recreate(self, node: common.SlurmNode, policy: NodesetPolicy, group: Group,
                 reason: str) -> None:
        self.track(node, policy, "recreate", reason)
        self.counted(policy.name, "recreate")
        self.actions.append(Recreate(group.holders[node.name], node.name))
        self.note(f"recreating {node.name} through its instance group: {reason}",
                  node=node.name, action="recreate")

    def follow(self, node: common.SlurmNode, policy: NodesetPolicy, track: Track,
               group: Group | None) -> None:
        """An action in flight: see it through, once."""
        if track.action == "drain":
            if not (node.drained or node.down):  # resumed by hand
                del self.state.nodes[node.name]
        elif track.action == "gave-up":
            # The loop left it DOWN: anything else means an operator resumed it since.
            if not node.down:
                del self.state.nodes[node.name]
                if unhealthy(node):
                    self.start(node, policy, group)
        elif track.action == "report":
            gone = group is not None and group.vms.get(node.name, "RUNNING") != "RUNNING"
            if group is not None and (gone or track.outcome == "refused"
                                      or self.since(track.since) >= self.config.report_wait_s):
                self.recreate(node, policy, group, track.reason)  # counted with the report
        elif track.outcome == "refused":
            # The call did nothing: its place this hour is spent, the node starts again.
            del self.state.nodes[node.name]
            if unhealthy(node):
                self.start(node, policy, group)
        else:
            self.registered(node, policy, track, group)

    def registered(self, node: common.SlurmNode, policy: NodesetPolicy, track: Track,
                   group: Group | None) -> None:
        """A reboot or recreation: its slurmd registers again, or it times out."""
        if node.rebooting:
            return
        if node.slurmd_start != track.slurmd_start and not node.not_responding:
            del self.state.nodes[node.name]
            self.state.returned[node.name] = Returned(self.now, policy.name, track.action)
            if node.checked_failed and node.reason_stamp != track.reason_stamp:
                # Its check (run as slurmd starts) drained the new VM again: not resumed.
                self.start(node, policy, group)
            elif track.action == "recreate":
                self.counted(policy.name, "resume")
                self.actions.append(SetState(node.name, "resume"))
                self.note(f"{node.name} registered again after its replacement: resumed",
                          node=node.name, action="resume")
            return
        if self.since(track.since) < self.config.replace_timeout_s:
            return
        timeout = self.config.replace_timeout_s
        what = "replace" if track.action == "recreate" else track.action
        self.failed(policy.name, f"{node.name} did not register within {timeout}s of its "
                                 f"{what}")
        self.state.nodes[node.name] = replace(track, action="gave-up", since=self.now)
        self.counted(policy.name, "timeout")
        self.actions.append(SetState(node.name, "down", with_reason(
            track.reason, f"{PREFIX}{what}-timeout: no registration {timeout}s after the "
                          f"{what}")))
        self.note(f"{node.name} did not come back: DOWN", "ERROR", node=node.name,
                  action="timeout")

    def failed(self, nodeset: str, why: str) -> None:
        count = self.state.failures.get(nodeset, 0) + 1
        self.state.failures[nodeset] = count
        limit = self.config.protect_after_failures
        self.note(f"nodeset {nodeset}: failed remediation {count} of {limit}: {why}", "WARNING",
                  nodeset=nodeset, action="failure")
        if count >= limit and nodeset not in self.state.protected:
            self.state.protected[nodeset] = Protection(
                self.now, f"{count} failed remediations in a row, last: {why}")
            self.counted(nodeset, "protect")
            self.note(f"nodeset {nodeset} is protected: {count} failed remediations in a row "
                      f"(last: {why}); the loop no longer reboots or replaces its nodes. Leave "
                      f"with: clusterprint-remediate --reset {nodeset}", "ALERT",
                      nodeset=nodeset, action="protect")

    def mark_protected(self, nodeset: str, protection: Protection,
                       nodes: list[common.SlurmNode]) -> None:
        """Say why in sinfo: every drained or down node of the nodeset carries it."""
        note = f"{PROTECTED}: " + (protection.note or "remediation stopped after "
                                   f"{self.state.failures.get(nodeset, 0)} failures")
        for node in nodes:
            if (node.drained or node.down) and not protected_note(node.reason):
                self.actions.append(SetState(node.name, "down" if node.down else "drain",
                                             with_reason(node.reason, note)))


# --- Slurm and the Compute API ----------------------------------------------------------

class Slurm:
    """The scontrol commands the loop runs; each takes a list of nodes."""

    def __init__(self, run: Callable[[list[str]], str] | None = None) -> None:
        self.run = run or (lambda argv: common.output(argv, SCONTROL_TIMEOUT_S))

    def nodes(self) -> list[common.SlurmNode]:
        return common.parse_nodes(self.run(["scontrol", "show", "node", "-o"]))

    def reboot(self, nodes: list[str], reason: str) -> None:
        self.run(["scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}",
                  ",".join(nodes)])

    def set_state(self, nodes: list[str], state: str, reason: str = "") -> None:
        self.run(SetState(nodes[0], state, reason).argv(nodes))

    def delete(self, nodes: list[str]) -> None:
        self.run(["scontrol", "delete", f"nodename={','.join(nodes)}"])


# --- Acting ---------------------------------------------------------------------------------

def apply(actions: list[Action], slurm: Slurm, compute: common.Compute,
          log: common.Log = LOG) -> set[str]:
    """Carry the actions out, like ones together: one scontrol command per state and
    reason, one recreateInstances per group. Returns the nodes whose call was refused
    (it did nothing: the next pass may try again); any failure is logged, never raised."""
    refused: set[str] = set()
    batches: dict[tuple, list[str]] = {}
    for action in actions:
        if isinstance(action, Note):
            log(action.message, action.severity, **action.fields)
        elif isinstance(action, (Reset, Report)):
            try:
                if isinstance(action, Reset):
                    compute.reset(action.node)
                else:
                    compute.report_faulty(action.node, GPU_FAULT_BEHAVIOR, action.description)
            except common.ComputeError as exc:
                log(f"{type(action).__name__.lower()} of {action.node} failed: {exc}",
                    "ERROR", node=action.node)
                refused |= {action.node} if exc.refused else set()
        else:
            key = (type(action), *(getattr(action, f.name) for f in fields(action)
                                   if f.name != "node"))
            batches.setdefault(key, []).append(action.node)
    for (kind, *args), nodes in batches.items():
        for start in range(0, len(nodes), BATCH_MAX):
            part = nodes[start:start + BATCH_MAX]
            try:
                _batch(kind, args, part, slurm, compute)
            except (common.ComputeError, common.CommandFailed) as exc:
                log(f"{kind.__name__.lower()} of {','.join(part)} failed: {exc}", "ERROR",
                    nodes=",".join(part))
                # scontrol reboot refused does nothing; one that timed out shows REBOOT_*.
                if kind is Reboot or (kind is Recreate and exc.refused):
                    refused |= set(part)
    return refused


def _batch(kind: type, args: list, nodes: list[str], slurm: Slurm, compute: common.Compute) -> None:
    if kind is Recreate:
        compute.recreate(args[0], nodes)
    elif kind is Reboot:
        slurm.reboot(nodes, args[0])
    elif kind is SetState:
        slurm.set_state(nodes, *args)
    else:
        slurm.delete(nodes)


# --- The loop -------------------------------------------------------------------------------

class Remediator:
    """Passes of the loop: Slurm, Compute, the clock and the log are injected."""

    def __init__(self, config: Config, slurm: Slurm, compute: common.Compute,
                 clock: Callable[[], Reading] = system_clock, log: common.Log = LOG) -> None:
        self.config, self.slurm, self.compute, self.clock = config, slurm, compute, clock
        self.log = log
        self._groups: dict[str, list[str]] = {}
        self._alerted = ""
        self.scale_down = scale_down.ScaleDown(
            scale_down.state_path(config.state_file),
            (lambda: scale_down.fetch_sizes(config.sizes_url, config.http_timeout_s))
            if config.sizes_url else None,
            slurm.run, compute, log)

    def _state(self, now: Reading) -> tuple[State, bool]:
        """The saved state and whether it may be written; an unreadable file is ALERTed
        once (not every pass) and gives a state that protects every nodeset."""
        try:
            return State.load(self.config.state_file), True
        except BadState as exc:
            message = (f"state file {self.config.state_file} is unreadable ({exc}): no node "
                       "is rebooted or replaced until an operator runs "
                       "clusterprint-remediate --reset NODESET")
            if message != self._alerted:
                self.log(message, "ALERT", action="protect", state_file=self.config.state_file)
                self._alerted = message
            return unreadable_state(self.config, f"state file unreadable: {exc}", now), False

    def _group(self, policy: NodesetPolicy) -> Group | None:
        """The nodeset's VMs in all its groups, or None when the API did not answer as
        expected (for any one group: a partial list would look like deleted VMs)."""
        try:
            if policy.name not in self._groups:
                self._groups[policy.name] = self.compute.groups(policy.base_instance_name)
            vms: dict[str, str] = {}
            holders: dict[str, str] = {}
            for name in self._groups[policy.name]:
                listed = self.compute.instances(name)
                vms.update(listed)
                holders.update(dict.fromkeys(listed, name))
            return Group(vms, holders)
        except common.ComputeError as exc:
            self._groups.pop(policy.name, None)  # found again next pass: it may be new
            self.log(f"cannot list the VMs of nodeset {policy.name}: {exc}", "ERROR",
                     nodeset=policy.name)
            return None

    def run_once(self) -> None:
        """Read, decide, record, act, record the outcome: all under the state file's lock,
        and the actions counted before any is taken."""
        with common.locked(self.config.state_file):
            nodes = self.slurm.nodes()
            groups = {name: self._group(policy) for name, policy in self.config.nodesets.items()}
            now = self.clock()
            # Scale-down first: the nodes it drains are its own, not remediation's.
            mine = self.scale_down.run_once(nodes, scale_down.listings(groups, self._groups), {
                name: p.base_instance_name for name, p in self.config.nodesets.items()}, now.wall)
            nodes = [node for node in nodes if node.name not in mine]
            state, writable = self._state(now)
            actions, state = decide(nodes, groups, state, now, self.config)
            if writable:
                state.save(self.config.state_file)
            refused = apply(actions, self.slurm, self.compute, self.log)
            if writable and refused & set(state.nodes):
                for name in refused & set(state.nodes):
                    state.nodes[name] = replace(state.nodes[name], outcome="refused")
                state.save(self.config.state_file)
        self.host_events(nodes, set(state.nodes), now,
                         {name for name, group in groups.items() if group is not None})

    def host_events(self, nodes: list[common.SlurmNode], busy: set[str], now: Reading,
                    answered: set[str]) -> None:
        """After the loop's own actions: preempted or stopped VMs DOWN, maintenance windows
        reserved (host_events.py); a node the loop acts on (``busy``) is left to it, and a
        nodeset whose groups the API did not list this pass (``answered``) is not asked
        again (one timeout a pass, not two)."""
        watched = {n.name: host_events.Watched(n.name, n.vm_names, n.maintenance_reservations)
                   for n in self.config.nodesets.values() if n.name in answered}
        host_events.watch(nodes, watched, self.compute, self.slurm.run, busy, now.wall,
                          self.log)

    def reset(self, nodeset: str) -> None:
        """Leave protected mode: failures forgotten, the note taken off the reasons. An
        unreadable state file is kept aside as ``FILE.corrupt``; the fresh state keeps
        every other nodeset protected."""
        path = self.config.state_file
        with common.locked(path):
            now = self.clock()
            try:
                state = State.load(path)
            except BadState as exc:
                os.replace(path, f"{path}.corrupt")
                state = unreadable_state(self.config, f"state file unreadable: {exc}", now,
                                         spare=nodeset)
                self.log(f"state file {path} was unreadable ({exc}): kept as {path}.corrupt; "
                         "the other nodesets stay protected until each is reset", "WARNING",
                         action="reset", state_file=path)
            state.protected.pop(nodeset, None)
            state.failures.pop(nodeset, None)
            state.save(path)
            cleared = []
            for node in self.slurm.nodes():
                policy = nodeset_of(node, self.config)
                if policy and policy.name == nodeset and protected_note(node.reason):
                    kept = common.SEPARATOR.join(p for p in node.reason.split(common.SEPARATOR)
                                                 if not p.startswith(f"{PROTECTED}:"))
                    cleared.append(SetState(node.name, "down" if node.down else "drain",
                                            kept or f"{PREFIX}protected-reset"))
            apply(cleared, self.slurm, self.compute, self.log)
        self.log(f"nodeset {nodeset} left protected mode", nodeset=nodeset, action="reset")


def reboot_program(compute: common.Compute, nodelist: str) -> int:
    """RebootProgram (reboot_from_controller): slurmctld passes ``node1,node2,...``."""
    failed = 0
    for node in filter(None, nodelist.split(",")):
        try:
            compute.reset(node)
            LOG(f"reset the VM of {node}", node=node, action="reset")
        except common.ComputeError as exc:
            failed += 1
            LOG(f"cannot reset the VM of {node}: {exc}", "ERROR", node=node)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """``--once``: one pass; ``--reset NODESET``; ``--reboot NODES``; else loop forever."""
    parser = argparse.ArgumentParser(prog="clusterprint-remediate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--once", action="store_true", help="one pass, then exit")
    action.add_argument("--reset", metavar="NODESET", help="leave protected mode")
    action.add_argument("--reboot", metavar="NODES",
                        help="RebootProgram mode: reset these VMs (comma-separated)")
    parser.add_argument("--now", type=float, help="the wall clock, in epoch seconds (tests)")
    parser.add_argument("--uptime", type=float,
                        help="with --now: the boot's monotonic clock (default: --now)")
    parser.add_argument("--boot-id", default="fixed-clock", help="with --now: the boot")
    parser.add_argument("features", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        config = Config.load(args.config)
        compute = common.Compute(config.project or common.metadata_project(config.token_url,
                                                             config.http_timeout_s),
                          config.zone, config.api, config.token_url, config.http_timeout_s)
    except (common.BadJSON, common.MetadataError) as exc:
        LOG(f"cannot start: {exc}", "ERROR")
        return 2
    if args.reboot is not None:
        return reboot_program(compute, args.reboot)
    clock = system_clock
    if args.now is not None:
        fixed = Reading(args.now, args.now if args.uptime is None else args.uptime,
                        args.boot_id)
        clock = lambda: fixed  # noqa: E731
    loop = Remediator(config, Slurm(), compute, clock)
    if args.reset:
        if args.reset not in config.nodesets:
            LOG(f"no nodeset {args.reset} in {args.config}", "ERROR")
            return 2
        try:
            loop.reset(args.reset)
        except (common.CommandFailed, OSError) as exc:
            LOG(f"reset of {args.reset}: {exc}", "ERROR")
            return 1
        return 0
    return common.repeat(loop.run_once, args.once, config.interval_s, LOG)


if __name__ == "__main__":
    sys.exit(main())
