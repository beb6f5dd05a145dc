"""Test modules share helpers only through tests/support/, never by importing each other.

A test module imported by another runs its module-level code twice under two names (pytest's
importlib mode and the import), and the tests of the one are coupled to the other's
internals; conftest files hold fixtures, not helpers to import.
"""

from __future__ import annotations

import ast

from tests.support.paths import ROOT

TESTS = ROOT / "tests"


def imported_test_modules(path) -> list[str]:
    """The ``tests.*`` modules a file imports that are not in tests.support."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [name for name in names if name.split(".")[0] == "tests"
                  and name.split(".")[:2] != ["tests", "support"]]
    return found


def test_no_test_module_imports_another_only_tests_support():
    files = sorted(TESTS.rglob("*.py"))
    assert TESTS / "support" / "paths.py" in files
    offending = {str(p.relative_to(ROOT)): imported_test_modules(p) for p in files}
    assert {path: names for path, names in offending.items() if names} == {}


def test_the_check_sees_both_import_forms(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import tests.slurm.conftest\nfrom tests.clusterprint import test_x\n"
                      "from tests.support.paths import ROOT\nimport testsuite\n")
    assert imported_test_modules(sample) == ["tests.slurm.conftest", "tests.clusterprint"]
