"""Findings: what validation says about a blueprint, one problem each.

Rules collect findings instead of raising, so a user sees every problem in one run;
the caller decides what fails (errors do, warnings do not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    """``("storage", "lustre", 0, "capacity_gib")`` as ``storage.lustre[0].capacity_gib``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


@dataclass(frozen=True)
class Finding:
    """One problem at one key path, with the rule that found it and what would be right."""

    path: KeyPath
    rule: str
    message: str
    hint: str | None = None
    severity: Severity = "error"


def error(path: KeyPath, message: str, hint: str | None = None, *, rule: str = "") -> Finding:
    """A finding that makes the blueprint invalid (rules get their id from the registry)."""
    return Finding(path, rule, message, hint, "error")


def warning(path: KeyPath, message: str, hint: str | None = None, *, rule: str = "") -> Finding:
    """A finding worth reading that does not fail validation."""
    return Finding(path, rule, message, hint, "warning")


@dataclass(frozen=True)
class Located:
    """A finding placed in a file, ready to print."""

    file: str
    line: int | None
    column: int | None
    finding: Finding

    def line_text(self) -> str:
        """The contract's one-line form: ``FILE:LINE:COL: error: KEY.PATH: message (hint)``."""
        f = self.finding
        where = self.file if self.line is None else f"{self.file}:{self.line}:{self.column}"
        hint = f" ({f.hint})" if f.hint else ""
        key = f"{format_path(f.path)}: " if f.path else ""
        return f"{where}: {f.severity}: {key}{f.message}{hint}"

    def as_json(self) -> dict:
        """The same finding for ``--format json``."""
        f = self.finding
        return {"file": self.file, "line": self.line, "column": self.column,
                "path": format_path(f.path), "rule": f.rule, "severity": f.severity,
                "message": f.message, "hint": f.hint}
