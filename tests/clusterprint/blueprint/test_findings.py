"""Findings print in the contract's one-line form and as JSON."""

import pytest

from clusterprint.blueprint.findings import (
    Finding,
    Located,
    count_text,
    error,
    format_path,
    warning,
)


@pytest.mark.parametrize(("path", "text"), [
    (("storage", "lustre", 0, "capacity_gib"), "storage.lustre[0].capacity_gib"),
    (("slurm", "partitions", 1, "nodesets", 0), "slurm.partitions[1].nodesets[0]"),
    (("recipes", 2), "recipes[2]"),
    (("zone",), "zone"),
    ((), "(root)"),
])
def test_format_path(path, text):
    assert format_path(path) == text


def test_error_line_is_the_contracts():
    finding = error(("storage", "lustre", 0, "capacity_gib"),
                    "20000 is not a multiple of 18000, the step of performance tier 500",
                    "try 18000 or 36000", rule="storage.lustre-capacity")
    assert Located("blueprints/bad.yaml", 31, 21, finding).line_text() == (
        "blueprints/bad.yaml:31:21: error: storage.lustre[0].capacity_gib: 20000 is not a "
        "multiple of 18000, the step of performance tier 500 (try 18000 or 36000)")


def test_warning_line_without_hint():
    finding = warning(("network", "mtu"), "8896 differs from 8244")
    assert Located("bp.yaml", 3, 8, finding).line_text() == (
        "bp.yaml:3:8: warning: network.mtu: 8896 differs from 8244")


def test_file_level_finding_has_no_key_path_and_no_position():
    located = Located("missing.yaml", None, None, Finding((), "file.unreadable", "no such file"))
    assert located.line_text() == "missing.yaml: error: no such file"
    assert located.as_json()["line"] is None


def test_json_form_has_every_field():
    finding = error(("zone",), "zone us-east1-b is not in region us-central1", "try us-central1-a",
                    rule="location.zone-in-region")
    assert Located("bp.yaml", 5, 7, finding).as_json() == {
        "file": "bp.yaml", "line": 5, "column": 7, "path": "zone",
        "rule": "location.zone-in-region", "severity": "error",
        "message": "zone us-east1-b is not in region us-central1", "hint": "try us-central1-a"}


@pytest.mark.parametrize(("errors", "warnings", "text"), [
    (0, 0, None),
    (1, 0, "1 error"),
    (2, 0, "2 errors"),
    (0, 1, "1 warning"),
    (0, 3, "3 warnings"),
    (2, 1, "2 errors, 1 warning"),
    (1, 2, "1 error, 2 warnings"),
])
def test_count_text_says_each_level_in_its_number(errors, warnings, text):
    findings = [error(("zone",), "e")] * errors + [warning(("network", "mtu"), "w")] * warnings
    assert count_text(reversed(findings)) == text
