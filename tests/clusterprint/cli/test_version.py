"""`clusterprint --version`: the installed version, else the checkout's pyproject.toml."""

import subprocess
import sys
import tomllib
from importlib import metadata

import pytest

from clusterprint.cli import version as version_module
from clusterprint.cli.version import version
from tests.support.paths import ROOT

DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version_prints_the_name_and_number_and_exits_0():
    result = subprocess.run([sys.executable, "-m", "clusterprint.cli", "--version"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"clusterprint {DECLARED}\n", "")


def test_a_checkout_never_installed_reads_its_pyproject():
    # -S: no site-packages, so no installed distribution; --version needs nothing from there.
    result = subprocess.run([sys.executable, "-S", "-m", "clusterprint.cli", "--version"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"clusterprint {DECLARED}\n", "")


@pytest.fixture
def not_installed(monkeypatch):
    """As if no clusterprint distribution were installed."""
    def missing(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(version_module.metadata, "version", missing)


def test_installed_metadata_comes_first(monkeypatch):
    monkeypatch.setattr(version_module.metadata, "version", lambda name: "9.8.7")
    assert version() == "9.8.7"


@pytest.mark.usefixtures("not_installed")
def test_without_metadata_the_project_file_says_it():
    assert version() == DECLARED


@pytest.mark.usefixtures("not_installed")
@pytest.mark.parametrize("text", [None, "[project\n", "[tool.other]\n"],
                         ids=["no-file", "not-toml", "no-version"])
def test_neither_is_unknown_not_a_traceback(tmp_path, text):
    pyproject = tmp_path / "pyproject.toml"
    if text is not None:
        pyproject.write_text(text)
    assert version(pyproject) == "unknown"
