"""Every rendered startup script parses and passes shellcheck with nothing suppressed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.node import common
from clusterprint.render import node_programs, node_scripts, rendered_files
from tests.support.blueprint_texts import blueprint_text
from tests.support.paths import blueprint_path, reference_blueprints
from tests.support.topology_blueprints import a4x_cluster

BLUEPRINTS = reference_blueprints()
#: The rendered files of every reference blueprint, and of an A4X cluster (none of them is
#: A4X): its controller's script alone starts the NVLink blocks service.
RENDERED = {**{path.stem: rendered_files(load_checked(str(path))) for path in BLUEPRINTS},
            "a4x": rendered_files(a4x_cluster())}
SCRIPTS = [(blueprint, name) for blueprint, files in RENDERED.items()
           for name in files if name.endswith(".sh")]


@pytest.fixture(scope="module")
def script_dir(tmp_path_factory) -> Path:
    """Every rendered blueprint's scripts on disk, one folder per blueprint."""
    root = tmp_path_factory.mktemp("scripts")
    for blueprint, files in RENDERED.items():
        for name, text in files.items():
            target = root / blueprint / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return root


@pytest.mark.parametrize(("blueprint", "name"), SCRIPTS)
def test_script_parses_and_passes_shellcheck(blueprint, name, script_dir):
    script = script_dir / blueprint / name
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr
    assert shutil.which("shellcheck"), "install shellcheck (make system-packages)"
    checked = subprocess.run(["shellcheck", "--severity=style", "--shell=bash", str(script)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("overrides", [
    {"slurm.accounting.cloud_sql.instance": "my-project:us-central1:acct"},
    {"slurm.accounting.enabled": False}], ids=["cloud-sql", "accounting-off"])
def test_the_controller_script_of_each_accounting_passes_shellcheck(tmp_path, overrides):
    checked = check_text("b.yaml", blueprint_text(overrides))
    script = tmp_path / "controller.sh"
    script.write_text(rendered_files(checked.blueprint)["scripts/controller.sh"])
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    checked = subprocess.run(["shellcheck", "--severity=style", "--shell=bash", str(script)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize(("blueprint", "name"), SCRIPTS)
def test_a_script_carries_the_node_programs_common_module_once_at_most(blueprint, name):
    # The controller's loop, power saving and config-sync share one common.py: carried
    # three times, an A4X controller's script passed Compute Engine's metadata value limit.
    script = RENDERED[blueprint][name]
    assert script.count(Path(common.__file__).read_text()) <= 1


def test_two_node_programs_at_one_path_are_refused():
    one = {"/etc/slurm/clusterprint/common.py": ("text", "0644")}
    assert node_programs.shipped_once(one, dict(one)) == one
    with pytest.raises(ValueError, match="/etc/slurm/clusterprint/common.py"):
        node_programs.shipped_once(one, {"/etc/slurm/clusterprint/common.py": ("old", "0644")})


def test_the_a4x_cluster_checked_here_is_the_one_that_starts_the_nvlink_blocks_service():
    # Else the A4X scripts above would check nothing the reference blueprints do not.
    assert [b for b, files in RENDERED.items()
            if "\nstep start_nvlink_blocks\n" in files["scripts/controller.sh"]] == ["a4x"]


def test_scripts_suppress_no_shellcheck_warning(script_dir):
    scripts = sorted(script_dir.glob("*/*/*.sh"))
    assert len(scripts) == len(SCRIPTS)
    suppressed = [s for s in scripts if re.search(r"#\s*shellcheck\s+disable", s.read_text())]
    assert suppressed == []


def scripts_of(blueprint_name: str) -> dict[str, str]:
    """The rendered files of a reference blueprint."""
    return rendered_files(load_checked(blueprint_path(blueprint_name)))


def test_gpu_nodes_register_with_their_feature_and_gpus():
    files = scripts_of("a4")
    # a4spot has elastic nodes: a static node is never powered down.
    assert ("readonly NODE_CONF='Feature=a4 Gres=gpu:b200:8 SuspendTime=INFINITE'"
            in files["scripts/compute-a4.sh"])
    assert ("readonly NODE_CONF='Feature=a4spot Gres=gpu:b200:8 SuspendTime=INFINITE'"
            in files["scripts/compute-a4spot.sh"])
    assert ("readonly NODE_CONF='Feature=a3mega Gres=gpu:h100:8'"
            in scripts_of("a3mega")["scripts/compute-a3mega.sh"])
    assert "readonly CONF_SERVER=a4-controller:6817" in files["scripts/compute-a4.sh"]


def test_cpu_nodes_register_without_gres():
    assert ("readonly NODE_CONF='Feature=cpu SuspendTime=INFINITE'\n"
            in scripts_of("cpu-small")["scripts/compute-cpu.sh"])


def test_the_slurm_files_reach_the_controller_and_login_nodes_as_metadata_only():
    bp = load_checked(blueprint_path("a4"))
    files, values = rendered_files(bp), node_scripts(bp).slurm_config
    assert json.loads(values["controller"]) == {
        name: files[name] for name in ("slurm.conf", "gres.conf", "cgroup.conf",
                                       "plugstack.conf", "topology.yaml")}
    assert json.loads(values["login"]) == {
        name: files[name] for name in ("slurm.conf", "plugstack.conf", "topology.yaml")}
    # One source: no startup script holds a copy that could disagree with the key (compute
    # nodes fetch theirs from slurmctld).
    for name, text in files.items():
        if name.endswith(".sh"):
            assert "\nPartitionName=" not in text and "\nSlurmctldHost=" not in text, name


def test_storage_mounts_follow_the_blueprint():
    a3mega = scripts_of("a3mega")["scripts/compute-a3mega.sh"]
    assert "metadata_into lustre_source clusterprint-lustre-scratch\n" in a3mega
    assert 'mount -t lustre -o _netdev "$lustre_source" /lustre' in a3mega
    # Root mounts the bucket for every user's jobs: files and folders open to all.
    bucket = ("gcsfuse --implicit-dirs --file-mode=666 --dir-mode=777 -o allow_other \\\n"
              "    my-project-a3mega-ckpts /gcs/checkpoints")
    assert bucket in a3mega
    # a4 keeps /home on its only Lustre entry: /home is mounted once, from its source key.
    a4 = scripts_of("a4")["scripts/login.sh"]
    assert "clusterprint-lustre-shared" not in a4
    assert "metadata_into source clusterprint-home-source" in a4


def test_controller_creates_the_munge_and_jwt_keys_only_in_secret_manager():
    files = scripts_of("cpu-small")
    controller = files["scripts/controller.sh"]
    assert "gcloud secrets versions add" in controller
    assert "read_secret_name MUNGE_SECRET clusterprint-munge-secret" in controller
    assert "read_secret_name JWT_SECRET clusterprint-jwt-secret" in controller
    for name, text in files.items():
        if name != "scripts/controller.sh":
            assert "gcloud secrets versions add" not in text, name
            # Only the controller holds the key that signs REST API tokens.
            assert "clusterprint-jwt-secret" not in text, name


def parts_checked(script: str) -> list[str]:
    """The parts a boot script's image check requires of the image (its ensure_image)."""
    return re.search(r"^ensure_image\(\) \{\n(?:.*\n)*?  for part in (.*); do$", script,
                     re.MULTILINE)[1].split()


def test_each_role_needs_only_the_parts_it_runs_and_mounts():
    files = scripts_of("a3mega")
    # The controller mounts only the Filestore /home and runs MariaDB for accounting (on by
    # default); the login node has the clients of every file system, pyxis and the
    # TensorBoard uploader; a GPU node the GPU stack and its fabric.
    assert parts_checked(files["scripts/controller.sh"]) == [
        "base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "mariadb"]
    assert parts_checked(files["scripts/login.sh"]) == [
        "base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "lustre", "gcsfuse", "tensorboard",
        "pyxis"]
    assert parts_checked(files["scripts/compute-a3mega.sh"]) == [
        "base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "lustre", "gcsfuse", "pyxis",
        "gpu", "fabric"]
    assert parts_checked(scripts_of("cpu-small")["scripts/compute-cpu.sh"]) == [
        "base", "gcloud", "ops_agent", "munge", "slurm", "nfs"]


def test_accounting_on_cloud_sql_or_off_needs_no_database_server():
    def blueprint(overrides: dict) -> Blueprint:
        checked = check_text("b.yaml", blueprint_text(overrides))
        assert checked.ok, [f.line_text() for f in checked.findings]
        return checked.blueprint

    sql = {"slurm.accounting.cloud_sql.instance": "my-project:us-central1:acct"}
    controller = rendered_files(blueprint(sql))["scripts/controller.sh"]
    assert "mariadb" not in parts_checked(controller) and "start_slurmdbd" in controller
    assert "gcloud sql instances describe acct \\\n    --project=my-project" in controller
    files = rendered_files(blueprint({"slurm.accounting.enabled": False}))
    controller = files["scripts/controller.sh"]
    assert "mariadb" not in parts_checked(controller)
    # (rest_plugins names slurmdbd in its comment and check of slurm.conf, with or without it)
    assert "start_slurmdbd" not in controller
    assert "/etc/slurm/slurmdbd.conf" not in controller and "slurmdbd.conf" not in files
    assert "AccountingStorageType" not in files["slurm.conf"]


def test_lustre_home_needs_no_nfs_client_but_the_lustre_client_everywhere():
    files = scripts_of("a4")
    for name in ("scripts/controller.sh", "scripts/login.sh", "scripts/compute-a4.sh"):
        assert "nfs" not in parts_checked(files[name]), name
        assert "lustre" in parts_checked(files[name]), name


#: What installs software: an image install script's steps, never a boot script's unless
#: its nodeset's image says install_at_boot (the login node's staged NCCL job builds
#: nccl-tests in its container when it runs, so make is no sign).
INSTALL_STEPS = ("install_slurm() {", "apt_get", "apt_install", "download_once", "docker pull",
                 "pip install", "dkms", "git -C")


def test_no_boot_script_installs_anything_and_every_image_script_does():
    for blueprint, files in RENDERED.items():
        for name, text in files.items():
            if name.startswith("scripts/") and name.endswith(".sh"):
                assert not [s for s in INSTALL_STEPS if s in text], (blueprint, name)
            if name.startswith("images/"):
                assert "install_slurm() {" in text and "apt_install" in text, (blueprint, name)
