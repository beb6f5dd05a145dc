"""What another project gets when it installs clusterprint: one package, ``clusterprint``.

A top-level package named ``components`` in site-packages would clash with any other
project's ``components``; the Pulumi side is importable as ``clusterprint.components``
while its folder stays at the repository's top level, where the design puts it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib

from setuptools import find_namespace_packages

from tests.paths import ROOT


def packaged() -> list[str]:
    """The packages a wheel of this checkout holds, found the way pyproject tells setuptools."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    # pyproject.toml leaves `namespaces` at its default (true): `clusterprint` has no __init__.py.
    return find_namespace_packages(where=str(ROOT), include=include)


def test_only_clusterprint_lands_in_site_packages():
    tops = {name.split(".")[0] for name in packaged()}
    assert tops == {"clusterprint"}
    assert "clusterprint.components" in packaged()


def test_the_components_folder_is_the_package_clusterprint_components():
    assert (ROOT / "clusterprint/components").resolve() == (ROOT / "components").resolve()


def test_components_import_each_other_by_the_packaged_name():
    for path in sorted((ROOT / "components").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "components", f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] != "components", f"{path.name}: {alias.name}"


def test_a_project_elsewhere_imports_a_component(tmp_path):
    # Run from a folder that is not this checkout, as another stack would.
    done = subprocess.run(
        [sys.executable, "-c",
         "from clusterprint.components.network import ClusterNetwork; "
         "import clusterprint.components.network as n; print(n.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("clusterprint/components/network.py")
