"""The node programs as the renderer ships them: each with the shared module beside it.

The health check, the remediation loop and config-sync import ``common``
(clusterprint/node/common.py) from the folder they run from: Python puts a script's own
folder, links resolved, first on ``sys.path``. So wherever one of them is installed, and
under ``clusterprint render --out``'s ``scripts/``, common.py lands in the same folder; it
is the very file the tests import, as each program is.
"""

from __future__ import annotations

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
