"""Turning pydantic's validation errors into findings a person can act on.

pydantic says *what* failed ("extra_forbidden", "literal_error"); a user needs the key
path, what was wrong and what would be right ("did you mean `mtu`?").
"""

from __future__ import annotations

import datetime
import difflib
import json
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from clusterprint.blueprint import model
from clusterprint.blueprint.findings import Finding, KeyPath, error

#: What each pattern in the model means, in words.
PATTERN_MEANINGS = {
    model.NAME_PATTERN: "2 to 20 lowercase letters, digits or hyphens, starting with a letter "
                        "and not ending with a hyphen",
    model.LIST_NAME_PATTERN: "1 to 16 lowercase letters, digits or hyphens, starting with a "
                             "letter and not ending with a hyphen",
    model.PARTITION_NAME_PATTERN: "1 to 31 lowercase letters, digits or hyphens, starting "
                                  "with a letter and not ending with a hyphen",
    model.IMAGE_FAMILY_PATTERN: "an image family: lowercase letters, digits or hyphens, "
                                "starting with a letter, at most 63",
    model.PROJECT_PATTERN: "a project id: 6 to 30 lowercase letters, digits or hyphens, "
                           "starting with a letter",
    model.REGION_PATTERN: "a region such as us-central1",
    model.NODE_PATH_PATTERN: "an absolute path of letters, digits, ., _, - and / without "
                             "`..`, such as /lustre/data/web_text",
    model.MOUNT_PATH_PATTERN: "a path of letters, digits, ., _, - and / without `..`, such as "
                              "/lustre/scratch",
    model.CIDR_PATTERN: "an IPv4 CIDR block such as 10.0.0.0/20",
    model.ZONE_PATTERN: "a zone such as us-central1-a",
    model.MACHINE_TYPE_PATTERN: "a machine type such as a3-megagpu-8g",
    model.NETWORK_PATTERN: "projects/PROJECT/global/networks/NAME",
    model.SUBNETWORK_PATTERN: "projects/PROJECT/regions/REGION/subnetworks/NAME",
    model.RESERVATION_PATTERN: "[projects/P/reservations/]NAME[/reservationBlocks/B"
                               "[/reservationSubBlocks/S]]",
    model.SLURM_TIME_PATTERN: "a Slurm time such as 60, 12:00:00 or 7-00:00:00",
    model.LABEL_KEY_PATTERN: "a label key: lowercase letters, digits, _ or -, starting with a "
                             "letter, at most 63",
    model.LABEL_VALUE_PATTERN: "a label value: lowercase letters, digits, _ or -, at most 63",
    model.BUCKET_PATTERN: "a bucket name: 3 to 63 lowercase letters, digits, dots, _ or -",
    model.LUSTRE_FILESYSTEM_PATTERN: "1 to 8 letters and digits",
    model.CLOUD_SQL_INSTANCE_PATTERN: "a Cloud SQL instance: projects/P/instances/I or the "
                                      "connection name P:REGION:I",
    model.SQL_DATABASE_PATTERN: "a database name: 1 to 64 letters, digits or _",
}

_TYPE_WORDS = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "a string", "list_type": "a list", "dict_type": "a mapping",
    "model_type": "a mapping", "model_attributes_type": "a mapping", "float_type": "a number",
}


def describe(value: Any) -> str:
    """A short name for what the user wrote, for "expected X, got Y"."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", type(None): "nothing (null)",
             datetime.date: "a date", datetime.datetime: "a timestamp", bytes: "binary data"}
    # Anything else came from a YAML tag (``!foo bar``); its class name means nothing to a user.
    word = names.get(type(value), "a tagged YAML value")
    if isinstance(value, bool | int | float | str | datetime.date):
        return f"{word} ({_show(value)})"
    return word


def _show(value: Any) -> str:
    """A value as it would be written in the blueprint: strings quoted and escaped as in JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _literal_choices(expected: str) -> list[str | int]:
    """The choices of pydantic's ``'a', 'b' or 'c'`` (Python reprs) as values: ``125`` an int."""
    words = [w.strip() for w in expected.replace(" or ", ", ").split(",") if w.strip()]
    return [w[1:-1] if w[:1] == "'" else int(w) if w.lstrip("-").isdigit() else w
            for w in words]


