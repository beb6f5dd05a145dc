"""Where a cluster's VMs are, read from the Compute API alone: ``clusterprint status``.

Each node's boot script publishes its progress as guest attributes
(``clusterprint/render/templates/scripts/boot_status.sh.j2``): ``booting STEP``, ``ready``
or ``failed STEP`` with the last lines of its log. They are read with the user's
credentials (``compute.instances.getGuestAttributes``), no SSH. Any process on a VM can
write its guest attributes (Compute docs, "Setting and querying guest attributes"): where
users are kept off the metadata server (``security.users_get_node_credentials`` false,
clusterprint/render/metadata_guard.py) only root can, so a user cannot forge a node's stage;
elsewhere a user on a node could.

A nodeset's static VMs are its groups' whose base instance name is the nodeset's
(``naming.base_instance_name``), found as the remediation loop finds them, by listing the
zone's groups; its elastic VMs are in the groups of ``naming.elastic_base_instance_name``,
created by power saving when jobs need them, and counted apart: the static VMs ready are
what makes a nodeset ready. A VM not created yet is listed by its group
with its last try's error, and the group's ``listErrors`` says what its creates failed with
(a stockout, a quota, a reservation). A flex-start group gets its VMs only through resize
requests (Pulumi's for ``count``, the controller's for elastic nodes): one still waiting for
capacity is shown with its VMs and age, one that failed with its error; a nodeset waiting
on them is not ready yet, one whose request failed needs the user. Fetching
(``read_cluster``) is apart from deciding (``vm_state``, ``nodeset_status``), which tests
drive with plain data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from clusterprint.build.compute import number_of, object_of
from clusterprint.contract import naming, node_metadata

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint, Nodeset
    from clusterprint.build.compute import ComputeApi

#: A VM's states, from the API's status, its group's action on it and the boot's guest
#: attribute.
CREATING, BOOTING, READY, FAILED, STOPPED, MISSING, DELETING = (
    "creating", "booting", "ready", "failed", "stopped", "missing", "deleting")
#: Instance statuses on the way to RUNNING, where no boot script runs yet.
STARTING_STATUSES = frozenset({"PROVISIONING", "STAGING", "REPAIRING"})
#: What a group does to a VM (listManagedInstances' currentAction) that takes it away: power
#: saving deleting an idle elastic node, a scale-in. Such a VM is neither wanted nor failed.
LEAVING_ACTIONS = frozenset({"DELETING", "ABANDONING"})
#: Actions that bring a VM that is not RUNNING back up (the remediation loop's recreate, a
#: group's restart or repair): it is on its way, not stopped.
RETURNING_ACTIONS = frozenset({"RECREATING", "RESTARTING", "STARTING", "RESUMING",
                               "REFRESHING", "VERIFYING"})
#: A resize request's states once it is over (clusterprint/node/capacity.py's FINISHED):
#: only the others wait for capacity.
FINISHED_REQUESTS = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
#: The group errors shown per group: the most recent kinds.
GROUP_ERRORS_SHOWN = 5
#: The states a nodeset's VMs are counted in, besides ``created``.
COUNTED = (CREATING, BOOTING, READY, FAILED, DELETING)


@dataclass(frozen=True)
class VmStatus:
    """One VM: ``state`` one of the states above; ``stage`` the step it boots or failed at;
    ``lines`` the last lines of a failed boot; ``error`` why its creation failed so far."""

    name: str
    state: str
    status: str = ""
    stage: str = ""
    lines: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class GroupError:
    """One kind of error a group's actions met (listErrors), how often, when last."""

    code: str
    message: str
    count: int
    last: str


@dataclass(frozen=True)
class ResizeRequest:
    """A flex-start group's request for ``count`` VMs: ``state`` as the API says
    (ACCEPTED while it waits for capacity), ``error`` ``CODE: message`` when it FAILED."""

    name: str
    group: str
    state: str
    count: int
    created: str = ""
    error: str = ""

    @property
    def waiting(self) -> bool:
        return self.state not in FINISHED_REQUESTS

    @property
    def failed(self) -> bool:
        return self.state == "FAILED"


def created(vms: list[VmStatus]) -> int:
    """VMs that exist and stay, whatever they do."""
    return sum(vm.state not in (CREATING, MISSING, DELETING) for vm in vms)


def in_state(vms: list[VmStatus], state: str) -> int:
    return sum(vm.state == state for vm in vms)


def counts(vms: list[VmStatus]) -> dict[str, int]:
    """How many VMs are created, and how many are in each COUNTED state."""
    return {"created": created(vms), **{state: in_state(vms, state) for state in COUNTED}}


