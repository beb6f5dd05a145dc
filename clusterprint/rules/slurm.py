"""Slurm rules: nodeset sizes, provisioning combinations and machine types."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from clusterprint import catalog
from clusterprint.findings import Finding, Fix, error, warning
from clusterprint.model import Blueprint
from clusterprint.rules.registry import rule


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


@rule("slurm.machine-type")
def check_gpu_machine_known(bp: Blueprint) -> Iterator[Finding]:
    """A GPU-looking machine type outside the catalog gets no GPUs, GRES or GPU networks."""
    known = list(catalog.GPU_MACHINES)
    for index, ns in enumerate(bp.slurm.nodesets):
        if "gpu" in ns.machine_type and catalog.gpu_family(ns.machine_type) is None:
            close = difflib.get_close_matches(ns.machine_type, known, n=1, cutoff=0.6)
            yield warning(("slurm", "nodesets", index, "machine_type"),
                          f"{ns.machine_type} is not in clusterprint's GPU catalog; its nodes get "
                          f"no GPU GRES and no GPU networks",
                          f"did you mean {close[0]}?" if close else
                          f"known GPU machine types: {', '.join(known)}")


@rule("slurm.boot-disk")
def check_boot_disk_type(bp: Blueprint) -> Iterator[Finding]:
    """A3 Ultra and A4 boot only from Hyperdisk."""
    for index, ns in enumerate(bp.slurm.nodesets):
        family = catalog.gpu_family(ns.machine_type)
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


@rule("slurm.gpu-detection")
def check_gpu_detection(bp: Blueprint) -> Iterator[Finding]:
    """Where nodesets differ in GPUs, only Slurm's gpu/nvml plugin finds a node's GPUs.

    The default image's Slurm (Ubuntu 24.04) has no such plugin: its GPU nodes would
    register without GPUs and be drained. A custom image may carry the plugin.
    """
    if bp.slurm.uniform_gpus:
        return
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.gpus and ns.image is None:
            yield warning(("slurm", "nodesets", index, "machine_type"),
                          "nodesets differ in GPUs, so gres.conf cannot name this nodeset's "
                          "GPU devices; the default image's Slurm has no gpu/nvml plugin to "
                          "find them, and its nodes would be drained",
                          (Fix("set image to one whose Slurm has gpu/nvml",
                               sets="slurm.nodesets[].image"),
                           Fix("put nodes of another GPU count in a cluster of their own")))
