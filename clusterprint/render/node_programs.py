"""The node programs as the renderer ships them: each with the shared module beside it.

The health check, the remediation loop, power saving and config-sync import ``common``
(clusterprint/node/common.py) from the folder they run from: Python puts a script's own
folder, links resolved, first on ``sys.path``. So wherever one of them is installed, and
under ``clusterprint render --out``'s ``scripts/``, common.py lands in the same folder; it
is the very file the tests import, as each program is. A startup script installs each file
once (``shipped_once``), however many of its programs share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from types import ModuleType

from clusterprint.node import common

#: The shebang a program gets where it is a command of its own (a link points at it).
SHEBANG = "#!/usr/bin/python3\n"


def module_text(module: ModuleType, shebang: bool = False) -> str:
    """A module of clusterprint.node as the package ships it."""
    name = module.__name__.rsplit(".", 1)[-1]
    text = resources.files("clusterprint.node").joinpath(f"{name}.py").read_text("utf-8")
    return (SHEBANG if shebang and not text.startswith("#!") else "") + text


def program_files(folder: str, module: ModuleType, shebang: bool = False) -> dict[str, str]:
    """The files that make ``module`` run from ``folder``: the program and common.py."""
    name = module.__name__.rsplit(".", 1)[-1]
    return {f"{folder}/{name}.py": module_text(module, shebang),
            f"{folder}/{common.__name__.rsplit('.', 1)[-1]}.py": module_text(common)}


def with_modes(files: Mapping[str, str], program: str) -> dict[str, tuple[str, str]]:
    """``files`` with the mode each is installed with: ``program`` runs (0755), what it
    imports is read (0644)."""
    return {path: (text, "0755" if path == program else "0644") for path, text in files.items()}


def shipped_once(*parts: Mapping[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Every file of ``parts`` once, by path: the programs sharing a folder share its
    common.py, and a startup script must stay under Compute Engine's 256 KiB metadata value
    (node_metadata.check_size), so it carries that file once, not once per program. One path
    with two texts or modes is a renderer bug, refused."""
    files: dict[str, tuple[str, str]] = {}
    for part in parts:
        for path, text_mode in part.items():
            if files.setdefault(path, text_mode) != text_mode:
                raise ValueError(f"two different node program files at {path}")
    return files
