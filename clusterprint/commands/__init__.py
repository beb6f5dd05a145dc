"""One module per ``clusterprint`` command: ``add_arguments(parser)`` and ``run(args)``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterprint.model import Blueprint


def file_argument(text: str) -> str:
    """An argparse type for FILE arguments: an empty name is a usage error, not the folder ``.``."""
    if not text:
        raise argparse.ArgumentTypeError("the file name is empty")
    return text


def checked_blueprint(path: str) -> tuple[Blueprint | None, int]:
    """The valid blueprint in ``path`` and exit 0, or None and validate's exit status.

    Commands that need a valid blueprint print its findings to stderr exactly as
    ``validate`` prints them, warnings included, so their stdout stays their output.
    """
    from clusterprint.validate import check_file

    checked = check_file(path)
    for line in checked.lines():
        print(line, file=sys.stderr)
    return (checked.blueprint, 0) if checked.ok else (None, checked.exit_code)
