"""Power saving on the controller: elastic nodes get a VM when jobs need them and lose it idle.

A nodeset's nodes above ``count`` (where power saving is on: clusterprint/blueprint/model.py
``Nodeset.elastic``) have fixed names, ``{cluster}-{nodeset}-e00001`` and on. Slurm must know
a node before it can power it up, so ``declare`` (every pass of ``watch``, and by hand) creates
each elastic node Slurm does not know yet powered down (``scontrol create ...
State=CLOUD``, shown ``idle~``), with its nodeset's feature, GPUs, the machine type's CPUs
and memory (from the Compute API) and its own SuspendTime. Then slurmctld calls, as
SlurmUser, with a hostlist:

- ``resume HOSTLIST`` (ResumeProgram): creates each node's VM in one of the nodeset's
  instance groups with room (``createInstances``, by name); the VM boots, its slurmd
  registers under that name and the job starts. A flex-start nodeset's VMs come only
  through a resize request (Compute docs "About resize requests in a MIG"): one per resume
  and group, naming the nodes' VMs, for the nodeset's ``run_duration_s``; Dynamic Workload
  Scheduler creates them all at once when it finds the capacity, and the job waits
  (``CF``, configuring) until then, within its partition's ResumeTimeout.
- ``suspend HOSTLIST`` (SuspendProgram): deletes the VMs of idle nodes (``deleteInstances``);
  a name without a VM (Slurm also powers down a node it has just been given) is skipped.
- ``resume-fail HOSTLIST`` (ResumeFailProgram): a VM did not register within ResumeTimeout:
  its VM is deleted and the node backs off like a failed create.

A group takes a create and retries it for ever when capacity is short, saying why only in
its list of VMs. So ``watch`` (a service, every ``--interval`` seconds) reads the groups of
nodesets with VMs being created: a create that failed with a stockout, a quota or an
exhausted reservation is stopped (the VM deleted), and its node is powered down at once
(``POWER_DOWN_FORCE``, which requeues the job) with a reason ``cp:capacity: <kind>: <code>:
<message>`` that ``sinfo -R`` shows. The node then stays DOWN with that reason for
``backoff_s`` and returns to service (``idle~``) for the next try: never down for ever, never
a create-and-fail loop. A resume of a node still backing off is refused the same way without
an API call. A flex-start create does not fail for a stockout (its request waits): ``watch``
lists the requests of flex-start groups too, backs off the nodes of a request that FAILED
(its ``status.error``, a quota for example) and deletes finished requests, so each list
stays short; a resume-fail or suspend of a node whose request still waits cancels it.

Each pass lists every group of every elastic nodeset once, and also deletes the VMs of nodes
Slurm counts powered down that no create is bringing up (a suspend whose delete failed:
Slurm powers the node down after SuspendTimeout all the same), so no VM bills unused.

Static nodes register themselves with ``SuspendTime=INFINITE`` (clusterprint/render/
slurm_config.py) and are never passed here. Every change is recorded in the state file under
its lock before the API or scontrol is called. Standard library only, with the node programs'
common.py beside it. Exit 0, 1 when Slurm or the API failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import MISSING, dataclass, field, fields

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

LOG = common.Log("capacity")
SCONTROL_TIMEOUT_S = 60
#: The reason of every node power saving takes out of service (the remediation loop leaves
#: elastic nodes to power saving).
REASON = f"{common.PREFIX}capacity"
#: Create errors that mean the zone, the project or the reservation has no room now, by kind
#: (codes: listManagedInstances' lastAttempt.errors; Google's "Troubleshoot resource
#: availability errors" page; Kubernetes cluster-autoscaler's GCE client reads the same).
STOCKOUT_CODES = frozenset({"ZONE_RESOURCE_POOL_EXHAUSTED", "RESOURCE_POOL_EXHAUSTED",
                            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                            "INSUFFICIENT_CAPACITY"})
#: Share of a machine type's memory a created node declares (slurmd registers what its
#: kernel leaves, a few percent less; slurm_config.KERNEL_SHARE).
KERNEL_SHARE = 0.9


def kind_of(code: str, message: str) -> str:
    """Why a create failed, in a word: stockout, quota, reservation, or error."""
    if code in STOCKOUT_CODES:
        return "stockout"
    if "QUOTA" in code.upper():
        return "quota"
    if "reservation" in message.lower():
        return "reservation"
    return "error"


@dataclass(frozen=True)
class Nodeset:
    """One nodeset's elastic nodes: ``prefix`` and a number of ELASTIC digits, 1..count."""

    name: str
    base_instance_name: str
    prefix: str
    count: int
    digits: int
    machine_type: str
    features: str
    gres: str
    topology: str
    suspend_time_s: int
    #: A flex-start nodeset's requested run duration (its resize requests'); 0: not flex.
    run_duration_s: int = 0

    def names(self) -> list[str]:
        return [f"{self.prefix}{i:0{self.digits}d}" for i in range(1, self.count + 1)]

    def holds(self, node: str) -> bool:
        number = node[len(self.prefix):]
        return (node.startswith(self.prefix) and len(number) == self.digits
                and number.isdigit() and 1 <= int(number) <= self.count)


