"""Findings: what validation says about a blueprint, one problem each.

Rules collect findings instead of raising, so a user sees every problem in one run;
the caller decides what fails (errors do, warnings do not).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

Severity = Literal["error", "warning"]
KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    """``("storage", "lustre", 0, "capacity_gib")`` as ``storage.lustre[0].capacity_gib``.

    A part that is neither a key nor an index (an item of a diff's id-keyed list) prints
    in brackets too: ``computeResources[a4].config``.
    """
    text = ""
    for part in path:
        text += (f".{part}" if text else part) if isinstance(part, str) else f"[{part}]"
    return text or "(root)"


@dataclass(frozen=True)
class Fix:
    """One way out of a finding, and the blueprint key it has the user set, if any.

    A hint built from fixes can lose the ones an orchestrator cannot take (managed mode
    has no ``network.gpu_networks``) and still read as a hint.
    """

    text: str
    #: The dotted key the fix sets, ``[]`` for every item (``slurm.nodesets[].image``).
    sets: str | None = None


#: A hint: plain text, or ways out joined as "A, or B".
Hint = str | tuple[Fix, ...] | None


def hint_text(fixes: tuple[Fix, ...]) -> str | None:
    """The fixes as one hint line."""
    return ", or ".join(f.text for f in fixes) or None


@dataclass(frozen=True)
class Finding:
    """One problem at one key path, with the rule that found it and what would be right."""

    path: KeyPath
    rule: str
    message: str
    hint: str | None = None
    severity: Severity = "error"
    #: The ways out ``hint`` was built from, when the rule named them one by one.
    fixes: tuple[Fix, ...] = ()


def _finding(path: KeyPath, message: str, hint: Hint, rule: str, severity: Severity) -> Finding:
    if isinstance(hint, tuple):
        return Finding(path, rule, message, hint_text(hint), severity, hint)
    return Finding(path, rule, message, hint, severity)


def error(path: KeyPath, message: str, hint: Hint = None, *, rule: str = "") -> Finding:
    """A finding that makes the blueprint invalid (rules get their id from the registry)."""
    return _finding(path, message, hint, rule, "error")


def warning(path: KeyPath, message: str, hint: Hint = None, *, rule: str = "") -> Finding:
    """A finding worth reading that does not fail validation."""
    return _finding(path, message, hint, rule, "warning")


def count_text(findings: Iterable[Finding]) -> str | None:
    """How many of each level, ``2 errors, 1 warning``; None when there are none at all.

    A level with none is left out (``1 error``), so the line says only what is there.
    """
    counts = Counter(f.severity for f in findings)
    parts = [f"{n} {level}{'' if n == 1 else 's'}" for level in get_args(Severity)
             if (n := counts[level])]
    return ", ".join(parts) or None


@dataclass(frozen=True)
class Located:
    """A finding placed in a file, ready to print."""

    file: str
    line: int | None
    column: int | None
    finding: Finding

    @property
    def place(self) -> str:
        """``FILE:LINE:COL``, or ``FILE`` for a finding about the whole file."""
        return self.file if self.line is None else f"{self.file}:{self.line}:{self.column}"

    def line_text(self) -> str:
        """The contract's one-line form: ``FILE:LINE:COL: error: KEY.PATH: message (hint)``."""
        f = self.finding
        hint = f" ({f.hint})" if f.hint else ""
        key = f"{format_path(f.path)}: " if f.path else ""
        return f"{self.place}: {f.severity}: {key}{f.message}{hint}"

    def as_json(self) -> dict:
        """The same finding for ``--format json``."""
        f = self.finding
        return {"file": self.file, "line": self.line, "column": self.column,
                "path": format_path(f.path), "rule": f.rule, "severity": f.severity,
                "message": f.message, "hint": f.hint}
