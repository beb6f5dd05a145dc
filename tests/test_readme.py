"""The README's and docs/' examples are what the commands really print, not what they once did."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import BLUEPRINTS, ROOT

README = ROOT / "README.md"


def doc(name: str) -> str:
    """The text of the page ``docs/NAME.md``."""
    return (ROOT / "docs" / f"{name}.md").read_text()


def test_the_validate_sample_is_what_validate_prints(tmp_path):
    block = re.search(r"```\n\$ clusterprint validate blueprints/bad\.yaml\n(.*?)```",
                      doc("cli"), re.S)
    assert block, "docs/cli.md lost its validate sample"
    (tmp_path / "blueprints").mkdir()
    text = (BLUEPRINTS / "a3mega.yaml").read_text()
    bad = text.replace("mtu: 8244 ", "mtu: 8000 ", 1).replace(
        "capacity_gib: 18000 ", "capacity_gib: 20000 ", 1)
    assert "mtu: 8000 " in bad and "capacity_gib: 20000 " in bad
    (tmp_path / "blueprints/bad.yaml").write_text(bad)
    done = subprocess.run([sys.executable, "-m", "clusterprint.cli", "validate",
                           "blueprints/bad.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, check=False, env={"PYTHONPATH": str(ROOT),
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert done.stdout + done.stderr == block.group(1)


def test_the_apis_to_enable_are_those_the_plans_need():
    from clusterprint.facts import prerequisites
    from tests.support.plans import PLANNED, planned_types

    command = re.search(r"gcloud services enable (.*?) --project", README.read_text(), re.S)
    assert command, "README lost its `gcloud services enable` line"
    listed = command.group(1).replace("\\\n", " ").split()
    types = frozenset().union(*(planned_types(name) for name in PLANNED))
    assert listed == sorted({*prerequisites.required_apis(types), *prerequisites.RUNTIME_APIS})
    small = re.search(r"`cpu-small` needs only `([a-z\s]+)`", README.read_text())
    assert small, "README lost the list of cpu-small's APIs"
    needed = {*prerequisites.required_apis(planned_types("cpu-small")),
              *prerequisites.RUNTIME_APIS}
    assert small.group(1).split() == sorted(api.split(".")[0] for api in needed)


def test_the_deploy_step_runs_the_policy_pack_as_the_blueprint_needs_it():
    """Step 3 of the first cluster installs the pack where PulumiPolicy.yaml looks for its
    virtualenv, and tells it storage.protect exactly when the blueprint turns it off."""
    import json

    import yaml

    from clusterprint.blueprint.validate import load_checked

    step = README.read_text().split("### 3. Deploy", 1)[1].split("\n### ", 1)[0]
    blueprint = re.search(r"config set clusterprint:blueprint (\S+)", step).group(1)
    pack = yaml.safe_load((ROOT / "policy/PulumiPolicy.yaml").read_text())
    install = (f"python3 -m venv policy/{pack['runtime']['options']['virtualenv']} && "
               f"policy/{pack['runtime']['options']['virtualenv']}/bin/pip install -r "
               "policy/requirements.txt")
    assert install in step
    config = "--policy-pack-config policy/unprotected.json"
    protect = load_checked(str(ROOT / blueprint)).storage.protect
    for command in ("pulumi preview --diff", "pulumi up"):
        line = next(line for line in step.splitlines() if line.startswith(command))
        assert "--policy-pack policy" in line
        assert (config in line) is (not protect)
    unprotected = json.loads((ROOT / "policy/unprotected.json").read_text())
    assert {c["storageProtect"] for c in unprotected.values()} == {False}


def test_tear_it_down_says_what_bills_after_destroy_as_the_stack_output_does():
    """README step 7 and the stack's ``after_destroy`` output warn of the same things."""
    from clusterprint.components.teardown import IMAGES, RUNNING_JOBS, STATE

    step = README.read_text().split("### 7. Tear it down", 1)[1].split("\n### ", 1)[0]
    before = step.split("What blocks `pulumi destroy`", 1)[0]
    for said in ("kills running jobs", "`squeue`", "state=drain", "`after_destroy`",
                 "reservation", "`create: false`", "clusterprint image build",
                 "Pulumi's state bucket"):
        assert said in before, said
    assert "kills running jobs" in RUNNING_JOBS and "clusterprint image build" in IMAGES
    assert "Pulumi's state" in STATE
