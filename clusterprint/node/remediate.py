"""The controller's remediation loop: what happens to a node the health check drained.

Standard library only (it runs on the controller's stock python3, 3.10 or newer). Each
pass reads Slurm's nodes, decides, acts, records; its state lives in one JSON file,
written atomically, so a restarted loop picks up where it left off and never repeats an
action. It acts only on nodes drained with a ``cp:`` reason (the health check's) or
found DOWN and not responding, per their nodeset's ``on_failure``:

- ``drain``: leaves the node drained with its reason.
- ``reboot``: ``scontrol reboot ASAP nextstate=RESUME``; slurmctld runs the RebootProgram
  (this program with ``--reboot``, ``SlurmctldParameters=reboot_from_controller``), which
  resets the VM through the Compute API. A node that is DOWN (Slurm refuses to reboot it)
  is reset directly.
- ``replace``: once the node has no jobs, reports its host as faulty where Compute Engine
  supports it (and the reason is the GPUs'), then recreates the VM through its instance
  group, which keeps the name; the node is resumed when its slurmd registers again, or
  set DOWN with the reason after ``replace_timeout_s``.

At most ``max_share_per_hour`` of a nodeset (rounded down, at least one node) is
rebooted or replaced in any hour. A remediation fails when a replaced VM does not
register in time, or when a remediated node fails its check again within
``watch_s``; after ``protect_after_failures`` failures in a row a nodeset is protected:
the loop stops acting on it, logs an ALERT and says so in the reasons of its drained
nodes, until ``--reset NODESET``. So a broken check cannot recycle a cluster.

DOWN dynamic nodes whose VM no longer exists in their instance group (it was deleted or
replaced under another name) are deleted from Slurm: they count against MaxNodeCount.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: The health check's reasons start so; several are joined with REASON_SEPARATOR.
PREFIX = "cp:"
REASON_SEPARATOR = "; "
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
#: Slurm's reason field is short in sinfo; a longer one is cut, never refused.
REASON_MAX = 250
METADATA_TOKEN_URL = ("http://metadata.google.internal/computeMetadata/v1/instance/"
                      "service-accounts/default/token")
COMPUTE_API = "https://compute.googleapis.com/compute/v1"
HTTP_TIMEOUT_S = 30
#: syslog(3) levels of the severities the loop logs at.
SYSLOG_LEVELS = {"ALERT": 1, "ERROR": 3, "WARNING": 4, "INFO": 6}


# --- Slurm's view ---------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """One node as ``scontrol show node -o`` prints it."""

    name: str
    #: the base state and its flags, upper case: {"IDLE", "DRAIN", "DYNAMIC_NORM"}
    state: frozenset[str]
    features: tuple[str, ...]
    reason: str
    slurmd_start: str
    #: who set the reason and when (``root@2026-12-01T10:31:53``): a new drain changes it
    reason_stamp: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state

    @property
    def down(self) -> bool:
        return "DOWN" in self.state

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.state

    @property
    def busy(self) -> bool:
        """Jobs still run (or end) on it: a replacement waits."""
        return bool(self.state & {"ALLOCATED", "MIXED", "COMPLETING"})

    @property
    def rebooting(self) -> bool:
        """Slurm is rebooting it (``scontrol reboot``): hands off."""
        return bool(self.state & {"REBOOT", "REBOOT_REQUESTED", "REBOOT_ISSUED"})

    @property
    def checked_failed(self) -> bool:
        """Drained or down by the health check (its reason starts ``cp:``)."""
        return (self.drained or self.down) and self.reason.startswith(PREFIX)

    @property
    def unhealthy(self) -> bool:
        """What the loop acts on: a failed check, or DOWN without an answer."""
        return not self.rebooting and (self.checked_failed
                                       or (self.down and self.not_responding))


def parse_nodes(text: str) -> list[Node]:
    """``scontrol show node -o``: one line per node; Reason, if any, is last and has spaces."""
    nodes = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        head, _, reason = line.partition(" Reason=")
        fields = dict(re.findall(r"(\w+)=(\S*)", head))
        state = fields.get("State", "").rstrip("*")
        flags = set(state.split("+")) if state else set()
        if fields.get("State", "").endswith("*"):
            flags.add("NOT_RESPONDING")
        stamp = re.search(r" \[([^\]]*@[^\]]*)\]\s*$", reason)
        reason = reason[:stamp.start()] if stamp else reason.strip()
        features = tuple(f for f in fields.get("ActiveFeatures", "").split(",") if f)
        nodes.append(Node(fields["NodeName"], frozenset(flags), features, reason,
                          fields.get("SlurmdStartTime", ""), stamp[1] if stamp else ""))
    return nodes


class Slurm:
    """The scontrol commands the loop runs, each looked up on PATH."""

    def __init__(self, run: Callable[[list[str]], str] | None = None) -> None:
        self.run = run or _run

    def nodes(self) -> list[Node]:
        return parse_nodes(self.run(["scontrol", "show", "node", "-o"]))

    def reboot(self, node: str, reason: str) -> None:
        self.run(["scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", node])

    def set_state(self, node: str, state: str, reason: str | None = None) -> None:
        argv = ["scontrol", "update", f"nodename={node}", f"state={state}"]
        self.run(argv + ([f"reason={reason}"] if reason else []))

    def delete(self, node: str) -> None:
        self.run(["scontrol", "delete", f"nodename={node}"])


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise SlurmError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class SlurmError(Exception):
    """An scontrol command failed."""


# --- The Compute API ------------------------------------------------------------------

class ComputeError(Exception):
    """A Compute API call failed: the loop logs it and tries again next pass."""


class Compute:
    """The four Compute API calls the loop makes, with the metadata server's token."""

    def __init__(self, project: str, zone: str, api: str = COMPUTE_API,
                 token_url: str = METADATA_TOKEN_URL) -> None:
        self.project, self.zone = project, zone
        self.api, self.token_url = api.rstrip("/"), token_url
        self._token: tuple[str, float] | None = None

    def _bearer(self) -> str:
        if self._token is None or self._token[1] < time.monotonic():
            request = urllib.request.Request(self.token_url,
                                             headers={"Metadata-Flavor": "Google"})
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
                token = json.load(answer)
            self._token = (token["access_token"],
                           time.monotonic() + int(token.get("expires_in", 300)) - 60)
        return self._token[0]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.api}/projects/{self.project}/zones/{self.zone}/{path}"
        data = json.dumps(body).encode() if body is not None else None
        try:
            request = urllib.request.Request(
                url, data=data, method=method,
                headers={"Authorization": f"Bearer {self._bearer()}",
                         "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise ComputeError(f"{method} {path}: HTTP {exc.code}: "
                               f"{exc.read()[:300].decode(errors='replace')}") from None
        except (OSError, ValueError, KeyError) as exc:
            raise ComputeError(f"{method} {path}: {exc}") from None

    def group(self, base_instance_name: str) -> str:
        """The instance group whose VMs are named ``base_instance_name-xxxx``."""
        token = ""
        while True:
            page = self.call("GET", "instanceGroupManagers" + (f"?pageToken={token}"
                                                               if token else ""))
            for item in page.get("items", []):
                if item.get("baseInstanceName") == base_instance_name:
                    return item["name"]
            token = page.get("nextPageToken", "")
            if not token:
                raise ComputeError(f"no instance group of {base_instance_name}-* VMs")

    def instances(self, group: str) -> dict[str, str]:
        """Every VM of the group, being created or not, by name: its status."""
        found, token = {}, ""
        while True:
            page = self.call("POST", f"instanceGroupManagers/{group}/listManagedInstances"
                             + (f"?pageToken={token}" if token else ""))
            for item in page.get("managedInstances", []):
                found[item["instance"].rsplit("/", 1)[-1]] = item.get("instanceStatus", "")
            token = page.get("nextPageToken", "")
            if not token:
                return found

    def reset(self, instance: str) -> None:
        self.call("POST", f"instances/{instance}/reset")

    def recreate(self, group: str, instance: str) -> None:
        self.call("POST", f"instanceGroupManagers/{group}/recreateInstances",
                  {"instances": [f"zones/{self.zone}/instances/{instance}"]})

    def report_faulty(self, instance: str, description: str) -> None:
        self.call("POST", f"instances/{instance}/reportHostAsFaulty",
                  {"disruptionSchedule": "IMMEDIATE",
                   "faultReasons": [{"behavior": GPU_FAULT_BEHAVIOR,
                                     "description": description[:REASON_MAX]}]})


# --- Configuration and state ----------------------------------------------------------

@dataclass(frozen=True)
class NodesetPolicy:
    """What the loop does with one nodeset's failing nodes."""

    name: str
    base_instance_name: str
    nodes: int
    on_failure: str
    report_faulty_host: bool


@dataclass(frozen=True)
class Config:
    """The rendered config (``/etc/clusterprint/remediate.json``)."""

    project: str
    zone: str
    state_file: str
    nodesets: dict[str, NodesetPolicy]
    max_share_per_hour: float
    protect_after_failures: int
    replace_timeout_s: int
    report_wait_s: int
    watch_s: int
    interval_s: int
    api: str = COMPUTE_API
    token_url: str = METADATA_TOKEN_URL

    @classmethod
    def load(cls, path: str) -> Config:
        raw = json.loads(Path(path).read_text())
        raw["nodesets"] = {name: NodesetPolicy(name=name, **ns)
                           for name, ns in raw["nodesets"].items()}
        return cls(**raw)

    def per_hour(self, nodeset: NodesetPolicy) -> int:
        """The most reboots or replacements of the nodeset in any hour."""
        return max(1, math.floor(self.max_share_per_hour * nodeset.nodes))


@dataclass
class State:
    """What survives a restart: actions in flight, the hour's actions, failures, protection."""

    #: node -> {"action", "since", "reason", "nodeset", "slurmd_start"}
    nodes: dict[str, dict] = field(default_factory=dict)
    #: nodeset -> times of its reboots and replacements (the last hour's)
    actions: dict[str, list[float]] = field(default_factory=dict)
    #: nodeset -> failed remediations in a row
    failures: dict[str, int] = field(default_factory=dict)
    #: node -> when a remediated node came back (failing again within watch_s counts)
    returned: dict[str, dict] = field(default_factory=dict)
    #: nodeset -> {"since", "why"}
    protected: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> State:
        try:
            return cls(**json.loads(Path(path).read_text()))
        except FileNotFoundError:
            return cls()

    def save(self, path: str) -> None:
        """Atomically: a crash leaves the old file or the new one, never half of one."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "w") as out:
            json.dump(self.__dict__, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)


# --- Logging ----------------------------------------------------------------------------

def log(message: str, severity: str = "INFO", **fields: object) -> None:
    """One JSON line on stdout, led by its syslog level (``<1>`` for ALERT).

    Under systemd the journal takes the ``<N>`` prefix as the line's PRIORITY
    (systemd.exec(5), SyslogLevelPrefix=, on by default), and the Ops Agent's
    systemd_journald receiver maps PRIORITY 1 to severity ALERT in Cloud Logging
    (the Ops Agent's source: confgenerator/logging_receivers.go).
    """
    line = json.dumps({"severity": severity, "message": message, **fields})
    print(f"<{SYSLOG_LEVELS[severity]}>{line}", flush=True)


def with_reason(reason: str, extra: str) -> str:
    """``reason`` with ``extra`` appended once, cut to what Slurm shows."""
    if extra.split(": ", 1)[0] in reason:
        return reason[:REASON_MAX]
    return (reason + REASON_SEPARATOR + extra if reason else extra)[:REASON_MAX]


def host_fault(reason: str) -> bool:
    """Whether one of the reasons is a GPU hardware fault (not a missing tool)."""
    parts = reason.split(REASON_SEPARATOR)
    return any(p.startswith(HOST_FAULT_PREFIXES) and not p.startswith(NOT_HOST_FAULTS)
               for p in parts)


# --- The loop ---------------------------------------------------------------------------

class Remediator:
    """One pass of the loop over plain data; Slurm, Compute and the clock are injected."""

    def __init__(self, config: Config, slurm: Slurm, compute: Compute,
                 clock: Callable[[], float] = time.time) -> None:
        self.config, self.slurm, self.compute, self.clock = config, slurm, compute, clock
        self.state = State.load(config.state_file)
        self._groups: dict[str, str] = {}

    # Each pass ---------------------------------------------------------------------
    def run_once(self) -> None:
        """Read, decide, act, record: the state file is saved after every action."""
        now = self.clock()
        nodes = {n.name: n for n in self.slurm.nodes()}
        vms = {ns: self._vms(policy) for ns, policy in self.config.nodesets.items()}
        for name in sorted(nodes):
            node = nodes[name]
            policy = self._policy(node)
            if policy is None:
                continue
            self._handle(node, policy, vms[policy.name], now)
        self._forget_gone(nodes)
        for ns in self.state.protected:
            self._mark_protected(ns, [n for n in nodes.values() if self._in(n, ns)])
        self._save()

    def _policy(self, node: Node) -> NodesetPolicy | None:
        for feature in node.features:
            if feature in self.config.nodesets:
                return self.config.nodesets[feature]
        return None

    def _in(self, node: Node, nodeset: str) -> bool:
        policy = self._policy(node)
        return policy is not None and policy.name == nodeset

    def _vms(self, policy: NodesetPolicy) -> dict[str, str] | None:
        """The group's VMs by name, or None when the API did not answer (then nothing
        is deleted and no replacement starts this pass)."""
        try:
            if policy.name not in self._groups:
                self._groups[policy.name] = self.compute.group(policy.base_instance_name)
            return self.compute.instances(self._groups[policy.name])
        except ComputeError as exc:
            log(f"cannot list the VMs of nodeset {policy.name}: {exc}", "ERROR")
            return None

    def _save(self) -> None:
        self.state.save(self.config.state_file)

    def _forget_gone(self, nodes: dict[str, Node]) -> None:
        for table in (self.state.nodes, self.state.returned):
            for name in [n for n in table if n not in nodes]:
                del table[name]

    # One node -----------------------------------------------------------------------
    def _handle(self, node: Node, policy: NodesetPolicy, vms: dict[str, str] | None,
                now: float) -> None:
        if (node.down and vms is not None and node.name not in vms
                and "DYNAMIC_NORM" in node.state
                and self.state.nodes.get(node.name, {}).get("action") != "recreate"):
            self._delete_stale(node)
            return
        entry = self.state.nodes.get(node.name)
        if entry is not None:
            self._follow(node, policy, entry, vms, now)
            return
        if node.unhealthy:
            self._start(node, policy, vms, now)
        else:
            self._watch(node, now)

    def _delete_stale(self, node: Node) -> None:
        try:
            self.slurm.delete(node.name)
        except SlurmError as exc:
            log(f"cannot delete stale node {node.name}: {exc}", "ERROR", node=node.name)
            return
        self.state.nodes.pop(node.name, None)
        self.state.returned.pop(node.name, None)
        log(f"deleted node {node.name}: its VM no longer exists", node=node.name,
            action="delete")
        self._save()

    def _watch(self, node: Node, now: float) -> None:
        """A remediated node that stays healthy for watch_s ends its nodeset's failures."""
        back = self.state.returned.get(node.name)
        if back and now - back["since"] >= self.config.watch_s:
            del self.state.returned[node.name]
            self.state.failures[back["nodeset"]] = 0

    def _start(self, node: Node, policy: NodesetPolicy, vms: dict[str, str] | None,
               now: float) -> None:
        back = self.state.returned.pop(node.name, None)
        if back and now - back["since"] < self.config.watch_s:
            self._failed(policy.name, f"{node.name} failed again {int(now - back['since'])}s "
                                      f"after its {back['action']}", now)
        if policy.name in self.state.protected:
            return
        if policy.on_failure == "drain":
            self._record(node, policy, "drain", now)
            log(f"{node.name} stays drained: {node.reason}", node=node.name, action="drain")
            return
        if policy.on_failure == "replace" and node.busy:
            log(f"{node.name}: waiting for its jobs to end before replacing it",
                node=node.name, action="wait")
            return
        if policy.on_failure == "replace" and (vms is None or node.name not in vms):
            return
        if not self._allowed(policy, now):
            return
        if policy.on_failure == "reboot":
            self._reboot(node, policy, now)
        elif policy.report_faulty_host and host_fault(node.reason):
            self._report(node, policy, now)
        else:
            self._recreate(node, policy, now, node.reason)

    def _allowed(self, policy: NodesetPolicy, now: float) -> bool:
        recent = [t for t in self.state.actions.get(policy.name, []) if now - t < HOUR_S]
        self.state.actions[policy.name] = recent
        limit = self.config.per_hour(policy)
        if len(recent) >= limit:
            log(f"nodeset {policy.name}: {len(recent)} of {limit} remediations this hour, "
                "the rest wait", "WARNING", nodeset=policy.name, action="rate-limit")
            return False
        return True

    def _record(self, node: Node, policy: NodesetPolicy, action: str, now: float,
                reason: str | None = None, counted: bool = False) -> None:
        self.state.nodes[node.name] = {"action": action, "since": now, "nodeset": policy.name,
                                       "reason": reason if reason is not None else node.reason,
                                       "slurmd_start": node.slurmd_start,
                                       "reason_stamp": node.reason_stamp}
        if counted:
            self.state.actions.setdefault(policy.name, []).append(now)
        self._save()

    def _reboot(self, node: Node, policy: NodesetPolicy, now: float) -> None:
        try:
            if node.down:
                # scontrol reboot skips DOWN nodes: reset the VM, ReturnToService brings it.
                self.compute.reset(node.name)
            else:
                self.slurm.reboot(node.name, with_reason(node.reason, f"{PREFIX}reboot: issued"))
        except (SlurmError, ComputeError) as exc:
            log(f"cannot reboot {node.name}: {exc}", "ERROR", node=node.name)
            return
        self._record(node, policy, "reboot", now, counted=True)
        log(f"rebooting {node.name}: {node.reason}", node=node.name, action="reboot")

    def _report(self, node: Node, policy: NodesetPolicy, now: float) -> None:
        try:
            self.compute.report_faulty(node.name, node.reason)
        except ComputeError as exc:
            log(f"cannot report the host of {node.name}, recreating it anyway: {exc}",
                "WARNING", node=node.name)
            self._recreate(node, policy, now, node.reason)
            return
        self._record(node, policy, "report", now, counted=True)
        log(f"reported the host of {node.name} as faulty: {node.reason}", node=node.name,
            action="report")

    def _recreate(self, node: Node, policy: NodesetPolicy, now: float, reason: str,
                  counted: bool = True) -> None:
        try:
            self.compute.recreate(self._groups[policy.name], node.name)
        except (ComputeError, KeyError) as exc:
            log(f"cannot recreate {node.name}: {exc}", "ERROR", node=node.name)
            return
        self._record(node, policy, "recreate", now, reason=reason, counted=counted)
        log(f"recreating {node.name} through its instance group: {reason}", node=node.name,
            action="recreate")

    def _follow(self, node: Node, policy: NodesetPolicy, entry: dict,
                vms: dict[str, str] | None, now: float) -> None:
        """An action in flight: see it through, once."""
        action = entry["action"]
        if action == "drain":
            if not (node.drained or node.down):  # resumed by hand
                del self.state.nodes[node.name]
            return
        if action == "gave-up":
            # The loop left it DOWN: anything else means an operator resumed it since.
            if not node.down:
                del self.state.nodes[node.name]
                if node.unhealthy:
                    self._start(node, policy, vms, now)
            return
        if action == "reboot":
            if node.rebooting:
                return
            del self.state.nodes[node.name]
            self._returned(node, policy, entry, now)
            if node.unhealthy:
                self._start(node, policy, vms, now)
            return
        if action == "report":
            gone = vms is not None and vms.get(node.name, "RUNNING") != "RUNNING"
            if gone or now - entry["since"] >= self.config.report_wait_s:
                self._recreate(node, policy, now, entry["reason"], counted=False)
            return
        # recreate: the new VM's slurmd registers under the same name.
        if node.slurmd_start != entry["slurmd_start"] and not node.not_responding:
            del self.state.nodes[node.name]
            if node.checked_failed and node.reason_stamp != entry.get("reason_stamp"):
                # Its check (run as slurmd starts) drained the new VM again: not resumed.
                self._returned(node, policy, entry, now)
                self._start(node, policy, vms, now)
                return
            try:
                self.slurm.set_state(node.name, "resume")
            except SlurmError as exc:
                log(f"cannot resume {node.name}: {exc}", "ERROR", node=node.name)
            self._returned(node, policy, entry, now)
            log(f"{node.name} registered again after its replacement: resumed",
                node=node.name, action="resume")
        elif now - entry["since"] >= self.config.replace_timeout_s:
            reason = with_reason(entry["reason"], f"{PREFIX}replace-timeout: no registration "
                                                  f"{self.config.replace_timeout_s}s after "
                                                  "recreation")
            try:
                self.slurm.set_state(node.name, "down", reason)
            except SlurmError as exc:
                log(f"cannot set {node.name} down: {exc}", "ERROR", node=node.name)
            entry.update(action="gave-up", since=now)
            self._failed(policy.name, f"{node.name} did not register within "
                                      f"{self.config.replace_timeout_s}s of its recreation",
                         now)
            log(f"{node.name} did not come back: DOWN", "ERROR", node=node.name,
                action="timeout")

    def _returned(self, node: Node, policy: NodesetPolicy, entry: dict, now: float) -> None:
        self.state.returned[node.name] = {"since": now, "nodeset": policy.name,
                                          "action": entry["action"]}
        self._save()

    # Failures and protection ---------------------------------------------------------
    def _failed(self, nodeset: str, why: str, now: float) -> None:
        count = self.state.failures.get(nodeset, 0) + 1
        self.state.failures[nodeset] = count
        limit = self.config.protect_after_failures
        log(f"nodeset {nodeset}: failed remediation {count} of {limit}: {why}", "WARNING",
            nodeset=nodeset, action="failure")
        if count >= limit and nodeset not in self.state.protected:
            self.state.protected[nodeset] = {
                "since": now, "why": f"{count} failed remediations in a row, last: {why}"}
            log(f"nodeset {nodeset} is protected: {count} failed remediations in a row "
                f"(last: {why}); the loop no longer reboots or replaces its nodes. Leave "
                f"with: clusterprint-remediate --reset {nodeset}", "ALERT", nodeset=nodeset,
                action="protect")
        self._save()

    def _mark_protected(self, nodeset: str, nodes: list[Node]) -> None:
        """Say why in sinfo: every drained or down node of the nodeset carries it."""
        note = (f"{PROTECTED}: remediation stopped after "
                f"{self.state.failures.get(nodeset, 0)} failures")
        for node in nodes:
            if not (node.drained or node.down) or PROTECTED in node.reason:
                continue
            try:
                self.slurm.set_state(node.name, "down" if node.down else "drain",
                                     with_reason(node.reason, note))
            except SlurmError as exc:
                log(f"cannot mark {node.name}: {exc}", "ERROR", node=node.name)

    def reset(self, nodeset: str) -> None:
        """Leave protected mode: failures forgotten, the note taken off the reasons."""
        self.state.protected.pop(nodeset, None)
        self.state.failures.pop(nodeset, None)
        for node in self.slurm.nodes():
            if self._in(node, nodeset) and PROTECTED in node.reason:
                kept = REASON_SEPARATOR.join(p for p in node.reason.split(REASON_SEPARATOR)
                                             if not p.startswith(PROTECTED))
                self.slurm.set_state(node.name, "down" if node.down else "drain",
                                     kept or f"{PREFIX}protected-reset")
        self._save()
        log(f"nodeset {nodeset} left protected mode", nodeset=nodeset, action="reset")


def metadata_project(token_url: str) -> str:
    """The controller's own project, from the metadata server that hands out its token."""
    url = token_url.split("/instance/", 1)[0] + "/project/project-id"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
        return answer.read().decode().strip()


def reboot_program(config: Config, compute: Compute, nodelist: str) -> int:
    """RebootProgram (reboot_from_controller): slurmctld passes ``node1,node2,...``."""
    failed = 0
    for node in filter(None, nodelist.split(",")):
        try:
            compute.reset(node)
            log(f"reset the VM of {node}", node=node, action="reset")
        except ComputeError as exc:
            failed += 1
            log(f"cannot reset the VM of {node}: {exc}", "ERROR", node=node)
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
    parser.add_argument("--now", type=float, help="the clock, in epoch seconds (tests)")
    parser.add_argument("features", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = Config.load(args.config)
    compute = Compute(config.project or metadata_project(config.token_url), config.zone,
                      config.api, config.token_url)
    if args.reboot is not None:
        return reboot_program(config, compute, args.reboot)
    clock = (lambda: args.now) if args.now is not None else time.time
    loop = Remediator(config, Slurm(), compute, clock)
    if args.reset:
        loop.reset(args.reset)
        return 0
    while True:
        try:
            loop.run_once()
        except SlurmError as exc:
            log(f"pass skipped: {exc}", "ERROR")
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(config.interval_s)


if __name__ == "__main__":
    sys.exit(main())
