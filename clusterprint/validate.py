"""From a file name to a checked blueprint, or to every problem it has.

The one entry point the CLI, the stack program and the plan share, so a blueprint
refused by ``clusterprint validate`` is refused the same way by ``pulumi up``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from clusterprint.findings import Finding, KeyPath, Located
from clusterprint.loader import Document, LoadError, load_document, parse
from clusterprint.model import Blueprint


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


class InvalidBlueprint(Exception):
    """Raised where a program needs a valid blueprint; its text is the validator's lines."""

    def __init__(self, checked: Checked) -> None:
        super().__init__("\n".join(f.line_text() for f in checked.findings))
        self.checked = checked


def check_document(file: str, doc: Document) -> Checked:
    """Validate loaded data: the model first, then the rules on a model that built."""
    from clusterprint import rules
    from clusterprint.model_errors import findings_from

    result = Checked(file)
    found: list[Finding]
    if not isinstance(doc.data, dict):
        from clusterprint.model_errors import describe

        found = [Finding((), "schema.type",
                         f"a blueprint is a mapping of keys, got {describe(doc.data)}")]
    else:
        try:
            result.blueprint = Blueprint.model_validate(doc.data)
        except ValidationError as exc:
            found = findings_from(exc) + rule_findings_despite(doc.data, exc)
        else:
            found = rules.check(result.blueprint)
    for finding in found:
        # These blame the key itself: point at it, not at its value.
        key = finding.rule in ("schema.unknown-key", "schema.label-key", "labels.reserved")
        line, column = doc.position(finding.path, key=key)
        result.findings.append(Located(file, line, column, finding))
    result.findings.sort(key=lambda f: (f.line or 0, f.column or 0))
    return result


def rule_findings_despite(data: dict, exc: ValidationError) -> list[Finding]:
    """Rule findings on the data with the model's bad keys left out.

    A typo'd key and a Lustre size off its step should both show in one run. Each key
    the model refused is dropped (its default applies; a required integer takes a
    stand-in from its bounds), and the rules run on what is left. Findings inside an
    object that lost a value are dropped too, since the stand-in could be what they
    complain about; unknown keys cost nothing. When this cannot repair the data (a
    missing key, a bad list item, a bad required string), the model's findings stand
    alone.
    """
    from clusterprint import rules
    from clusterprint.model_errors import clean_loc, model_at

    repaired = copy.deepcopy(data)
    shaken: list[KeyPath] = []
    for err in exc.errors(include_url=False):
        path = clean_loc(err["loc"])
        unknown = err["type"] == "extra_forbidden" or path[-1:] == ("[key]",)
        path = path[:-1] if path[-1:] == ("[key]",) else path
        parent = _walk(repaired, path[:-1])
        if err["type"] == "missing" or not isinstance(parent, dict) or path[-1] not in parent:
            return []
        del parent[path[-1]]
        if not unknown:
            shaken.append(path[:-1])
            stand_in = _integer_stand_in(model_at(path[:-1]), str(path[-1]))
            if stand_in is not None:
                parent[path[-1]] = stand_in
    try:
        blueprint = Blueprint.model_validate(repaired)
    except ValidationError:
        return []
    return [f for f in rules.check(blueprint)
            if not any(f.path[:len(owner)] == owner for owner in shaken)]


def _integer_stand_in(owner: type[BaseModel] | None, key: str) -> int | None:
    """A valid value for a required integer field: its upper bound, else its lower one.

    The upper bound keeps capacity checks elsewhere (a recipe's nodes within its
    partition) from blaming a value the user never wrote.
    """
    field = owner.model_fields.get(key) if owner else None
    if field is None or not field.is_required() or field.annotation is not int:
        return None
    bounds = {name: getattr(m, name) for m in field.metadata
              for name in ("ge", "le") if getattr(m, name, None) is not None}
    return bounds.get("le", bounds.get("ge", 0))


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
