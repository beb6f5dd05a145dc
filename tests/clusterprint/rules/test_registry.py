"""Every registered rule has table cases on both sides in its domain's test module."""

import importlib.util
from pathlib import Path

import pytest

from clusterprint.rules import RULES

HERE = Path(__file__).parent


def _tables(domain: str) -> tuple[set[str], set[str]]:
    path = HERE / f"test_{domain}.py"
    spec = importlib.util.spec_from_file_location(f"rule_tables_{domain}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return ({p.values[0] for p in module.REFUSED}, {p.values[0] for p in module.ACCEPTED})


@pytest.mark.parametrize("rule_id", [r.id for r in RULES])
def test_every_rule_has_refused_and_accepted_cases(rule_id):
    refused, accepted = _tables(rule_id.split(".")[0])
    assert rule_id in refused, f"{rule_id} has no REFUSED case"
    assert rule_id in accepted, f"{rule_id} has no ACCEPTED case"


def test_rule_ids_are_unique_and_named_after_their_module():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.function.__module__ == f"clusterprint.rules.{r.id.split('.')[0]}"
