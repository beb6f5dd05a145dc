"""Managed-mode rules: what the Cluster Director API can express."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import BaseModel

from clusterprint import catalog
from clusterprint.findings import Finding, KeyPath, error
from clusterprint.model import Blueprint
from clusterprint.rules.registry import rule


def keys_set(root: BaseModel, dotted: str) -> list[KeyPath]:
    """The paths matching ``dotted`` (``[]`` = every item) that the file itself sets."""
    found: list[tuple[KeyPath, object]] = [((), root)]
    for part in dotted.split("."):
        name, every = part.removesuffix("[]"), part.endswith("[]")
        step: list[tuple[KeyPath, object]] = []
        for path, node in found:
            if isinstance(node, BaseModel) and name in node.model_fields_set:
                value = getattr(node, name)
                if every:
                    step += [((*path, name, i), item) for i, item in enumerate(value)]
                else:
                    step.append(((*path, name), value))
        found = step
    return [path for path, _ in found]


def _managed(bp: Blueprint) -> bool:
    return bp.orchestrator == "managed"


@rule("managed.cluster-id")
def check_managed_name(bp: Blueprint) -> Iterator[Finding]:
    """The managed API's cluster_id is at most 10 lowercase letters and digits."""
    if _managed(bp) and not re.match(catalog.MANAGED_CLUSTER_ID_PATTERN, bp.name):
        fixed = re.sub(r"[^a-z0-9]", "", bp.name)[:10]
        yield error(("name",), f"{bp.name!r} does not fit the managed API's cluster_id",
                    f"at most 10 lowercase letters and digits, e.g. {fixed}")


@rule("managed.machine-type")
def check_managed_machine_types(bp: Blueprint) -> Iterator[Finding]:
    """The managed API runs only the GPU machine types it supports."""
    if not _managed(bp):
        return
    supported = [m for m, f in catalog.GPU_MACHINES.items() if f.managed]
    for index, ns in enumerate(bp.slurm.nodesets):
        family = catalog.gpu_family(ns.machine_type)
        if family is not None and not family.managed:
            yield error(("slurm", "nodesets", index, "machine_type"),
                        f"{ns.machine_type} is not supported by the managed API",
                        f"use {', '.join(supported)}, or orchestrator: self-managed")


@rule("managed.filestore-tier")
def check_managed_filestore_tier(bp: Blueprint) -> Iterator[Finding]:
    """The managed API creates only ZONAL and REGIONAL Filestore instances."""
    home = bp.storage.home.filestore
    if _managed(bp) and home is not None and bp.storage.home.uses_filestore and (
            home.tier not in catalog.MANAGED_FILESTORE_TIERS):
        yield error(("storage", "home", "filestore", "tier"),
                    f"the managed API cannot create Filestore tier {home.tier}",
                    f"use {' or '.join(catalog.MANAGED_FILESTORE_TIERS)}")


@rule("managed.reservation-block")
def check_managed_reservation(bp: Blueprint) -> Iterator[Finding]:
    """The managed API takes a whole reservation, not a block or sub-block of one."""
    if not _managed(bp):
        return
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.reservation and "/reservationBlocks/" in ns.reservation:
            whole = ns.reservation.split("/reservationBlocks/")[0]
            yield error(("slurm", "nodesets", index, "reservation"),
                        "the managed API takes a whole reservation, not a block",
                        f"use {whole}, or orchestrator: self-managed")


@rule("managed.unsupported-key")
def check_managed_keys(bp: Blueprint) -> Iterator[Finding]:
    """A key the managed API cannot express is refused when the file sets it."""
    if not _managed(bp):
        return
    for dotted in catalog.MANAGED_UNSUPPORTED_KEYS:
        for path in keys_set(bp, dotted):
            yield error(path, "the managed orchestrator cannot express this key",
                        "remove it, or use orchestrator: self-managed")
