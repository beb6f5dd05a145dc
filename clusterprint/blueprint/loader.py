"""Reading blueprint files into plain data, keeping where every key came from.

Errors must point at a line and column, so the loader records a position for every
key path while it turns ruamel's round-trip nodes into plain dicts, lists and scalars
(the model validates plain Python types strictly).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterprint.blueprint.findings import KeyPath

#: Larger files are refused: no real blueprint comes near it, and the pure-Python YAML
#: parser takes about 7 s per MiB, so a stray large file must not look like a hang.
MAX_FILE_BYTES = 1024 * 1024
#: Nodes after alias expansion; stops "billion laughs" style documents.
MAX_NODES = 200_000
MAX_DEPTH = 64


class LoadError(Exception):
    """A file that cannot become blueprint data, with the place to blame.

    ``unreadable`` is a file the user pointed at wrongly (missing, a directory, no
    permission): a usage problem. Otherwise the content is at fault: an invalid blueprint.
    """

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 *, unreadable: bool = False, rule: str = "file.syntax") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.unreadable = unreadable
        self.rule = rule


@dataclass
class Document:
    """A loaded file: its plain data and the 1-based (line, column) of each key path."""

    data: Any
    #: A scalar's value position; for a mapping or list, its key's position.
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    #: Where each mapping key itself is written (unknown keys are reported there).
    key_positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def position(self, path: KeyPath, *, key: bool = False) -> tuple[int, int]:
        """Where ``path`` is written, or its nearest written ancestor (for defaults)."""
        table = self.key_positions if key else self.positions
        found = table.get(tuple(path))
        if found:
            return found
        for end in range(len(path) - 1, -1, -1):
            found = self.positions.get(tuple(path[:end]))
            if found:
                return found
        return (1, 1)


def read_text(path: str) -> str:
    """The file's text, or a LoadError that says why it cannot be read."""
    if not path:  # Path("") is the current folder
        raise LoadError("the file name is empty", unreadable=True, rule="file.unreadable")
    p = Path(path)
    try:
        if p.is_dir():
            raise LoadError("is a directory, not a blueprint file", unreadable=True,
                            rule="file.unreadable")
        # Read at most one byte past the limit: /dev/zero or a FIFO has no size to stat.
        with p.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise LoadError(f"file is over {MAX_FILE_BYTES // (1024 * 1024)} MiB, the limit for "
                            f"a blueprint", 1, 1, rule="file.size")
    except FileNotFoundError:
        raise LoadError("no such file", unreadable=True, rule="file.unreadable") from None
    except PermissionError:
        raise LoadError("permission denied", unreadable=True, rule="file.unreadable") from None
    except OSError as exc:
        raise LoadError(exc.strerror or str(exc), unreadable=True,
                        rule="file.unreadable") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise LoadError("file is not UTF-8 text", line, 1, rule="file.encoding") from None


def parse(text: str, is_json: bool) -> Document:
    """Blueprint data from YAML or JSON text; JSON is held to strict JSON first."""
    if not text.strip():
        raise LoadError("file is empty; a blueprint is a mapping starting with "
                        "`apiVersion: clusterprint/v1`", 1, 1, rule="file.empty")
    _check_nesting(text)
    if is_json:
        _check_strict_json(text)
    return _parse_yaml(text, "JSON" if is_json else "YAML")


def load_document(path: str) -> Document:
    """Read and parse one blueprint file; JSON by the ``.json`` suffix, else YAML."""
    return parse(read_text(path), path.lower().endswith(".json"))


def _line_col(text: str, index: int) -> tuple[int, int]:
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


def _check_nesting(text: str) -> None:
    """Refuse flow nesting deeper than MAX_DEPTH before the parser spends seconds on it.

    ruamel takes about 3 s on a few KiB of ``a: [[[[...`` before it fails with a
    recursion error. Brackets are counted anywhere, in quotes and comments too: a real
    blueprint never leaves anywhere near MAX_DEPTH of them open.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for match in re.finditer(r"[\[\]{}]", text):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        if depth > MAX_DEPTH:
            raise LoadError(f"document nests deeper than {MAX_DEPTH} levels",
                            *_line_col(text, match.start()), rule="file.size")


class _NotJson(ValueError):
    """A constant Python's json module accepts but JSON does not (NaN, Infinity)."""


