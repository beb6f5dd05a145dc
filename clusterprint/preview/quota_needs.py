"""The regional Compute Engine quota a blueprint's plan takes: vCPUs, GPUs and disk GB.

Counted from what the plan really creates (the controller's and login nodes' VMs and the
state disk, with their machine types and disk sizes from the planned inputs; a managed
cluster's login VMs, which the Cluster Director API creates, from the blueprint) and from each
nodeset (``count`` VMs at once, up to ``max_count`` as elastic nodes join). A reservation
nodeset takes no vCPU or GPU quota of its own: its reservation already holds it (the Cluster
Toolkit's quota validator skips them likewise, pkg/validators/quota.go at 1047080,
isReservationUsed); its boot disks still count. Spot and flex-start VMs take the preemptible
quota where the region grants one (facts/machines.py PREEMPTIBLE_CPU_QUOTA says so), so a need
names both. vCPUs and GPUs also count against the project's quotas on all of them in all
regions (machines.PROJECT_CPU_QUOTA, PROJECT_GPU_QUOTA), metrics of the project, not of its
region, which spot VMs take too. Filestore and
Managed Lustre capacity are quotas of their own APIs, not Compute's regional ones, and are not
counted here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterprint.facts import catalog, machines

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint
    from clusterprint.preview.plan import Plan

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"


@dataclass(frozen=True)
class Vms:
    """VMs of one machine type that take quota alike."""

    machine_type: str
    count: int
    max_count: int
    preemptible: bool
    reserved: bool
    disks: tuple[tuple[str, int], ...]
    #: Who they are, for a problem's line: ``nodeset gpu``, ``the controller``.
    who: str


@dataclass(frozen=True)
class Need:
    """What one metric must have free: at once (``count``) and at most (``max_count``)."""

    metric: str
    #: The preemptible metric tried first (spot and flex-start); None for regular VMs.
    preemptible: str | None
    count: int
    max_count: int
    who: tuple[str, ...]


def planned_vms(blueprint: Blueprint, plan: Plan) -> list[Vms]:
    """Every VM the cluster runs: the plan's single VMs, then each nodeset's."""
    found = [Vms(r.inputs["machineType"], 1, 1, False, False,
                 (_boot_disk(r.inputs),), f"VM {r.name}")
             for r in plan.resources if r.type == INSTANCE and r.inputs.get("machineType")]
    found += _managed_logins(blueprint)
    found += [Vms(ns.machine_type, ns.count, ns.upper_bound,
                  ns.provisioning in ("spot", "flex-start"), ns.provisioning == "reservation",
                  ((ns.boot_disk_type, ns.boot_disk.size_gb),), f"nodeset {ns.name}")
              for ns in blueprint.slurm.nodesets]
    return found


def _managed_logins(blueprint: Blueprint) -> list[Vms]:
    """A managed cluster's login VMs: the Cluster Director API creates them in the project
    from the blueprint's machine type and count, so the plan has no Instance of them, yet
    they take its quota. Their boot disks are the API's choice, not counted."""
    login = blueprint.slurm.login
    if blueprint.orchestrator != "managed" or not login.count:
        return []
    return [Vms(login.machine_type, login.count, login.count, False, False, (),
                "the login nodes")]


def planned_disks(plan: Plan) -> list[tuple[str, int, str]]:
    """The plan's own disks (the controller's state disk): type, GB, name."""
    return [(r.inputs.get("type") or "pd-standard", int(r.inputs.get("size") or 0), r.name)
            for r in plan.resources if r.type == DISK]


def quota_needs(vms: list[Vms], disks: list[tuple[str, int, str]],
                guest_cpus: Callable[[str], int | None]) -> list[Need]:
    """The needs, one per metric, sorted; ``guest_cpus`` is a machine type's vCPUs (None
    where unknown: its vCPU quota is not counted)."""
    totals: dict[tuple[str, str | None], list] = {}

    def add(metric: str | None, preemptible: bool, count: int, max_count: int,
            who: str) -> None:
        if metric is None or max_count <= 0:
            return
        key = (metric, machines.preemptible_quota(metric) if preemptible else None)
        total = totals.setdefault(key, [0, 0, []])
        total[0] += count
        total[1] += max_count
        if who not in total[2]:
            total[2].append(who)

    def take(metric: str | None, each: int | None, group: Vms, all_regions: str) -> None:
        """``each`` of the group's VMs' vCPUs or GPUs, of the regional ``metric`` and of the
        project's ``all_regions`` one; nothing where either is unknown."""
        if metric is None or each is None:
            return
        add(metric, group.preemptible, each * group.count, each * group.max_count, group.who)
        add(all_regions, False, each * group.count, each * group.max_count, group.who)

    for group in vms:
        if not group.reserved:
            cpu, gpu = machines.quota_metrics(group.machine_type)
            family = machines.gpu_family(group.machine_type)
            take(cpu, guest_cpus(group.machine_type), group, machines.PROJECT_CPU_QUOTA)
            take(gpu, family.gpus if family else None, group, machines.PROJECT_GPU_QUOTA)
        for disk_type, size_gb in group.disks:
            add(catalog.DISK_QUOTA_METRICS.get(disk_type), False, size_gb * group.count,
                size_gb * group.max_count, group.who)
    for disk_type, size_gb, name in disks:
        add(catalog.DISK_QUOTA_METRICS.get(disk_type), False, size_gb, size_gb, f"disk {name}")
    return [Need(metric, preemptible, count, max_count, tuple(who))
            for (metric, preemptible), (count, max_count, who)
            in sorted(totals.items(), key=lambda item: (item[0][0], item[0][1] or ""))]


def _boot_disk(inputs: dict) -> tuple[str, int]:
    params = (inputs.get("bootDisk") or {}).get("initializeParams") or {}
    return params.get("type") or "pd-standard", int(params.get("size") or 0)
