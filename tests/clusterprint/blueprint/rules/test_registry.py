"""Every registered rule has table cases on both sides in its domain's test module."""

import importlib.util
import re
from pathlib import Path

import pytest

from clusterprint.blueprint.rules import RULES
from tests.support.paths import ROOT

HERE = Path(__file__).parent
RULE_TABLE = ROOT / "docs" / "blueprint.md"


def _module(domain: str):
    path = HERE / f"test_{domain}.py"
    spec = importlib.util.spec_from_file_location(f"rule_tables_{domain}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tables(domain: str) -> tuple[set[str], set[str]]:
    module = _module(domain)
    return ({p.values[0] for p in module.REFUSED}, {p.values[0] for p in module.ACCEPTED})


def _readme_rows() -> dict[str, str]:
    """The rule table of docs/blueprint.md: rule id -> its level column."""
    rows = re.findall(r"^\| `([a-z]+\.[a-z0-9-]+)` \| ([a-z, ]+) \|", RULE_TABLE.read_text(),
                      re.MULTILINE)
    assert len(rows) == len(dict(rows)), "a rule has two rows in docs/blueprint.md"
    return dict(rows)


@pytest.mark.parametrize("rule_id", [r.id for r in RULES])
def test_every_rule_has_refused_and_accepted_cases(rule_id):
    refused, accepted = _tables(rule_id.split(".")[0])
    assert rule_id in refused, f"{rule_id} has no REFUSED case"
    assert rule_id in accepted, f"{rule_id} has no ACCEPTED case"


def test_rule_ids_are_unique_and_named_after_their_module():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.function.__module__ == f"clusterprint.blueprint.rules.{r.id.split('.')[0]}"


def test_readme_lists_every_rule_with_the_levels_its_cases_show():
    rows = _readme_rows()
    assert set(rows) == {r.id for r in RULES}
    for domain in {r.id.split(".")[0] for r in RULES}:
        levels: dict[str, set[str]] = {}
        for case in _module(domain).REFUSED:
            levels.setdefault(case.values[0], set()).add(case.values[3])
        for rule_id, seen in levels.items():
            assert rows[rule_id] == ", ".join(sorted(seen)), rule_id
