"""Storage rules: Filestore and Lustre sizes per tier, /home, and mount paths."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, KeyPath, error, format_path
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.names import unknown_reference
from clusterprint.blueprint.rules.registry import rule
from clusterprint.facts import catalog

#: What a node needs at these paths of Ubuntu 24.04 (the default image) to boot and run
#: its boot scripts: a mount may not be at, inside or above one (so never ``/`` or ``/mnt``).
#: Left free on purpose: /home (its own rule), /media, /srv (empty on the image), the rest of
#: /mnt (the usual place for extra mounts), /lost+found and the *.usr-is-merged markers.
SYSTEM_PATHS = {
    "/bin": "programs, through a link to /usr/bin",
    "/sbin": "programs, through a link to /usr/sbin",
    "/lib": "libraries, through a link to /usr/lib",
    "/lib64": "the loader, through a link to /usr/lib64",
    "/usr": "programs and libraries",
    "/boot": "the kernel",
    "/dev": "device files",
    "/etc": "configuration",
    "/proc": "the kernel's process view",
    "/sys": "the kernel's device view",
    "/run": "runtime state such as munge's socket",
    "/tmp": "temporary files",
    "/var": "Slurm's spool and state",
    "/root": "root's home",
    "/opt": "add-on software",
    "/snap": "snaps, gcloud among them on Ubuntu's images: the boot scripts call it",
    "/mnt/localssd": "its local SSD, as Cluster Toolkit's GPU nodes do",
}


def capacity_problem(capacity: int, bands: tuple[catalog.CapacityBand, ...],
                     what: str) -> tuple[str, str] | None:
    """Why ``capacity`` is not allowed by ``bands`` and what to try, or None if it is."""
    if any(b.allows(capacity) for b in bands):
        return None
    candidates = sorted({n for b in bands for n in b.nearest(capacity)})
    below = [n for n in candidates if n < capacity][-1:]
    above = [n for n in candidates if n > capacity][:1]
    hint = "try " + " or ".join(str(n) for n in below + above)
    if capacity < bands[0].minimum:
        return f"{capacity} is below {bands[0].minimum}, the minimum of {what}", hint
    if capacity > bands[-1].maximum:
        return f"{capacity} is above {bands[-1].maximum}, the maximum of {what}", hint
    band = next((b for b in bands if b.minimum <= capacity <= b.maximum), None)
    if band is None:
        return f"{capacity} falls between the allowed ranges of {what}", hint
    step_words = (f"not a multiple of {band.step}" if band.minimum % band.step == 0
                  else f"not {band.minimum} plus a multiple of {band.step}")
    return f"{capacity} is {step_words}, the step of {what}", hint


@rule("storage.filestore-capacity")
def check_filestore_capacity(bp: Blueprint) -> Iterator[Finding]:
    """Filestore capacity must fit its tier's range and step."""
    fs = bp.storage.home.filestore
    if fs is None:
        return
    problem = capacity_problem(fs.capacity_gib, catalog.FILESTORE_TIERS[fs.tier],
                               f"Filestore tier {fs.tier}")
    if problem:
        yield error(("storage", "home", "filestore", "capacity_gib"), *problem)


@rule("storage.lustre-capacity")
def check_lustre_capacity(bp: Blueprint) -> Iterator[Finding]:
    """Lustre capacity must follow its performance tier's min, step and max."""
    for index, lustre in enumerate(bp.storage.lustre):
        tier = catalog.LUSTRE_TIERS[lustre.performance_tier]
        problem = capacity_problem(lustre.capacity_gib, tier.bands(),
                                   f"performance tier {tier.throughput}")
        if problem:
            yield error(("storage", "lustre", index, "capacity_gib"), *problem)


@rule("storage.home")
def check_home(bp: Blueprint) -> Iterator[Finding]:
    """/home is exactly one of Filestore or a listed Lustre entry."""
    home = bp.storage.home
    if home.filestore is not None and home.lustre is not None:
        yield error(("storage", "home"), "set either filestore or lustre, not both",
                    "/home is one file system")
    elif home.filestore is None and home.lustre is None:
        yield error(("storage", "home"), "needs filestore or lustre",
                    "e.g. filestore: {tier: ZONAL, capacity_gib: 1024}")
    if home.lustre is not None and bp.lustre(home.lustre) is None:
        known = [x.name for x in bp.storage.lustre]
        yield unknown_reference(("storage", "home", "lustre"), home.lustre, known,
                                "lustre entry", "lustre entries")


def _mounts(bp: Blueprint) -> list[tuple[KeyPath, str]]:
    mounts: list[tuple[KeyPath, str]] = []
    for index, lustre in enumerate(bp.storage.lustre):
        if lustre.name != bp.storage.home.lustre:
            mounts.append((("storage", "lustre", index, "mount"), bp.mount_of(lustre)))
    mounts += [(("storage", "buckets", index, "mount"), bucket.mount_path)
               for index, bucket in enumerate(bp.storage.buckets)]
    return mounts


def mount_problem(path: str) -> tuple[str, str] | None:
    """Why a mount path cannot be used on a node, or None."""
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path", f"try /{path.lstrip('./')}"
    normal = posixpath.normpath(path)
    if normal != path or "//" in path:
        return f"{path!r} is not a normalized path", f"try {normal}"
    for system, holds in SYSTEM_PATHS.items():
        where = ("is" if path == system else f"is inside {system}," if _inside(path, system)
                 else f"would cover {system}," if _inside(system, path) else None)
        if where:
            return f"{path} {where} where the node keeps {holds}", "mount under a path of its own"
    return None


def _inside(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


@rule("storage.mounts")
def check_mounts(bp: Blueprint) -> Iterator[Finding]:
    """Mounts are absolute, unique, outside /home and never nested in one another."""
    mounts = _mounts(bp)
    home_lustre = bp.lustre(bp.storage.home.lustre or "")
    if home_lustre and home_lustre.mount not in (None, "/home"):
        index = bp.storage.lustre.index(home_lustre)
        yield error(("storage", "lustre", index, "mount"),
                    f"this entry is /home, so it mounts at /home, not {home_lustre.mount}",
                    "remove mount or set /home")
    for i, (path, mount) in enumerate(mounts):
        problem = mount_problem(mount)
        if problem:
            yield error(path, *problem)
            continue
        if _inside(mount, "/home"):
            yield error(path, f"{mount} is inside /home", "mount shared storage outside /home")
            continue
        for other_path, other in mounts[:i]:
            if mount == other:
                yield error(path, f"{mount} is already the mount of "
                                  f"{format_path(other_path[:-1])}", "use another path")
            elif _inside(mount, other) or _inside(other, mount):
                yield error(path, f"{mount} and {other} are nested", "use sibling paths")
