"""The version ``clusterprint --version`` prints: the installed one, else the checkout's."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

#: The checkout's project file, one folder above the package.
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def version(pyproject: Path = PYPROJECT) -> str:
    """The installed distribution's version, else the one ``pyproject.toml`` declares.

    Run from a checkout that was never installed (``python -m clusterprint.cli``), no
    distribution metadata exists, but the project file next to the package says the
    same number a build would install. Neither (a copy of the package alone) is
    ``unknown``, never a traceback.
    """
    try:
        return metadata.version("clusterprint")
    except metadata.PackageNotFoundError:
        pass
    try:
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