class _TooLong(ValueError):
    """An integer longer than Python converts (``sys.get_int_max_str_digits()``)."""


#: The json module's messages (some end in "at", its position following) in words.
JSON_MESSAGES = {
    "Expecting value": "expected a value",
    "Expecting ',' delimiter": "expected `,` or the end of the list or object",
    "Expecting ':' delimiter": "expected `:` after the key",
    "Expecting property name enclosed in double quotes": "expected a key in double quotes",
    "Extra data": "more text after the end of the document",
    "Unterminated string starting at": "a string is never closed",
    "Invalid \\uXXXX escape": "invalid \\u escape: it takes 4 hexadecimal digits",
}


def _json_message(msg: str) -> str:
    """A json module message as a sentence of its own (its position is printed apart)."""
    if msg in JSON_MESSAGES:
        return JSON_MESSAGES[msg]
    if msg.startswith("Invalid control character"):
        return "control character in a string: write it as a \\u escape"
    if msg.startswith("Invalid \\escape"):
        return "invalid backslash escape in a string"
    return msg.removesuffix(" at").lower()


def _too_long(digits: str) -> str:
    return (f"a number of {len(digits)} digits is too long "
            f"(at most {sys.get_int_max_str_digits()} digits)")


def _digits_at(text: str, digits: str) -> int:
    """Where the number ``digits`` is written (not inside a longer one)."""
    found = re.search(rf"(?<![\d.]){re.escape(digits)}(?!\d)", text)
    return found.start() if found else 0


def _check_strict_json(text: str) -> None:
    """JSON syntax errors, as strict JSON sees them; duplicate keys are left to the YAML
    parser, which reports them with their line."""
    def no_constants(name: str) -> None:
        raise _NotJson(name)

    def bounded_int(digits: str) -> int:
        if len(digits.lstrip("-")) > sys.get_int_max_str_digits():
            raise _TooLong(digits)
        return int(digits)

    try:
        json.loads(text, parse_constant=no_constants, parse_int=bounded_int)
    except _NotJson as exc:
        # NaN and Infinity are Python's extension, not JSON; find the first bare one.
        token = re.search(rf"(?<![\w\"]){re.escape(str(exc))}(?![\w\"])", text)
        raise LoadError(f"invalid JSON: {exc} is not a JSON number",
                        *_line_col(text, token.start() if token else 0)) from None
    except _TooLong as exc:
        raise LoadError(f"invalid JSON: {_too_long(str(exc))}",
                        *_line_col(text, _digits_at(text, str(exc)))) from None
    except json.JSONDecodeError as exc:
        before = text[: exc.pos].rstrip()
        if before.endswith(",") and text[exc.pos: exc.pos + 1] in ("}", "]"):
            raise LoadError(f"invalid JSON: trailing comma before `{text[exc.pos]}`",
                            *_line_col(text, len(before) - 1)) from None
        raise LoadError(f"invalid JSON: {_json_message(exc.msg)}", exc.lineno,
                        exc.colno) from None
    except RecursionError:
        raise LoadError("document nests too deeply", 1, 1, rule="file.size") from None


def _parse_yaml(text: str, syntax: str) -> Document:
    """Parse YAML (JSON is YAML too); ``syntax`` names the format in error messages."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.reader import ReaderError

    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _locating_constructor()
    try:
        root = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if problem.startswith("but ") and exc.context:  # "but found another document"
            problem = f"{exc.context}, {problem}"
        if "duplicate key" in problem:
            problem = problem.split(" with value")[0]
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise LoadError(f"invalid {syntax}: {problem}", line, col) from None
    except ReaderError as exc:  # its str() names ruamel's internal string and offset
        raise LoadError(f"invalid {syntax}: control character U+{exc.character:04X} is not "
                        "allowed (write it as an escape inside double quotes)",
                        *_line_col(text, exc.position)) from None
    except _UnreadableValue as exc:
        raise LoadError(f"invalid {syntax}: {exc.message}", exc.line, exc.column) from None
    except RecursionError:
        raise LoadError("document nests too deeply", 1, 1, rule="file.size") from None
    except YAMLError as exc:
        raise LoadError(f"invalid {syntax}: {exc}", 1, 1) from None
    if root is None:
        raise LoadError("file holds no blueprint (only comments or an empty document)", 1, 1,
                        rule="file.empty")
    doc = Document(None, {(): (1, 1)})
    doc.data = _plain(root, (), doc, [0])
    return doc


class _UnreadableValue(Exception):
    """A scalar the YAML parser accepted but cannot turn into a value (``2024-13-45``)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


