"""The rendered scripts boot a node, run again unchanged after a reboot, and fail loudly.

Each test boots a sandboxed VM (tests/support/boot_sandbox.py: bind mounts and overlays in a
mount namespace of its own, stubs for the cloud and the image) and reads what its scripts
wrote, ran and logged.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.contract import node_metadata
from clusterprint.facts import slurm
from clusterprint.facts.topology import PHYSICAL_TOPOLOGY_KEY
from clusterprint.node import (
    common,
    mlops_broker,
    register_model,
    tensorboard_sync,
    tensorboard_upload,
)
from clusterprint.render import config_sync, healthcheck, images, rendered_files, topology
from tests.support.boot_sandbox import (
    IMAGE_NAME,
    STATE_DEVICE,
    Node,
    daemon_starts,
    installing_at_boot,
    ready,
    storage_ready,
)
from tests.support.local_slurm import node_conf_of
from tests.support.node_log import messages
from tests.support.paths import STDLIB_ONLY, blueprint_path, reference_blueprints
from tests.support.topology_blueprints import (
    a4x_cluster,
    cpu_only,
    mixed_partition,
    without_gpu_network,
)


@pytest.fixture
def node(sandbox, tmp_path) -> Node:
    """A fresh VM."""
    return Node(tmp_path)


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    """The cpu-small blueprint's rendered files."""
    return rendered_files(load_checked(blueprint_path("cpu-small")))


@pytest.fixture(scope="module")
def a3mega() -> dict[str, str]:
    """The a3mega blueprint's rendered files: Lustre scratch and a bucket."""
    return rendered_files(load_checked(blueprint_path("a3mega")))


@pytest.fixture(scope="module")
def a4() -> dict[str, str]:
    """The a4 blueprint's rendered files: GPU nodes, /home on Lustre, a bucket."""
    return rendered_files(load_checked(blueprint_path("a4")))


def test_controller_creates_munge_key_once_and_is_unchanged_after_reboot(node, files):
    node.booted_from(files, "controller")
    calls = node.calls()
    assert "mount -t nfs -o hard,timeo=600,retrans=3,_netdev 10.1.2.3:/home /home" in calls
    assert sum(c.startswith("gcloud secrets versions add cpu-small-munge-key") for c in calls) == 1
    key = node.file("/etc/munge/munge.key")
    assert key.read_text() == (node.fake / "secret" / "1").read_text()
    assert oct(key.stat().st_mode & 0o777) == "0o400"
    assert node.file("/etc/slurm/slurm.conf").read_text() == files["slurm.conf"]
    assert "systemctl restart slurmctld" in calls and "systemctl restart munge" in calls
    assert node.installs() == []
    assert f"image: {IMAGE_NAME} holds every part this role needs" in node.journal()

    node.booted_from(files, "controller")
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("mount", "gcloud secrets versions add"))]
    assert "systemctl start slurmctld" in calls and "systemctl restart slurmctld" not in calls
    assert sorted(os.listdir(node.fake / "secret")) == ["1"]


JWT_KEY = "/etc/slurm/jwt_hs256.key"
REST_UNIT = "/etc/systemd/system/slurmrestd.service"


def test_controller_creates_the_jwt_key_once_and_serves_the_rest_api_on_its_address(
        node, files):
    node.booted_from(files, "controller")
    calls = node.calls()
    assert sum(c.startswith("gcloud secrets versions add cpu-small-jwt-key") for c in calls) == 1
    (version,) = (node.fake / "secrets" / "cpu-small-jwt-key").iterdir()
    key = node.file(JWT_KEY)
    assert key.read_bytes() == version.read_bytes()
    assert len(base64.b64decode(key.read_bytes(), validate=True)) == 48
    # slurmctld reads it as SlurmUser; auth/jwt refuses a key others may write.
    assert oct(key.stat().st_mode & 0o777) == "0o400" and key.owner() == "slurm"
    unit = node.file(REST_UNIT).read_text()
    # The internal address only, and every plugin: this slurm.conf names slurmdbd
    # (accounting is on by default), so the database's plugins are served too.
    assert ("\nExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld,"
            "openapi/slurmdbd,openapi/util 10.0.0.5:6820\n") in unit
    assert "\nUser=slurmrestd\nGroup=slurmrestd\n" in unit
    assert "\nEnvironment=SLURM_JWT=daemon\n" in unit
    assert [c for c in calls if c.startswith("useradd")] == [
        "useradd --system --user-group --no-create-home --shell /usr/sbin/nologin slurmrestd"]
    starts = [c for c in calls if c.startswith("systemctl") and "slurm" in c]
    assert starts.index("systemctl restart slurmctld") < starts.index(
        "systemctl restart slurmrestd")
    assert "systemctl enable slurmrestd" in calls

    node.booted_from(files, "controller")
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("gcloud secrets versions add", "useradd"))]
    assert "systemctl start slurmrestd" in calls and "systemctl restart slurmrestd" not in calls
    assert node.file(JWT_KEY).read_bytes() == version.read_bytes()
    assert "JWT key: cpu-small-jwt-key has a version" in node.journal()


def test_a_slurm_conf_without_slurmdbd_serves_only_slurmctlds_plugins(node, files):
    line = "\nAccountingStorageType=accounting_storage/slurmdbd\n"
    assert line in files["slurm.conf"]
    without_dbd = {**files, "slurm.conf": files["slurm.conf"].replace(line, "\n", 1)}
    node.booted_from(without_dbd, "controller")
    # Without a slurmdbd in slurm.conf the database's plugins would stop slurmrestd.
    assert "-s openapi/slurmctld,openapi/util 10.0.0.5:6820\n" in node.file(
        REST_UNIT).read_text()


SYNC_UNIT = "/etc/systemd/system/clusterprint-config-sync.service"
SYNC_PROGRAM = "/usr/local/sbin/clusterprint-config-sync"
#: Where the login node's helpers and config-sync lie, beside common.py.
MLOPS_LIB = "/usr/local/lib/clusterprint"
#: Where config-sync lies on each role: on the controller beside the remediation loop and
#: power saving, which share its common.py.
SYNC_FOLDER = {"controller": "/etc/slurm/clusterprint", "login": MLOPS_LIB}


@pytest.mark.parametrize("role", ["controller", "login"])
def test_the_slurm_files_come_from_metadata_and_the_service_follows_them(node, files, role):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.booted_from(files, role)
    for name in config_sync.ROLE_FILES[role]:
        path = node.file(f"/etc/slurm/{name}")
        assert path.exists() == (name in files), name
        if name in files:
            assert path.read_text() == files[name]
            assert oct(path.stat().st_mode & 0o777) == "0o644"
    # The command is a link to the program, which lies beside the shared common.py (the boot
    # ran it through the link: --install wrote the files above).
    folder = SYNC_FOLDER[role]
    assert os.readlink(node.file(SYNC_PROGRAM)) == f"{folder}/config_sync.py"
    program = node.file(f"{folder}/config_sync.py")
    assert program.read_text() == config_sync.program_text()
    assert stat.S_IMODE(program.stat().st_mode) == 0o755
    assert node.file(f"{folder}/common.py").read_text() == Path(common.__file__).read_text()
    unit = node.file(SYNC_UNIT).read_text()
    assert f"\nExecStart=/usr/bin/python3 {SYNC_PROGRAM} --role {role}\n" in unit
    assert "\nSyslogIdentifier=clusterprint-config-sync\nRestart=always\n" in unit
    calls = node.calls()
    assert "systemctl enable clusterprint-config-sync.service" in calls
    assert "systemctl restart clusterprint-config-sync.service" in calls
    if role == "controller":
        # It follows a running slurmctld: started after it, ordered after it at boot.
        assert calls.index("systemctl restart slurmctld") < calls.index(
            "systemctl restart clusterprint-config-sync.service")
        assert "\nAfter=network-online.target slurmctld.service\n" in unit
    # A reboot with the same metadata rewrites nothing and restarts nothing.
    node.booted_from(files, role)
    calls = node.calls()
    assert "systemctl start clusterprint-config-sync.service" in calls
    assert not [c for c in calls if c.startswith("systemctl restart")]


