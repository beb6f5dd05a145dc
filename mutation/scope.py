"""Narrow a staged copy's ``[tool.mutmut]`` to one scope: what it mutates, which tests judge it.

mutmut reads its configuration from the folder it runs in and nothing else, so `make
mutation` stages the tree in ``.mutation/SCOPE/`` and rewrites the two keys there. A scope
pairs modules with the tests that exercise them in the test process: mutmut picks each
mutant's tests from the functions a test reached in its coverage pass, and a program the
tests start as a process (the CLI, a node program) is not traced there.

``core`` is the configuration as pyproject.toml states it. Its coverage pass still fails
today: the CLI tests render whole startup scripts in a process, and with mutmut's copies of
the node programs embedded a script outgrows a metadata value (256 KiB), so those tests fail.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

NODE = "clusterprint/node/"
SCOPES: dict[str, tuple[list[str], list[str]]] = {
    "node": ([f"{NODE}common.py", f"{NODE}healthcheck.py", f"{NODE}remediate.py",
              f"{NODE}config_sync.py"], ["tests/clusterprint/node"]),
    "policies": (["clusterprint/preview/policies.py", "clusterprint/facts/addresses.py",
                  "clusterprint/facts/credentials.py"],
                 ["tests/clusterprint/preview/test_policies.py", "tests/policy"]),
}


def narrowed(text: str, modules: list[str], tests: list[str]) -> str:
    """pyproject.toml's text with ``only_mutate`` and the test selection replaced."""
    text, mutated = re.subn(r"^only_mutate = \[.*?\]", f"only_mutate = {json.dumps(modules)}",
                            text, count=1, flags=re.MULTILINE | re.DOTALL)
    text, selected = re.subn(r"^pytest_add_cli_args_test_selection = \[.*?\]",
                             f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
                             text, count=1, flags=re.MULTILINE | re.DOTALL)
    assert mutated == selected == 1, "pyproject.toml has no [tool.mutmut] keys to narrow"
    return text


def main(argv: list[str]) -> int:
    scope, pyproject = argv
    if scope == "core":
        return 0
    if scope not in SCOPES:
        print(f"MUTATION_SCOPE={scope}: one of core, {', '.join(SCOPES)}", file=sys.stderr)
        return 2
    path = Path(pyproject)
    path.write_text(narrowed(path.read_text(), *SCOPES[scope]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