@dataclass(frozen=True)
class Config:
    """What the controller's power saving acts on; rendered by clusterprint/render/
    capacity.py."""

    zone: str
    state_file: str
    nodesets: dict[str, Nodeset]
    project: str = ""
    backoff_s: int = 600
    group_vms_max: int = 2000
    request_vms_max: int = 1000
    api: str = common.COMPUTE_API
    token_url: str = common.METADATA_TOKEN_URL
    http_timeout_s: float = 30.0

    @classmethod
    def load(cls, path: str) -> Config:
        """The config file, every value of the type its field says; BadJSON naming the
        first that is not (a config that crashed a program would do so in slurmctld's log,
        on every resume)."""
        with open(path, "rb") as file:
            raw = dict(common.expect(common.load_json(file.read(), path), dict, path))
        nodesets = common.expect(raw.pop("nodesets", None), dict, f"{path}: nodesets")
        return _typed(cls, {**raw, "nodesets": {
            name: _typed(Nodeset, {**common.expect(value, dict, f"{path}: nodeset {name}"),
                                   "name": name}, f"{path}: nodeset {name}")
            for name, value in nodesets.items()}}, path)

    def nodeset_of(self, node: str) -> Nodeset | None:
        return next((n for n in self.nodesets.values() if n.holds(node)), None)


#: What each field's annotation takes (the nodesets are checked one by one).
_TYPES = {"str": str, "int": int, "float": (int, float), "dict[str, Nodeset]": dict}


def _typed(cls: type, raw: dict, what: str):
    """``cls`` of ``raw``, whose keys are its fields and whose values are of their types."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise common.BadJSON(f"{what}: unknown key {common.clip(unknown[0], 60)}")
    for name, spec in known.items():
        if name not in raw:
            if spec.default is MISSING:
                raise common.BadJSON(f"{what}: no {name}")
            continue
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, _TYPES[spec.type]):
            raise common.BadJSON(f"{what}: {name} is {common.clip(repr(value), 60)}, "
                                 f"not {spec.type}")
    return cls(**raw)


@dataclass
class State:
    """Nodes backing off (``{node: {"until": epoch, "reason": text}}``), VMs being
    created (``{node: epoch}``) and flex-start resize requests not yet finished
    (``{request: {"group": group, "nodes": [node, ...]}}``)."""

    backoff: dict[str, dict] = field(default_factory=dict)
    creating: dict[str, float] = field(default_factory=dict)
    requests: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> State:
        try:
            with open(path, "rb") as file:
                raw = common.expect(common.load_json(file.read(), path), dict, path)
        except FileNotFoundError:
            return cls()
        return cls(**{key: common.expect(raw.get(key, {}), dict, key)
                      for key in ("backoff", "creating", "requests")})

    def save(self, path: str) -> None:
        common.atomic_write(path, json.dumps({"backoff": self.backoff, "creating": self.creating,
                                              "requests": self.requests}, indent=1) + "\n")

    def request_of(self, node: str) -> str | None:
        """The waiting resize request that asks for ``node``'s VM, if one does."""
        return next((name for name, request in self.requests.items()
                     if node in request["nodes"]), None)


#: The names of the resize requests power saving makes (RFC 1035, at most 63 characters);
#: the request Pulumi makes for a flex-start nodeset's ``count`` is never one of them.
REQUEST_PREFIX = "cp-resume-"


def request_name(nodes: list[str], now: float) -> str:
    """A resize request's name, unique to its nodes and its time."""
    digest = hashlib.sha256(",".join(nodes).encode()).hexdigest()[:16]
    return f"{REQUEST_PREFIX}{int(now)}-{digest}"


