"""Slurm rules: nodeset sizes, provisioning combinations and machine types."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from clusterprint.blueprint.findings import Finding, KeyPath, error, format_path, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.blueprint.slurm_time import (
    MAX_MINUTES,
    format_minutes,
    slurm_minutes,
    slurm_time_seconds,
)
from clusterprint.facts import machines


@rule("slurm.reservation")
def check_reservation(bp: Blueprint) -> Iterator[Finding]:
    """A reservation is named with, and only with, provisioning: reservation."""
    for index, ns in enumerate(bp.slurm.nodesets):
        path = ("slurm", "nodesets", index)
        if ns.provisioning == "reservation" and not ns.reservation:
            yield error((*path, "provisioning"), "provisioning reservation needs a reservation",
                        "add reservation: projects/P/reservations/NAME")
        if ns.reservation and ns.provisioning != "reservation":
            yield error((*path, "reservation"),
                        f"a reservation is only used with provisioning reservation, not "
                        f"{ns.provisioning}", "set provisioning: reservation, or remove it")


@rule("slurm.reservation-placement")
def check_reservation_placement(bp: Blueprint) -> Iterator[Finding]:
    """Reserved VMs are placed by their reservation: they take no placement policy of ours.

    Compute Engine refuses an external placement policy on VMs that consume an ordinary
    reservation (slurm-gcp clears it: "vanilla reservations don't support external
    policies"), and the Cluster Toolkit's A3 Ultra and A4 blueprints turn placement off.
    """
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.provisioning == "reservation" and ns.placement == "compact":
            yield error(("slurm", "nodesets", index, "placement"),
                        "a reservation places its own VMs; a compact placement policy cannot "
                        "be added to them",
                        "remove placement; for close nodes reserve with a compact placement "
                        "policy, or name a reservation block or sub-block")


@rule("slurm.reservation-bound")
def check_reservation_bound(bp: Blueprint) -> Iterator[Finding]:
    """RESERVATION_BOUND VMs consume a dense or calendar-mode reservation, on A3/A4 types."""
    for index, ns in enumerate(bp.slurm.nodesets):
        if not ns.reservation_bound:
            continue
        path = ("slurm", "nodesets", index)
        if ns.provisioning != "reservation":
            yield error((*path, "reservation_bound"),
                        f"reservation_bound applies to a reservation, not to {ns.provisioning}",
                        "set provisioning: reservation and a reservation, or remove it")
        elif ns.machine_type not in machines.RESERVATION_BOUND_MACHINES:
            yield warning((*path, "machine_type"),
                          f"the reservation-bound model is documented only for "
                          f"{', '.join(sorted(machines.RESERVATION_BOUND_MACHINES))}",
                          "check that your reservation is dense or calendar-mode, or remove "
                          "reservation_bound")


@rule("slurm.max-count")
def check_max_count(bp: Blueprint) -> Iterator[Finding]:
    """max_count bounds the nodeset, so it cannot be below the static count."""
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.max_count is not None and ns.max_count < ns.count:
            yield error(("slurm", "nodesets", index, "max_count"),
                        f"{ns.max_count} is below count {ns.count}",
                        f"set max_count >= {ns.count}")
        if ns.upper_bound == 0:
            yield error(("slurm", "nodesets", index, "count"),
                        "a nodeset with count 0 needs max_count", "set max_count >= 1")


def close_machine_type(machine_type: str) -> str | None:
    """The known machine type nearest a misspelt one: a GPU type, or a CPU series and shape
    with the size the user wrote."""
    series, _, rest = machine_type.partition("-")
    size = rest.partition("-")[2]
    digits = "".join(c for c in size.partition("-")[0] if c.isdigit())
    cpu = [f"{s}-{shape}" + (f"-{n}" if n else "")
           for s, shapes in machines.CPU_MACHINE_SERIES.items() for shape in shapes
           for n in {size, digits}]
    candidates = [t for t in (*machines.GPU_MACHINES, *cpu) if machines.machine_known(t)]
    close = difflib.get_close_matches(machine_type, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


@dataclass(frozen=True)
class MachineTypeKey:
    """One ``machine_type`` of the blueprint: where it is, what it says, and its escape."""

    path: KeyPath
    machine_type: str
    #: ``machine_type_unlisted`` beside it: the type is newer than the catalog.
    unlisted: bool

    @property
    def escape(self) -> str:
        """The dotted key that says the type is newer than the catalog."""
        return f"{format_path(self.path[:-1])}.machine_type_unlisted"


def machine_types(bp: Blueprint) -> list[MachineTypeKey]:
    """Every machine type of the blueprint at its key path: controller, login, nodesets."""
    slurm = bp.slurm
    return [MachineTypeKey(("slurm", "controller", "machine_type"),
                           slurm.controller.machine_type, slurm.controller.machine_type_unlisted),
            MachineTypeKey(("slurm", "login", "machine_type"), slurm.login.machine_type,
                           slurm.login.machine_type_unlisted),
            *(MachineTypeKey(("slurm", "nodesets", i, "machine_type"), ns.machine_type,
                             ns.machine_type_unlisted)
              for i, ns in enumerate(slurm.nodesets))]


#: What clusterprint makes of a machine type it does not know: the catalog's row is where
#: GPUs, GPU NICs, the boot disk type, the image and the price come from.
UNLISTED_AS = ("its nodes are then built as CPU nodes: no GPU GRES, no GPU networks, no GPU "
               "drivers, and no price in the cost estimate")


@rule("slurm.machine-type")
def check_machine_known(bp: Blueprint) -> Iterator[Finding]:
    """A machine type outside the catalog is a typo until the blueprint says it is newer.

    A typo (``a3-ultragpu-8``) only fails at `pulumi up`, after the network and storage
    exist, so it is an error with the closest known type. A type newer than the catalog
    is let through with ``machine_type_unlisted: true``, as a warning: such a node gets no
    GPU GRES, no GPU networks and a CPU image, so an unlisted GPU type boots as a CPU node.
    """
    series = sorted(set(machines.CPU_MACHINE_SERIES)
                    | {t.split("-")[0] for t in machines.GPU_MACHINES})
    for key in machine_types(bp):
        if machines.machine_known(key.machine_type):
            if key.unlisted:
                yield warning(key.path, f"{key.machine_type} is in clusterprint's catalog",
                              f"remove {key.escape}, so validate checks it")
            continue
        if key.unlisted:
            yield warning(key.path, f"{key.machine_type} is not in clusterprint's catalog, so "
                                    f"its GPUs, NICs and price are unknown; {UNLISTED_AS}",
                          "check it exists in the zone: gcloud compute machine-types list "
                          f"--filter=name={key.machine_type} --zones={bp.zone}")
            continue
        close = close_machine_type(key.machine_type)
        yield error(key.path, f"{key.machine_type} is not a machine type clusterprint knows",
                    (f"did you mean {close}? " if close else
                     f"known series: {', '.join(series)}; ")
                    + f"if it is newer than the catalog, set {key.escape}: true; {UNLISTED_AS}")


@rule("slurm.boot-disk")
def check_boot_disk_type(bp: Blueprint) -> Iterator[Finding]:
    """A3 Ultra and A4 boot only from Hyperdisk."""
    for index, ns in enumerate(bp.slurm.nodesets):
        family = machines.gpu_family(ns.machine_type)
        needed = family.boot_disk_type if family else None
        if needed == "hyperdisk-balanced" and ns.boot_disk.type not in (None, needed):
            yield error(("slurm", "nodesets", index, "boot_disk", "type"),
                        f"{ns.machine_type} cannot boot from {ns.boot_disk.type}",
                        f"use {needed}")


@rule("slurm.placement")
def check_compact_placement(bp: Blueprint) -> Iterator[Finding]:
    """Compact placement is for several nodes; on a single node it only limits capacity."""
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.placement == "compact" and ns.upper_bound < 2:
            yield warning(("slurm", "nodesets", index, "placement"),
                          "compact placement on a nodeset of at most one node does nothing",
                          "set placement: none")


def time_limit_problem(text: str) -> tuple[str, str] | None:
    """Why slurmctld would refuse, wrap or zero a time limit, and the range it takes; or None."""
    seconds = slurm_time_seconds(text)
    if seconds is None:
        return None
    minutes = slurm_minutes(seconds)
    accepted = (f"use 1 minute up to {MAX_MINUTES} minutes = {format_minutes(MAX_MINUTES)}, "
                f"or UNLIMITED")
    if minutes == 0:
        return f"{text} is a limit of 0 minutes: Slurm keeps it as 0, not as no limit", accepted
    if minutes > MAX_MINUTES:
        return (f"{text} is {format_minutes(minutes)}, longer than Slurm's 32-bit time "
                f"arithmetic holds: slurmctld refuses it or wraps it to another limit"), accepted
    return None


def limit_minutes(text: str | None) -> float:
    """A time limit in the minutes Slurm keeps; no limit (or none written) is infinite."""
    seconds = slurm_time_seconds(text) if text else None
    return float("inf") if seconds is None else slurm_minutes(seconds)


@rule("slurm.time-limit")
def check_time_limits(bp: Blueprint) -> Iterator[Finding]:
    """A partition's max_time and default_time are limits Slurm 22.05 and 23.11 keep (1 minute
    up to 2**31 s), and default_time is within max_time: slurmctld drops a longer DefaultTime
    without a word (read_config.c "DefaultTime exceeds MaxTime"), leaving max_time."""
    for index, partition in enumerate(bp.slurm.partitions):
        path = ("slurm", "partitions", index)
        for key in ("max_time", "default_time"):
            text = getattr(partition, key)
            if text and (problem := time_limit_problem(text)):
                yield error((*path, key), *problem)
        default = partition.default_time
        if default and limit_minutes(partition.max_time) < limit_minutes(default):
            yield error((*path, "default_time"),
                        f"default_time {default} is longer than max_time "
                        f"{partition.max_time}: slurmctld ignores it",
                        f"set default_time to at most {partition.max_time}")


@rule("slurm.accounting")
def check_accounting(bp: Blueprint) -> Iterator[Finding]:
    """A Cloud SQL instance is named only for accounting that is on, and in the cluster's region.

    With ``enabled: false`` nothing would use the instance, which reads as a database that
    records jobs while none does. slurmctld talks to slurmdbd and slurmdbd to the database
    on every job start and end: an instance in another region adds that round trip to each.
    """
    accounting = bp.slurm.accounting
    sql = accounting.cloud_sql
    if sql is None:
        return
    path = ("slurm", "accounting", "cloud_sql")
    if not accounting.enabled:
        yield error(path, "cloud_sql names a database for accounting that is off",
                    "set slurm.accounting.enabled: true, or remove cloud_sql")
    if sql.region is not None and sql.region != bp.region:
        yield warning((*path, "instance"),
                      f"the Cloud SQL instance is in {sql.region}, the cluster in {bp.region}: "
                      f"every job start and end crosses regions",
                      f"use an instance in {bp.region}")


@rule("slurm.image")
def check_image(bp: Blueprint) -> Iterator[Finding]:
    """A nodeset's image is an exact name or a family: one of them, so what it boots is clear."""
    for index, ns in enumerate(bp.slurm.nodesets):
        image = ns.image
        if image is not None and (image.name is None) == (image.family is None):
            given = "both name and family" if image.name else "neither name nor family"
            yield error(("slurm", "nodesets", index, "image"),
                        f"an image is an exact name or a family, and this one has {given}",
                        "give name: IMAGE (pinned), or family: FAMILY (its newest image at "
                        "each VM's creation)")
