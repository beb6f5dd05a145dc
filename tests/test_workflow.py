"""The example GitHub workflow users copy: linted by zizmor and actionlint, pinned, least privilege.

Users copy it into repositories with cloud credentials in reach, so it is held to what
zizmor (offline: no GitHub API calls) and actionlint report, and to no findings at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.support.paths import ROOT

WORKFLOW = ROOT / ".github/workflows/clusterprint.yml"
#: ``owner/repo@<40 hex> # vX.Y.Z``: a hash GitHub cannot move, with the tag it was.
PINNED = re.compile(r"^\s*-?\s*uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def tool(name: str) -> str:
    """A linter installed with the test extra, next to this interpreter."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is missing: pip install -e '.[test]'"
    return str(path)


def run_linter(*command: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def test_zizmor_offline_finds_nothing():
    result = run_linter(tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_actionlint_finds_nothing():
    """actionlint also runs shellcheck on every run: script (shellcheck is installed)."""
    result = run_linter(tool("actionlint"), "-no-color", str(WORKFLOW))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


@pytest.fixture(scope="module")
def workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def steps(workflow: dict) -> list[tuple[str, dict]]:
    return [(job, step) for job, spec in workflow["jobs"].items() for step in spec["steps"]]


def test_every_action_is_pinned_by_hash_with_its_tag():
    lines = [line for line in WORKFLOW.read_text().splitlines() if "uses:" in line]
    assert lines
    assert [line for line in lines if not PINNED.match(line)] == []


def test_no_checkout_keeps_the_token(workflow):
    checkouts = [step for _, step in steps(workflow)
                 if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 4
    assert all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_each_job_is_granted_only_what_it_uses(workflow):
    assert workflow["permissions"] == {}
    granted = {job: spec["permissions"] for job, spec in workflow["jobs"].items()}
    assert granted == {"check": {"contents": "read"},
                       "diff": {"contents": "read", "pull-requests": "write"},
                       "preview": {"contents": "read"}}


def test_no_expression_is_expanded_into_a_shell_line(workflow):
    """Step outputs and event fields reach scripts as environment variables only."""
    for job, step in steps(workflow):
        assert "${{" not in step.get("run", ""), (job, step.get("name"))


def test_every_blueprint_is_planned_and_checked_against_the_policy_pack(workflow):
    script = next(step["run"] for job, step in steps(workflow)
                  if job == "check" and "--policy" in step.get("run", ""))
    assert "for bp in blueprints/*.yaml" in script
    assert 'clusterprint plan "$bp" --json --policy' in script
    assert 'exit "$status"' in script
    preview = next(step["run"] for job, step in steps(workflow) if job == "preview"
                   and "pulumi preview" in step.get("run", ""))
    assert "--policy-pack policy" in preview and "set -o pipefail" in preview


def requirement_lines(path: Path) -> list[str]:
    """The requirements in a pip requirements file: comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_the_file_pulumi_installs_from_installs_this_project():
    """Pulumi's pip toolchain runs ``pip install -r requirements.txt`` in the project
    directory and installs nothing without one (pulumi/pulumi sdk/python/toolchain/pip.go,
    ``InstallDependencies``): the file must be there and name this project.
    """
    import tomllib

    assert requirement_lines(ROOT / "requirements.txt") == ["-e ."]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == \
        "clusterprint"


def test_preview_installs_the_program_into_pulumis_venv_before_previewing(workflow):
    preview = [step.get("run", "") for step in workflow["jobs"]["preview"]["steps"]]
    install = next(i for i, run in enumerate(preview) if "pulumi install" in run)
    previewed = next(i for i, run in enumerate(preview) if "pulumi preview" in run)
    assert install < previewed
    venv = YAML(typ="safe").load((ROOT / "Pulumi.yaml").read_text())["runtime"]["options"][
        "virtualenv"]
    # The import from Pulumi's venv, isolated from the checkout in the working directory,
    # fails the step when `pulumi install` installed nothing.
    assert f"{venv}/bin/python -I -c 'import clusterprint.components.program'" in \
        preview[install].split("pulumi install", 1)[1]