#: What a scalar of each YAML tag was meant to be, for "is not a valid ...".
_TAG_WORDS = {"int": "integer", "float": "number", "bool": "boolean", "timestamp": "date",
              "binary": "base64 value"}


def _locating_constructor() -> type:
    """ruamel's round-trip constructor, but a value it cannot convert names its place.

    ruamel converts scalars with Python's int(), float() and datetime, whose errors
    carry no position (and an integer over Python's digit limit is one of them).
    """
    from ruamel.yaml.constructor import RoundTripConstructor

    class LocatingConstructor(RoundTripConstructor):
        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                raise _UnreadableValue(_value_problem(node, exc), node.start_mark.line + 1,
                                       node.start_mark.column + 1) from None

    return LocatingConstructor


def _value_problem(node: Any, exc: Exception) -> str:
    value = node.value if isinstance(node.value, str) else ""
    kind = _TAG_WORDS.get(str(node.tag).rsplit(":", 1)[-1], "value")
    digits = value.lstrip("+-").replace("_", "")
    if kind == "integer" and len(digits) > sys.get_int_max_str_digits():
        return _too_long(digits)
    shown = value if len(value) <= 40 else value[:37] + "..."
    reason = f" ({exc})" if kind in ("date", "base64 value") else ""
    return f"`{shown}` is not a valid {kind}{reason}"


def _plain(node: Any, path: KeyPath, doc: Document, count: list[int]) -> Any:
    """Plain Python data from ruamel nodes, recording positions along the way."""
    count[0] += 1
    if count[0] > MAX_NODES or len(path) > MAX_DEPTH:
        line, col = doc.position(path)
        raise LoadError("document is too large or too deep once aliases are expanded", line,
                        col, rule="file.size")
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if not isinstance(key, str | int | float | bool) or key is None:
                line, col = _position(node, key) or doc.position(path)
                raise LoadError("mapping keys must be plain strings", line, col)
            child = (*path, str(key))  # ruamel's positions go by the original key
            spot = _position(node, key)
            if spot:
                doc.key_positions[child] = spot
                doc.positions[child] = spot
                if not isinstance(value, dict | list):
                    doc.positions[child] = _scalar_position(node, key, value, spot)
            out[str(key)] = _plain(value, child, doc, count)
        return out
    if isinstance(node, list):
        out_list = []
        for index, value in enumerate(node):
            child = (*path, index)
            try:
                line, col = node.lc.item(index)
                doc.positions[child] = (line + 1, col + 1)
            except (AttributeError, KeyError, TypeError):
                pass
            out_list.append(_plain(value, child, doc, count))
        return out_list
    return _plain_scalar(node)


def _position(node: Any, key: Any, part: str = "key") -> tuple[int, int] | None:
    """1-based position of a mapping's ``key`` itself, or of its value with part="value"."""
    try:
        line, col = getattr(node.lc, part)(key)
    except (AttributeError, KeyError, TypeError):
        return None
    return (line + 1, col + 1)


def _scalar_position(node: Any, key: Any, value: Any, key_spot: tuple[int, int]
                     ) -> tuple[int, int]:
    """Where a key's scalar value is written; an empty value (``zone:``) has no place of
    its own (ruamel gives the next token's, often a line below), so its key's is used."""
    spot = _position(node, key, "value")
    if spot is None or (value is None and spot[0] != key_spot[0]):
        return key_spot
    return spot


def _plain_scalar(value: Any) -> Any:
    """ruamel's scalar subclasses (ScalarInt, ScalarString...) as their plain base types."""
    if isinstance(value, bool) or value is None:
        return value
    for base in (int, float, str):
        if isinstance(value, base):
            return base(value)
    # Timestamps and other YAML-only types stay as they are; the model refuses them.
    return value
