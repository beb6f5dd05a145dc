"""Managed-mode rules: what the Cluster Director API can express.

Besides the rules, :func:`as_managed_mode_sees_it` keeps the other rules' findings true
in managed mode: none about a key the API does not use, and no hint that has the user
set a key managed mode refuses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from pydantic import BaseModel

from clusterprint.blueprint.findings import Finding, KeyPath, error, hint_text
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.facts import catalog, machines

#: The hint of a finding whose every way out sets a key managed mode refuses.
NO_MANAGED_FIX = "orchestrator: managed cannot change this; use orchestrator: self-managed"


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
    """The managed API runs its GPU families and N2 on compute nodes, N2 standard on login."""
    if not _managed(bp):
        return
    supported = machines.managed_machine_types()
    gpus = [m for m in supported if machines.gpu_family(m)]
    for index, ns in enumerate(bp.slurm.nodesets):
        if ns.machine_type not in supported:
            yield error(("slurm", "nodesets", index, "machine_type"),
                        f"the managed API does not run {ns.machine_type}",
                        f"use {', '.join(gpus)} or an N2 type (n2-standard-8, "
                        f"n2-highmem-32, ...), or orchestrator: self-managed")
    login = bp.slurm.login.machine_type
    if login not in catalog.MANAGED_LOGIN_MACHINES:
        yield error(("slurm", "login", "machine_type"),
                    f"the managed API does not run login nodes on {login}",
                    f"use one of {', '.join(catalog.MANAGED_LOGIN_MACHINES)}")


@rule("managed.login-count")
def check_managed_login_count(bp: Blueprint) -> Iterator[Finding]:
    """A managed cluster is reached through its login nodes: it needs at least one."""
    minimum = catalog.MANAGED_MIN_LOGIN_NODES
    if _managed(bp) and bp.slurm.login.count < minimum:
        yield error(("slurm", "login", "count"),
                    f"the managed API needs at least {minimum} login node",
                    f"set count: {minimum} or more")


@rule("managed.region")
def check_managed_region(bp: Blueprint) -> Iterator[Finding]:
    """The managed API runs in its own list of regions."""
    if _managed(bp) and bp.region not in catalog.MANAGED_REGIONS:
        yield error(("region",), f"the managed API does not run in {bp.region}",
                    f"use one of {', '.join(catalog.MANAGED_REGIONS)}, "
                    f"or orchestrator: self-managed")


@rule("managed.lustre-capacity")
def check_managed_lustre_capacity(bp: Blueprint) -> Iterator[Finding]:
    """The managed API creates Lustre instances in a narrower range than Lustre's tiers."""
    band = catalog.MANAGED_LUSTRE_CAPACITY_GIB
    if not _managed(bp):
        return
    for index, lustre in enumerate(bp.storage.lustre):
        if not band.allows(lustre.capacity_gib):
            yield error(("storage", "lustre", index, "capacity_gib"),
                        f"the managed API creates Lustre of {band.minimum} to {band.maximum} "
                        f"GiB, not {lustre.capacity_gib}",
                        f"use {band.minimum} to {band.maximum} GiB, on the tier's steps")


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


def _covers(key: str, dotted: str) -> bool:
    """Whether ``dotted`` (``[]`` for list indexes) is the key ``key`` or lies under it."""
    return dotted == key or dotted.startswith((f"{key}.", f"{key}[]"))


def _unsupported(dotted: str) -> bool:
    return any(_covers(key, dotted) for key in catalog.MANAGED_UNSUPPORTED_KEYS)


def _dotted(path: KeyPath) -> str:
    """``("slurm", "nodesets", 0, "image")`` as ``slurm.nodesets[].image``."""
    return "".join("[]" if isinstance(p, int) else (f".{p}" if i else p)
                   for i, p in enumerate(path))


def as_managed_mode_sees_it(bp: Blueprint, findings: list[Finding]) -> list[Finding]:
    """The findings, true for a managed blueprint.

    A finding of another rule at a key the managed API does not use is dropped: the key
    changes nothing there, and where the file sets it managed.unsupported-key says to
    remove it. A way out that sets such a key is dropped from the hint (the rest still
    reads as one); a finding left with none says managed mode cannot change it.
    """
    if not _managed(bp):
        return findings
    kept = []
    for finding in findings:
        if finding.rule.startswith("managed."):
            kept.append(finding)
            continue
        if _unsupported(_dotted(finding.path)):
            continue
        fixes = tuple(f for f in finding.fixes if not (f.sets and _unsupported(f.sets)))
        if fixes != finding.fixes:
            finding = replace(finding, fixes=fixes, hint=hint_text(fixes) or NO_MANAGED_FIX)
        kept.append(finding)
    return kept
