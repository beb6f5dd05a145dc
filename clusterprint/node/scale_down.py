"""Safe scale-down: the controller, not Pulumi, sets how many VMs a nodeset's static groups hold.

Standard library only (it runs on the controller's stock python3, 3.10 or newer), with the
node programs' shared module (common.py) beside it; the remediation loop
(remediate.py) runs one pass of it at the start of each of its own, under its state lock.

Pulumi creates a nodeset's static groups at ``count`` VMs and then leaves their size alone
(``ignore_changes=["targetSize"]``, components/nodeset.py): a group told a smaller size
deletes VMs of its own choosing, busy ones included. The desired count of every nodeset
reaches the running controller as its metadata key ``clusterprint-nodeset-sizes`` (a JSON
object of nodeset to count, rendered by clusterprint/render/remediation.py): ``pulumi up``
updates a running VM's metadata in place and this pass reads the key from the metadata
server each time, so a changed count needs no reboot. Each pass compares each nodeset's
VMs (every one its groups list, being created or not, less those it asked to delete) with
that count:

- fewer: it creates the missing VMs (``createInstances``, under names of the group's own
  ``{cluster}-{nodeset}-xxxx`` form, in the groups with room below GROUP_VMS_MAX); each
  joins Slurm as its slurmd registers (dynamic nodes, ``slurmd -Z``).
- more: it picks the surplus and drains it in Slurm with reason ``cp:scale-down`` (added
  to any reason the node has), in this order: VMs with no Slurm node yet or not running,
  nodes already out of service (down, or drained without jobs), idle nodes, then busy
  ones, those whose jobs are ending (COMPLETING) before those with part of the node in use
  (MIXED) before whole ones (ALLOCATED); by name within each. Job end times are not read:
  one ``scontrol show node`` per pass is all this needs. A drained node with no job left
  (not ALLOCATED, MIXED or COMPLETING) has exactly its VM deleted by name
  (``deleteInstances``, which lowers the group's target size by one); once the group no
  longer lists the VM, the Slurm node is deleted (``scontrol delete nodename=``). A VM with
  no Slurm node yet is deleted at once: no job can be on it.
- a count raised again while nodes drain: the busiest of them are given back first (their
  ``cp:scale-down`` reason removed, resumed where it was the only one).

So no VM with a job on it is deleted by a scale-down: a drained node takes no new job and
its VM goes only once Slurm shows it without one. Nodes it drains are its own: the
remediation loop does not act on them (``claimed``), whatever reason the health check may
write over its own later.

Every action is counted in the state file (``scale-down-state.json`` beside the
remediation loop's) before it is taken, so a call that times out after the API acted is
never repeated as if it had not: a VM asked to be deleted is not counted again, a VM asked
to be created is counted as there for CREATE_GRACE_S even before the group lists it. It
fails closed: when any group of any nodeset does not list, when the metadata key cannot be
read or is not a JSON object of counts, or when the state file cannot be read, the pass
does nothing (and says why, once).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

#: The controller's metadata key with each nodeset's desired count
#: (clusterprint/contract/node_metadata.py NODESET_SIZES; a test holds them equal).
KEY = "clusterprint-nodeset-sizes"
SIZES_URL = f"{common.METADATA_ROOT}instance/attributes/{KEY}"
#: The reason a node drained for scale-down carries (with any it had before).
REASON = f"{common.PREFIX}scale-down"
#: The most VMs one zonal group holds (clusterprint/facts/catalog.py GROUP_VMS_MAX).
GROUP_VMS_MAX = 2000
#: How long a VM asked for counts as there before the group lists it.
CREATE_GRACE_S = 600
#: How long a VM asked to be deleted may stay listed before it is asked again.
DELETE_RETRY_S = 900
#: VMs or nodes named in one API call or scontrol command.
BATCH_MAX = 500
#: The characters of the four a group appends to its base instance name.
NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
#: The state file's name, beside the remediation loop's.
STATE_NAME = "scale-down-state.json"
#: Slurm states of a node that still has a job on it.
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")

LOG = common.Log("scale-down")


# --- The desired counts ---------------------------------------------------------------------

class SizesNotSet(common.MetadataError):
    """The controller has no ``clusterprint-nodeset-sizes`` key (HTTP 404)."""


def parse_sizes(data: bytes | str) -> dict[str, int]:
    """The key's value: a JSON object of nodeset name to a count of 0 or more; BadJSON
    naming what is wrong otherwise."""
    raw = common.expect(common.load_json(data, KEY), dict, KEY)
    sizes = {}
    for name, count in raw.items():
        common.expect(count, int, f"{KEY}.{name}")
        if count < 0:
            raise common.BadJSON(f"{KEY}.{name}: a count below 0")
        sizes[name] = count
    return sizes


def fetch_sizes(url: str, timeout: float) -> dict[str, int]:
    """The desired counts from the metadata server: SizesNotSet, MetadataError or BadJSON
    when there are none to trust."""
    try:
        answer = common.metadata_get(url, timeout)
    except common.MetadataError as exc:
        if exc.status == 404:
            raise SizesNotSet(f"metadata {KEY} is not set", 404) from None
        raise
    return parse_sizes(answer.body)


# --- State ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """A VM (and the Slurm node of its name) this program is removing or adding."""

    nodeset: str
    group: str
    #: the wall clock when the step was taken
    since: float


# Shared with the remediation loop, which imports this file: here, not in common.py, which
# the controller's startup script carries three times, near the 256 KiB metadata limit.

class BadState(Exception):
    """A loop's state file exists and cannot be used: the message says why."""


