"""What render makes of ``slurm.health_checks``: the program, one config per nodeset, the
slurm.conf lines, and the fixed command line the rendered program answers to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.cli.main import main
from clusterprint.facts import machines
from clusterprint.node import common
from clusterprint.node import healthcheck as program
from clusterprint.render import healthcheck, rendered_files, slurm_config
from clusterprint.render.healthcheck import gpu_model, healthcheck_config
from tests.support.healthcheck_fakes import PROGRAM, calls, scenario, stub_bin
from tests.support.paths import blueprint_path


def cluster(gpu: str = "quick", interval_s: int = 300, machine_type: str = "a3-ultragpu-8g"
            ) -> Blueprint:
    """A GPU nodeset and a CPU nodeset under ``health_checks`` ``gpu`` and ``interval_s``."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "demo",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": "gpu", "machine_type": machine_type, "count": 2},
                               {"name": "cpu", "machine_type": "n2-standard-8", "count": 1}],
                  "partitions": [{"name": "all", "nodesets": ["gpu", "cpu"]}],
                  "health_checks": {"gpu": gpu, "interval_s": interval_s}}})


def test_render_writes_the_program_and_common_as_shipped_and_one_config_per_nodeset():
    files = rendered_files(cluster())
    assert files["scripts/healthcheck.py"] == PROGRAM.read_text()
    assert files["scripts/common.py"] == Path(common.__file__).read_text()
    configs = {name: json.loads(text) for name, text in files.items()
               if name.startswith("scripts/healthcheck-")}
    assert sorted(configs) == ["scripts/healthcheck-cpu.json", "scripts/healthcheck-gpu.json"]
    assert (configs["scripts/healthcheck-gpu.json"]["gpus"],
            configs["scripts/healthcheck-gpu.json"]["gpu"]) == (8, {
        "model": "H200", "nvlink": True, "dcgm_level": 1, "dcgm_level_after_failure": None})
    assert (configs["scripts/healthcheck-cpu.json"]["gpus"],
            configs["scripts/healthcheck-cpu.json"]["gpu"]) == (0, None)


def test_each_config_is_the_programs_own_with_the_programs_defaults():
    files = rendered_files(cluster())
    config = program.Config.from_json(files["scripts/healthcheck-gpu.json"])
    assert config == healthcheck_config(cluster(), cluster().slurm.nodesets[0])
    assert (config.disks, config.budget_s, config.state_file) == (
        program.Config.disks, program.Budgets(), program.STATE_FILE)


def test_the_program_knows_the_prolog_timeout_slurm_conf_sets():
    assert program.PROLOG_EPILOG_TIMEOUT_S == slurm_config.PROLOG_EPILOG_TIMEOUT_S
    assert f"PrologEpilogTimeout={program.PROLOG_EPILOG_TIMEOUT_S}\n" in (
        rendered_files(cluster())["slurm.conf"])


@pytest.mark.parametrize(("name", "model", "after_failure"), [
    ("a3mega", "H100", None), ("a3ultra", "H200", 2), ("a4", "B200", None)])
def test_each_reference_gpu_nodeset_expects_its_machine_types_gpus(name, model, after_failure):
    blueprint = load_checked(blueprint_path(name))
    config = healthcheck_config(blueprint, blueprint.slurm.nodesets[0])
    assert (config.gpus, config.gpu.model) == (8, model)
    assert config.gpu.dcgm_level_after_failure == after_failure
    assert config.mounts[0] == "/home"
    assert [d.path for d in config.disks] == ["/", "/mnt/localssd"]


def test_every_blueprint_mount_is_checked():
    blueprint = load_checked(blueprint_path("a3mega"))
    assert healthcheck_config(blueprint, blueprint.slurm.nodesets[0]).mounts == (
        "/home", "/lustre", "/gcs/checkpoints")


@pytest.mark.parametrize("machine_type", sorted(machines.GPU_MACHINES))
def test_every_gpu_machine_type_names_a_model_nvidia_smi_prints(machine_type):
    model = gpu_model(machines.GPU_MACHINES[machine_type].gpu)
    assert model in {"A100", "H100", "H200", "B200", "GB200", "L4"}


def test_thorough_adds_the_epilog_quick_the_prolog_only():
    quick = rendered_files(cluster("quick"))["scripts/compute-gpu.sh"]
    thorough = rendered_files(cluster("thorough"))["scripts/compute-gpu.sh"]
    assert f"install_text {healthcheck.PROLOG} 0755" in quick
    assert f"rm -f {healthcheck.EPILOG}" in quick
    assert f"install_text {healthcheck.EPILOG} 0755" in thorough
    assert "--mode epilog" in thorough


def test_gpu_off_renders_no_gpu_check_prolog_or_epilog_but_keeps_the_node_checks():
    files = rendered_files(cluster("off"))
    config = json.loads(files["scripts/healthcheck-gpu.json"])
    assert (config["gpus"], config["gpu"]) == (8, None)  # GPUs, and they are not checked
    script = files["scripts/compute-gpu.sh"]
    assert f"rm -f {healthcheck.PROLOG}" in script and f"rm -f {healthcheck.EPILOG}" in script
    assert f"HealthCheckProgram={healthcheck.HEALTH_CHECK_PROGRAM}" in files["slurm.conf"]


def test_a_cpu_nodeset_gets_no_prolog():
    script = rendered_files(cluster())["scripts/compute-cpu.sh"]
    assert f"rm -f {healthcheck.PROLOG}" in script


def test_slurm_conf_runs_the_check_every_interval_cycling_through_the_nodes():
    conf = rendered_files(cluster(interval_s=600))["slurm.conf"]
    assert (f"HealthCheckProgram={healthcheck.HEALTH_CHECK_PROGRAM}\nHealthCheckInterval=600\n"
            "HealthCheckNodeState=CYCLE,ANY\n") in conf


def test_interval_0_renders_no_health_check_program():
    conf = rendered_files(cluster(interval_s=0))["slurm.conf"]
    assert "HealthCheck" not in conf.replace("# Health checks", "")


def test_the_program_never_holds_the_heredoc_terminator():
    assert "CLUSTERPRINT_EOF" not in PROGRAM.read_text()


def test_the_rendered_program_answers_its_fixed_command_line(tmp_path):
    out = tmp_path / "out"
    assert main(["render", blueprint_path("a3ultra"), "--out", str(out)]) == 0
    fixtures = scenario(tmp_path / "fixtures", "h200")
    bin_dir = stub_bin(tmp_path / "bin")
    done = subprocess.run(
        [sys.executable, "scripts/healthcheck.py", "--config", "scripts/healthcheck-a3ultra.json",
         "--no-drain"], cwd=out, capture_output=True, text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HEALTHCHECK_FIXTURES": str(fixtures)})
    # This machine has the recorded GPUs but not the blueprint's shared file systems.
    unmounted = [m for m in ("/home", "/lustre") if not os.path.ismount(m)]
    assert done.stdout.splitlines() == [f"cp:mount: {m} is not mounted" for m in unmounted]
    assert done.returncode == (1 if unmounted else 0)
    assert "dcgmi diag -r 1 -j" in calls(fixtures)
    assert not [c for c in calls(fixtures) if c.startswith("scontrol")]
