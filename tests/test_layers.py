"""No import runs back up a layer: every module of clusterprint/ and components/, read with ast.

The order is clusterprint/__init__.py's. An import inside a function counts as much as one
at the top (a lazy import is a dependency all the same, only a later one), and so does
``importlib.import_module`` with a name written out.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: The layers, bottom first: each may import its own and those before it.
LAYERS = ("node", "facts", "contract", "blueprint", "render", "build", "components",
          "preview", "cli")


def modules() -> list[tuple[str, Path]]:
    """Every module's dotted name and file; components/ by the name it is installed as."""
    found = [(".".join(path.relative_to(ROOT).with_suffix("").parts), path)
             for path in sorted((ROOT / "clusterprint").rglob("*.py"))]
    found += [(f"clusterprint.components.{path.stem}", path)
              for path in sorted((ROOT / "components").glob("*.py"))]
    return [(name.removesuffix(".__init__"), path) for name, path in found]


def imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, wherever it stands, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            # `from clusterprint import cli` imports clusterprint.cli: name the alias too.
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args
              and ast.unparse(node.func) in ("importlib.import_module", "import_module")):
            written = node.args[0]
            if isinstance(written, ast.JoinedStr) and written.values:
                written = written.values[0]  # f"clusterprint.cli.commands.{name}": its start
            if isinstance(written, ast.Constant) and isinstance(written.value, str):
                yield node.lineno, written.value.rstrip(".")


def layer(module: str) -> str | None:
    """The layer of a clusterprint module (``clusterprint.blueprint.model``: blueprint)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "clusterprint" and len(parts) > 1 else None


MODULES = modules()


def test_every_module_lies_in_a_layer():
    outside = [str(path.relative_to(ROOT)) for name, path in MODULES
               if name != "clusterprint" and layer(name) not in LAYERS]
    assert outside == []


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_no_import_runs_back_up_a_layer(name, path):
    own = LAYERS.index(layer(name)) if name != "clusterprint" else -1
    upward = [f"{path.relative_to(ROOT)}:{line}: {name} ({LAYERS[own] if own >= 0 else 'root'}) "
              f"imports {target} ({layer(target)}), a layer above"
              for line, target in imports(name, path)
              if layer(target) in LAYERS and LAYERS.index(layer(target)) > own]
    assert upward == []


@pytest.mark.parametrize(("name", "path"), [(n, p) for n, p in MODULES if layer(n) == "node"],
                         ids=[n for n, _ in MODULES if layer(n) == "node"])
def test_node_programs_need_only_the_standard_library(name, path):
    # They run on VMs that have no clusterprint installed: beside the standard library, only
    # their siblings, by package name in tests and by file name beside each other on a node.
    siblings = {p.stem for p in path.parent.glob("*.py")}
    foreign = [f"{path.relative_to(ROOT)}:{line}: {target}" for line, target in imports(name, path)
               if target.split(".")[0] not in sys.stdlib_module_names
               and not target.startswith("clusterprint.node.") and target not in siblings]
    assert foreign == []


def test_the_check_sees_imports_inside_functions_and_by_name(tmp_path):
    module = tmp_path / "sample.py"
    module.write_text("import importlib\n"
                      "from clusterprint import cli\n"
                      "from ..contract import naming\n"
                      "def late():\n"
                      "    from clusterprint.preview.plan import Plan\n"
                      "    return importlib.import_module(f'clusterprint.render.{late}')\n")
    assert sorted(imports("clusterprint.facts.sample", module)) == [
        (1, "importlib"), (2, "clusterprint.cli"), (3, "clusterprint.contract.naming"),
        (5, "clusterprint.preview.plan.Plan"), (6, "clusterprint.render")]
