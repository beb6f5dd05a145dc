"""Storage rules: Filestore and Lustre sizes per tier, /home, and mount paths."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from clusterprint import catalog
from clusterprint.findings import Finding, KeyPath, error, format_path
from clusterprint.model import Blueprint
from clusterprint.rules.names import unknown_reference
from clusterprint.rules.registry import rule

#: Paths a shared file system must never cover: the node would stop booting.
SYSTEM_PATHS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc",
                "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var")


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
    if path in SYSTEM_PATHS or any(path.startswith(p + "/") for p in SYSTEM_PATHS[1:]):
        return f"{path} would cover a system directory", "mount under a path of its own"
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
