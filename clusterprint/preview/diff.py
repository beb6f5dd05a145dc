"""What changes between two plans: create, update, replace or delete, input by input.

Resources match by (type, logical name), as Pulumi's URNs do. A changed input that
the provider cannot update in place makes the change a replacement; which inputs
those are comes from ``clusterprint.preview.replacements``. A replaced or deleted
Filestore, Lustre or bucket loses its data: the diff says so loudly and the CLI
exits non-zero. A change to the Slurm files' metadata carries each changed file's unified
diff (``clusterprint.preview.file_diff``). This is a review aid worked out offline;
`pulumi preview --diff` against the real stack is the authority.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterprint.blueprint.findings import Located, format_path
from clusterprint.preview.file_diff import FileDiff, slurm_file_diffs
from clusterprint.preview.plan import Plan, mock_id
from clusterprint.preview.replacements import (
    forces_replacement,
    is_data_bearing,
    keyed_lists,
    replaced_on_any_change,
)
from clusterprint.preview.rollout import Rollout, rollouts

Action = Literal["create", "update", "replace", "delete"]
#: The order changes are listed in: what destroys data reads first.
ACTION_ORDER: tuple[Action, ...] = ("delete", "replace", "update", "create")


@dataclass(frozen=True)
class ItemId:
    """An item of an id-keyed list in an input path: ``computeResources[a4]``."""

    id: str

    def __str__(self) -> str:
        return self.id


#: A path inside a resource's inputs: keys, list indexes and ids of keyed items.
InputPath = tuple[str | int | ItemId, ...]
#: Marks a side of an input change where the input is not set.
ABSENT = None


@dataclass(frozen=True)
class InputChange:
    """One input whose value differs, at a leaf path such as ``fileShares[0].capacityGb``."""

    path: str
    old: Any
    new: Any
    forces_replacement: bool
    #: Where the input is the Slurm files' metadata: each changed file's unified diff.
    files: tuple[FileDiff, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The change as ``diff --json`` prints it; "files" only on the Slurm files' input."""
        out: dict[str, Any] = {"path": self.path, "old": self.old, "new": self.new,
                               "forcesReplacement": self.forces_replacement}
        if self.files:
            out["files"] = [f.as_json() for f in self.files]
        return out


@dataclass(frozen=True)
class ResourceChange:
    """What happens to one resource, and why."""

    action: Action
    type: str
    name: str
    inputs: tuple[InputChange, ...] = ()
    #: For an update caused only by a replaced dependency: the dependencies' names.
    replaced_dependencies: tuple[str, ...] = ()

    @property
    def data_loss(self) -> bool:
        """A data-bearing resource that is replaced or deleted loses what it holds."""
        return self.action in ("replace", "delete") and is_data_bearing(self.type)

    def as_json(self) -> dict[str, Any]:
        """The change as ``diff --json`` prints it."""
        return {"action": self.action, "type": self.type, "name": self.name,
                "dataLoss": self.data_loss, "inputs": [c.as_json() for c in self.inputs],
                "replacedDependencies": list(self.replaced_dependencies)}


@dataclass
class PlanDiff:
    """Every change between two plans, data-losing changes first, and how the changes
    reach the VMs already running (clusterprint.preview.rollout)."""

    changes: list[ResourceChange] = field(default_factory=list)
    unchanged: int = 0
    rollouts: list[Rollout] = field(default_factory=list)

    @property
    def data_loss(self) -> list[ResourceChange]:
        """The changes that replace or delete a Filestore, Lustre or bucket."""
        return [c for c in self.changes if c.data_loss]

    def counts(self) -> dict[str, int]:
        """How many resources each action touches, plus the unchanged ones."""
        out = {a: sum(1 for c in self.changes if c.action == a) for a in ACTION_ORDER}
        out["unchanged"] = self.unchanged
        return out

    def as_json(self) -> dict[str, Any]:
        """The ``diff --json`` object."""
        return {"summary": self.counts(), "dataLoss": bool(self.data_loss),
                "changes": [c.as_json() for c in self.changes],
                "rollouts": [r.as_json() for r in self.rollouts]}


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    """Compare two plans resource by resource.

    A resource whose own inputs did not change but that depends on a replaced one is
    listed as an update: it will point at the new resource (an instance group moving
    to a replaced template). It is a replacement instead when its type replaces on any
    change (an instance template reading a replaced file system's address), or when a
    replacement-forcing input of it holds the replaced resource's id.
    """
    old_by_key = {r.key: r for r in old.resources}
    new_by_key = {r.key: r for r in new.resources}
    changes: dict[tuple[str, str], ResourceChange] = {}
    for key, res in old_by_key.items():
        if key not in new_by_key:
            changes[key] = ResourceChange("delete", res.type, res.name)
    for key, res in new_by_key.items():
        before = old_by_key.get(key)
        if before is None:
            changes[key] = ResourceChange("create", res.type, res.name)
            continue
        inputs = _input_changes(res.type, before.inputs, res.inputs)
        if inputs:
            action: Action = ("replace" if any(c.forces_replacement for c in inputs)
                              else "update")
            changes[key] = ResourceChange(action, res.type, res.name, inputs)
    _propagate_replacements(new, changes)
    ordered = sorted(changes.values(), key=lambda c: (ACTION_ORDER.index(c.action),
                                                      not c.data_loss, c.type, c.name))
    return PlanDiff(ordered, len(new_by_key) - sum(
        1 for c in ordered if c.action != "delete"), rollouts(ordered, new))


