"""Print the blueprint JSON Schema (draft 2020-12), generated from the model.

Point an editor at schemas/blueprint.schema.json (the committed copy of this output)
to complete and explain every key.

Exit status: 0 printed, 2 stdout cannot be written (a full disk; the reason on stderr).
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """schema takes no arguments."""


def run(args: argparse.Namespace) -> int:
    """Write the schema to standard output."""
    from clusterprint.blueprint.schema import schema_text

    sys.stdout.write(schema_text())
    return 0