def load_state(path: str, parse: Callable[[object], object]) -> object | None:
    """A loop's state as ``parse`` (which raises BadJSON) makes it of the file's JSON; None
    when there is none; BadState when the file is unreadable, not JSON, or not its shape."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadState(exc.strerror or str(exc)) from None
    try:
        return parse(common.load_json(data, "the state"))
    except common.BadJSON as exc:
        raise BadState(str(exc)) from None


def save_state(path: str, state: object) -> None:
    """A loop's state (a dataclass), whole or not at all, readable by root only."""
    common.atomic_write(path, json.dumps(asdict(state), indent=1, sort_keys=True) + "\n",
                        0o600)


@dataclass(frozen=True)
class SetState:
    """``scontrol update nodename=... state=... [reason=...]``."""

    node: str
    state: str
    reason: str = ""

    def argv(self, nodes: list[str] | None = None) -> list[str]:
        """For this node, or for ``nodes`` of its state and reason."""
        return (["scontrol", "update", f"nodename={','.join(nodes or [self.node])}",
                 f"state={self.state}"] + ([f"reason={self.reason}"] if self.reason else []))


@dataclass
class State:
    """What survives a restart: the nodes drained for scale-down, the VMs asked to be
    deleted (until their Slurm node is deleted too) and those asked to be created."""

    draining: dict[str, Claim] = field(default_factory=dict)
    deleting: dict[str, Claim] = field(default_factory=dict)
    creating: dict[str, Claim] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: object) -> State:
        raw = common.expect(raw, dict, "the state")
        unknown = sorted(set(raw) - {f.name for f in fields(cls)})
        if unknown:
            raise common.BadJSON(f"the state: unknown key {unknown[0]!r}")
        tables = {}
        for table in (f.name for f in fields(cls)):
            entries = common.expect(raw.get(table, {}), dict, f"the state.{table}")
            tables[table] = {name: _claim(entry, f"the state.{table}.{name}")
                             for name, entry in entries.items()}
        return cls(**tables)

    @classmethod
    def load(cls, path: str) -> State:
        """The saved state; an empty one when there is none; BadState when it is unreadable,
        not JSON, or not the shape this program writes."""
        state = load_state(path, cls.from_json)
        return cls() if state is None else state

    def save(self, path: str) -> None:
        save_state(path, self)

    def of(self, table: str, nodeset: str) -> dict[str, Claim]:
        return {name: c for name, c in getattr(self, table).items() if c.nodeset == nodeset}


