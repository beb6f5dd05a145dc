"""Prometheus's durations (``60s``, ``1m30s``) as seconds, to compare a scrape's timeout
with its interval as Prometheus does, not as strings.

The format is prometheus/common model.ParseDuration (model/time.go): units y, w, d, h, m,
s, ms, largest first, each at most once, and nothing else.
"""

from __future__ import annotations

import re

#: Each unit's seconds, largest first (the order the format wants them in).
UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1,
         "ms": 0.001}
DURATION = re.compile("".join(rf"(?:(?P<{'milli' if u == 'ms' else u}>\d+){u})?"
                              for u in UNITS))


def seconds(text: str) -> float:
    """``text``'s seconds; ValueError when it is not a Prometheus duration."""
    if text == "0":
        return 0.0
    found = DURATION.fullmatch(text)
    if not text or not found:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(found["milli" if u == "ms" else u] or 0) * factor
               for u, factor in UNITS.items())
