"""The node programs' journal lines as a test reads them: ``<N>`` and one JSON object each
(clusterprint/node/common.py Log)."""

from __future__ import annotations

import json
import re

from clusterprint.node import common


def entries(text: str) -> list[tuple[str, str]]:
    """Each line's (severity, message); a line of another shape fails the test, as does a
    priority that does not match its severity."""
    found = []
    for line in text.splitlines():
        match = re.fullmatch(r"<(\d)>(\{.*\})", line)
        assert match, f"not a journal line: {line!r}"
        entry = json.loads(match[2])
        assert int(match[1]) == common.SYSLOG_LEVELS[entry["severity"]], line
        found.append((entry["severity"], entry["message"]))
    return found


def messages(text: str, severity: str | None = None) -> list[str]:
    """The messages of the lines, of one severity if given."""
    return [message for level, message in entries(text) if severity in (None, level)]
