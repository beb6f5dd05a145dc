"""The stack program: config in, checked blueprint, cluster and exports out."""

from __future__ import annotations

import pulumi
import pytest

from clusterprint.components import program
from tests.components.conftest import ROOT


def test_the_configured_blueprint_is_built_and_exported(cloud, monkeypatch):
    monkeypatch.chdir(ROOT)  # `pulumi up` runs the program in the project directory
    monkeypatch.setitem(pulumi.runtime.config.CONFIG.get(), "clusterprint:blueprint",
                        "blueprints/cpu-small.yaml")
    controller = cloud.run(lambda: program.main().exports["controller"])
    assert controller == "cpu-small-controller"
    assert cloud.one("clusterprint:index:TrainingCluster").name == "cpu-small"


def test_an_invalid_blueprint_is_refused_with_the_validator_lines(cloud, tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (ROOT / "blueprints" / "cpu-small.yaml").read_text()
    bad.write_text(text.replace("capacity_gib: 1024", "capacity_gib: 10"))
    with pytest.raises(pulumi.RunError) as refused:
        cloud.run(lambda: program.build(str(bad)))
    assert f"{bad}:" in str(refused.value)
    assert "storage.home.filestore.capacity_gib: 10 is below 1024" in str(refused.value)
    assert not cloud.resources


def test_the_project_file_names_what_the_program_reads():
    """Pulumi.yaml's project name and config key are the ones the program and plan use."""
    from ruamel.yaml import YAML

    from clusterprint import plan
    from clusterprint.validate import load_checked

    project = YAML(typ="safe").load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == plan.PROJECT
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    key = project["config"][program.BLUEPRINT_KEY]
    assert key["type"] == "string" and key["default"] == program.DEFAULT_BLUEPRINT
    assert load_checked(str(ROOT / key["default"])).name == "a3mega"
    assert (ROOT / "__main__.py").read_text().count("main()") == 1