class ResizeRequests:
    """A flex-start group's resize requests (instanceGroupManagerResizeRequests), through
    the controller's Compute client."""

    def __init__(self, compute: common.Compute) -> None:
        self.compute = compute

    def insert(self, group: str, name: str, nodes: list[str], run_duration_s: int) -> None:
        """VMs of these names, all at once when capacity is found, for ``run_duration_s``."""
        self.compute.call("POST", f"instanceGroupManagers/{group}/resizeRequests", {
            "name": name, "instances": [{"name": node} for node in nodes],
            "requestedRunDuration": {"seconds": str(run_duration_s)}})

    def listed(self, group: str) -> dict[str, dict[str, str]]:
        """Each request of the group by name: its ``state`` and, where it failed, the
        ``code`` and ``message`` of its first error."""
        found = {}
        for item in self.compute.items("GET", f"instanceGroupManagers/{group}/resizeRequests",
                                        "items"):
            status = item.get("status")
            error = status.get("error") if isinstance(status, dict) else None
            errors = error.get("errors") if isinstance(error, dict) else None
            first = errors[0] if isinstance(errors, list) and errors else {}
            first = first if isinstance(first, dict) else {}
            found[common.Compute.text_field(item, "name")] = {
                "state": common.Compute.text_field(item, "state", ""),
                "code": common.one_line(first.get("code", "")),
                "message": common.one_line(first.get("message", ""))}
        return found

    def cancel(self, group: str, name: str) -> None:
        self.compute.call("POST", f"instanceGroupManagers/{group}/resizeRequests/{name}/cancel")

    def delete(self, group: str, name: str) -> None:
        self.compute.call("DELETE", f"instanceGroupManagers/{group}/resizeRequests/{name}")


#: The states of a resize request that is over (it may then be deleted).
FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class Slurm:
    """The scontrol commands power saving runs."""

    def __init__(self, run=None) -> None:
        self.run = run or (lambda argv: common.output(argv, SCONTROL_TIMEOUT_S))

    def hostnames(self, hostlist: str) -> list[str]:
        return self.run(["scontrol", "show", "hostnames", hostlist]).split()

    def nodes(self) -> list[common.SlurmNode]:
        return common.parse_nodes(self.run(["scontrol", "show", "node", "-o"]))

    def update(self, nodes: list[str], *settings: str) -> None:
        self.run(["scontrol", "update", f"nodename={','.join(nodes)}", *settings])

    def create(self, line: list[str]) -> None:
        self.run(["scontrol", "create", *line])