@dataclass
class NodesetStatus:
    """A nodeset: ``wanted`` static VMs and their ``vms``, up to ``elastic`` more on demand
    and their ``elastic_vms``. They are counted apart: an elastic VM, ready or not, says
    nothing of whether the static ones the nodeset wants are up."""

    name: str
    wanted: int
    elastic: int
    vms: list[VmStatus] = field(default_factory=list)
    elastic_vms: list[VmStatus] = field(default_factory=list)
    #: group name -> its errors, most recent first
    groups: dict[str, list[GroupError]] = field(default_factory=dict)
    #: a problem with no VM to name (no group at all)
    problems: list[str] = field(default_factory=list)
    #: flex-start only: its groups' resize requests that wait or failed
    requests: list[ResizeRequest] = field(default_factory=list)

    def count(self, state: str) -> int:
        """Static VMs in ``state``."""
        return in_state(self.vms, state)

    @property
    def created(self) -> int:
        """Static VMs that exist and stay."""
        return created(self.vms)

    @property
    def on_demand(self) -> dict[str, int]:
        """The elastic VMs' counts, as ``counts`` gives them."""
        return counts(self.elastic_vms)

    @property
    def every_vm(self) -> list[VmStatus]:
        """The static VMs, then the elastic ones."""
        return [*self.vms, *self.elastic_vms]


@dataclass
class ClusterStatus:
    """The controller, the login nodes and the nodesets of one cluster."""

    cluster: str
    project: str
    zone: str
    controller: VmStatus
    logins: list[VmStatus]
    nodesets: list[NodesetStatus]

    @property
    def failed(self) -> bool:
        """Something needs the user: a boot failed, a VM is missing or cannot be created."""
        vms = [self.controller, *self.logins, *(vm for n in self.nodesets for vm in n.every_vm)]
        return (any(vm.state in (FAILED, STOPPED, MISSING) or vm.error for vm in vms)
                or any(n.problems or any(r.failed for r in n.requests)
                       for n in self.nodesets))

    @property
    def ready(self) -> bool:
        """Every wanted VM booted to the end: as many static VMs of each nodeset ready as it
        wants (elastic ones come and go with jobs)."""
        return (self.controller.state == READY and all(vm.state == READY for vm in self.logins)
                and all(n.count(READY) >= n.wanted for n in self.nodesets))

    def as_json(self) -> dict[str, Any]:
        nodesets = []
        for n in self.nodesets:
            nodesets.append({
                "name": n.name, "wanted": n.wanted, "elastic": n.elastic, **counts(n.vms),
                "on_demand": n.on_demand,
                "vms": [*(vm_json(vm, elastic=False) for vm in n.vms),
                        *(vm_json(vm, elastic=True) for vm in n.elastic_vms)],
                "groups": {g: [asdict(e) for e in errors] for g, errors in n.groups.items()},
                "problems": n.problems, "resize_requests": [asdict(r) for r in n.requests]})
        return {"cluster": self.cluster, "project": self.project, "zone": self.zone,
                "ready": self.ready, "failed": self.failed,
                "controller": asdict(self.controller),
                "login": [asdict(vm) for vm in self.logins], "nodesets": nodesets}


def vm_json(vm: VmStatus, elastic: bool) -> dict[str, Any]:
    """A nodeset's VM in the JSON: whether it is one of the elastic nodes besides."""
    return {**asdict(vm), "elastic": elastic}


def vm_state(name: str, status: str, attributes: dict[str, str], error: str = "",
             action: str = "") -> VmStatus:
    """A VM from its instance status (empty while its group still creates it), what its
    group does to it (``action``, a managed VM's currentAction) and its boot's guest
    attributes."""
    if action in LEAVING_ACTIONS:
        return VmStatus(name, DELETING, status)
    if not status:
        return VmStatus(name, CREATING, error=error)
    if status in STARTING_STATUSES:
        return VmStatus(name, BOOTING, status, stage=status.lower())
    if status != "RUNNING":
        if action in RETURNING_ACTIONS:
            return VmStatus(name, BOOTING, status, stage=action.lower())
        return VmStatus(name, STOPPED, status)
    return _booted(name, status, attributes)


#: A ``failed`` boot state without its step (the script always names one).
UNNAMED_STEP = "an unnamed step"


def _booted(name: str, status: str, attributes: dict[str, str]) -> VmStatus:
    """A RUNNING VM by its boot state: ``ready``, ``failed STEP``, ``booting STEP``, or
    nothing yet. A value the boot script never writes (any process on the VM can write
    one) is shown as it is and read as still booting: neither ready nor a failure."""
    value = attributes.get(node_metadata.BOOT_STATE, "").strip()
    word, _, step = value.partition(" ")
    step = step.strip()
    if word == "ready":
        return VmStatus(name, READY, status)
    if word == "failed":
        lines = tuple(attributes.get(node_metadata.BOOT_LOG, "").splitlines())
        return VmStatus(name, FAILED, status, stage=step or UNNAMED_STEP, lines=lines)
    if word in ("booting", ""):
        # Running, its boot script not yet at its first step (or it published none yet).
        return VmStatus(name, BOOTING, status, stage=step or "starting")
    return VmStatus(name, BOOTING, status, stage=f"unknown boot state {value[:80]!r}")


