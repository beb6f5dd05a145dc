"""Fixtures shared by the clusterprint tests; the texts themselves live in
tests/support/blueprint_texts.py."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.validate import Checked, check_text
from tests.support.blueprint_texts import RuleCheck, blueprint_text


@pytest.fixture
def rules_check() -> RuleCheck:
    """Assertions for rule tables: ``rules_check.refused(...)`` / ``.accepted(...)``."""
    return RuleCheck()


@pytest.fixture
def make_text():
    """``make_text(overrides)``: the minimal blueprint text with keys overridden."""
    return blueprint_text


@pytest.fixture
def check():
    """``check(text, is_json=False)``: validate text as ``bp.yaml`` (or ``bp.json``)."""
    def run(text: str, is_json: bool = False) -> Checked:
        return check_text("bp.json" if is_json else "bp.yaml", text, is_json)
    return run