class Capacity:
    """The programs' steps over one config, Slurm, the Compute API, a clock and a log."""

    def __init__(self, config: Config, slurm: Slurm, compute: common.Compute,
                 clock=time.time, log: common.Log = LOG) -> None:
        self.config, self.slurm, self.compute = config, slurm, compute
        self.requests = ResizeRequests(compute)
        self.clock, self.log = clock, log

    # --- declare ---------------------------------------------------------------------------

    def declare(self) -> None:
        """Every elastic node Slurm does not know, created powered down."""
        known = {node.name for node in self.slurm.nodes()}
        for nodeset in self.config.nodesets.values():
            missing = [name for name in nodeset.names() if name not in known]
            if not missing:
                continue
            cpus, memory = self.compute.machine_type(nodeset.machine_type)
            line = [f"NodeName={','.join(missing)}", "State=CLOUD",
                    f"Features={nodeset.features}", f"CPUs={cpus}",
                    f"RealMemory={int(memory * KERNEL_SHARE)}",
                    f"SuspendTime={nodeset.suspend_time_s}"]
            line += [f"Gres={nodeset.gres}"] if nodeset.gres else []
            line += [f"Topology={nodeset.topology}"] if nodeset.topology else []
            self.slurm.create(line)
            self.log(f"declared {len(missing)} elastic node(s) of nodeset {nodeset.name}",
                     nodeset=nodeset.name)

    # --- resume, suspend, resume-fail ------------------------------------------------------

    def _by_nodeset(self, hostlist: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for node in self.slurm.hostnames(hostlist):
            nodeset = self.config.nodeset_of(node)
            if nodeset is None:
                self.log(f"{node} is no elastic node: left alone", "ERROR", node=node)
            else:
                found.setdefault(nodeset.name, []).append(node)
        return found

    def _members(self, nodeset: Nodeset) -> dict[str, dict[str, dict[str, str]]]:
        """Each group of the nodeset with its VMs (``common.Compute.creations``)."""
        return {group: self.compute.creations(group)
                for group in self.compute.groups(nodeset.base_instance_name)}

    def resume(self, hostlist: str) -> int:
        failed = 0
        with common.locked(self.config.state_file):
            state = State.load(self.config.state_file)
            for name, nodes in self._by_nodeset(hostlist).items():
                nodeset = self.config.nodesets[name]
                waiting = [n for n in nodes if n in state.backoff]
                if waiting:
                    self._power_down(waiting, state.backoff[waiting[0]]["reason"])
                nodes = [n for n in nodes if n not in state.backoff]
                if nodes:
                    failed += self._create(nodeset, nodes, state)
            state.save(self.config.state_file)
        return 1 if failed else 0

    def _create(self, nodeset: Nodeset, nodes: list[str], state: State) -> int:
        try:
            members = self._members(nodeset)
            held = {vm for vms in members.values() for vm in vms}
            new = [n for n in nodes if n not in held]
            now = self.clock()
            for node in nodes:
                state.creating[node] = now
            # Counted first: a create that times out after the API took it still happened.
            state.save(self.config.state_file)
            batches = []
            for group, vms in sorted(members.items()):
                waiting = sum(len(r["nodes"]) for r in state.requests.values()
                              if r["group"] == group)
                room = max(0, self.config.group_vms_max - len(vms) - waiting)
                batch, new = new[:room], new[room:]
                batches += [(group, batch[start:start + self.config.request_vms_max])
                            for start in range(0, len(batch), self.config.request_vms_max)]
            if new:
                raise common.ComputeError(f"no group of nodeset {nodeset.name} has room "
                                          f"for {len(new)} more VM(s)")
            for group, batch in batches:
                if nodeset.run_duration_s:
                    self._request(nodeset, group, batch, state)
                else:
                    self.compute.create(group, batch)
            self.log(f"{'asking for' if nodeset.run_duration_s else 'creating'} the VMs of "
                     f"{','.join(nodes)}", nodeset=nodeset.name, action="resume")
            return 0
        except common.ComputeError as exc:
            self._back_off(nodes, state, f"{REASON}: error: {exc}")
            return 1

    def _request(self, nodeset: Nodeset, group: str, nodes: list[str], state: State) -> None:
        """One resize request for ``nodes``' VMs, counted before it is made; forgotten
        again where the API refused it (it made nothing)."""
        name = request_name(nodes, self.clock())
        state.requests[name] = {"group": group, "nodes": nodes}
        state.save(self.config.state_file)
        try:
            self.requests.insert(group, name, nodes, nodeset.run_duration_s)
        except common.ComputeError as exc:
            if exc.refused:
                state.requests.pop(name)
            raise

    def _delete(self, nodeset: Nodeset, nodes: list[str],
                members: dict[str, dict[str, dict[str, str]]] | None = None) -> None:
        """The VMs of ``nodes`` deleted from the groups that hold them (``members``: the
        groups as this pass has already read them, so a pass lists each group once)."""
        for group, vms in sorted((members or self._members(nodeset)).items()):
            mine = [n for n in nodes if n in vms]
            for start in range(0, len(mine), self.config.request_vms_max):
                self.compute.delete(group, mine[start:start + self.config.request_vms_max])

    def _cancel(self, nodes: list[str], state: State) -> None:
        """The waiting resize requests that ask for ``nodes``' VMs cancelled: a request is
        all or nothing, so its other nodes lose their VM too (Slurm times them out alike).
        Forgotten once cancelled; ``watch`` deletes them."""
        for name in {r for node in nodes if (r := state.request_of(node))}:
            self.requests.cancel(state.requests[name]["group"], name)
            state.requests.pop(name)
            state.save(self.config.state_file)

    def _deleting(self, hostlist: str, then) -> int:
        """Under the state's lock: each nodeset's VMs of ``hostlist`` deleted (their
        waiting resize requests cancelled first), then ``then(nodes, state)``; the number
        of nodesets whose delete failed."""
        failed = 0
        with common.locked(self.config.state_file):
            state = State.load(self.config.state_file)
            for name, nodes in self._by_nodeset(hostlist).items():
                try:
                    self._cancel(nodes, state)
                    self._delete(self.config.nodesets[name], nodes)
                except common.ComputeError as exc:
                    self.log(f"deleting the VMs of {','.join(nodes)} failed: {exc}", "ERROR")
                    failed += 1
                then(nodes, state)
            state.save(self.config.state_file)
        return failed

    def suspend(self, hostlist: str) -> int:
        """Idle nodes' VMs deleted; 1 when a delete failed."""
        def forget(nodes: list[str], state: State) -> None:
            for node in nodes:
                state.creating.pop(node, None)
        return 1 if self._deleting(hostlist, forget) else 0

    def resume_fail(self, hostlist: str) -> int:
        """Nodes whose VM did not register in time: deleted, and backing off."""
        self._deleting(hostlist, lambda nodes, state: self._back_off(
            nodes, state, f"{REASON}: timeout: no VM registered within ResumeTimeout",
            power_down=False))
        return 0

    def _back_off(self, nodes: list[str], state: State, reason: str,
                  power_down: bool = True) -> None:
        reason = common.clip(reason)
        until = self.clock() + self.config.backoff_s
        for node in nodes:
            state.backoff[node] = {"until": until, "reason": reason}
            state.creating.pop(node, None)
        state.save(self.config.state_file)
        self.log(f"{','.join(nodes)}: {reason}; next try in {self.config.backoff_s} s",
                 "WARNING", nodes=",".join(nodes), action="backoff")
        if power_down:
            self._power_down(nodes, reason)
        else:
            self.slurm.update(nodes, "state=down", f"reason={reason}")

    def _power_down(self, nodes: list[str], reason: str) -> None:
        """Powered down at once: Slurm requeues the job the node was for."""
        self.slurm.update(nodes, "state=power_down_force", f"reason={reason}")

    # --- watch -----------------------------------------------------------------------------

    def watch(self) -> None:
        """One pass: declare what Slurm lacks (after a restart of slurmctld, or a larger
        max_count), then, reading each nodeset's groups once: stop failed creates, delete
        the VMs of powered-down nodes, hold backing-off nodes down, return them."""
        try:
            self.declare()
        except common.ComputeError as exc:
            self.log(f"cannot declare the elastic nodes: {exc}", "ERROR")
        with common.locked(self.config.state_file):
            state = State.load(self.config.state_file)
            # Read under the lock, as every resume creates under it: a node powered down
            # here has no create running that this pass could race.
            nodes = {node.name: node for node in self.slurm.nodes()}
            for nodeset in self.config.nodesets.values():
                try:
                    members = self._members(nodeset)
                except common.ComputeError as exc:
                    self.log(f"cannot list the VMs of nodeset {nodeset.name}: {exc}", "ERROR")
                    continue
                creating = [n for n in state.creating if nodeset.holds(n)]
                if nodeset.run_duration_s:
                    self._finished_requests(members, state)
                self._failed_creates(nodeset, members, creating, state)
                self._strays(nodeset, members, nodes, set(creating))
            self._returns(state)
            state.save(self.config.state_file)

    def _failed_creates(self, nodeset: Nodeset, members: dict[str, dict[str, dict[str, str]]],
                        creating: list[str], state: State) -> None:
        vms = {vm: seen for listed in members.values() for vm, seen in listed.items()}
        by_reason: dict[str, list[str]] = {}
        for node in creating:
            seen = vms.get(node)
            if seen is None or not (seen["status"] or seen["code"]):
                continue  # not listed yet, or not tried yet: the next pass looks again
            if seen["status"]:  # created: its slurmd registers
                state.creating.pop(node)
                continue
            kind = kind_of(seen["code"], seen["message"])
            reason = f"{REASON}: {kind}: {seen['code']}: {seen['message']}"
            by_reason.setdefault(common.clip(reason), []).append(node)
        for reason, nodes in by_reason.items():
            try:
                self._delete(nodeset, nodes, members)
            except common.ComputeError as exc:
                self.log(f"stopping the creates of {','.join(nodes)} failed: {exc}", "ERROR")
                continue
            self._back_off(nodes, state, reason)

    def _finished_requests(self, members: dict[str, dict[str, dict[str, str]]],
                           state: State) -> None:
        """Each flex-start group's resize requests, listed once: a FAILED one's nodes back
        off with its error, a finished one of power saving's is deleted, a waiting one
        whose nodes all gave up (backed off: its insert timed out, yet happened) is
        cancelled, and one the API no longer lists is forgotten (never made, or gone)."""
        for group in sorted(members):
            try:
                listed = self.requests.listed(group)
            except common.ComputeError as exc:
                self.log(f"cannot list the resize requests of {group}: {exc}", "ERROR")
                continue
            for name, request in listed.items():
                if not name.startswith(REQUEST_PREFIX):
                    continue  # Pulumi's request for the static nodes
                if request["state"] not in FINISHED:
                    # One this program has no record of lost its state file with it.
                    asked = state.requests.get(name, {"nodes": []})["nodes"]
                    if not any(node in state.creating for node in asked):
                        self._cancel_listed(group, name, state)
                    continue
                mine = state.requests.pop(name, {"nodes": []})
                waiting = [n for n in mine["nodes"] if n in state.creating]
                if request["state"] == "FAILED" and waiting:
                    kind = kind_of(request["code"], request["message"])
                    self._back_off(waiting, state, f"{REASON}: {kind}: {request['code']}: "
                                                   f"{request['message']}")
                try:
                    self.requests.delete(group, name)
                except common.ComputeError as exc:
                    self.log(f"deleting resize request {name} failed: {exc}", "ERROR")
            for name in [n for n, r in state.requests.items()
                         if r["group"] == group and n not in listed]:
                state.requests.pop(name)

    def _cancel_listed(self, group: str, name: str, state: State) -> None:
        try:
            self.requests.cancel(group, name)
        except common.ComputeError as exc:
            self.log(f"cancelling resize request {name} failed: {exc}", "ERROR")
            return
        state.requests.pop(name, None)
        self.log(f"cancelled resize request {name}: its nodes gave up", "WARNING",
                 action="cancel")

    def _strays(self, nodeset: Nodeset, members: dict[str, dict[str, dict[str, str]]],
                nodes: dict[str, common.SlurmNode], creating: set[str]) -> None:
        """VMs of nodes Slurm counts powered down, which no create of this program is
        bringing up, deleted: a suspend or resume-fail whose delete failed, a create that
        happened though its call failed. Slurm would not use them; they would only bill."""
        stray = sorted(vm for vms in members.values() for vm in vms
                       if nodeset.holds(vm) and vm not in creating
                       and vm in nodes and "POWERED_DOWN" in nodes[vm].state
                       and "POWERING_UP" not in nodes[vm].state)
        if not stray:
            return
        self.log(f"deleting the VMs of powered-down nodes {','.join(stray)}", "WARNING",
                 nodeset=nodeset.name, action="stray")
        try:
            self._delete(nodeset, stray, members)
        except common.ComputeError as exc:
            self.log(f"deleting the VMs of {','.join(stray)} failed: {exc}", "ERROR")

    def _returns(self, state: State) -> None:
        now = self.clock()
        nodes = {node.name: node for node in self.slurm.nodes()}
        for name, held in list(state.backoff.items()):
            node = nodes.get(name)
            if node is None:
                state.backoff.pop(name)
            elif held["until"] <= now:
                state.backoff.pop(name)
                state.save(self.config.state_file)
                self.slurm.update([name], "state=resume")
                self.log(f"{name}: back in service for the next try", node=name,
                         action="return")
            elif "POWERED_DOWN" in node.state and not node.down:
                self.slurm.update([name], "state=down", f"reason={held['reason']}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="capacity.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("step", choices=("declare", "resume", "suspend", "resume-fail",
                                         "watch"))
    parser.add_argument("hostlist", nargs="?", default="")
    parser.add_argument("--once", action="store_true", help="watch: one pass")
    parser.add_argument("--interval", type=float, default=30.0)
    args = parser.parse_args(argv)
    if (args.step in ("resume", "suspend", "resume-fail")) != bool(args.hostlist):
        parser.error(f"{args.step} takes {'a' if args.hostlist == '' else 'no'} hostlist")
    try:
        config = Config.load(args.config)
    except (OSError, common.BadJSON) as exc:
        LOG(f"config {args.config}: {exc}", "ERROR")
        return 1
    compute = common.Compute(config.project or common.metadata_project(config.token_url,
                                                                       config.http_timeout_s),
                             config.zone, config.api, config.token_url, config.http_timeout_s)
    capacity = Capacity(config, Slurm(), compute)
    steps = {"resume": capacity.resume, "suspend": capacity.suspend,
             "resume-fail": capacity.resume_fail}
    try:
        if args.step == "declare":
            capacity.declare()
            return 0
        if args.step == "watch":
            return common.repeat(capacity.watch, args.once, args.interval, LOG)
        return steps[args.step](args.hostlist)
    except (common.CommandFailed, common.ComputeError, OSError) as exc:
        LOG(f"{args.step} failed: {exc}", "ERROR")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
