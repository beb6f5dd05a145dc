"""What another project gets when it installs clusterprint: one package, ``clusterprint``.

A top-level package named ``components`` in site-packages would clash with any other
project's ``components``; the Pulumi side is importable as ``clusterprint.components``
while its folder stays at the repository's top level, where the design puts it. The build
configuration maps the folder (no symlink), so a wheel, an editable install and a checkout
on a file system without symlinks all see the same package.
"""

from __future__ import annotations

import ast
import filecmp
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pulumi

from tests.support.paths import ROOT, blueprint_path


def setuptools_config() -> dict:
    """``[tool.setuptools]`` of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_only_clusterprint_lands_in_site_packages():
    packages = setuptools_config()["packages"]
    assert {name.split(".")[0] for name in packages} == {"clusterprint"}
    assert "clusterprint.components" in packages


def test_the_package_list_is_every_package_folder():
    # setuptools' finder does not follow package-dir, so the list is written out: a new
    # layer or subpackage missing from it would be missing from every wheel.
    folders = {".".join(init.parent.relative_to(ROOT).parts)
               for init in (ROOT / "clusterprint").rglob("__init__.py")}
    assert set(setuptools_config()["packages"]) == folders | {"clusterprint.components"}


def test_the_components_folder_is_mapped_to_clusterprint_components():
    assert setuptools_config()["package-dir"] == {"clusterprint.components": "components"}
    assert (ROOT / "components/__init__.py").is_file()
    assert not (ROOT / "clusterprint/components").exists()


def test_no_tracked_symlink_outside_tests():
    listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    links = [entry.split("\t", 1)[1] for entry in listed.split("\0")
             if entry.startswith("120000 ")]
    assert [link for link in links if not link.startswith("tests/")] == []


def test_components_import_each_other_by_the_packaged_name():
    for path in sorted((ROOT / "components").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "components", f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] != "components", f"{path.name}: {alias.name}"


def test_a_checkout_first_on_sys_path_still_finds_the_components():
    # Run in the checkout, as pytest (pythonpath ".") and `python` there do: its clusterprint/
    # comes first on sys.path and holds no components/; the editable install maps them.
    done = subprocess.run(
        [sys.executable, "-c",
         "import clusterprint, clusterprint.components.network as n; "
         "print(clusterprint.__file__); print(n.__file__)"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"is this checkout installed with pip install -e?\n{done.stderr}"
    assert done.stdout.split() == [str(ROOT / "clusterprint/__init__.py"),
                                   str(ROOT / "components/network.py")]


def test_a_wheel_in_a_fresh_venv_imports_a_component_and_renders_as_the_checkout(tmp_path):
    # Build from the tracked files alone, as a fresh clone would, away from the checkout.
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z", "pyproject.toml", "README.md",
                              "clusterprint", "components"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split("\0")
    for name in filter(None, tracked):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("clusterprint-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True)
    # The dependencies (pulumi, pydantic, ...) come from this venv, by a path line: a .pth
    # line adds a folder without running the .pth files in it (this checkout's editable
    # finder among them), so clusterprint itself can only come from the wheel.
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "dependencies.pth").write_text(f"{Path(pulumi.__file__).parents[1]}\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [str(venv / "bin/python"), "-I", "-c",
         "import importlib.util, clusterprint.components.network as n; print(n.__file__); "
         "print(importlib.util.find_spec('components'))"],
        cwd=elsewhere, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(site / "clusterprint/components/network.py"), "None"]

    # The console script of the wheel renders the templates and node programs it ships.
    for name, command in (("wheel", [str(venv / "bin/clusterprint")]),
                          ("checkout", [sys.executable, "-m", "clusterprint.cli"])):
        subprocess.run([*command, "render", blueprint_path("a3mega"), "--out",
                        str(tmp_path / name)], cwd=elsewhere, check=True, capture_output=True)
    assert _differences(filecmp.dircmp(tmp_path / "wheel", tmp_path / "checkout")) == []


def _differences(compared: filecmp.dircmp) -> list[str]:
    """Every file that differs or exists on one side only, below two compared folders."""
    found = [*compared.left_only, *compared.right_only, *compared.diff_files]
    for sub in compared.subdirs.values():
        found += _differences(sub)
    return found
