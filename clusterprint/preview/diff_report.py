"""How a plan diff reads: in a terminal, and as the comment a CI job posts on a PR.

Both forms lead with what loses data, because that is the change a reviewer must
not miss, then say which changes reach the running VMs by themselves and which wait for a
reboot or a recreated VM, and end by naming `pulumi preview --diff` as the authority.
A change to the Slurm files' metadata names the files it changes and shows each file's
unified diff (under the change in a terminal, in ``diff`` blocks after the table in
Markdown). A changed startup script keeps its one-line form (first changed line and how
many more): every VM and template carries one, so a change to a shared step would
repeat the same long diff for each, while a Slurm file change is what a reviewer reads
line by line.

A saved plan may name a resource, an input or a file with any character: each is printed
escaped (``printable``), so a newline or an escape sequence in it never splits a line or
drives the terminal, and in Markdown it stands in a code span that neither a backtick nor a
``|`` in it can end early or cut out of its table cell.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clusterprint.blueprint.validate import printable
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
    lines = [f"clusterprint diff {printable(old)} -> {printable(new)}",
             f"  {summary_line(diff)}", ""]
    if diff.data_loss:
        verdict = ("allowed by --allow-data-loss" if allow_data_loss
                   else "refused (exit 3); pass --allow-data-loss once you have a copy")
        lines.append(f"!! DATA LOSS: {len(diff.data_loss)} data-bearing resource(s) would be "
                     f"replaced or deleted, {verdict}:")
        lines += [f"!!   {c.action} {printable(c.name)} ({printable(c.type)})"
                  for c in diff.data_loss]
        lines.append("")
    if not diff.changes:
        lines.append("No changes.")
    for change in diff.changes:
        lines.append(f"{SYMBOLS[change.action]:>2} {change.action:<8} "
                     f"{printable(change.name)}  {printable(change.type)}")
        for c in change.inputs:
            lines.append(f"      {_input_text(c)}")
            lines += [f"        {printable(line)}" for f in c.files for line in f.lines]
        if change.replaced_dependencies:
            lines.append(f"      (depends on replaced {_names(change.replaced_dependencies)})")
    if diff.rollouts:
        lines += ["", "How the changes reach the running VMs:"]
        lines += [f"  {r.kind:<9} {printable(r.name)} ({_names(r.inputs)}): {printable(r.how)}"
                  for r in diff.rollouts]
    lines += ["", AUTHORITY]
    return "\n".join(lines) + "\n"


def markdown_report(diff: PlanDiff, old: str, new: str, allow_data_loss: bool) -> str:
    """The pull-request comment: counts, a loud data-loss section, a table of changes."""
    counts = diff.counts()
    lines = [f"### clusterprint diff: {_code(old)} → {_code(new)}", "",
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
            why = ", ".join(_code(c.path) for c in change.inputs if c.forces_replacement)
            lines.append(f"> - **{change.action}** {_code(change.name)} ({_code(change.type)})"
                         + (f": {why} cannot change in place" if why else ""))
        lines.append("")
    if diff.changes:
        lines += ["| | action | name | type | changed inputs |", "|---|---|---|---|---|"]
        lines += [_table_row(c) for c in diff.changes]
    else:
        lines.append("No changes.")
    lines += _markdown_files(diff)
    if diff.rollouts:
        lines += ["", "#### How the changes reach the running VMs", ""]
        lines += [f"- **{r.kind}** {_code(r.name)} ({', '.join(_code(i) for i in r.inputs)}): "
                  f"{printable(r.how)}" for r in diff.rollouts]
    lines += ["", f"_{AUTHORITY}_"]
    return "\n".join(lines) + "\n"


def _table_row(change: ResourceChange) -> str:
    cells = [_code(_input_text(c), cell=True) for c in change.inputs]
    if change.replaced_dependencies:
        cells.append(_code(f"depends on replaced {_names(change.replaced_dependencies)}",
                           cell=True))
    return (f"| {SYMBOLS[change.action]} | {change.action} | {_code(change.name, cell=True)} | "
            f"{_code(change.type, cell=True)} | {'<br>'.join(cells)} |")


def _markdown_files(diff: PlanDiff) -> list[str]:
    """Each changed Slurm file's unified diff, by resource, in a ``diff`` block a table cell
    cannot hold."""
    lines = []
    for change in diff.changes:
        for file in (f for c in change.inputs for f in c.files):
            body = [printable(line) for line in file.lines]
            fence = "`" * max(3, max((len(r) for line in body
                                      for r in re.findall("`+", line)), default=0) + 1)
            lines += ["", f"{_code(file.name)} on {_code(change.name)}:", "",
                      f"{fence}diff", *body, fence]
    return ["", "#### Slurm files", *lines] if lines else []


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(printable(n) for n in names)


def _code(text: str, cell: bool = False) -> str:
    """``text`` escaped as a Markdown code span: fenced by more backticks than any run in it
    (padded with a space, which the reader strips), its ``|`` escaped in a table cell."""
    text = printable(text)
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if len(fence) > 1 else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _input_text(change: InputChange) -> str:
    forced = "  (forces replacement)" if change.forces_replacement else ""
    path = printable(change.path)
    if change.files:
        names = ", ".join(printable(f.name) for f in change.files)
        return f"{path}: Slurm files changed: {names}{forced}"
    if _is_text(change.old) and _is_text(change.new):
        return f"{path}: {_changed_lines(change.old, change.new)}{forced}"
    return f"{path}: {_value(change.old)} -> {_value(change.new)}{forced}"


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
    text = printable(json.dumps(value, sort_keys=True, ensure_ascii=False))
    if len(text) > VALUE_LIMIT:
        return text[: VALUE_LIMIT - 1] + f"…({len(text)} chars)"
    return text