def group_errors(items: list[dict[str, Any]]) -> list[GroupError]:
    """listErrors' items as kinds of error, most recent first, the first few."""
    counts: Counter[tuple[str, str]] = Counter()
    last: dict[tuple[str, str], str] = {}
    for item in items:
        error = object_of(item.get("error"))
        kind = (str(error.get("code", "")), " ".join(str(error.get("message", "")).split()))
        counts[kind] += 1
        last[kind] = max(last.get(kind, ""), str(item.get("timestamp", "")))
    kinds = sorted(counts, key=lambda k: last[k], reverse=True)[:GROUP_ERRORS_SHOWN]
    return [GroupError(code, message, counts[(code, message)], last[(code, message)])
            for code, message in kinds]


def last_attempt_error(item: dict[str, Any]) -> str:
    """``CODE: message`` of a managed VM's last failed try to create it, "" for none."""
    return _first_error(object_of(object_of(item.get("lastAttempt")).get("errors")))


def resize_request(group: str, item: dict[str, Any]) -> ResizeRequest:
    """A resize request as the API lists it: its VMs named (``instances``) or counted
    (``resizeBy``), the first of its errors."""
    status = object_of(item.get("status"))
    error = (object_of(status.get("error"))
             or object_of(object_of(status.get("lastAttempt")).get("error")))
    instances = item.get("instances")
    count = (len(instances) if isinstance(instances, list) else 0) or int(
        number_of(item.get("resizeBy")) or 0)
    return ResizeRequest(str(item.get("name", "")), group, str(item.get("state", "")), count,
                         str(item.get("creationTimestamp", "")), _first_error(error))


def _first_error(error: dict[str, Any]) -> str:
    """``CODE: message`` of the first of an error's ``errors``, "" for none."""
    errors = error.get("errors")
    first = object_of(errors[0]) if isinstance(errors, list) and errors else {}
    return f"{first.get('code', '')}: {first.get('message', '')}" if first else ""


def read_cluster(api: ComputeApi, blueprint: Blueprint) -> ClusterStatus:
    """Every VM of the blueprint's cluster as the Compute API sees it now."""
    zone, cluster = blueprint.zone, blueprint.name
    groups = api.groups(zone)
    controller = _standalone(api, zone, node_metadata.controller_hostname(cluster))
    logins = [_standalone(api, zone, node_metadata.login_hostname(cluster, i))
              for i in range(blueprint.slurm.login.count)]
    nodesets = [_nodeset(api, zone, cluster, nodeset, groups)
                for nodeset in blueprint.slurm.nodesets]
    return ClusterStatus(cluster, api.project, zone, controller, logins, nodesets)


def _standalone(api: ComputeApi, zone: str, name: str) -> VmStatus:
    instance = api.instance(zone, name)
    if instance is None:
        return VmStatus(name, MISSING)
    status = str(instance.get("status", ""))
    attributes = (api.guest_attributes(zone, name, node_metadata.BOOT_NAMESPACE)
                  if status == "RUNNING" else {})
    return vm_state(name, status, attributes)


def _nodeset(api: ComputeApi, zone: str, cluster: str, nodeset: Nodeset,
             groups: list[dict[str, Any]]) -> NodesetStatus:
    """The nodeset's static groups' VMs and its elastic groups' apart (a group's base
    instance name says which: rule names.derived-collision keeps each one a nodeset's)."""
    found = NodesetStatus(nodeset.name, nodeset.count, nodeset.elastic)
    kinds = [(naming.base_instance_name(cluster, nodeset.name), found.vms)]
    if nodeset.elastic:
        kinds.append((naming.elastic_base_instance_name(cluster, nodeset.name),
                      found.elastic_vms))
    for base, vms in kinds:
        names = sorted(str(g.get("name")) for g in groups if g.get("baseInstanceName") == base)
        if not names and vms is found.vms:
            found.problems.append(f"no instance group of {base}-* VMs in {zone}: has "
                                  "`pulumi up` created the cluster?")
        for group in names:
            vms.extend(_group_vms(api, zone, group))
            if nodeset.provisioning == "flex-start":
                found.requests += [r for r in (resize_request(group, item) for item in
                                               api.resize_requests(zone, group))
                                   if r.waiting or r.failed]
            errors = group_errors(api.group_errors(zone, group))
            if errors:
                found.groups[group] = errors
    return found


def _group_vms(api: ComputeApi, zone: str, group: str) -> list[VmStatus]:
    """Every VM of the group, with its boot's stage where it runs."""
    vms = []
    for item in api.managed_instances(zone, group):
        name = str(item.get("name") or str(item.get("instance", "")).rsplit("/", 1)[-1])
        status = str(item.get("instanceStatus", ""))
        attributes = (api.guest_attributes(zone, name, node_metadata.BOOT_NAMESPACE)
                      if status == "RUNNING" else {})
        vms.append(vm_state(name, status, attributes,
                            last_attempt_error(item) if not status else "",
                            str(item.get("currentAction") or "")))
    return vms