def _unwrap(annotation: Any) -> list[Any]:
    """The types inside Optional, list, dict and Annotated wrappers."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        args = typing.get_args(annotation)
        if origin is dict:
            args = args[1:]
        return [t for a in args for t in _unwrap(a)]
    return [annotation]


def model_at(path: KeyPath) -> type[BaseModel] | None:
    """The model class that describes the mapping at ``path``, if any."""
    current: Any = model.Blueprint
    for part in path:
        if isinstance(part, int):
            continue
        fields = _fields(current)
        field = fields.get(part)
        if field is None:
            return None
        inner = [t for t in _unwrap(field.annotation)
                 if isinstance(t, type) and issubclass(t, BaseModel)]
        if not inner:
            return None
        current = inner[0]
    return current


def _fields(cls: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f for name, f in cls.model_fields.items()}


def _suggest(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def clean_loc(loc: tuple) -> KeyPath:
    """pydantic's error location as a blueprint key path (validator wrappers left out)."""
    return tuple(p for p in loc if isinstance(p, int) or not str(p).startswith("function-"))


def findings_from(exc: ValidationError) -> list[Finding]:
    """One finding per pydantic error, with a hint where one helps."""
    return [_finding(e) for e in exc.errors(include_url=False)]


def _finding(err: dict) -> Finding:
    kind = err["type"]
    path = clean_loc(err["loc"])
    value = err.get("input")
    ctx = err.get("ctx") or {}

    def bad(rule: str, message: str, hint: str | None = None) -> Finding:
        return error(path, message, hint, rule=rule)

    if path and path[-1] == "[key]":
        path = path[:-1]
        return bad("schema.label-key", f"label key {_show(path[-1])} is not valid",
                   PATTERN_MEANINGS[model.LABEL_KEY_PATTERN])
    if kind == "missing":
        return bad("schema.required", "required key is missing")
    if kind == "extra_forbidden":
        owner = model_at(path[:-1])
        known = sorted(_fields(owner)) if owner else []
        hint = _suggest(str(path[-1]), known) or (
            f"known keys: {', '.join(known)}" if known else None)
        return bad("schema.unknown-key", "unknown key", hint)
    if kind == "literal_error":
        choices = _literal_choices(ctx.get("expected", ""))
        words = [_show(c) for c in choices]
        expected = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
        names = [str(c) for c in choices]
        hint = _suggest(value, names) if isinstance(value, str) else None
        if isinstance(value, str) and value in names and value not in choices:
            hint = f"write {value} without quotes: it is a number"  # performance_tier: "500"
        return bad("schema.enum", f"{_show(value)} is not one of {expected}", hint)
    if kind == "string_unicode":  # JSON can escape half a surrogate pair: "\ud800"
        return bad("schema.type", "is not valid Unicode text",
                   "remove the unpaired \\uD800-\\uDFFF escape")
    if kind in _TYPE_WORDS:
        return bad("schema.type", f"expected {_TYPE_WORDS[kind]}, got {describe(value)}")
    if kind == "string_pattern_mismatch":
        meaning = PATTERN_MEANINGS.get(ctx.get("pattern"), f"pattern {ctx.get('pattern')}")
        return bad("schema.pattern", f"{_show(value)} is not valid", f"expected {meaning}")
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}
    if kind in bounds:
        words, key = bounds[kind]
        return bad("schema.range", f"{_show(value)} is out of range",
                   f"must be {words} {ctx.get(key)}")
    if kind == "string_too_long":
        return bad("schema.length", f"is {len(value)} characters long",
                   f"at most {ctx.get('max_length')}")
    if kind in ("too_short", "too_long"):
        words = "at least" if kind == "too_short" else "at most"
        limit = ctx.get("min_length" if kind == "too_short" else "max_length")
        # pydantic leaves a mapping's actual length out (None).
        actual = ctx.get("actual_length")
        actual = len(value) if actual is None and isinstance(value, dict | list) else actual
        return bad("schema.length", f"has {actual} items", f"needs {words} {limit}")
    return bad("schema.invalid", err["msg"])
