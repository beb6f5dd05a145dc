"""What a command line run loads: the CLI's promise to stay light (validate never imports
Pulumi, --dry-run never google-auth, the flag form of `new` never its prompt library) is
kept only if a fresh interpreter, which has loaded nothing yet, shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import ROOT

#: Marks the report line on stderr, after whatever the commands print there.
REPORT = "clusterprint-test-modules:"


@dataclass(frozen=True)
class Loaded:
    """The runs' exit statuses, the watched modules loaded by then, and the process."""

    statuses: list[int]
    modules: list[str]
    process: subprocess.CompletedProcess


def loaded_modules(*runs: list[str], watched: tuple[str, ...], cwd: Path = ROOT,
                   env: dict[str, str] | None = None, timeout: float = 60) -> Loaded:
    """Run ``clusterprint.cli.main.main(argv)`` for each of ``runs`` in one new interpreter
    (stdin empty) and say which modules of the ``watched`` packages it loaded."""
    code = (
        "import json, sys\n"
        "from clusterprint.cli.main import main\n"
        f"statuses = [main(argv) for argv in {list(runs)!r}]\n"
        f"watched = {watched!r}\n"
        "modules = sorted(m for m in sys.modules\n"
        "                 if any(m == w or m.startswith(w + '.') for w in watched))\n"
        f"print({REPORT!r}, json.dumps([statuses, modules]), file=sys.stderr)\n")
    process = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=timeout,
        env={"PYTHONPATH": str(ROOT), **(os.environ if env is None else env)})
    reports = [line for line in process.stderr.splitlines() if line.startswith(REPORT)]
    assert process.returncode == 0 and reports, process.stderr
    statuses, modules = json.loads(reports[-1][len(REPORT):])
    return Loaded(statuses, modules, process)


def clusterprint(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)


def offline_env(tmp_path) -> dict[str, str]:
    """No credentials anywhere, and no metadata server to ask for them."""
    return {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json"),
            "NO_GCE_CHECK": "True", "CLOUDSDK_CONFIG": str(tmp_path)}
