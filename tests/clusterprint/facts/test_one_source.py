"""A machine type's string is written in one table: its row of facts/machines.py.

Everything else (the network, GRES, NVLink, zones, prices, NCCL proof, recipe image, the
wizard) reads the row, so adding a family is adding its rows. Checked over the code of
clusterprint/, components/ and the templates: docstrings and comments may cite a type (a
source's path names one), code and templates may not.
"""

import ast
import functools
import re
from pathlib import Path

import pytest

from clusterprint.facts import machines
from tests.support.paths import ROOT

TABLE = "clusterprint/facts/machines.py"
#: Strings outside the table that name a type as an example of a valid value, not as a fact
#: about it: the schema's description, a validation message, and the stand-in a blueprint
#: with errors is checked with (any GPU type serves), and the refusal of a malformed
#: --machine-type by the login node's model helper (standard library only: it cannot read the
#: table). None of them changes with the table.
EXAMPLES = {
    ("clusterprint/blueprint/model.py", "a3-megagpu"),
    ("clusterprint/blueprint/model_errors.py", "a3-megagpu"),
    ("clusterprint/blueprint/validate.py", "a3-megagpu"),
    ("clusterprint/node/register_model.py", "g2-standard"),
}
#: Each family's type strings by what comes before the size: a3-highgpu-8g and the
#: f"a3-highgpu-{n}g" of its smaller shapes are both a3-highgpu.
STEMS = sorted({f.machine_type.rsplit("-", 1)[0] for f in machines.MACHINE_FAMILIES})


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the nodes that are docstrings: a module's, a class's or a function's."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def code_strings(path: Path) -> list[str]:
    """Every string constant of a Python file's code (f-strings' literal parts included),
    docstrings left out; a template's whole text."""
    text = path.read_text()
    if path.suffix != ".py":
        return [text]
    tree = ast.parse(text)
    skip = _docstrings(tree)
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip]


@functools.cache
def sources() -> list[Path]:
    """The package's code and templates, and the components'."""
    return sorted(p for folder in ("clusterprint", "components")
                  for p in (ROOT / folder).rglob("*")
                  if p.suffix in {".py", ".j2", ".sh"} and p.is_file())


@functools.cache
def _strings(path: Path) -> tuple[str, ...]:
    return tuple(code_strings(path))


def writers(stem: str) -> set[str]:
    """The files whose code writes a type string of ``stem`` (a2-highgpu-8g, a2-highgpu-{n}g)
    or the stem itself (a table keyed by family)."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(stem)}(?!\w)")
    found = set()
    for path in sources():
        relative = path.relative_to(ROOT).as_posix()
        if (relative, stem) not in EXAMPLES and any(map(pattern.search, _strings(path))):
            found.add(relative)
    return found


@pytest.mark.parametrize("stem", STEMS)
def test_a_family_s_type_strings_are_written_in_its_rows_only(stem):
    assert writers(stem) == {TABLE}


def test_the_examples_still_name_a_family_of_the_table():
    """An example left behind by a renamed family would be allowed for no reason."""
    for relative, stem in EXAMPLES:
        strings = code_strings(ROOT / relative)
        assert any(re.search(rf"(?<![\w-]){stem}-\d", s) for s in strings), relative
        assert stem in STEMS


def test_the_scan_sees_f_strings_and_leaves_docstrings_out(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text('def f(n):\n    """a2-highgpu-8g in a docstring"""\n'
                    '    return f"a2-highgpu-{n}g"\n')
    assert code_strings(path) == ["a2-highgpu-", "g"]


def test_every_type_is_one_row():
    types = [f.machine_type for f in machines.MACHINE_FAMILIES]
    assert len(types) == len(set(types))
