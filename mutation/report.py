"""mutation/REPORT-SCOPE.md from the last `mutmut run`: the kill rate and every surviving mutant.

Run by `make mutation` after `mutmut run` (in the staged copy, MUTMUT the mutmut
command); prints Markdown on stdout. A survivor is a plausible bug no test notices: each
one is listed with its diff, by file, so that a developer can write the test that kills it
(or say in the code why the mutant is no bug).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

#: mutmut's statuses that mean a test noticed the mutant (a hang counts: the suite failed).
KILLED = ("killed", "timeout", "caught by type check")
#: Statuses of mutants no test noticed: ran and passed, or reached by no selected test.
SURVIVED = ("survived", "no tests", "suspicious")


def results(mutmut: str) -> dict[str, str]:
    """Every mutant's status, by mutant name, as ``mutmut results --all true`` lists them."""
    out = subprocess.run([mutmut, "results", "--all", "true"], capture_output=True, text=True,
                         check=True).stdout
    return dict(re.findall(r"^\s+(\S+): (.+)$", out, re.MULTILINE))


def source_file(mutant: str) -> str:
    """``clusterprint.preview.diff.x_diff_plans__mutmut_3`` is a mutant of
    clusterprint/preview/diff.py."""
    module = re.match(r"(.*?)\.x[_ǁ]", mutant)
    return (module[1] if module else mutant).replace(".", "/") + ".py"


def per_module(status: dict[str, str]) -> list[str]:
    """One table row per mutated file: its killed and judged mutants (unchecked ones left
    out: a run narrowed with MUTANTS judges only some)."""
    killed: Counter[str] = Counter()
    judged: Counter[str] = Counter()
    for mutant, state in status.items():
        if state in KILLED or state in SURVIVED:
            judged[source_file(mutant)] += 1
            killed[source_file(mutant)] += state in KILLED
    return [f"| `{path}` | {killed[path]} | {judged[path]} | "
            f"{100 * killed[path] / judged[path]:.1f} % |" for path in sorted(judged)]


def report(mutmut: str) -> str:
    """The Markdown report."""
    status = results(mutmut)
    counts = Counter(status.values())
    killed = sum(counts[s] for s in KILLED)
    survived = sorted(m for m, s in status.items() if s in SURVIVED)
    judged = killed + len(survived)
    config = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]
    commit = os.environ.get("MUTATION_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip() or "unknown"
    seconds = os.environ.get("MUTATION_SECONDS")
    rate = f"{100 * killed / judged:.1f} %" if judged else "n/a"
    lines = [
        "# Mutation testing: the last run",
        "",
        "Written by `make mutation` (mutmut 3.8.1; scope: `MUTATION_SCOPE`, mutation/scope.py).",
        "Regenerate it after changing the mutated code or its tests; it is not run in CI.",
        "",
        f"- Run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit}"
        + (f", {int(seconds) // 60} min {int(seconds) % 60} s" if seconds else ""),
        "- Mutated: " + ", ".join(f"`{p}`" for p in config["only_mutate"]),
        "- Tests per mutant: those of " + ", ".join(
            f"`{p}`" for p in config["pytest_add_cli_args_test_selection"])
        + " that reach the mutated function, with `"
        + " ".join(a for a in config["pytest_add_cli_args"] if not a.startswith("no:")
                   and a != "-p") + "`",
        *([f"- Run only: the mutants matching `{os.environ['MUTANTS']}`; "
           f"{counts['not checked']} others of the scope not checked"]
          if os.environ.get("MUTANTS") else []),
        "- Not mutated: functions with a decorator (mutmut 3 skips them: every `@rule` "
        "function), the node scripts' bash templates (not Python).",
        "",
        f"Kill rate: {killed} of {judged} mutants killed ({rate})",
        "",
        "| status | mutants |",
        "|---|---|",
        *(f"| {s} | {n} |" for s, n in sorted(counts.items())),
        "",
        "## Per module",
        "",
        "| module | killed | judged | kill rate |",
        "|---|---|---|---|",
        *per_module(status),
        "",
        "## Surviving mutants",
        "",
        "Each is a change to the code that no selected test notices; `mutmut show NAME`",
        "prints it again, `mutmut apply NAME` puts it into the tree to try a test against.",
    ]
    by_file: dict[str, list[str]] = defaultdict(list)
    for mutant in survived:
        by_file[source_file(mutant)].append(mutant)
    for path, mutants in sorted(by_file.items()):
        lines += ["", f"### {path} ({len(mutants)})", ""]
        for mutant in mutants:
            diff = subprocess.run([mutmut, "show", mutant], capture_output=True,
                                  text=True).stdout.strip()
            body = [d for d in diff.splitlines() if d.startswith(("+", "-", "@@"))
                    and not d.startswith(("+++", "---"))]
            lines += [f"- `{mutant}` ({status[mutant]})", "", "  ```diff",
                      *(f"  {d}" for d in body), "  ```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(report(sys.argv[1] if len(sys.argv) > 1 else "mutmut"))