def _propagate_replacements(new: Plan, changes: dict[tuple[str, str], ResourceChange]) -> None:
    """Dependents of a replaced resource change too, until nothing more changes."""
    while True:
        replaced = {c.name for c in changes.values() if c.action == "replace"}
        grew = False
        for res in new.resources:
            hit = tuple(sorted(replaced.intersection(res.dependencies)))
            current = changes.get(res.key)
            if not hit or (current is not None and current.action in ("replace", "create")):
                continue
            if current is not None and set(hit) <= set(current.replaced_dependencies):
                continue
            forced = replaced_on_any_change(res.type) or any(
                forces_replacement(res.type, _normalise(path))
                for path, value in _leaves(res.inputs)
                if isinstance(value, str) and any(mock_id(n) in value for n in hit))
            own = current.inputs if current else ()
            changes[res.key] = ResourceChange("replace" if forced else "update", res.type,
                                              res.name, own, hit)
            grew = True
        if not grew:
            return


def _input_changes(type_: str, old: dict, new: dict) -> tuple[InputChange, ...]:
    keyed = keyed_lists(type_)
    old_leaves = dict(_leaves(old, keyed=keyed)) if old else {}
    new_leaves = dict(_leaves(new, keyed=keyed)) if new else {}
    old_items, new_items = _items(old_leaves), _items(new_leaves)
    out = []
    for path in sorted(old_leaves.keys() | new_leaves.keys(), key=_sort_key):
        before, after = old_leaves.get(path, ABSENT), new_leaves.get(path, ABSENT)
        if before != after or type(before) is not type(after):
            item = _item(path)
            if item is not None and item not in old_items:
                forced = False  # an item the API adds to its map in place
            elif item is not None and item not in new_items:
                forced = keyed[_normalise(item)]
            else:
                forced = forces_replacement(type_, _normalise(path), before, after)
            shown = format_path(path)
            out.append(InputChange(shown, before, after, forced,
                                   slurm_file_diffs(shown, before, after)))
    return tuple(out)


def _leaves(value: Any, path: InputPath = (),
            keyed: dict[str, bool] | None = None) -> list[tuple[InputPath, Any]]:
    """Every scalar (and every empty dict or list) in nested inputs, with its path.

    Items of the lists in ``keyed`` whose ids are unique are placed by id, so an item
    inserted before others changes no one else's path.
    """
    keyed = keyed or {}
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k), keyed)]
    if isinstance(value, list) and value:
        ids = [v.get("id") if isinstance(v, dict) else None for v in value]
        if _normalise(path) in keyed and all(isinstance(i, str) for i in ids) and (
                len(set(ids)) == len(ids)):
            steps: list[int | ItemId] = [ItemId(i) for i in ids]
        else:
            steps = list(range(len(value)))
        return [leaf for step, v in zip(steps, value, strict=True)
                for leaf in _leaves(v, (*path, step), keyed)]
    return [(path, value)]


def _item(path: InputPath) -> InputPath | None:
    """The path of the keyed item ``path`` lies in, if any."""
    index = next((i for i, p in enumerate(path) if isinstance(p, ItemId)), None)
    return None if index is None else path[:index + 1]


def _items(leaves: dict[InputPath, Any]) -> set[InputPath]:
    return {item for path in leaves if (item := _item(path)) is not None}


def _sort_key(path: InputPath) -> tuple:
    return tuple((0, p, "") if isinstance(p, int) else (0, 0, p.id) if isinstance(p, ItemId)
                 else (1, 0, p) for p in path)


def _normalise(path: InputPath) -> str:
    """``fileShares[0].name`` as ``fileShares.name``: the replacement table's form."""
    return ".".join(p for p in path if isinstance(p, str))


class DiffInputError(Exception):
    """An OLD or NEW argument that is neither a valid blueprint nor a saved plan.

    For an invalid blueprint ``findings`` holds the validator's findings (the text is
    their lines), so the command prints them as ``validate`` does.
    """

    def __init__(self, message: str, findings: list[Located] | None = None) -> None:
        super().__init__(message)
        self.findings = findings or []


def load_plan(path: str) -> Plan:
    """A saved plan (JSON with a top-level "resources" key), or the plan of a blueprint.

    The file is read once, so OLD or NEW may be a pipe (``<(git show main:bp.yaml)``).
    """
    from clusterprint.blueprint.loader import LoadError, read_text
    from clusterprint.blueprint.validate import check_text
    from clusterprint.preview.plan import (
        MAX_DEPTH,
        PlanFormatError,
        nests_deeper,
        plan_blueprint,
    )

    try:
        text = read_text(path)
    except LoadError as exc:
        raise DiffInputError(f"{path}: {exc.message}") from None
    if not path.lower().endswith((".yaml", ".yml")):
        if nests_deeper(text):
            raise DiffInputError(f"{path}: neither a clusterprint plan nor a blueprint: it "
                                 f"nests deeper than {MAX_DEPTH} levels")
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and "resources" in data:
            try:
                return Plan.from_json(data)
            except PlanFormatError as exc:
                raise DiffInputError(f"{path}: not a clusterprint plan: {exc}") from None
        if isinstance(data, dict) and "apiVersion" not in data:
            raise DiffInputError(f'{path}: neither a clusterprint plan (`clusterprint plan '
                                 f'--json` output, a "resources" list) nor a blueprint '
                                 f'(apiVersion: clusterprint/v1)')
    checked = check_text(path, text, is_json=path.lower().endswith(".json"))
    if not checked.ok or checked.blueprint is None:
        raise DiffInputError("\n".join(checked.lines()), checked.findings)
    return plan_blueprint(checked.blueprint)
