"""Writing rendered files into a folder all at once, or not at all.

The files are written into a fresh folder next to the target and renamed into place,
so an error (a full disk, an interrupt) never leaves a half-written folder behind.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path


class OutputExists(Exception):
    """The target folder holds files and the caller did not ask to replace them."""


def write_tree(files: dict[str, str], out: Path, replace: bool = False) -> None:
    """Write ``files`` ({relative path: text}) as the folder ``out``.

    An existing non-empty ``out`` is replaced only with ``replace``; scripts are
    made executable.
    """
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise OutputExists(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not replace:
        raise OutputExists(f"{out} is not empty (use --force to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o755 if relative.endswith(".sh") else 0o644)
        staging.chmod(0o755)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, out: Path) -> None:
    """Put ``staging`` where ``out`` is, moving any old folder aside until that worked."""
    if not out.exists():
        staging.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
    old.rmdir()
    out.rename(old)
    try:
        staging.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old)
