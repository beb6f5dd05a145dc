"""Writing rendered files into a folder all at once, or not at all, and never over a user's files.

The files are written into a fresh folder next to the target and renamed into place,
so an error (a full disk, an interrupt) never leaves a half-written folder behind.
Every rendered folder holds a marker file listing what the render wrote: replacing a
folder (``--force``) is allowed only where the marker shows that nothing else is in it,
so a mistyped ``--out`` can never delete a user's work.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

#: The file every rendered folder holds: its header, then each file the render wrote.
MARKER = ".clusterprint-render"
MARKER_HEADER = ("# Written by clusterprint render: `clusterprint render --force` may replace\n"
                 "# this folder as long as it holds only the files listed here.\n")


class OutputExists(Exception):
    """The target folder may not be written: it holds files, or is a place never to replace."""


class RenderLeftOver(Exception):
    """``--force`` changed something and could not finish: the message says what is where.

    The new render is in place but the folder it replaced could not be removed, or
    neither the new folder nor the old one could be put at the target. What is left
    of the old folder is renamed to a visible ``OUT.previous`` (never left hidden).
    """


def write_tree(files: dict[str, str], out: Path, replace: bool = False,
               source: Path | None = None) -> None:
    """Write ``files`` ({relative path: text}) and the marker as the folder ``out``.

    An existing non-empty ``out`` is replaced only with ``replace`` and only when it
    is an earlier render's folder; ``source`` (the blueprint) must not be inside it.
    Scripts are made executable.
    """
    out = out.resolve()
    _refuse_protected(out, source)
    if out.exists() and not out.is_dir():
        raise OutputExists(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not replace:
            raise OutputExists(f"{out} is not empty (--force replaces only an earlier render)")
        _refuse_foreign_files(out)
    created = [parent for parent in reversed(out.parents) if not parent.exists()]
    staging = None
    try:
        for parent in created:
            parent.mkdir()
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        for relative, text in {**files, MARKER: _marker_text(files)}.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o755 if relative.endswith(".sh") else 0o644)
        staging.chmod(0o755)
    except BaseException:
        # Nothing was touched: the folders made for ``out`` go too, innermost first.
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for parent in reversed(created):
            _remove_if_empty(parent)
        raise
    _swap_in(staging, out)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # someone else put something there meanwhile
        folder.rmdir()


def _marker_text(files: dict[str, str]) -> str:
    return MARKER_HEADER + "".join(f"{relative}\n" for relative in sorted(files))


def _refuse_protected(out: Path, source: Path | None) -> None:
    """Folders never replaced, however empty or marked: where the user stands or lives."""
    cwd = Path.cwd().resolve()
    if out == Path(out.anchor):
        raise OutputExists(f"{out} is the root folder: render into a folder of its own")
    if cwd.is_relative_to(out):
        what = "the current folder" if cwd == out else f"an ancestor of the current folder {cwd}"
        raise OutputExists(f"{out} is {what}: render into a folder of its own")
    if out == Path.home().resolve():
        raise OutputExists(f"{out} is your home folder: render into a folder of its own")
    if source is not None and source.resolve().is_relative_to(out):
        raise OutputExists(f"{out} holds the blueprint {source}: render into a folder of its own")


def _refuse_foreign_files(out: Path) -> None:
    """``out`` must be an earlier render's folder holding nothing but what that render wrote."""
    marker = out / MARKER
    if not marker.is_file() or marker.is_symlink():
        raise OutputExists(f"{out} holds files and no {MARKER} marker, so clusterprint render "
                           "did not write it: --force replaces only an earlier render's folder")
    listed = {line for line in marker.read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#")} | {MARKER}
    # A folder is the render's only when it leads to a listed file: an empty folder of
    # the user's inside an earlier render is theirs too.
    folders = {str(parent) for name in listed for parent in Path(name).parents} - {"."}
    foreign = sorted(str(path.relative_to(out)) for path in _entries(out)
                     if str(path.relative_to(out)) not in listed | folders)
    if foreign:
        raise OutputExists(f"{out} holds files an earlier render did not write "
                           f"({', '.join(foreign)}): move them away, or render elsewhere")


def _entries(out: Path) -> list[Path]:
    """Every file, link and folder under ``out``, without following links."""
    found = []
    for folder, dirs, names in os.walk(out):
        found += [Path(folder) / name for name in names + dirs]
    return found


def _swap_in(staging: Path, out: Path) -> None:
    """Put ``staging`` where ``out`` is, moving any old folder aside until that worked.

    Until the new folder is in place any error puts everything back and nothing is
    touched. After that the old folder is removed; where that fails (a file it cannot
    delete) RenderLeftOver says so, and what is left is renamed out of hiding.
    """
    try:
        if not out.exists():
            staging.rename(out)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        old.rmdir()
        out.rename(old)
        try:
            staging.rename(out)
        except OSError as exc:
            _put_back(old, out, exc)
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        shutil.rmtree(old)
    except OSError as exc:
        raise RenderLeftOver(
            f"wrote {out}, but could not remove the render it replaced ({_reason(exc)}): what "
            f"is left of it is in {_out_of_hiding(old, out)}; remove it yourself") from None


def _put_back(old: Path, out: Path, error: OSError) -> None:
    """Move the old folder back to ``out`` after the new one could not take its place."""
    try:
        old.rename(out)
    except OSError as exc:
        raise RenderLeftOver(
            f"could not put the new render at {out} ({_reason(error)}) nor the earlier one "
            f"back ({_reason(exc)}): the earlier one is in {_out_of_hiding(old, out)}") from None


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _out_of_hiding(old: Path, out: Path) -> Path:
    """Rename the hidden old folder to ``OUT.previous`` (or ``.previous-2``...), if it can be."""
    for n in range(1, 100):
        kept = out.with_name(f"{out.name}.previous" + (f"-{n}" if n > 1 else ""))
        if kept.exists() or kept.is_symlink():
            continue
        try:
            old.rename(kept)
        except OSError:
            break
        return kept
    return old
