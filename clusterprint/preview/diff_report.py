"""How a plan diff reads: in a terminal, and as the comment a CI job posts on a PR.

Both forms lead with what loses data, because that is the change a reviewer must
not miss, then say which changes reach the running VMs by themselves and which wait for a
reboot or a recreated VM, and end by naming `pulumi preview --diff` as the authority.
"""

from __future__ import annotations

import json
from typing import Any

from clusterprint.preview.diff import ACTION_ORDER, InputChange, PlanDiff, ResourceChange

AUTHORITY = ("Worked out offline from the blueprints under Pulumi's mocks; "
             "`pulumi preview --diff` on the real stack is the authority.")
#: Terminal and table symbols, as `pulumi preview` draws them.
SYMBOLS = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
#: Longest value shown in full; startup scripts and dashboards are longer.
VALUE_LIMIT = 60


def summary_line(diff: PlanDiff) -> str:
    """``1 to create, 2 to update, ... 40 unchanged``."""
    counts = diff.counts()
    parts = [f"{counts[a]} to {a}" for a in reversed(ACTION_ORDER)]
    return ", ".join(parts) + f", {counts['unchanged']} unchanged"


def text_report(diff: PlanDiff, old: str, new: str, allow_data_loss: bool) -> str:
    """The terminal form: summary, data loss, then every change with its inputs."""
    lines = [f"clusterprint diff {old} -> {new}", f"  {summary_line(diff)}", ""]
    if diff.data_loss:
        verdict = ("allowed by --allow-data-loss" if allow_data_loss
                   else "refused (exit 3); pass --allow-data-loss once you have a copy")
        lines.append(f"!! DATA LOSS: {len(diff.data_loss)} data-bearing resource(s) would be "
                     f"replaced or deleted, {verdict}:")
        lines += [f"!!   {c.action} {c.name} ({c.type})" for c in diff.data_loss]
        lines.append("")
    if not diff.changes:
        lines.append("No changes.")
    for change in diff.changes:
        lines.append(f"{SYMBOLS[change.action]:>2} {change.action:<8} {change.name}  "
                     f"{change.type}")
        lines += [f"      {_input_text(c)}" for c in change.inputs]
        if change.replaced_dependencies:
            lines.append(f"      (depends on replaced {', '.join(change.replaced_dependencies)})")
    if diff.rollouts:
        lines += ["", "How the changes reach the running VMs:"]
        lines += [f"  {r.kind:<9} {r.name} ({', '.join(r.inputs)}): {r.how}"
                  for r in diff.rollouts]
    lines += ["", AUTHORITY]
    return "\n".join(lines) + "\n"


def markdown_report(diff: PlanDiff, old: str, new: str, allow_data_loss: bool) -> str:
    """The pull-request comment: counts, a loud data-loss section, a table of changes."""
    counts = diff.counts()
    lines = [f"### clusterprint diff: `{old}` → `{new}`", "",
             "| create | update | replace | delete | unchanged |",
             "|---:|---:|---:|---:|---:|",
             "| " + " | ".join(str(counts[k]) for k in
                             ("create", "update", "replace", "delete", "unchanged")) + " |",
             ""]
    if diff.data_loss:
        verdict = ("allowed with `--allow-data-loss`." if allow_data_loss
                   else "the check fails until this is intended and run with "
                        "`--allow-data-loss`.")
        lines += ["> [!CAUTION]",
                  f"> **DATA LOSS: {len(diff.data_loss)} data-bearing resource(s) would be "
                  f"replaced or deleted**; {verdict}", ">"]
        for change in diff.data_loss:
            why = ", ".join(f"`{c.path}`" for c in change.inputs if c.forces_replacement)
            lines.append(f"> - **{change.action}** `{change.name}` (`{change.type}`)"
                         + (f": {why} cannot change in place" if why else ""))
        lines.append("")
    if diff.changes:
        lines += ["| | action | name | type | changed inputs |", "|---|---|---|---|---|"]
        lines += [_table_row(c) for c in diff.changes]
    else:
        lines.append("No changes.")
    if diff.rollouts:
        lines += ["", "#### How the changes reach the running VMs", ""]
        lines += [f"- **{r.kind}** `{r.name}` ({', '.join(f'`{i}`' for i in r.inputs)}): "
                  f"{r.how}" for r in diff.rollouts]
    lines += ["", f"_{AUTHORITY}_"]
    return "\n".join(lines) + "\n"


def _table_row(change: ResourceChange) -> str:
    cells = [_cell(_input_text(c)) for c in change.inputs]
    if change.replaced_dependencies:
        cells.append(_cell(f"depends on replaced {', '.join(change.replaced_dependencies)}"))
    return (f"| {SYMBOLS[change.action]} | {change.action} | `{change.name}` | "
            f"`{change.type}` | {'<br>'.join(cells)} |")


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _input_text(change: InputChange) -> str:
    forced = "  (forces replacement)" if change.forces_replacement else ""
    if _is_text(change.old) and _is_text(change.new):
        return f"{change.path}: {_changed_lines(change.old, change.new)}{forced}"
    return f"{change.path}: {_value(change.old)} -> {_value(change.new)}{forced}"


def _is_text(value: Any) -> bool:
    """A multi-line string (a startup script, a config file): shown by its changed lines."""
    return isinstance(value, str) and "\n" in value


def _changed_lines(old: str, new: str) -> str:
    """The first changed line of two texts and how many more changed, not the whole texts."""
    import difflib

    old_lines, new_lines = old.splitlines(), new.splitlines()
    blocks = [op for op in difflib.SequenceMatcher(None, old_lines, new_lines,
                                                   autojunk=False).get_opcodes()
              if op[0] != "equal"]
    if not blocks:
        return "whitespace only"
    _, i1, i2, j1, j2 = blocks[0]
    first_old = _value(old_lines[i1]) if i1 < i2 else "(none)"
    first_new = _value(new_lines[j1]) if j1 < j2 else "(none)"
    more = sum(max(b[2] - b[1], b[4] - b[3]) for b in blocks) - max(i2 - i1, j2 - j1)
    tail = f" (and {more} more changed line{'s' if more != 1 else ''})" if more else ""
    return f"line {j1 + 1}: {first_old} -> {first_new}{tail}"


def _value(value: Any) -> str:
    if value is None:
        return "(unset)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > VALUE_LIMIT:
        return text[: VALUE_LIMIT - 1] + f"…({len(text)} chars)"
    return text
