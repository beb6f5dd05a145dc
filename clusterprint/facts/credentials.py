"""The shapes that give a credential away, and where in a value they are.

One detector, two callers: the policies `no-plaintext-secret` and `no-secret-in-outputs`
over a planned resource's inputs and the stack's outputs (clusterprint.preview.policies),
and the blueprint rule ``security.plaintext-secret`` over every string of a blueprint,
each of which reaches some resource's inputs (names, labels, metadata, boot scripts), so
`validate` refuses what the policies would.

Standard library only: the policy pack's virtualenv has nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

#: Where a string lies in a value: dict keys and list indexes, outermost first.
Path = tuple[str | int, ...]

#: What the detector looks for in every string a resource carries: credential formats
#: whose shape alone gives them away, so an ordinary script line never matches.
SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "a private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    "a service account key": re.compile(r'"private_key(?:_id)?"\s*:\s*"'),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
    "a Google OAuth access token": re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"),
    "a Pulumi access token": re.compile(r"\bpul-[0-9a-f]{40}\b"),
    "an AWS access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a Slack token": re.compile(r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),
    # A munge key is 32 to 1024 random bytes (mungekey(8)); as text it is a long base64 or
    # hex run. 256 base64 characters is 192 bytes: longer than any word, hash or name.
    "a munge key (a long base64 blob)": re.compile(r"[A-Za-z0-9+/]{256,}={0,2}"),
    # A literal key echoed into munge.key: the literal is echo's argument, piped or
    # redirected on the same line, so a long path elsewhere on the line never matches.
    "a munge key written from the script": re.compile(
        r"\b(?:echo|printf)\s+(?:\S+\s+)*?['\"]?[A-Za-z0-9+/]{32,}={0,2}['\"]?\s*[|>]"
        r"[^\n]*munge\.key"),
}
#: A metadata key or label that says it holds the munge key.
MUNGE_KEY_NAME = re.compile(r"munge[-_.]?key", re.IGNORECASE)
#: What such a key may hold: the Secret Manager secret's name, never the key.
SECRET_REFERENCE = re.compile(
    r"projects/[^/\s]+/secrets/[^/\s]+|\[(?:id of [^\]]+|unknown|secret)\]")


def leaks(value: Any) -> Iterator[tuple[Path, str]]:
    """Every credential in a value: where it is and what, as "holds a GitHub token".

    Credential shapes first, in every string and dict key (a label's key can leak), then
    every string under a key named as the munge key that is not a secret's name.
    """
    for path, text in _strings(value, ()):
        for kind, pattern in SECRET_PATTERNS.items():
            if pattern.search(text):
                yield path, f"holds {kind}"
    for path, text in _munge_named(value, ()):
        if not SECRET_REFERENCE.fullmatch(text):
            yield path, "is named as the munge key but holds a value, not a secret's name"


def dotted(path: Path) -> str:
    """``("metadata", "startup-script")`` as ``metadata.startup-script``, indexes in brackets."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _strings(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """Every string in a value with its path, dict keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield (*path, str(key)), str(key)
            yield from _strings(item, (*path, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _munge_named(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """String values under a key that says it is the munge key, anywhere in the value."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, str) and MUNGE_KEY_NAME.search(str(key)):
                yield (*path, str(key)), item
            else:
                yield from _munge_named(item, (*path, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _munge_named(item, (*path, index))
