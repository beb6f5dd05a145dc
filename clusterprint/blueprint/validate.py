"""From a file name to a checked blueprint, or to every problem it has.

The one entry point the CLI, the stack program and the plan share, so a blueprint
refused by ``clusterprint validate`` is refused the same way by ``pulumi up``.
"""

from __future__ import annotations

import copy
import types
import typing
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from clusterprint.blueprint.findings import Finding, KeyPath, Located
from clusterprint.blueprint.loader import Document, LoadError, load_document, parse
from clusterprint.blueprint.model import (
    BUCKET_PATTERN,
    CIDR_PATTERN,
    CLOUD_SQL_INSTANCE_PATTERN,
    IMAGE_FAMILY_PATTERN,
    LIST_NAME_PATTERN,
    LUSTRE_FILESYSTEM_PATTERN,
    MACHINE_TYPE_PATTERN,
    NAME_PATTERN,
    NETWORK_PATTERN,
    PARTITION_NAME_PATTERN,
    PROJECT_PATTERN,
    REGION_PATTERN,
    ZONE_PATTERN,
    Blueprint,
)


@dataclass
class Checked:
    """The outcome for one file: the blueprint when it is valid, and every finding."""

    file: str
    blueprint: Blueprint | None = None
    findings: list[Located] = field(default_factory=list)
    unreadable: bool = False

    @property
    def ok(self) -> bool:
        """True when the file loaded, validated and no finding is an error."""
        return self.blueprint is not None and not any(
            f.finding.severity == "error" for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 valid (warnings allowed), 1 invalid, 2 unreadable: the CLI's contract."""
        return 2 if self.unreadable else (0 if self.ok else 1)


    def lines(self) -> list[str]:
        """Each finding as the one line ``validate`` prints."""
        return [printable(f.line_text()) for f in self.findings]


def printable(text: str) -> str:
    """``text`` kept on one line: a newline or escape sequence in a key prints as ``\\n``.

    A key or file name can hold any character; written raw, it would break the
    one-problem-per-line contract or drive the terminal.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    code = ord(char)
    return named.get(char) or (f"\\x{code:02x}" if code < 0x100 else
                               f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


class InvalidBlueprint(Exception):
    """Raised where a program needs a valid blueprint; its text is the validator's lines."""

    def __init__(self, checked: Checked) -> None:
        super().__init__("\n".join(checked.lines()))
        self.checked = checked


#: Unicode categories no blueprint text may hold: controls (C0 with tab, DEL, C1), invisible
#: format characters (bidi overrides, zero-width) and the line and paragraph separators.
CONTROL_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
#: Names for the controls people meet; Unicode names none of the Cc characters.
CONTROL_NAMES = {"\0": "NUL", "\t": "tab", "\n": "newline", "\r": "carriage return",
                 "\x1b": "ESC", "\x7f": "DEL"}


def control_characters(data: Any, path: KeyPath = ()) -> list[tuple[Finding, bool]]:
    """A finding for every key and string value in ``data`` that holds a control character,
    and whether it blames the key (True) or the value.

    No blueprint string is free text: a newline in a mount path once ended a heredoc of a
    boot script and ran the next lines as root, a NUL crashed the health check. The schema's
    patterns refuse them where they apply; this check refuses them in every string and every
    mapping key, whatever the model makes of it, naming the key.
    """
    found: list[tuple[Finding, bool]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            child = (*path, key)
            if problem := _control_problem(key):
                found.append((Finding(child, "schema.control-character", f"the key {problem}",
                                      "remove it: keys are plain names"), True))
            found += control_characters(value, child)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += control_characters(value, (*path, index))
    elif problem := _control_problem(data):
        found.append((Finding(path, "schema.control-character", f"the value {problem}",
                              "remove it: blueprint strings are single-line names, paths "
                              "and ranges"), False))
    return found


def _control_problem(text: Any) -> str | None:
    """What control characters ``text`` holds, in words, or None."""
    if not isinstance(text, str) or text.isprintable():
        return None
    chars = dict.fromkeys(c for c in text if unicodedata.category(c) in CONTROL_CATEGORIES)
    if not chars:
        return None
    named = [f"U+{ord(c):04X} ({CONTROL_NAMES.get(c) or unicodedata.name(c, 'control')})"
             for c in chars]
    return f"holds {'a control character' if len(named) == 1 else 'control characters'} " + (
        ", ".join(named))


def check_document(file: str, doc: Document) -> Checked:
    """Validate loaded data: control characters anywhere and the model first, then the rules
    on a model that built. A model finding at a key already blamed for a control character
    is left out: it would say the same thing less plainly."""
    from clusterprint.blueprint import rules
    from clusterprint.blueprint.model_errors import findings_from

    result = Checked(file)
    controls = control_characters(doc.data)
    blamed = {finding.path for finding, _ in controls}
    blames_key = {finding for finding, on_key in controls if on_key}
    found: list[Finding]
    if not isinstance(doc.data, dict):
        from clusterprint.blueprint.model_errors import describe

        found = [Finding((), "schema.type",
                         f"a blueprint is a mapping of keys, got {describe(doc.data)}")]
    else:
        try:
            result.blueprint = Blueprint.model_validate(doc.data)
        except ValidationError as exc:
            found = findings_from(exc) + rule_findings_despite(doc.data, exc)
        else:
            found = rules.check(result.blueprint)
    found = [f for f, _ in controls] + [f for f in found if f.path not in blamed]
    for finding in found:
        # These blame the key itself: point at it, not at its value.
        key = finding.rule in ("schema.unknown-key", "schema.label-key", "labels.reserved") or (
            finding in blames_key)
        line, column = doc.position(finding.path, key=key)
        result.findings.append(Located(file, line, column, finding))
    result.findings.sort(key=lambda f: (f.line or 0, f.column or 0))
    return result


def rule_findings_despite(data: dict, exc: ValidationError) -> list[Finding]:
    """Rule findings on the data with the model's bad values repaired, so none hides another.

    A typo'd key, a bad machine type and a Lustre size off its step should all show in
    one run. Each value the model refused (or a missing key) is repaired twice, with
    different stand-ins: the default or a first valid value, then a second valid value
    (see ``_stand_in``); unknown keys are dropped. The rules run on both repairs, and a
    finding stands only when both give it: one that a stand-in causes changes with the
    stand-in. Findings at a repaired value are dropped too, since any stand-in could be
    what they complain about, and so are those in the rest of a repaired scalar's mapping
    (its siblings are what rules compare it with). A repaired section (a mapping, or a
    list of them such as a missing ``slurm.partitions``) hides only itself: the problems
    of its sibling sections (``slurm.nodesets``) still show.
    """
    from clusterprint.blueprint import rules

    errors = exc.errors(include_url=False)
    try:
        first, shaken = _repaired(data, errors, 0)
        second, _ = _repaired(data, errors, 1)
        found = [rules.check(Blueprint.model_validate(first)),
                 set(rules.check(Blueprint.model_validate(second)))]
    except (_NoStandIn, ValidationError):
        return []
    return [f for f in found[0] if f in found[1]
            and not any(f.path[:len(owner)] == owner for owner in shaken)]


class _NoStandIn(Exception):
    """A refused value with no valid stand-in (a wrong type for a whole section)."""


#: Two valid values for each pattern a required string has, unlike in what rules read:
#: no GPUs and GPUs, one region and another.
STAND_INS: dict[str | None, tuple[str, str]] = {
    NAME_PATTERN: ("standin-a", "standin-b"),
    LIST_NAME_PATTERN: ("standin-a", "standin-b"),
    PARTITION_NAME_PATTERN: ("standin-a", "standin-b"),
    IMAGE_FAMILY_PATTERN: ("standin-a", "standin-b"),
    PROJECT_PATTERN: ("standin-project-a", "standin-project-b"),
    REGION_PATTERN: ("us-central1", "europe-west4"),
    ZONE_PATTERN: ("us-central1-a", "europe-west4-b"),
    MACHINE_TYPE_PATTERN: ("n2-standard-4", "a3-megagpu-8g"),
    NETWORK_PATTERN: ("projects/standin-project-a/global/networks/standin-a",
                      "projects/standin-project-b/global/networks/standin-b"),
    BUCKET_PATTERN: ("standin-a", "standin-b"),
    LUSTRE_FILESYSTEM_PATTERN: ("standina", "standinb"),
    CLOUD_SQL_INSTANCE_PATTERN: ("projects/standin-project-a/instances/standin-a",
                                 "standin-project-b:us-central1:standin-b"),
    CIDR_PATTERN: ("192.0.2.0/24", "198.51.100.0/24"),
    None: ("standin-a", "standin-b"),
}


def _repaired(data: dict, errors: list, which: int) -> tuple[dict, list[KeyPath]]:
    """A copy of ``data`` with each refused value replaced, and the paths rules must skip."""
    from clusterprint.blueprint.model_errors import clean_loc, model_at

    repaired = copy.deepcopy(data)
    shaken: list[KeyPath] = []
    for err in errors:
        path = clean_loc(err["loc"])
        if err["type"] == "extra_forbidden" or path[-1:] == ("[key]",):
            path = path[:-1] if path[-1:] == ("[key]",) else path
            parent = _walk(repaired, path[:-1])
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            continue
        parent = _walk(repaired, path[:-1])
        if isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
            parent[path[-1]] = _item_stand_in(path, which)
            shaken.append(path)
        elif isinstance(parent, dict):
            value = _field_stand_in(path, which, default_first=which == 0)
            if value is _DEFAULT:
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = value
            shaken.append(path if len(path) == 1 or model_at(path) else path[:-1])
        else:
            raise _NoStandIn
    return repaired, shaken


#: Leave the key out so its default applies.
_DEFAULT = object()


def _field_stand_in(path: KeyPath, which: int, default_first: bool) -> Any:
    """A valid value for the mapping key at ``path``: its default first where it has one."""
    from clusterprint.blueprint.model_errors import model_at

    owner = model_at(path[:-1])
    if owner is None:  # an entry of a free-form mapping (labels): leave it out
        return _DEFAULT
    field = _field(owner, str(path[-1]))
    if field is None:
        raise _NoStandIn
    if not field.is_required() and default_first:
        return _DEFAULT
    try:
        return _stand_in(field.annotation, field.metadata, which)
    except _NoStandIn:
        if field.is_required():
            raise
        return _DEFAULT


def _item_stand_in(path: KeyPath, which: int) -> Any:
    """A valid value for the list item at ``path`` (``slurm.partitions[0].nodesets[1]``)."""
    from clusterprint.blueprint.model_errors import model_at

    owner = model_at(path[:-2])
    field = _field(owner, str(path[-2])) if owner else None
    if field is None or typing.get_origin(field.annotation) is not list:
        raise _NoStandIn
    return _stand_in(typing.get_args(field.annotation)[0], [], which)


def _field(owner: type[BaseModel], key: str) -> Any:
    return next((f for name, f in owner.model_fields.items() if (f.alias or name) == key), None)


def _stand_in(annotation: Any, metadata: list, which: int) -> Any:
    """Stand-in ``which`` (0 or 1) for a value of ``annotation`` within its constraints."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found = [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        return _stand_in(inner, [*metadata, *found], which)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _stand_in(options[0], metadata, which)
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        return choices[0] if which == 0 else choices[-1]
    limits = {name: getattr(m, name) for m in metadata
              for name in ("ge", "le", "pattern", "min_length")
              if getattr(m, name, None) is not None}
    if origin is list:
        item = _stand_in(typing.get_args(annotation)[0], [], which)
        return [item] * max(limits.get("min_length", 1), 1)
    if annotation is bool:
        return bool(which)
    if annotation is int:
        low = limits.get("ge", 0)
        # The upper bound first: a capacity check elsewhere (a recipe's nodes within its
        # partition) then does not blame a value the user never wrote.
        return limits.get("le", low + 1) if which == 0 else low
    if annotation is str and limits.get("pattern") in STAND_INS:
        return STAND_INS[limits.get("pattern")][which]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {f.alias or name: _stand_in(f.annotation, f.metadata, which)
                for name, f in annotation.model_fields.items() if f.is_required()}
    raise _NoStandIn


def _walk(data: Any, path: KeyPath) -> Any:
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def check_file(file: str) -> Checked:
    """Load and validate one file; never raises for anything a user can get wrong."""
    try:
        doc = load_document(file)
    except LoadError as exc:
        return _load_failure(file, exc)
    return check_document(file, doc)


def check_text(file: str, text: str, is_json: bool = False) -> Checked:
    """Validate blueprint text as if read from ``file`` (for tests and tools)."""
    try:
        doc = parse(text, is_json)
    except LoadError as exc:
        return _load_failure(file, exc)
    return check_document(file, doc)


def load_checked(file: str) -> Blueprint:
    """The valid blueprint in ``file``, or InvalidBlueprint with every problem."""
    checked = check_file(file)
    if not checked.ok or checked.blueprint is None:
        raise InvalidBlueprint(checked)
    return checked.blueprint


def _load_failure(file: str, exc: LoadError) -> Checked:
    finding = Finding((), exc.rule, exc.message)
    return Checked(file, None, [Located(file, exc.line, exc.column, finding)],
                   unreadable=exc.unreadable)