def test_a_reboot_with_changed_slurm_files_restarts_slurmctld_with_them(node, files):
    node.booted_from(files, "controller")
    node.calls()
    grown = {**files, "slurm.conf": files["slurm.conf"].replace("MaxNodeCount=4",
                                                                "MaxNodeCount=8")}
    assert grown["slurm.conf"] != files["slurm.conf"]
    node.booted_from(grown, "controller")
    assert node.file("/etc/slurm/slurm.conf").read_text() == grown["slurm.conf"]
    calls = node.calls()
    assert "systemctl restart slurmctld" in calls
    assert "systemctl start clusterprint-config-sync.service" in calls


def test_slurm_files_the_program_refuses_fail_the_boot_before_slurmctld(node, files):
    node.metadata(node_metadata.SLURM_CONFIG, json.dumps({"slurm.conf": "", "x.conf": ""}))
    done = node.boot(files["scripts/controller.sh"])
    assert done.returncode != 0
    journal = node.journal()
    refused = journal.splitlines()[-2]
    assert messages(refused, "ERROR") == [
        "REFUSED the Slurm files of metadata clusterprint-slurm-config: unknown files "
        "['x.conf']: only slurm.conf, gres.conf, cgroup.conf, plugstack.conf, topology.yaml"]
    assert journal.splitlines()[-1] == ("<3>FAILED: metadata clusterprint-slurm-config: the "
                                        "Slurm files were refused (the line before says why)")
    assert daemon_starts(node.calls()) == []
    assert not node.file("/etc/slurm/slurm.conf").exists()


