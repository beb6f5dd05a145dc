"""Where the tests' inputs are, found from this file, never from the folder pytest starts in.

A test that globbed ``blueprints/`` relative to the current folder collected nothing when
pytest started elsewhere, and passed having checked nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The repository's root folder.
ROOT = Path(__file__).resolve().parents[2]
#: The interpreter a node runs its programs with: the system python3, without this venv's
#: packages, as on a VM. Under `make mutation` the programs' modules are mutmut's copies,
#: which import mutmut (MUTANT_UNDER_TEST names the mutant), so they run on its venv's.
MUTATION = "mutmut" in sys.modules
NODE_PYTHON = sys.executable if MUTATION else "/usr/bin/python3"
#: A node program run on the standard library alone: no site-packages (-S), no user site,
#: no PYTHON* variables; its own folder stays first on the path. (Under `make mutation`
#: mutmut's site-packages stay: the mutants import it.)
STDLIB_ONLY = [NODE_PYTHON, "-E", "-s", *([] if MUTATION else ["-S"])]
#: The reference blueprints' folder.
BLUEPRINTS = ROOT / "blueprints"


def blueprint_path(name: str) -> str:
    """The path of the reference blueprint ``name`` (``a4`` is ``blueprints/a4.yaml``)."""
    return str(BLUEPRINTS / f"{name}.yaml")


def reference_blueprints() -> list[Path]:
    """Every reference blueprint, sorted; there are always some."""
    found = sorted(BLUEPRINTS.glob("*.yaml"))
    assert found, f"no reference blueprint in {BLUEPRINTS}"
    return found
