"""The Slurm files a changed ``clusterprint-slurm-config`` value changes, as unified diffs.

That metadata value is every Slurm file of a node as one JSON object
(clusterprint/render/config_sync.py); compared as one string, a new ``max_time`` reads as
two copies cut off at their first characters. Decoded, each file that differs is shown by
name as ``diff -u`` shows it, which is what a reviewer of a Slurm change reads.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from clusterprint.preview.rollout import LIVE_INPUT

#: Lines of context around each change, as ``diff -u`` and ``git diff`` keep.
CONTEXT = 3
#: The side of a file that one plan does not have, as ``git diff`` names it.
NO_FILE = "/dev/null"


@dataclass(frozen=True)
class FileDiff:
    """One file of a bundle that differs: its name and its unified diff's lines."""

    name: str
    lines: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        """The file as ``diff --json`` prints it: the diff as one text, as ``diff -u`` writes."""
        return {"name": self.name, "diff": "".join(f"{line}\n" for line in self.lines)}


def slurm_file_diffs(path: str, old: Any, new: Any) -> tuple[FileDiff, ...]:
    """The changed files of the input at ``path`` if it is the Slurm files' metadata and
    each side is such a bundle (or absent); none otherwise, and the change shows as values.

    A saved plan can hold anything there: a side that is not a JSON object of texts is
    shown as a value, never guessed at.
    """
    if path != LIVE_INPUT:
        return ()
    before, after = _files(old), _files(new)
    if before is None or after is None:
        return ()
    return tuple(FileDiff(name, _unified(name, before.get(name), after.get(name)))
                 for name in sorted(before.keys() | after.keys())
                 if before.get(name) != after.get(name))


def _files(value: Any) -> dict[str, str] | None:
    """The files in one side's value; an absent side holds none."""
    if value is None:
        return {}
    try:
        files = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return files


def _unified(name: str, old: str | None, new: str | None) -> tuple[str, ...]:
    return tuple(difflib.unified_diff(
        (old or "").splitlines(), (new or "").splitlines(),
        fromfile=NO_FILE if old is None else f"a/{name}",
        tofile=NO_FILE if new is None else f"b/{name}", n=CONTEXT, lineterm=""))