def _claim(raw: object, what: str) -> Claim:
    raw = common.expect(raw, dict, what)
    if set(raw) != {"nodeset", "group", "since"}:
        raise common.BadJSON(f"{what}: keys {sorted(raw)}, not nodeset, group and since")
    return Claim(common.expect(raw["nodeset"], str, f"{what}.nodeset"),
                 common.expect(raw["group"], str, f"{what}.group"),
                 float(common.expect(raw["since"], (int, float), f"{what}.since")))


def state_path(remediation_state: str) -> str:
    """Where the state lies: beside the remediation loop's, under the same lock."""
    return str(Path(remediation_state).with_name(STATE_NAME))


# --- Decisions ------------------------------------------------------------------------------

#: One log line (SetState, above: a node drained or given back).
Note = common.Note


@dataclass(frozen=True)
class VMCall:
    """``createInstances`` or ``deleteInstances`` (``verb``: common.Compute's ``create`` or
    ``delete``) of these VMs, by name, in their group."""

    verb: str
    group: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class DeleteNodes:
    """``scontrol delete nodename=...``: their VMs are gone."""

    names: tuple[str, ...]


Action = SetState | VMCall | DeleteNodes | Note

#: A nodeset's groups as the API listed them: group name -> {VM name: its status}, every
#: group, empty ones too.
Listing = dict[str, dict[str, str]]


def listings(groups: dict[str, object], names: dict[str, list[str]]
             ) -> dict[str, Listing | None]:
    """Each nodeset's groups and their VMs from the remediation loop's lists (its
    ``Group``: every VM's status and the group that holds it, None where any group failed),
    with the groups that hold no VM."""
    found: dict[str, Listing | None] = {}
    for nodeset, group in groups.items():
        if group is None:
            found[nodeset] = None
            continue
        listing: Listing = {name: {} for name in names.get(nodeset, [])}
        for vm, status in group.vms.items():
            listing.setdefault(group.holders[vm], {})[vm] = status
        found[nodeset] = listing
    return found


def marked(node: common.SlurmNode) -> bool:
    """Whether one of the node's reasons is this program's."""
    return any(part.startswith(REASON) for part in node.reason.split(common.SEPARATOR))


def busy(node: common.SlurmNode) -> bool:
    return bool(node.state & set(BUSY))


def rank(vm: str, status: str, node: common.SlurmNode | None) -> tuple[int, str]:
    """Which surplus VM goes first (lowest): see the module's docstring."""
    if node is None or status != "RUNNING":
        return (0, vm)
    if not busy(node):
        return (1 if node.down or node.drained or node.rebooting else 2, vm)
    return (3 if "COMPLETING" in node.state else 4 if "MIXED" in node.state else 5, vm)


def ready(node: common.SlurmNode | None) -> bool:
    """Whether a drained node's VM may go now: no Slurm node, or out of service (drained
    or down) with no job on it and no reboot under way."""
    return node is None or ((node.drained or node.down) and not busy(node)
                            and not node.rebooting)


def without_mark(reason: str) -> str:
    """The node's other reasons, this program's taken out."""
    return common.SEPARATOR.join(p for p in reason.split(common.SEPARATOR)
                                 if p and not p.startswith(REASON))


def released(node: str, others: str) -> SetState:
    """A node drained for scale-down given back: resumed where this program's reason was
    its only one, else drained with its other reasons only."""
    return SetState(node, "drain", others) if others else SetState(node, "resume")


