"""A reader of the Prometheus text exposition format (0.0.4), strict where a scraper is.

The exporter's tests parse what it serves with it, so an answer the Ops Agent's receiver
would refuse (a sample of no declared family, a family declared twice, a bad label or value)
fails the test instead of passing as text. Written from the format's specification
(prometheus.io/docs/instrumenting/exposition_formats), not the exporter's code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
_PAIR = re.compile(rf'({LABEL})="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


@dataclass(frozen=True)
class Family:
    """One metric: its type, its help and its samples, labels -> value."""

    type: str
    help: str
    samples: dict[frozenset[tuple[str, str]], float]

    def value(self, **labels: str) -> float:
        """The sample with exactly these labels."""
        return self.samples[frozenset(labels.items())]

    def where(self, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """The samples that carry these labels among theirs."""
        return {key: value for key, value in self.samples.items()
                if set(labels.items()) <= key}


def _labels(text: str, line: str) -> frozenset[tuple[str, str]]:
    pairs, at = [], 0
    while at < len(text):
        match = _PAIR.match(text, at)
        assert match, f"bad labels in {line!r}"
        value = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], match[2])
        pairs.append((match[1], value))
        at = match.end()
    assert len({k for k, _ in pairs}) == len(pairs), f"a label repeats in {line!r}"
    return frozenset(pairs)


def parse(text: str) -> dict[str, Family]:
    """Every family of the exposition by name; AssertionError naming the first bad line."""
    assert text.endswith("\n"), "the exposition must end with a line break"
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, said = line[7:].partition(" ")
            assert re.fullmatch(NAME, name) and name not in helps, line
            helps[name] = said
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert kind in TYPES and name not in families, f"bad or repeated TYPE: {line!r}"
            families[name] = Family(kind, helps.get(name, ""), {})
        elif line.startswith("#") or not line.strip():
            continue
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample: {line!r}"
            assert match[1] in families, f"a sample before its TYPE: {line!r}"
            labels = _labels(match[2] or "", line)
            samples = families[match[1]].samples
            assert labels not in samples, f"a sample repeats: {line!r}"
            value = float(match[3])
            assert not math.isnan(value), line
            samples[labels] = value
    return families
