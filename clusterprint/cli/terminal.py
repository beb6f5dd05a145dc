"""Colour for people at a terminal: the level word of error and warning lines.

Only a stream that is a terminal gets colour, so pipes, files, CI logs and the stack
program's Pulumi log stay plain text that grep and the one-line format read as before.
``NO_COLOR`` set to anything but the empty string (no-color.org) or ``TERM=dumb``
turns it off there too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

from clusterprint.blueprint.findings import Located, Severity
from clusterprint.blueprint.validate import printable

#: SGR sequences: bold red errors and bold yellow warnings, as compilers print them.
LEVEL_COLOURS: dict[Severity, str] = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m"}
RESET = "\x1b[0m"


def colour_wanted(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether lines written to ``stream`` may carry colour."""
    if environ.get("NO_COLOR") or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except ValueError:  # a closed stream
        return False


def finding_line(located: Located, colour: bool) -> str:
    """The finding's one line, kept on one line, with its level word coloured if asked."""
    line = printable(located.line_text())
    if not colour:
        return line
    # The place prints escaped the same way inside the line: the level word follows it.
    start = len(printable(located.place)) + len(": ")
    level = located.finding.severity
    return f"{line[:start]}{LEVEL_COLOURS[level]}{level}{RESET}{line[start + len(level):]}"