def drain_reason(node: common.SlurmNode, note: str) -> str:
    """The node's reason with this program's added (last, within REASON_MAX)."""
    extra = common.clip(f"{REASON}: {note}", common.REASON_MAX // 2)
    kept = without_mark(node.reason)
    if not kept:
        return extra
    room = common.REASON_MAX - len(common.SEPARATOR) - len(extra)
    return common.clip(kept, room) + common.SEPARATOR + extra


def new_names(base: str, taken: set[str], count: int, seed: str) -> list[str]:
    """``count`` VM names of a group's form (``base-xxxx``) not in ``taken``, derived from
    ``seed`` so that one pass decides the same names every time it is run."""
    names: list[str] = []
    counter = 0
    while len(names) < count:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
        name = f"{base}-" + "".join(NAME_CHARS[b % len(NAME_CHARS)] for b in digest[:4])
        if name not in taken and name not in names:
            names.append(name)
    return names


def decide(nodes: list[common.SlurmNode], listings: dict[str, Listing | None],
           bases: dict[str, str], sizes: dict[str, int], state: State, now: float,
           ) -> tuple[list[Action], State]:
    """What to do this pass, and the state once it is done (``state`` is left as it was).

    ``listings``: each nodeset's groups (None where any did not list: then nothing at all
    is done); ``bases``: each nodeset's base instance name; ``sizes``: the desired counts
    (a nodeset missing from them is left as it is)."""
    if any(listing is None for listing in listings.values()):
        failed = sorted(name for name, listing in listings.items() if listing is None)
        return [Note(f"scale-down skipped: the VMs of nodeset {', '.join(failed)} could not "
                     "be listed", "WARNING", {"action": "skip"})], state
    work = State(dict(state.draining), dict(state.deleting), dict(state.creating))
    by_name = {node.name: node for node in nodes}
    actions: list[Action] = []
    for nodeset in sorted(listings):
        if nodeset in sizes:
            actions += _Nodeset(nodeset, listings[nodeset], bases[nodeset], sizes[nodeset],
                                by_name, work, now).decide()
    return actions, work


class _Nodeset:
    """One nodeset's part of a pass: the state it changes, the actions it adds."""

    def __init__(self, name: str, listing: Listing, base: str, desired: int,
                 nodes: dict[str, common.SlurmNode], state: State, now: float) -> None:
        self.name, self.listing, self.base, self.desired = name, listing, base, desired
        self.nodes, self.state, self.now = nodes, state, now
        self.vms = {vm: (group, status) for group, vms in sorted(listing.items())
                    for vm, status in vms.items()}
        self.actions: list[Action] = []

    def note(self, message: str, severity: str = "INFO", **extra: object) -> None:
        self.actions.append(Note(message, severity, {"nodeset": self.name, **extra}))

    def decide(self) -> list[Action]:
        self.settle()
        self.adopt()
        held = [vm for vm in self.vms if vm not in self.state.deleting]
        pending = [vm for vm in self.state.of("creating", self.name) if vm not in self.vms]
        surplus = len(held) + len(pending) - self.desired
        draining = self.state.of("draining", self.name)
        if surplus > len(draining):
            self.pick(surplus - len(draining), held, draining)
        elif surplus < len(draining):
            self.release(len(draining) - max(surplus, 0), draining)
        if surplus < 0:
            self.create(-surplus)
        self.delete_ready()
        return self.actions

    def settle(self) -> None:
        """Steps taken earlier that have finished: a deleted VM's Slurm node, a created VM
        the group now lists."""
        gone = []
        for vm, claim in self.state.of("deleting", self.name).items():
            if vm in self.vms:
                if self.now - claim.since >= DELETE_RETRY_S:
                    self.state.deleting[vm] = replace(claim, since=self.now)
                    self.actions.append(VMCall("delete", claim.group, (vm,)))
                    self.note(f"{vm} is still listed {DELETE_RETRY_S}s after its deletion: "
                              "asked again", "WARNING", node=vm, action="delete-vm")
            elif vm in self.nodes:
                gone.append(vm)
            else:
                del self.state.deleting[vm]
        if gone:
            self.actions.append(DeleteNodes(tuple(gone)))
            self.note(f"deleting Slurm nodes {','.join(gone)}: their VMs are gone",
                      action="delete-node", nodes=",".join(gone))
        for vm, claim in self.state.of("creating", self.name).items():
            if vm in self.vms or self.now - claim.since >= CREATE_GRACE_S:
                del self.state.creating[vm]
        for vm, claim in self.state.of("draining", self.name).items():
            if vm not in self.vms:  # its VM went by other means: only its node is left
                del self.state.draining[vm]
                self.state.deleting[vm] = replace(claim, since=self.now)

    def adopt(self) -> None:
        """A node marked ``cp:scale-down`` that the state does not hold (a state file put
        aside): held as draining, so that the count decides what becomes of it."""
        for vm, (group, _) in self.vms.items():
            node = self.nodes.get(vm)
            if (node is not None and marked(node) and vm not in self.state.draining
                    and vm not in self.state.deleting):
                self.state.draining[vm] = Claim(self.name, group, self.now)

    def pick(self, count: int, held: list[str], draining: dict[str, Claim]) -> None:
        free = sorted((rank(vm, self.vms[vm][1], self.nodes.get(vm)), vm)
                      for vm in held if vm not in draining)
        chosen = [vm for _, vm in free[:count]]
        for vm in chosen:
            self.state.draining[vm] = Claim(self.name, self.vms[vm][0], self.now)
            node = self.nodes.get(vm)
            if node is not None and not marked(node):
                self.actions.append(SetState(vm, "drain", drain_reason(
                    node, f"nodeset {self.name} is down to {self.desired} nodes")))
        if chosen:
            self.note(f"nodeset {self.name}: {len(self.vms)} VMs for {self.desired} nodes: "
                      f"draining {','.join(chosen)}, each deleted once it has no job",
                      action="drain", nodes=",".join(chosen))

    def release(self, count: int, draining: dict[str, Claim]) -> None:
        """The count went up again: the busiest drained nodes back to work first."""
        order = sorted(draining, key=lambda vm: rank(vm, self.vms[vm][1], self.nodes.get(vm)),
                       reverse=True)
        for vm in order[:count]:
            del self.state.draining[vm]
            node = self.nodes.get(vm)
            if node is not None and marked(node):
                self.actions.append(released(vm, without_mark(node.reason)))
        if order[:count]:
            self.note(f"nodeset {self.name}: back up to {self.desired} nodes: "
                      f"{','.join(order[:count])} kept", action="release",
                      nodes=",".join(order[:count]))

    def create(self, count: int) -> None:
        """The missing VMs, in the groups with room, in order."""
        creating = self.state.of("creating", self.name)
        room = {group: GROUP_VMS_MAX - len(vms) - sum(
                    1 for vm, c in creating.items() if c.group == group and vm not in vms)
                for group, vms in sorted(self.listing.items())}
        taken = set(self.vms) | set(self.state.creating) | set(self.state.deleting)
        names = new_names(self.base, taken, count, f"{self.base}:{self.now}")
        for group, free in room.items():
            batch = tuple(names[:max(free, 0)])
            names = names[len(batch):]
            if not batch:
                continue
            for vm in batch:
                self.state.creating[vm] = Claim(self.name, group, self.now)
            self.actions.append(VMCall("create", group, batch))
            self.note(f"nodeset {self.name}: {len(self.vms)} VMs for {self.desired} nodes: "
                      f"creating {','.join(batch)} in {group}", action="create",
                      nodes=",".join(batch))
        if names:
            self.note(f"nodeset {self.name}: no group has room for {len(names)} more VMs",
                      "ERROR", action="create")

    def delete_ready(self) -> None:
        """The drained VMs with no job left: deleted, exactly those. A node this pass only
        now asked Slurm to drain waits for the next, so that Slurm holds it drained (and
        shows it without a job) before its VM goes; a VM with no Slurm node goes at once."""
        just_drained = {a.node for a in self.actions
                        if isinstance(a, SetState) and a.state == "drain"}
        by_group: dict[str, list[str]] = {}
        for vm, claim in sorted(self.state.of("draining", self.name).items()):
            if vm in just_drained or not ready(self.nodes.get(vm)):
                continue
            del self.state.draining[vm]
            self.state.deleting[vm] = replace(claim, since=self.now)
            by_group.setdefault(claim.group, []).append(vm)
        for group, vms in by_group.items():
            self.actions.append(VMCall("delete", group, tuple(vms)))
            self.note(f"deleting {','.join(vms)} from {group}: drained for scale-down, no job "
                      "left", action="delete-vm", nodes=",".join(vms))


def claimed(nodes: list[common.SlurmNode], state: State) -> set[str]:
    """The Slurm nodes that are scale-down's, not the remediation loop's."""
    return ({n.name for n in nodes if marked(n)} | set(state.draining) | set(state.deleting))


# --- Acting ---------------------------------------------------------------------------------

Run = Callable[[list[str]], str]


def apply(actions: list[Action], run: Run, compute: common.Compute,
          log: common.Log = LOG) -> set[str]:
    """Carry the actions out, like ones together. Returns the VMs whose create or delete
    the API refused (it did nothing: the next pass may ask again); every failure is logged,
    never raised."""
    refused: set[str] = set()
    for action in actions:
        try:
            if isinstance(action, Note):
                log(action.message, action.severity, **action.fields)
            elif isinstance(action, SetState):
                run(action.argv())
            elif isinstance(action, DeleteNodes):
                for start in range(0, len(action.names), BATCH_MAX):
                    run(["scontrol", "delete",
                         f"nodename={','.join(action.names[start:start + BATCH_MAX])}"])
            else:
                call = getattr(compute, action.verb)
                for start in range(0, len(action.names), BATCH_MAX):
                    part = list(action.names[start:start + BATCH_MAX])
                    try:
                        call(action.group, part)
                    except common.ComputeError as exc:
                        refused |= set(part) if exc.refused else set()
                        raise
        except (common.ComputeError, common.CommandFailed) as exc:
            log(f"{type(action).__name__} failed: {exc}", "ERROR", action="failed")
    return refused


def undo_refused(state: State, refused: set[str]) -> State:
    """The state once the refused calls are known: a VM whose delete was refused drains
    on (asked again when ready), one whose create was refused is no longer counted."""
    for vm in refused & set(state.deleting):
        state.draining[vm] = state.deleting.pop(vm)
    for vm in refused & set(state.creating):
        del state.creating[vm]
    return state


class ScaleDown:
    """Passes of scale-down, run by the remediation loop inside its own: the metadata
    server, scontrol, the Compute API, the clock and the log are injected."""

    def __init__(self, state_file: str, sizes: Callable[[], dict[str, int]] | None, run: Run,
                 compute: common.Compute, log: common.Log = LOG) -> None:
        """``sizes`` None: no desired counts are given (a config with no ``sizes_url``), so
        nothing is resized."""
        self.state_file, self.sizes, self.run = state_file, sizes, run
        self.compute, self.log = compute, log
        self.enabled = sizes is not None
        self._said = ""
        #: the nodes the last pass held: kept out of remediation's hands while a pass skips
        self._last: set[str] = set()

    def once(self, message: str, severity: str) -> None:
        """A problem that lasts is logged when it starts, not every pass."""
        if message != self._said:
            self.log(message, severity, action="skip")
            self._said = message

    def run_once(self, nodes: list[common.SlurmNode], listings: dict[str, Listing | None],
                 bases: dict[str, str], now: float) -> set[str]:
        """One pass (the caller holds the state's lock); the nodes that are scale-down's."""
        if not self.enabled:
            return {n.name for n in nodes if marked(n)}
        if any(listing is None for listing in listings.values()):
            # The loop has said which group failed to list; a partial list would look
            # like missing VMs (created again) or fewer surplus ones.
            return {n.name for n in nodes if marked(n)} | self._last
        try:
            state = State.load(self.state_file)
        except BadState as exc:
            self.once(f"scale-down state {self.state_file} is unreadable ({exc}): no nodeset "
                      "is resized until it is moved away", "ALERT")
            return {n.name for n in nodes if marked(n)}
        try:
            sizes = self.sizes()
        except SizesNotSet as exc:
            self.once(f"scale-down idle: {exc}", "WARNING")
            return claimed(nodes, state)
        except (common.MetadataError, common.BadJSON) as exc:
            self.once(f"scale-down skipped: the desired counts cannot be read: {exc}", "ERROR")
            return claimed(nodes, state)
        self._said = ""
        actions, state = decide(nodes, listings, bases, sizes, state, now)
        state.save(self.state_file)
        refused = apply(actions, self.run, self.compute, self.log)
        if refused:
            undo_refused(state, refused).save(self.state_file)
        self._last = claimed(nodes, state)
        return self._last
