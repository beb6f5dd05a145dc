"""Blueprint texts for tests: a minimal valid blueprint that each case overrides.

A case names the keys it changes (``{"slurm.nodesets[0].count": 0}``) and wraps the value
a finding must point at in ``Here``: the text then carries ``# here`` on that line, so a
test asserts the reported line number against the text itself.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from clusterprint.blueprint.findings import Located, format_path
from clusterprint.blueprint.validate import Checked, check_text, printable

#: The contract's line: FILE:LINE:COL: error|warning: [KEY.PATH: ]message[ (hint)].
LINE_FORMAT = re.compile(r"^[^\s:][^:]*:\d+:\d+: (error|warning): \S.*$")
MARK = "# here"

MINIMAL = {
    "apiVersion": "clusterprint/v1",
    "kind": "TrainingCluster",
    "name": "demo",
    "region": "us-central1",
    "zone": "us-central1-a",
    "slurm": {
        "nodesets": [{"name": "cpu", "machine_type": "n2-standard-4", "count": 2}],
        "partitions": [{"name": "debug", "nodesets": ["cpu"]}],
    },
}


@dataclass(frozen=True)
class Here:
    """A value whose line a finding must report (rendered with ``# here``)."""

    value: Any


class _Drop:
    """``DROP``: an override that removes its key. Its repr is fixed, so that test ids that
    show it are the same in every run (mutmut reruns tests by id)."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()


def _steps(dotted: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", dotted)]


def apply_overrides(data: dict, overrides: dict[str, Any]) -> dict:
    """A copy of ``data`` with each dotted key set (``DROP`` removes it).

    Values are copied too: a later key inside one (``slurm.nodesets[1].image`` after
    ``slurm.nodesets[1]``) must not change a dict that other cases share.
    """
    data = copy.deepcopy(data)
    for dotted, value in overrides.items():
        value = value if value is DROP else copy.deepcopy(value)
        steps = _steps(dotted)
        last = steps[-1]
        node: Any = data
        for step, following in zip(steps[:-1], steps[1:], strict=True):
            if isinstance(node, list) and step == len(node):
                node.append({} if isinstance(following, str) else [])
            elif isinstance(node, dict) and step not in node:
                node[step] = {} if isinstance(following, str) else []
            node = node[step]
        if value is DROP:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(copy.deepcopy(value))
        else:
            node[last] = copy.deepcopy(value)  # a case must never change a shared constant
    return data


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, dict | list):
        return json.dumps(value)  # only empty ones reach here: {} or []
    return json.dumps(value) if isinstance(value, str) else str(value)


def _block(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    entries = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for key, item in entries:
        marked = isinstance(item, Here)
        item = item.value if marked else item
        lead = f"{pad}{key}:" if key is not None else f"{pad}-"
        if isinstance(item, dict | list) and item:
            inner = _block(item, indent + 2)
            if key is None:  # "- first: entry" on the dash's line
                lines.append(f"{lead} {inner[0].lstrip()}")
                lines += inner[1:]
            else:
                lines.append(lead)
                lines += inner
            head = len(lines) - len(inner) + (0 if key is None else -1)
        else:
            lines.append(f"{lead} {_scalar(item)}")
            head = len(lines) - 1
        if marked:
            lines[head] += f"  {MARK}"
    return lines


def to_yaml(data: dict) -> str:
    """Block-style YAML, one key per line, strings double-quoted."""
    return "\n".join(_block(data, 0)) + "\n"


def blueprint_text(overrides: dict[str, Any] | None = None, base: dict | None = None) -> str:
    """The minimal blueprint (or ``base``) with ``overrides`` applied, as YAML text."""
    return to_yaml(apply_overrides(base or MINIMAL, overrides or {}))


def marked_line(text: str) -> int:
    """The 1-based line that carries ``# here``."""
    lines = [i for i, line in enumerate(text.splitlines(), 1) if line.endswith(MARK)]
    assert len(lines) == 1, f"exactly one {MARK} expected in:\n{text}"
    return lines[0]


class RuleCheck:
    """Both sides of a rule: refused at a key path and line, or accepted without it."""

    def refused(self, overrides: dict[str, Any], rule: str, path: str,
                severity: str = "error", count: int = 1) -> Located:
        """The finding ``rule`` reports at ``path`` on the ``# here`` line.

        ``count`` is how many findings ``rule`` reports in the whole blueprint: a rule
        that stops at its first problem, or reports one problem twice, fails here.
        """
        text = blueprint_text(overrides)
        checked = check_text("bp.yaml", text)
        hits = [f for f in checked.findings
                if f.finding.rule == rule and format_path(f.finding.path) == path]
        assert hits, f"no {rule} at {path}; got {describe(checked)}\n{text}"
        of_rule = [f for f in checked.findings if f.finding.rule == rule]
        assert len(of_rule) == count, (
            f"{rule}: {len(of_rule)} findings, {count} expected: {describe(checked)}\n{text}")
        hit = hits[0]
        assert hit.finding.severity == severity
        assert hit.line == marked_line(text), f"{hit.line_text()}\n{text}"
        # As validate prints it: a key may hold a newline, the line never does.
        assert LINE_FORMAT.match(printable(hit.line_text())), hit.line_text()
        if severity == "error":
            assert checked.exit_code == 1
        return hit

    def accepted(self, overrides: dict[str, Any], rule: str) -> Checked:
        """The blueprint builds and ``rule`` finds nothing in it."""
        text = blueprint_text(overrides)
        checked = check_text("bp.yaml", text)
        assert checked.blueprint is not None, f"{describe(checked)}\n{text}"
        assert not [f for f in checked.findings if f.finding.rule == rule], describe(checked)
        return checked


def describe(checked: Checked) -> list[str]:
    """The finding lines, for assertion messages."""
    return [f.line_text() for f in checked.findings]


def table_tests(refused: list, accepted: list) -> tuple[Callable, Callable]:
    """The two table-driven tests of a rules module, from its REFUSED and ACCEPTED tables.

    REFUSED holds ``pytest.param(rule, path, overrides, severity, count)``, ``count``
    being how many findings the rule reports in that blueprint (``path`` names one of
    them, on the ``# here`` line); ACCEPTED holds ``pytest.param(rule, overrides)``.
    An empty table is an error, never a silent pass.
    """
    assert refused and accepted, "a rule table needs REFUSED and ACCEPTED cases"

    @pytest.mark.parametrize(("rule", "path", "overrides", "severity", "count"), refused)
    def test_refused(rule: str, path: str, overrides: dict, severity: str, count: int) -> None:
        RuleCheck().refused(overrides, rule, path, severity, count)

    @pytest.mark.parametrize(("rule", "overrides"), accepted)
    def test_accepted(rule: str, overrides: dict) -> None:
        RuleCheck().accepted(overrides, rule)

    return test_refused, test_accepted