def test_a_node_without_its_slurm_files_metadata_fails_naming_the_key(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    done = node.boot(files["scripts/login.sh"])
    assert done.returncode != 0
    assert ("<3>FAILED: metadata clusterprint-slurm-config: not set on this VM"
            in node.journal())


def test_controller_installs_the_remediation_loop_its_reboot_program_and_command(node, files):
    node.booted_from(files, "controller")
    program = node.file("/etc/slurm/clusterprint/remediate.py")
    assert program.read_text() == files["scripts/remediate.py"]
    assert node.file("/etc/slurm/clusterprint/remediate.json").read_text() == (
        files["scripts/remediate.json"])
    # slurm.conf's RebootProgram is the wrapper; slurmctld passes it the nodes.
    reboot = node.file("/etc/slurm/clusterprint/reboot-vm")
    assert "RebootProgram=/etc/slurm/clusterprint/reboot-vm" in files["slurm.conf"]
    assert reboot.stat().st_mode & 0o111 and '--reboot "$@"' in reboot.read_text()
    assert '"$@"' in node.file("/usr/local/sbin/clusterprint-remediate").read_text()
    unit = node.file("/etc/systemd/system/clusterprint-remediate.service").read_text()
    assert ("ExecStart=/usr/bin/python3 /etc/slurm/clusterprint/remediate.py --config "
            "/etc/slurm/clusterprint/remediate.json\n") in unit
    calls = node.calls()
    assert "systemctl enable clusterprint-remediate.service" in calls
    assert "systemctl restart clusterprint-remediate.service" in calls
    # The next boot changes nothing: the loop is started, not restarted (its state stays).
    node.booted_from(files, "controller")
    assert "systemctl start clusterprint-remediate.service" in node.calls()
    assert "systemctl restart clusterprint-remediate.service" not in node.calls()


def test_controller_starts_the_slurm_exporter_on_loopback_beside_the_loop(node, files):
    node.booted_from(files, "controller")
    assert node.file("/etc/slurm/clusterprint/slurm_exporter.py").read_text() == (
        files["scripts/slurm_exporter.py"])
    config = json.loads(node.file("/etc/slurm/clusterprint/slurm-exporter.json").read_text())
    assert config == json.loads(files["scripts/slurm-exporter.json"])
    assert config["address"] == "127.0.0.1"
    # It reads the loop's state file where the loop writes it.
    assert config["state_file"] == json.loads(files["scripts/remediate.json"])["state_file"]
    unit = node.file("/etc/systemd/system/clusterprint-slurm-exporter.service").read_text()
    assert ("ExecStart=/usr/bin/python3 /etc/slurm/clusterprint/slurm_exporter.py --config "
            "/etc/slurm/clusterprint/slurm-exporter.json\n") in unit
    calls = node.calls()
    assert "systemctl enable clusterprint-slurm-exporter.service" in calls
    assert calls.index("systemctl restart clusterprint-slurm-exporter.service") > calls.index(
        "systemctl enable slurmctld")
    node.booted_from(files, "controller")
    assert "systemctl start clusterprint-slurm-exporter.service" in node.calls()
    assert "systemctl restart clusterprint-slurm-exporter.service" not in node.calls()


def test_controller_installs_power_saving_before_slurmctld_and_its_service_after(node, files):
    """cpu-small's nodeset has elastic nodes: slurmctld finds the three programs its
    slurm.conf names when it starts, and the service that declares the nodes starts after."""
    node.booted_from(files, "controller")
    assert node.file("/etc/slurm/clusterprint/capacity.py").read_text() == (
        files["scripts/capacity.py"])
    assert node.file("/etc/slurm/clusterprint/capacity.json").read_text() == (
        files["scripts/capacity.json"])
    for step in ("resume", "suspend", "resume-fail"):
        program = f"/etc/slurm/clusterprint/capacity-{step}"
        assert f"={program}\n" in files["slurm.conf"]
        wrapper = node.file(program)
        assert wrapper.stat().st_mode & 0o111
        assert wrapper.read_text().endswith(f'capacity.json {step} "$1"\n')
    state = node.file("/var/lib/clusterprint/capacity")
    assert state.is_dir() and not state.stat().st_mode & 0o007
    unit = node.file("/etc/systemd/system/clusterprint-capacity.service").read_text()
    assert "User=slurm\n" in unit and " watch\n" in unit
    calls = node.calls()
    assert calls.index("systemctl enable clusterprint-capacity.service") > max(
        i for i, call in enumerate(calls) if call in ("systemctl restart slurmctld",
                                                      "systemctl start slurmctld"))


def test_a_controller_without_elastic_nodes_installs_no_power_saving(node):
    files = files_of("a3mega")
    node.booted_from(files, "controller")
    assert "ResumeProgram" not in files["slurm.conf"]
    assert not node.file("/etc/slurm/clusterprint/capacity.py").exists()
    assert "clusterprint-capacity.service" not in " ".join(node.calls())


def test_compute_waits_for_home_then_starts_slurmd_as_dynamic_node(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    (node.fake / "unreachable").touch()
    node.booted(files["scripts/compute-cpu.sh"])
    assert "mount Filestore 10.1.2.3:/home on /home: not yet, retrying" in node.journal()
    assert node.file("/etc/munge/munge.key").read_text() == "key from the controller"
    dropin = node.file("/etc/systemd/system/slurmd.service.d/clusterprint.conf").read_text()
    # cpu-small has elastic nodes: this static one is never powered down.
    assert ('-D -s -Z --conf-server cpu-small-controller:6817 --conf '
            '"Feature=cpu SuspendTime=INFINITE"' in dropin)
    # Slurm's own unit (23.02 on) is Type=notify, which a foreground (-D) slurmd never
    # satisfies.
    assert "\nType=simple\n" in dropin
    assert "systemctl restart slurmd" in node.calls()


def test_a_missing_metadata_value_fails_loudly(node, files):
    (node.fake / "metadata" / node_metadata.HOME_SOURCE).unlink()
    done = node.boot_from(files, "login")
    assert done.returncode != 0
    assert f"<3>FAILED: metadata {node_metadata.HOME_SOURCE}: not set on this VM" in node.journal()
    assert not [c for c in node.calls() if c.startswith("mount")]


def test_a_missing_lustre_address_fails_at_once_naming_its_key(node, a3mega):
    (node.fake / "secret" / "1").write_text("key from the controller")
    key = node_metadata.lustre_source("scratch")
    started = time.monotonic()
    done = node.boot_from(a3mega, "login")
    assert done.returncode != 0
    assert time.monotonic() - started < 30
    assert f"<3>FAILED: metadata {key}: not set on this VM" in node.journal()
    assert "retrying" not in node.journal()
    assert not [c for c in node.calls() if c.startswith("mount -t lustre")]


#: Every role of the reference blueprints (each GPU family's compute nodes among them), and
#: two families no reference blueprint has: G2 (no fabric, no local SSD) and A3 High (the
#: GPUDirect-TCPX warning, NICs of the dranet sample).
VARIANTS = {"g2": ("cpu-small", "n2-standard-4", "g2-standard-8"),
            "a3high": ("a3mega", "a3-megagpu-8g", "a3-highgpu-8g")}


@functools.cache
def files_of(name: str) -> dict[str, str]:
    """The rendered files of a reference blueprint or of a VARIANTS one."""
    if name not in VARIANTS:
        return rendered_files(load_checked(blueprint_path(name)))
    base, machine, other = VARIANTS[name]
    checked = check_text(f"{name}.yaml", Path(blueprint_path(base)).read_text().replace(
        machine, other))
    assert checked.ok and checked.blueprint, checked
    return rendered_files(checked.blueprint)


def vm_of(node: Node, name: str) -> Node:
    """``node`` as a VM of blueprint ``name``'s cluster (ready), a variant's GPUs its own."""
    ready(node, VARIANTS.get(name, (name,))[0])
    if name == "g2":
        node.driver("b200", 1)
    if name == "a3high":
        node.nics("dranet-5nic")
    return node


ROLES = [pytest.param(name, script, id=f"{name}-{script}")
         for name in (*(p.stem for p in reference_blueprints()), *VARIANTS)
         for script in sorted(s.removeprefix("scripts/").removesuffix(".sh")
                              for s in files_of(name) if s.startswith("scripts/")
                              and s.endswith(".sh"))]
#: What builds software: a boot on a built image runs none of it.
BUILDS = ("make", "configure", "dkms", "git", "ldconfig", "python3 -m venv", "tar")


@pytest.mark.parametrize(("name", "script"), ROLES)
def test_a_boot_on_a_built_image_installs_builds_and_downloads_nothing(node, name, script):
    vm_of(node, name).forbid_installs()
    node.booted_from(files_of(name), script)
    assert node.refused() == node.installs() == []
    assert [c for c in node.calls() if c.startswith(BUILDS)] == []
    assert f"image: {IMAGE_NAME} holds every part this role needs" in node.journal()


#: A part each role needs, and the way out its FAILED line names: the controller and login
#: nodes boot only clusterprint's image; a nodeset may name one that installs at boot.
#: The image also lacks a part the role does not need, which the line leaves out.
ONLY_CLUSTERPRINTS = ("the controller and login nodes boot only the image clusterprint "
                      "builds: build it (clusterprint image build)")
LACKING = [
    pytest.param("cpu-small", "controller", "mariadb", "gpu", ONLY_CLUSTERPRINTS,
                 id="controller-mariadb"),
    pytest.param("a3mega", "login", "pyxis", "fabric", ONLY_CLUSTERPRINTS, id="login-pyxis"),
    pytest.param("a4", "compute-a4spot", "fabric", "mariadb",
                 "build it (clusterprint image build), or name an image of your own in "
                 "slurm.nodesets[a4spot].image with install_at_boot: true", id="compute-fabric"),
]


@pytest.mark.parametrize(("name", "script", "part", "unneeded", "fix"), LACKING)
def test_an_image_without_a_part_its_role_needs_fails_the_boot_naming_it(
        node, name, script, part, unneeded, fix):
    ready(node, name).image_lacks_parts(part, unneeded)
    done = node.boot_from(files_of(name), script)
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == (
        f"<3>FAILED: image: {IMAGE_NAME} lacks {part}, which this role needs: {fix}")
    assert node.installs() == [] and daemon_starts(node.calls()) == []


def test_an_image_of_the_users_own_without_install_at_boot_names_the_key_to_set(node, files):
    text = Path(blueprint_path("cpu-small")).read_text().replace(
        "      machine_type: n2-standard-4\n",
        "      machine_type: n2-standard-4\n      image: {project: my-project, name: mine}\n")
    checked = check_text("mine.yaml", text)
    assert checked.ok and checked.blueprint, checked
    node.file(images.MANIFEST).unlink()
    (node.fake / "secret" / "1").write_text("key from the controller")
    done = node.boot(rendered_files(checked.blueprint)["scripts/compute-cpu.sh"])
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == (
        f"<3>FAILED: image: this image (no {images.MANIFEST}) lacks base gcloud ops_agent munge "
        "slurm nfs, which this role needs: set slurm.nodesets[cpu].image.install_at_boot: true to "
        "install what it lacks at boot, or drop slurm.nodesets[cpu].image to boot the image "
        "clusterprint builds")


def test_a_manifest_that_cannot_be_read_fails_the_boot_naming_it(node, files):
    node.write(images.MANIFEST, "{not json")
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == (
        f"<3>FAILED: image: {images.MANIFEST} is not an image manifest")


def test_a_manifest_listing_no_part_holds_none_whatever_its_name(node, files):
    node.manifest("slurm", ())
    (node.fake / "secret" / "1").write_text("key from the controller")
    done = node.boot(files["scripts/compute-cpu.sh"])
    assert done.returncode != 0
    assert ("<3>FAILED: image: slurm lacks base gcloud ops_agent munge slurm nfs, which this "
            "role needs" in node.journal())


@pytest.mark.parametrize("script", ["controller", "login", "compute-cpu"])
def test_a_slurm_of_another_release_series_fails_the_boot_naming_both(node, files, script):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.slurm_reports("25.11.2")
    done = node.boot_from(files, script)
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == (
        f"<3>FAILED: software: Slurm 25.11.2 is not {slurm.release_series(slurm.SLURM_VERSION)},"
        " the release clusterprint renders this cluster's Slurm files for: boot an image "
        "clusterprint built")
    assert daemon_starts(node.calls()) == []


@pytest.fixture(scope="module")
def a3mega_at_boot() -> dict[str, str]:
    """The a3mega blueprint's files, its nodeset booting an image that installs at boot."""
    return rendered_files(installing_at_boot("a3mega"))


def codename() -> str:
    """This machine's release (VERSION_CODENAME), which the scripts read as the VM's."""
    return next(line.split("=", 1)[1].strip('"') for line in
                Path("/etc/os-release").read_text().splitlines()
                if line.startswith("VERSION_CODENAME="))


def test_install_at_boot_installs_exactly_the_parts_the_image_lacks_once(node, a3mega_at_boot):
    ready(node, "a3mega").image_lacks_parts("lustre", "gcsfuse")
    node.booted_from(a3mega_at_boot, "compute-a3mega")
    assert ("image: clusterprint-sandbox-000000000000 lacks lustre gcsfuse: installing them at "
            "boot (slurm.nodesets[a3mega].image.install_at_boot)") in node.journal()
    sources = node.root / "disk" / "etc-apt" / "sources.list.d"
    assert sorted(p.name for p in sources.iterdir()) == ["gcsfuse.list", "lustre-client.list"]
    assert (f"https://packages.cloud.google.com/apt gcsfuse-{codename()} main"
            in (sources / "gcsfuse.list").read_text())
    assert (f"https://us-apt.pkg.dev/projects/lustre-client-binaries lustre-client-ubuntu-"
            f"{codename()} main" in (sources / "lustre-client.list").read_text())
    apt = "apt-get -q -y -o DPkg::Lock::Timeout=600"
    assert node.installs() == [
        "curl -fsSL -o /etc/apt/keyrings/lustre-client.asc "
        "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
        f"{apt} update",
        f"{apt} install lustre-client-modules-{os.uname().release} lustre-client-utils",
        "curl -fsSL -o /etc/apt/keyrings/gcsfuse.asc "
        "https://packages.cloud.google.com/apt/doc/apt-key.gpg",
        f"{apt} update",
        f"{apt} install gcsfuse"]
    calls = node.calls()
    assert "modprobe lustre" in calls
    assert calls.index("modprobe lustre") < calls.index(
        "mount -t lustre -o _netdev 10.9.8.7@tcp:/scratch /lustre")
    assert ("gcsfuse --implicit-dirs --file-mode=666 --dir-mode=777 -o allow_other"
            " my-project-a3mega-ckpts /gcs/checkpoints") in calls

    before = len(node.installs())
    node.booted_from(a3mega_at_boot, "compute-a3mega")
    assert node.installs()[before:] == []
    assert "modprobe lustre" not in node.calls()


def test_install_at_boot_on_a_bare_image_installs_every_part_once_and_boots(sandbox,
                                                                            tmp_path):
    node = ready(Node(tmp_path, built=False), "a3mega")
    files = rendered_files(installing_at_boot("a3mega"))
    node.booted_from(files, "compute-a3mega")
    journal = node.journal()
    assert ("image: this image lacks base gcloud ops_agent munge slurm nfs lustre gcsfuse pyxis "
            "gpu fabric: installing them at boot") in journal
    # The driver says CUDA 12 (the H100 sample): DCGM's package follows it, not the base
    # image's catalog entry, which only a builder with no GPU reads.
    assert "software: installing datacenter-gpu-manager-4-cuda12" in journal
    assert f"software: Slurm {slurm.SLURM_VERSION}" in journal
    assert node.installs() and not node.refused()
    calls = node.calls()
    assert calls.index(f"git -C /var/cache/clusterprint/slurm-{slurm.SLURM_VERSION} fetch -q "
                       f"--depth 1 {slurm.SLURM_REPOSITORY} {slurm.SLURM_COMMIT}") < (
        calls.index("systemctl restart slurmd"))

    node.forbid_installs()
    node.booted_from(files, "compute-a3mega")
    assert node.refused() == []
    assert [c for c in node.calls() if c.startswith(BUILDS)] == []


def test_a_custom_image_that_carries_the_fabric_unlisted_installs_nothing_for_it(
        node, a3mega_at_boot):
    ready(node, "a3mega")
    node.manifest("my-image", tuple(p for p in node.parts if p != "fabric"))
    lib = node.root / "disk" / "var-lib" / "tcpxo" / "lib64"
    lib.mkdir(parents=True)
    (lib / "nccl-env-profile.sh").write_text("export NCCL_NET=FasTrak\n")
    (node.fake / "docker-images").write_text(
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23\n")
    node.booted_from(a3mega_at_boot, "compute-a3mega")
    assert node.installs() == []
    assert [c for c in node.calls() if c.startswith(BUILDS)] == []
    journal = node.journal()
    assert "image: my-image lacks fabric: installing them at boot" in journal
    for part in ("Docker", "NVIDIA Container Toolkit"):
        assert f"fabric: {part}: on the image" in journal
    assert "fabric: the NCCL plugin is on the image (/var/lib/tcpxo/lib64)" in journal
    assert (lib / "nccl-env-profile.sh").read_text() == "export NCCL_NET=FasTrak\n"


def step(blueprint_name, script, call, failed, after_daemon=False):
    """One required step that fails for good: the stub call that breaks, the FAILED text."""
    return pytest.param(blueprint_name, script, call, failed, after_daemon,
                        id=f"{script}: {failed}")


HOME = "mount Filestore 10.1.2.3:/home on /home"
LUSTRE_HOME = "mount Lustre 10.9.8.7@tcp:/shared on /home"
SCRATCH = "mount Lustre scratch on /lustre"
CHECKPOINTS = "mount bucket my-project-a3mega-ckpts on /gcs/checkpoints"
DATASETS = "mount bucket my-project-a4-datasets on /gcs/datasets"
MUNGE_KEY = "read munge key cpu-small-munge-key"
ACCESS = "gcloud secrets versions access"
#: Every step a role cannot do without, in the blueprints that have it (what installs
#: software is the image's: tests/clusterprint/render/test_images.py).
REQUIRED_STEPS = [
    *(step(bp, f"compute-{bp}", call, failed) for bp, call, failed in [
        ("a3mega", "mount -t nfs", HOME),
        ("a4", "mount -t lustre -o _netdev 10.9.8.7@tcp:/shared /home", LUSTRE_HOME),
        ("a3mega", "mount -t lustre", SCRATCH),
        ("a3mega", "gcsfuse", CHECKPOINTS),
        ("a4", "gcsfuse", DATASETS),
        ("a3mega", ACCESS, MUNGE_KEY)]),
    step("a3mega", "compute-a3mega", "systemctl is-active --quiet slurmd", "slurmd running",
         after_daemon=True),
    *(step(bp, "login", call, failed) for bp, call, failed in [
        ("a3mega", "mount -t nfs", HOME),
        ("a4", "mount -t lustre -o _netdev 10.9.8.7@tcp:/shared /home", LUSTRE_HOME),
        ("a3mega", "mount -t lustre", SCRATCH),
        ("a3mega", "gcsfuse", CHECKPOINTS),
        ("a4", "gcsfuse", DATASETS),
        ("a3mega", ACCESS, MUNGE_KEY),
        ("a3mega", "scontrol ping", "controller answering")]),
    *(step("a3mega", "controller", call, failed) for call, failed in [
        ("gcloud secrets versions list", "list versions of cpu-small-munge-key"),
        ("gcloud secrets versions add", "add a version to cpu-small-munge-key"),
        (ACCESS, MUNGE_KEY)]),
    *(step("a3mega", "controller", call, failed) for call, failed in [
        ("gcloud secrets versions list cpu-small-jwt-key", "list versions of cpu-small-jwt-key"),
        ("gcloud secrets versions add cpu-small-jwt-key", "add a version to cpu-small-jwt-key"),
        (f"{ACCESS} latest --secret=cpu-small-jwt-key", "read JWT key cpu-small-jwt-key")]),
    step("a3mega", "controller", "systemctl is-active --quiet slurmrestd", "slurmrestd running",
         after_daemon=True),
    step("a3mega", "controller", "scontrol ping", "slurmctld answering", after_daemon=True),
    # slurmctld does not need /home and starts first; the boot still fails without it.
    step("a3mega", "controller", "mount -t nfs", HOME, after_daemon=True),
    step("a4", "controller", "mount -t lustre", LUSTRE_HOME, after_daemon=True),
]


@pytest.mark.parametrize(("blueprint_name", "script", "call", "failed", "after_daemon"),
                         REQUIRED_STEPS)
def test_a_required_step_that_fails_for_good_fails_the_boot_naming_it(
        node, a3mega, a4, blueprint_name, script, call, failed, after_daemon):
    files = {"a3mega": a3mega, "a4": a4}[blueprint_name]
    ready(node, blueprint_name)
    if script == "controller":
        shutil.rmtree(node.fake / "secret")
        (node.fake / "secret").mkdir()
    node.fail_for_good(call)
    started = time.monotonic()
    done = node.boot_from(files, script)
    assert done.returncode != 0, node.journal()
    assert time.monotonic() - started < 30
    journal = node.journal().splitlines()
    assert journal[-1] == f"<3>FAILED: {failed}: still failing after 0s", journal[-5:]
    assert not [line for line in journal if line.endswith(" is up")]
    # `clusterprint status` sees it: failed, the step, and the FAILED line last of its lines.
    assert node.guest_attribute(BOOT_STATE).split(" ")[0] == "failed"
    assert node.guest_attribute(BOOT_STATE).split(" ")[1] in steps_of(files[f"scripts/{script}.sh"])
    assert node.guest_attribute(BOOT_LOG).splitlines()[-1] == journal[-1]
    calls = node.calls()
    assert any(call in c for c in calls), f"{call!r} never ran: {calls}"
    if after_daemon:
        assert daemon_starts(calls)
    else:
        assert daemon_starts(calls) == []


def test_the_retry_budgets_default_to_productions(a3mega):
    scripts = {name: a3mega[f"scripts/{name}.sh"] for name in (
        "controller", "login", "compute-a3mega")}
    scripts.update({name: text for name, text in a3mega.items() if name.startswith("images/")})
    defaults = {name: budgets(script) for name, script in scripts.items()}
    shared = {"MOUNT": "1800", "MUNGE_KEY": "3600"}
    install = {"APT": "1200", "DOWNLOAD": "600"}
    assert defaults == {"controller": {**shared, "SECRET": "600", "SLURMCTLD": "300",
                                       "DB": "600", "SLURMDBD": "300"},
                        "login": {**shared, "CONTROLLER": "1800"},
                        "compute-a3mega": {**shared, "SLURMD": "600", "NIC": "300"},
                        **{name: install for name in scripts if name.startswith("images/")}}
    # A nodeset that installs at boot has the install steps' budgets too.
    at_boot = rendered_files(installing_at_boot("a3mega"))["scripts/compute-a3mega.sh"]
    assert budgets(at_boot) == {**shared, **install, "SLURMD": "600", "NIC": "300"}


def budgets(script: str) -> dict[str, str]:
    """The retry budgets a script declares, and their defaults in seconds."""
    return dict(re.findall(r"^readonly (\w+)_BUDGET_S=\$\{CLUSTERPRINT_\1_BUDGET_S:-(\d+)\}$",
                           script, re.MULTILINE))


def leaks(secret: bytes) -> list[bytes]:
    """What would give a munge key (base64 text, as the controller makes it) away: it, its
    base64 or the bytes it encodes, whole or any 32 bytes of them from a multiple of 32 (so
    any copy of 63 bytes or more shows)."""
    forms = [secret, base64.b64encode(secret), base64.b64decode(secret, validate=True)]
    return [form[i:i + 32] for form in forms for i in range(0, len(form), 32)]


def found_in(data: bytes, secret: bytes) -> bool:
    return any(part in data for part in leaks(secret))


def where_the_key_is(node: Node, done: subprocess.CompletedProcess, key: bytes) -> set[str]:
    """Every place the key shows, but Secret Manager's own store (fake/secret): each file in
    the node's folders (sandboxed disk and TMPDIR, the journal, bash's trace of every command
    and its arguments), the boot's output, and each stub call's arguments, stdin and files."""
    skipped = (node.fake / "secret", node.fake / "secrets", node.fake / "record", node.stubs,
               node.script_dir)
    places = {str(f.relative_to(node.root)) for f in node.root.rglob("*")
              if f.is_file() and not any(f.is_relative_to(s) for s in skipped)
              and found_in(f.read_bytes(), key)}
    places |= {f"boot {name}" for name, out in (("stdout", done.stdout), ("stderr", done.stderr))
               if found_in(out.encode(), key)}
    for record in node.records():
        call = b" ".join(record.argv[:4]).decode()
        places |= {f"{call}: {part}" for part, data in (
            ("argv", b"\0".join(record.argv)), ("stdin", record.stdin),
            *((f"file {n}", f) for n, f in enumerate(record.files, 1))) if found_in(data, key)}
    return places


MUNGE_KEY_FILE = "disk/etc-munge/munge.key"


def test_the_munge_key_the_controller_creates_goes_only_to_secret_manager_and_munge(
        node, a3mega):
    first = node.booted_from(a3mega, "controller")
    key = (node.fake / "secret" / "1").read_bytes()
    assert len(base64.b64decode(key, validate=True)) == 768
    assert where_the_key_is(node, first, key) == {
        MUNGE_KEY_FILE, "gcloud secrets versions add: file 1"}
    assert not list(node.tmp.iterdir())

    again = node.booted_from(a3mega, "controller")
    assert where_the_key_is(node, again, key) == {
        MUNGE_KEY_FILE, "gcloud secrets versions add: file 1"}


def test_the_jwt_key_the_controller_creates_goes_only_to_secret_manager_and_slurmctld(
        node, a3mega):
    for boot in ("first boot", "reboot"):
        done = node.booted_from(a3mega, "controller")
        (version,) = (node.fake / "secrets" / "cpu-small-jwt-key").iterdir()
        key = version.read_bytes()
        assert where_the_key_is(node, done, key) == {
            "disk/etc-slurm/jwt_hs256.key", "gcloud secrets versions add: file 1"}, boot
        assert not list(node.tmp.iterdir())
    # Nor is it the munge key, nor does the munge key go where the JWT key does.
    munge = (node.fake / "secret" / "1").read_bytes()
    assert not found_in(key, munge)
    assert where_the_key_is(node, done, munge) == {
        MUNGE_KEY_FILE, "gcloud secrets versions add: file 1"}


@pytest.mark.parametrize("script", ["login", "compute-a3mega"])
def test_a_node_keeps_the_munge_key_it_fetches_only_for_munge(node, a3mega, script):
    key = base64.b64encode(os.urandom(768))
    (node.fake / "secret" / "1").write_bytes(key)
    ready(node, "a3mega")
    for _ in ("first boot", "reboot"):
        done = node.booted_from(a3mega, script)
        assert where_the_key_is(node, done, key) == {MUNGE_KEY_FILE}
        assert not list(node.tmp.iterdir())


def test_the_login_node_stages_exactly_the_rendered_jobs_and_recipes_for_every_user(node, a4):
    ready(node, "a4")
    jobs = {f"/opt/clusterprint/{name}": text for name, text in a4.items()
            if name.startswith(("jobs/", "recipes/"))}
    assert sorted(jobs) == ["/opt/clusterprint/jobs/nccl-allreduce-a4.sbatch",
                            "/opt/clusterprint/jobs/nccl-allreduce-a4spot.sbatch",
                            "/opt/clusterprint/recipes/gemma-2b-rl.sbatch"]
    stale = [node.file("/opt/clusterprint/jobs/nccl-allreduce-renamed.sbatch"),
             node.file("/opt/clusterprint/recipes/llama3-8b-pretrain.sbatch")]
    for old in stale:
        old.parent.mkdir(parents=True)
        old.write_text("what an earlier blueprint had")
    node.booted_from(a4, "login")

    for name in ("jobs", "recipes"):
        folder = node.file(f"/opt/clusterprint/{name}")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755
        assert sorted(str(p) for p in folder.iterdir()) == sorted(
            str(node.file(j)) for j in jobs if j.startswith(f"/opt/clusterprint/{name}/"))
    for path, text in jobs.items():
        assert node.file(path).read_text() == text
        assert stat.S_IMODE(node.file(path).stat().st_mode) == 0o644
    assert "removed /opt/clusterprint/jobs/nccl-allreduce-renamed.sbatch" in node.journal()
    assert "removed /opt/clusterprint/recipes/llama3-8b-pretrain.sbatch" in node.journal()
    hint = node.file("/etc/profile.d/clusterprint-jobs.sh")
    assert stat.S_IMODE(hint.stat().st_mode) == 0o644
    checked = subprocess.run(["shellcheck", "--severity=style", "--shell=sh", str(hint)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    # A login shell on the node (its /opt in place) names each job and recipe when
    # interactive only.
    lines = [f"clusterprint: prove the GPU network first: sbatch {job}"
             for job in sorted(jobs) if "/jobs/" in job] + [
        "clusterprint: a training recipe that checkpoints and resumes: sbatch "
        "/opt/clusterprint/recipes/gemma-2b-rl.sbatch"]
    for shell, flags, shown in [("bash", "-i", lines), ("sh", "-i", lines), ("bash", "-l", [])]:
        login = ["unshare", "--mount", "--propagation", "private", "bash", "-c",
                 'mount --bind "$0" /opt && exec "$2" "$3" -c ". $1"',
                 str(node.root / "disk" / "opt"), str(hint), shell, flags]
        done = subprocess.run(login, capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(node.root)})
        assert done.stdout.splitlines() == shown, shell

    node.booted_from(a4, "login")
    assert "wrote /opt" not in node.journal() and "removed" not in node.journal()


def test_a_cluster_without_gpu_partitions_stages_no_job(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.booted_from(files, "login")
    assert list(node.file("/opt/clusterprint/jobs").iterdir()) == []


def test_a_gpu_node_installs_the_health_check_and_its_prolog(node, a4):
    gpu_node = ready(node, "a4")
    for boot in ("first boot", "reboot"):
        done = gpu_node.boot(a4["scripts/compute-a4.sh"])
        assert done.returncode == 0, gpu_node.journal()
        assert gpu_node.file(healthcheck.PROGRAM).read_text() == a4["scripts/healthcheck.py"]
        # The module it imports, beside it: Python looks in the program's own folder.
        assert gpu_node.file(healthcheck.PROGRAM).with_name("common.py").read_text() == a4[
            "scripts/common.py"]
        assert gpu_node.file(healthcheck.CONFIG).read_text() == a4[
            "scripts/healthcheck-a4.json"]
        for path, mode in ((healthcheck.HEALTH_CHECK_PROGRAM, "interval"),
                           (healthcheck.PROLOG, "prolog")):
            assert f"--config {healthcheck.CONFIG} --mode {mode}\n" in (
                gpu_node.file(path).read_text())
            assert gpu_node.file(path).stat().st_mode & 0o111
        assert not gpu_node.file(healthcheck.EPILOG).exists()  # a4 checks gpu: quick
        # Written once: a reboot that changes nothing does not restart slurmd for it.
        assert ("wrote " + healthcheck.PROLOG in gpu_node.journal()) is (boot == "first boot")


#: Where the metadata server places a VM (Google's "View VM topology" sample's shape), and
#: the Topology= word its slurmd must register with: 16 hex digits of each id.
PLACE = {"cluster": "europe-west1-cluster-jfhb", "block": "3e3056e2a1b4c5d6e7f80912",
         "subBlock": "1fc18636aa0b1c2d3e4f5a6b", "host": "2326a1b2c3d4e5f6"}
PLACED = "Topology=fabric:fabric:c-europe-west1-cluster-jfhb:b-3e3056e2a1b4c5d6:s-1fc18636aa0b1c2d"
UNPLACED = "Topology=fabric:fabric:unplaced"
SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/clusterprint.conf"


def registers_with(node: Node) -> str:
    """What slurmd's --conf holds on the node, as the boot wrote its unit."""
    (conf,) = re.findall(r'^ExecStart=\S+ -D -s -Z --conf-server \S+ --conf "([^"]*)"$',
                         node.file(SLURMD_DROPIN).read_text(), re.MULTILINE)
    return conf


def test_a_tree_node_registers_where_the_metadata_server_places_it_at_every_boot(node, a4):
    ready(node, "a4").metadata(PHYSICAL_TOPOLOGY_KEY, json.dumps(PLACE))
    node.booted_from(a4, "compute-a4")
    assert registers_with(node) == f"{node_conf_of(a4['scripts/compute-a4.sh'])} {PLACED}"
    assert f"topology: slurmd registers with {PLACED}" in node.journal()
    assert "<4>topology:" not in node.journal()
    # The program, beside the health check's common.py that it imports.
    program = node.file(topology.PLACE_PROGRAM)
    assert program.read_text() == a4["scripts/topology.py"]
    assert program.with_name("common.py").read_text() == a4["scripts/common.py"]
    assert "systemctl restart slurmd" in node.calls()
    # A reboot on the same host keeps the place and the running slurmd's unit.
    node.booted_from(a4, "compute-a4")
    assert registers_with(node).endswith(f" {PLACED}")
    assert "systemctl restart slurmd" not in node.calls()
    # A VM Compute Engine moved to another sub-block registers there on its next boot.
    node.metadata(PHYSICAL_TOPOLOGY_KEY, json.dumps({**PLACE, "subBlock": "77" * 12}))
    node.booted_from(a4, "compute-a4")
    assert registers_with(node).endswith(":s-7777777777777777")
    assert "systemctl restart slurmd" in node.calls()


@pytest.mark.parametrize("value", [
    pytest.param(None, id="absent"),
    pytest.param("", id="empty"),
    pytest.param("{not json", id="not-json"),
    pytest.param(json.dumps({k: v for k, v in PLACE.items() if k != "subBlock"}),
                 id="no-sub-block"),
    pytest.param(json.dumps({**PLACE, "block": 'a" ExecStart=/bin/sh -c id'}), id="hostile"),
])
def test_a_node_placed_nowhere_still_boots_and_registers_unplaced_with_a_warning(
        node, a4, value):
    ready(node, "a4")
    if value is not None:
        node.metadata(PHYSICAL_TOPOLOGY_KEY, value)
    node.booted_from(a4, "compute-a4")
    assert registers_with(node) == f"{node_conf_of(a4['scripts/compute-a4.sh'])} {UNPLACED}"
    (warning,) = [line for line in node.journal().splitlines()
                  if line.startswith("<4>topology: ")]
    assert warning.endswith(" joins Slurm's fabric tree under switch unplaced, with the other "
                            "nodes whose place is not known")
    assert "ExecStart=/bin/sh" not in node.file(SLURMD_DROPIN).read_text()
    assert "systemctl restart slurmd" in node.calls()


@pytest.mark.parametrize("name", ["cpu-small", "mixed"])
def test_a_cpu_node_registers_with_no_topology_and_never_asks_for_its_place(node, name):
    files = rendered_files(cpu_only() if name == "cpu-small" else mixed_partition())
    storage_ready(node, "cpu-small" if name == "cpu-small" else "a4")
    node.metadata(PHYSICAL_TOPOLOGY_KEY, json.dumps(PLACE))
    node.booted_from(files, "compute-cpu")
    # A node of a cluster that has a tree (mixed) too: its partitions place it flat.
    assert registers_with(node).split()[0] == "Feature=cpu"
    assert "Topology=" not in registers_with(node)
    assert [c for c in node.calls() if PHYSICAL_TOPOLOGY_KEY in c] == []
    assert not node.file(topology.PLACE_PROGRAM).exists()


def test_an_a4x_controller_installs_and_enables_the_nvlink_blocks_service(node):
    files = rendered_files(a4x_cluster())
    ready(node, "a4")
    node.booted_from(files, "controller")
    program = node.file(topology.BLOCKS_PROGRAM)
    assert program.read_text() == files["scripts/nvlink_blocks.py"]
    assert program.with_name("common.py").read_text() == files["scripts/common.py"]
    # It runs from there on the node's Python alone: its import of common.py resolves.
    done = subprocess.run([*STDLIB_ONLY, str(program), "--help"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    unit = node.file(f"/etc/systemd/system/{topology.BLOCKS_UNIT}").read_text()
    assert (f"\nExecStart=/usr/bin/python3 {topology.BLOCKS_PROGRAM} --tree fabric --block "
            "nvlink --nodesets a4,a4spot\n") in unit
    assert "\nAfter=slurmctld.service\n" in unit and "\nRestart=always\n" in unit
    # slurmctld reads the blocks it fills from topology.yaml, delivered with slurm.conf.
    assert node.file("/etc/slurm/topology.yaml").read_text() == files["topology.yaml"]
    calls = node.calls()
    assert f"systemctl enable {topology.BLOCKS_UNIT}" in calls
    assert calls.index("systemctl restart slurmctld") < calls.index(
        f"systemctl restart {topology.BLOCKS_UNIT}")
    # The next boot changes nothing: the service is started, not restarted.
    node.booted_from(files, "controller")
    calls = node.calls()
    assert f"systemctl start {topology.BLOCKS_UNIT}" in calls
    assert f"systemctl restart {topology.BLOCKS_UNIT}" not in calls


def test_a_tree_clusters_controller_runs_no_nvlink_blocks_service(node, a4):
    ready(node, "a4")
    node.booted_from(a4, "controller")
    assert node.file("/etc/slurm/topology.yaml").read_text() == a4["topology.yaml"]
    assert not node.file(topology.BLOCKS_PROGRAM).exists()
    assert [c for c in node.calls() if topology.BLOCKS_UNIT in c] == []


HELPERS = {"/usr/local/bin/clusterprint-tensorboard-upload": tensorboard_upload,
           "/usr/local/bin/clusterprint-register-model": register_model}
VENV = "/opt/clusterprint/venv"


def test_the_login_node_installs_the_helpers_once_beside_the_images_uploader(node, a3mega,
                                                                             tmp_path):
    ready(node, "a3mega")
    node.booted_from(a3mega, "login")
    calls = node.calls()
    # The uploader's venv is the image's (its tensorboard part): the boot makes none.
    assert [c for c in calls if c.startswith(("python3", "pip"))] == []
    # Each command is a link to its module, beside the broker's module they import.
    for path, module in {**HELPERS, f"{MLOPS_LIB}/mlops_broker.py": mlops_broker}.items():
        installed = node.file(f"{MLOPS_LIB}/{Path(module.__file__).name}")
        assert installed.read_text() == "#!/usr/bin/python3\n" + Path(module.__file__).read_text()
        assert stat.S_IMODE(installed.stat().st_mode) == 0o755
        if path in HELPERS:
            assert os.readlink(node.file(path)) == f"{MLOPS_LIB}/{Path(module.__file__).name}"
    config = node.file("/etc/clusterprint/mlops.json")
    assert json.loads(config.read_text()) == {
        "region": "us-central1", "broker": mlops_broker.SOCKET,
        "buckets": [{"name": "my-project-a3mega-ckpts", "mount": "/gcs/checkpoints"}],
        # observability.tensorboard: root's step watches the recipes' runs on Lustre.
        "tensorboard_runs": {"root": "/lustre", "folder": "clusterprint"}}
    assert "systemctl restart clusterprint-mlops.service" in calls  # a new program
    sync = node.file(f"{MLOPS_LIB}/tensorboard_sync.py")
    assert sync.read_text() == "#!/usr/bin/python3\n" + Path(tensorboard_sync.__file__).read_text()
    assert "systemctl restart clusterprint-tensorboard-sync.service" in calls

    # The installed helper reads the rendered configuration: a checkpoint off the bucket
    # (on Lustre) is copied to the blueprint's bucket, then registered (run by root, which
    # holds the node's credentials, it runs the commands itself).
    checkpoint = tmp_path / "lustre-ckpt"
    checkpoint.mkdir()
    done = subprocess.run(
        ["python3", str(node.file(f"{MLOPS_LIB}/register_model.py")), str(checkpoint),
         "--display-name", "llama", "--dry-run"], capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "CLUSTERPRINT_MLOPS_CONFIG": str(config)})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "clusterprint-register-model: gcloud storage rsync --recursive "
        f"{checkpoint} gs://my-project-a3mega-ckpts/models/llama")

    node.booted_from(a3mega, "login")
    assert "systemctl start clusterprint-mlops.service" in node.calls()  # nothing changed
    assert not [line for line in node.journal().splitlines()
                if line.startswith("wrote ") and ("/usr/local/bin" in line
                                                  or "mlops.json" in line)]


def test_a_cluster_with_a_tensorboard_needs_the_uploader_on_the_image(node, a3mega):
    ready(node, "a3mega").image_lacks_parts("tensorboard")
    done = node.boot_from(a3mega, "login")
    assert done.returncode != 0
    assert "lacks tensorboard, which this role needs" in node.journal().splitlines()[-1]


def test_a_cluster_without_a_tensorboard_gets_the_helpers_and_needs_no_uploader(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.image_lacks_parts("tensorboard")
    node.booted_from(files, "login")
    assert not node.file(VENV).exists()
    assert all(node.file(path).is_symlink() for path in HELPERS)
    assert json.loads(node.file("/etc/clusterprint/mlops.json").read_text())["buckets"] == []
    assert not node.file(f"{MLOPS_LIB}/tensorboard_sync.py").exists()
    assert [c for c in node.calls() if "tensorboard-sync" in c] == []


STATE = "/var/lib/clusterprint-state"
FORMAT = f"mkfs.ext4 -q -L clusterprint-state /dev/disk/by-id/{STATE_DEVICE}"
REGISTER = "sacctmgr -i add cluster cpu-small"


def test_controller_formats_the_state_disk_once_and_starts_accounting_before_slurmctld(
        node, files):
    node.booted_from(files, "controller")
    calls = node.calls()
    assert calls.count(FORMAT) == 1
    assert f"mount -o defaults /dev/disk/by-id/{STATE_DEVICE} {STATE}" in calls
    assert sum(c.startswith("mariadb-install-db --user=mysql") for c in calls) == 1
    # The password: a fresh version of the database secret, which only slurmdbd.conf keeps.
    password = (node.fake / "secrets" / "cpu-small-db-password" / "1").read_text()
    assert re.fullmatch(r"[A-Za-z0-9]{32}", password)
    conf = node.file("/etc/slurm/slurmdbd.conf")
    assert conf.read_text() == files["slurmdbd.conf"] + f"StoragePass={password}\n"
    assert oct(conf.stat().st_mode & 0o777) == "0o600" and conf.owner() == "slurm"
    assert "\nStoragePass=" not in files["slurmdbd.conf"]
    # The cluster is registered before slurmctld's first start, which needs it.
    assert calls.index(REGISTER) < calls.index("systemctl restart slurmctld")
    assert node.file("/etc/slurm/slurm.conf").read_text().count(
        f"StateSaveLocation={STATE}/slurmctld") == 1
    assert node.file("/etc/mysql/mariadb.conf.d/60-clusterprint.cnf").read_text().count(
        f"datadir={STATE}/mysql") == 1

    node.booted_from(files, "controller")
    calls = node.calls()
    assert FORMAT not in calls and REGISTER not in calls
    assert not [c for c in calls
                if c.startswith(("mariadb-install-db", "gcloud secrets versions add"))]
    assert "systemctl start slurmdbd" in calls and "systemctl restart slurmdbd" not in calls


def test_a_state_disk_blkid_cannot_read_is_never_formatted(node, files):
    (node.stubs / "blkid").write_text("#!/bin/bash\nexit 4\n")
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert f"FAILED: state disk /dev/disk/by-id/{STATE_DEVICE}: blkid failed (4)" in node.journal()
    assert FORMAT not in node.calls()


def test_a_missing_db_secret_fails_the_controller_boot_naming_it(node, files):
    (node.fake / "metadata" / node_metadata.DB_SECRET).unlink()
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert f"FAILED: metadata {node_metadata.DB_SECRET}: not set" in node.journal()
    assert not [c for c in node.calls() if "slurmctld" in c or "slurmdbd" in c]


def test_an_unreadable_db_secret_fails_the_controller_boot_naming_it(node, files):
    node.fail_for_good("--secret=cpu-small-db-password")
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert ("FAILED: read database password from secret cpu-small-db-password: still failing"
            in node.journal())
    assert not [c for c in node.calls() if c.startswith("systemctl") and "slurm" in c]


def test_a_password_the_database_refuses_fails_the_boot_naming_the_secret(node, files):
    node.fail_for_good("-u slurm -e SELECT 1")
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert ("accepting user slurm with the password in secret cpu-small-db-password: still "
            "failing" in node.journal())
    assert "systemctl restart slurmctld" not in node.calls()


def test_a_canary_db_password_goes_only_to_secret_manager_slurmdbd_conf_and_mariadb(
        node, files):
    canary = b"CanaryPassw0rdCanaryPassw0rdXYZ1"
    (node.fake / "secrets" / "cpu-small-db-password").mkdir(parents=True)
    (node.fake / "secrets" / "cpu-small-db-password" / "1").write_bytes(canary)
    done = node.booted_from(files, "controller")
    places = where_the_key_is(node, done, canary)
    # MariaDB gets it on stdin (ALTER USER) and in the client file of the check; nothing
    # else: no argument, no trace, no log, no leftover temp file.
    assert {p for p in places if not p.startswith("mariadb --defaults-extra-file=")} == {
        "disk/etc-slurm/slurmdbd.conf", "mariadb: stdin"}
    assert all(p.endswith(": file 1") for p in places if p.startswith("mariadb --"))
    assert not list(node.tmp.iterdir())
    rendered = "\n".join(files.values()).encode()
    assert not found_in(rendered, canary)


def test_every_file_that_holds_a_secret_is_only_its_owners_to_read(node, files):
    """The munge key, the JWT key and the database password, where they land on the
    controller's disk: no group or other may read (the munge key is munge's, the others
    SlurmUser's; chown is the node's, so the owner is what the script asks of it)."""
    canary = b"CanaryPassw0rdCanaryPassw0rdXYZ1"
    (node.fake / "secrets" / "cpu-small-db-password").mkdir(parents=True)
    (node.fake / "secrets" / "cpu-small-db-password" / "1").write_bytes(canary)
    done = node.booted_from(files, "controller")
    (jwt,) = (node.fake / "secrets" / "cpu-small-jwt-key").iterdir()
    held = set()
    for secret in ((node.fake / "secret" / "1").read_bytes(), jwt.read_bytes(), canary):
        held |= {p for p in where_the_key_is(node, done, secret) if p.startswith("disk/")}
    assert held == {MUNGE_KEY_FILE, "disk/etc-slurm/jwt_hs256.key",
                    "disk/etc-slurm/slurmdbd.conf"}
    for place in held:
        assert stat.S_IMODE((node.root / place).stat().st_mode) & 0o077 == 0, place


def test_a_controller_whose_cluster_leaves_the_tree_drops_topology_yaml_on_its_next_boot(
        node, a4):
    # A stale topology.yaml would keep slurmctld placing jobs by a tree the cluster left.
    ready(node, "a4")
    node.booted_from(a4, "controller")
    assert node.file("/etc/slurm/topology.yaml").exists()
    node.calls()
    flat = rendered_files(without_gpu_network())
    node.booted_from(flat, "controller")
    assert not node.file("/etc/slurm/topology.yaml").exists()
    assert "removed /etc/slurm/topology.yaml: the new value has no topology.yaml" in (
        node.journal())
    assert node.file("/etc/slurm/slurm.conf").read_text() == flat["slurm.conf"]
    assert "systemctl restart slurmctld" in node.calls()


@pytest.mark.parametrize("name", ["a4", "a4x"])
def test_the_login_node_installs_the_per_block_nccl_proof_command(node, a4, name):
    files = a4 if name == "a4" else rendered_files(a4x_cluster())
    ready(node, "a4")
    node.booted_from(files, "login")
    command = node.file(topology.NCCL_BLOCKS_COMMAND)
    assert os.readlink(command) == f"{MLOPS_LIB}/nccl_blocks.py"
    program = node.file(f"{MLOPS_LIB}/nccl_blocks.py")
    assert program.read_text() == "#!/usr/bin/python3\n" + files["scripts/nccl_blocks.py"]
    assert stat.S_IMODE(program.stat().st_mode) == 0o755
    # The command runs on the node's Python alone, beside the common.py it imports.
    done = subprocess.run([*STDLIB_ONLY, str(program), "--help"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and "clusterprint-nccl-blocks" in done.stdout, done.stderr


def test_a_cluster_with_no_topology_installs_no_per_block_proof(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.booted_from(files, "login")
    assert not os.path.lexists(node.file(topology.NCCL_BLOCKS_COMMAND))
    assert not node.file(f"{MLOPS_LIB}/nccl_blocks.py").exists()


BOOT_STATE = f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_STATE}"
BOOT_LOG = f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_LOG}"


def steps_of(script: str) -> list[str]:
    """The steps a rendered boot script runs, in order: its ``step NAME ...`` lines."""
    return re.findall(r"^step (\w+)", script, re.MULTILINE)


@pytest.mark.parametrize("script", ["controller", "login", "compute-a3mega"])
def test_a_boot_publishes_each_step_as_its_stage_then_ready(node, a3mega, script):
    ready(node, "a3mega")
    node.env["CLUSTERPRINT_STAGE_INTERVAL_S"] = "0"
    node.booted_from(a3mega, script)
    stages = [f"{BOOT_STATE}=booting {name}" for name in steps_of(a3mega[f"scripts/{script}.sh"])]
    assert len(stages) >= 8
    assert node.guest_attribute_writes() == [*stages, f"{BOOT_STATE}=ready"]
    assert node.guest_attribute(BOOT_LOG) is None


def test_a_fast_boot_writes_guest_attributes_within_their_rate_limit(node, files):
    node.booted_from(files, "controller")
    # 10 writes a minute: the first stage, then none less than 6 s after the last, then ready.
    assert node.guest_attribute_writes() == [f"{BOOT_STATE}=booting ensure_image",
                                             f"{BOOT_STATE}=ready"]
    assert node.file("/var/log/clusterprint-controller-boot.log").stat().st_mode & 0o077 == 0


def test_a_failed_step_publishes_failed_with_the_step_and_the_last_lines(node, a3mega):
    ready(node, "a3mega")
    node.fail_for_good("mount -t nfs")
    done = node.boot_from(a3mega, "compute-a3mega")
    assert done.returncode != 0
    assert node.guest_attribute(BOOT_STATE) == "failed mount_home"
    last = node.guest_attribute(BOOT_LOG).splitlines()
    assert last[-1] == node.journal().splitlines()[-1] == (
        "<3>FAILED: mount Filestore 10.1.2.3:/home on /home: still failing after 0s")
    assert "mount: broken by the test (mount -t nfs)" in last
    assert node.guest_attribute_writes()[-2:] == [
        f"{BOOT_LOG}={chr(92).join(['', 'n']).join(last)}", f"{BOOT_STATE}=failed mount_home"]


def test_the_published_last_lines_are_bounded_and_hold_no_key_like_text(node, files):
    secret = base64.b64encode(os.urandom(96)).decode()
    node.metadata(node_metadata.HOME_SOURCE, f"bogus:{secret} " + "x " * 2000)
    done = node.boot_from(files, "controller")
    assert done.returncode != 0
    assert secret in node.journal()  # the journal is root's (and adm's) to read
    published = node.guest_attribute(BOOT_LOG)
    assert secret not in published and secret[:24] not in published
    assert "<3>FAILED: metadata clusterprint-home-source is 'bogus:[...] x x" in published
    assert len(published.encode()) <= 1024
    assert node.guest_attribute(BOOT_STATE) == "failed mount_home"


def test_a_guest_attribute_that_cannot_be_written_never_fails_the_boot(node, files):
    node.fail_for_good("guest-attributes")
    node.booted_from(files, "controller")
    assert node.guest_attribute_writes() == []
    assert "<4>guest attribute clusterprint/boot: not written; the boot goes on" in node.journal()
