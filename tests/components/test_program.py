"""The stack program: config in, checked blueprint, cluster and exports out."""

from __future__ import annotations

import pulumi
import pytest

from clusterprint.components import program
from tests.support.paths import ROOT

CPU_SMALL = ROOT / "blueprints" / "cpu-small.yaml"


@pytest.fixture
def config(monkeypatch):
    """The stack's config as ``pulumi up`` passes it, set per test and restored after."""
    monkeypatch.chdir(ROOT)  # `pulumi up` runs the program in the project directory
    values = pulumi.runtime.config.CONFIG.get()

    def set_key(key: str, value: str) -> None:
        monkeypatch.setitem(values, key, value)

    for key in ("clusterprint:blueprint", "gcp:project"):
        monkeypatch.delitem(values, key, raising=False)
    return set_key


def test_the_configured_blueprint_is_built_and_exported(cloud, config):
    config("clusterprint:blueprint", "blueprints/cpu-small.yaml")
    controller = cloud.run(lambda: program.main().exports["controller"])
    assert controller == "cpu-small-controller"
    assert cloud.one("clusterprint:index:TrainingCluster").name == "cpu-small"
    assert cloud.logged("warning") == []


def test_pulumi_up_ends_with_the_command_that_shows_the_boot(cloud, config, tmp_path):
    config("clusterprint:blueprint", "blueprints/cpu-small.yaml")
    assert cloud.run(lambda: program.main().exports["status"]) == (
        "clusterprint status blueprints/cpu-small.yaml")
    mine = tmp_path / "my cluster.yaml"  # any path the stack names, quoted for the shell
    mine.write_text(CPU_SMALL.read_text())
    config("clusterprint:blueprint", str(mine))
    assert cloud.run(lambda: program.main().exports["status"]) == (
        f"clusterprint status '{mine}'")
    # A managed cluster's VMs are Cluster Director's: no groups for status to read.
    config("clusterprint:blueprint", str(ROOT / "tests/components/blueprints/managed.yaml"))
    assert "status" not in cloud.run(lambda: program.main().exports)


def test_a_stack_without_a_blueprint_is_refused_with_the_command_that_sets_one(cloud, config):
    """No default: without the key nothing is declared, and the error says what to run."""
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(program.main)
    message = str(refused.value)
    assert "clusterprint:blueprint is not set" in message
    assert "    pulumi config set clusterprint:blueprint blueprints/cpu-small.yaml\n" in message
    listed = message.split("reference blueprints: ", 1)[1]
    reference = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "blueprints").glob("*.yaml"))
    assert listed.startswith(", ".join(reference) + ", or a file of your own")
    assert not cloud.resources


def test_outside_a_project_the_refusal_still_names_the_command(cloud, config, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(program.main)
    assert str(refused.value).endswith(
        "pulumi config set clusterprint:blueprint PATH/TO/BLUEPRINT.yaml")


def test_an_invalid_blueprint_is_refused_with_the_validator_lines(cloud, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(CPU_SMALL.read_text().replace("capacity_gib: 1024", "capacity_gib: 10"))
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(lambda: program.build(str(bad)))
    assert f"{bad}:" in str(refused.value)
    assert "storage.home.filestore.capacity_gib: 10 is below 1024" in str(refused.value)
    assert not cloud.resources


def test_a_misspelt_machine_type_is_refused_before_any_resource(cloud, tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text(CPU_SMALL.read_text().replace("machine_type: n2-standard-4",
                                                  "machine_type: n2-standrd-4"))
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(lambda: program.build(str(typo)))
    assert (f"{typo}:24:21: error: slurm.nodesets[0].machine_type: n2-standrd-4 is not a "
            "machine type clusterprint knows (did you mean n2-standard-4?") in str(refused.value)
    assert not cloud.resources


def test_a_validator_warning_reaches_pulumis_log_as_validate_prints_it(cloud, config, tmp_path):
    from clusterprint.blueprint.validate import check_file

    newer = tmp_path / "newer.yaml"
    newer.write_text(CPU_SMALL.read_text().replace(
        "machine_type: n2-standard-4",
        "machine_type: n5-standard-4\n      machine_type_unlisted: true"))
    cloud.run(lambda: program.build(str(newer)).exports["controller"])
    assert cloud.logged("warning") == check_file(str(newer)).lines()
    assert cloud.logged("warning") == [
        f"{newer}:24:21: warning: slurm.nodesets[0].machine_type: n5-standard-4 is not in "
        "clusterprint's catalog, so its GPUs, NICs and price are unknown; its nodes are then "
        "built as CPU nodes: no GPU GRES, no GPU networks, no GPU drivers, and no price in the "
        "cost estimate (check it exists in the zone: gcloud compute machine-types list "
        "--filter=name=n5-standard-4 --zones=us-central1-c)"]
    assert cloud.one("clusterprint:index:TrainingCluster").name == "cpu-small"


def test_a_stack_project_other_than_the_blueprints_is_a_warning(cloud, config):
    config("clusterprint:blueprint", "blueprints/cpu-small.yaml")
    config("gcp:project", "other-project")
    cloud.run(lambda: program.main().exports["controller"])
    assert cloud.logged("warning") == [
        "blueprints/cpu-small.yaml: warning: project: my-project differs from the stack's "
        "gcp:project other-project; every resource is created in my-project, the blueprint's "
        "project (pulumi config set gcp:project my-project, or remove project from the "
        "blueprint to use the stack's)"]
    # The resources really are in the blueprint's project, as the warning says.
    projects = {r.inputs["project"] for r in cloud.resources if "project" in r.inputs}
    assert projects == {"my-project"}


def test_a_blueprint_without_project_on_a_stack_without_one_is_refused_with_the_fix(
        cloud, config, tmp_path):
    bare = tmp_path / "bare.yaml"
    lines = CPU_SMALL.read_text().splitlines(keepends=True)
    bare.write_text("".join(line for line in lines if not line.startswith("project:")))
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(lambda: program.build(str(bare)))
    assert str(refused.value) == ("no project: set `project` in the blueprint or run "
                                  "`pulumi config set gcp:project PROJECT`")
    config("gcp:project", "stack-project")
    cloud.run(lambda: program.build(str(bare)).exports["controller"])
    assert {r.inputs["project"] for r in cloud.resources if "project" in r.inputs} == {
        "stack-project"}


def test_the_same_project_in_stack_and_blueprint_warns_of_nothing(cloud, config):
    config("clusterprint:blueprint", "blueprints/cpu-small.yaml")
    config("gcp:project", "my-project")
    cloud.run(lambda: program.main().exports["controller"])
    assert cloud.logged("warning") == []


def test_the_project_file_names_what_the_program_reads():
    """Pulumi.yaml's project name is the plan's; the blueprint key is not declared there.

    A key declared under ``config:`` without a default is one the CLI requires before the
    program runs (pulumi/pulumi sdk/go/common/workspace/config.go, ``mergeConfig``): its
    bare "missing configuration value" would replace the program's refusal, which names
    the command and the choices.
    """
    from ruamel.yaml import YAML

    from clusterprint.preview import plan

    project = YAML(typ="safe").load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == plan.PROJECT
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    assert program.BLUEPRINT_KEY not in project.get("config", {})
    assert (ROOT / "__main__.py").read_text().count("main()") == 1
