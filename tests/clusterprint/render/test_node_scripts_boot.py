"""The rendered scripts boot a node, run again unchanged after a reboot, and fail loudly.

Each script runs as root in its own mount namespace: the folders it writes (/etc/munge,
/etc/slurm, /etc/systemd/system, /etc/apt, /var/spool, /var/lib, /home) are bind-mounted from
a temp folder, and stubs stand in for the metadata server, Secret Manager, systemd, mounts and apt.
The image's commands are fakes in the node's own folder: the scripts search only that,
the stubs and /usr/bin, never this machine's /usr/sbin, so what they find is what the test
put there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clusterprint import node_metadata
from clusterprint.render import rendered_files
from clusterprint.validate import load_checked

STUBS = Path(__file__).parent / "stubs"
SANDBOXED = ("/etc/munge", "/etc/slurm", "/etc/systemd/system", "/etc/apt", "/var/spool",
             "/var/lib", "/home")
#: What a ready image has: the Slurm daemons, munge and the NFS client.
IMAGE_COMMANDS = ("slurmd", "slurmctld", "munged", "mount.nfs")
SECRET = "projects/my-project/secrets/cpu-small-munge-key"


class Node:
    """One VM's disk and cloud, shared by the runs of its scripts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = root / "fake"
        for sub in ("metadata", "mounted", "secret"):
            (self.fake / sub).mkdir(parents=True)
        self.metadata(node_metadata.HOME_SOURCE, "nfs:10.1.2.3:/home")
        self.metadata(node_metadata.MUNGE_SECRET, SECRET)
        self.script_dir = root / "scripts"
        self.script_dir.mkdir()
        self.stubs = root / "stubs"
        shutil.copytree(STUBS, self.stubs, symlinks=True)
        self.bin = self.fake / "bin"
        self.bin.mkdir()
        for command in IMAGE_COMMANDS:
            self.image_has(command, "22.05.8")

    def image_has(self, command: str, slurm_version: str) -> None:
        """Put a command on the image; Slurm's report ``slurm_version`` for -V."""
        path = self.bin / command
        path.write_text(f'#!/bin/bash\necho "slurm-wlm {slurm_version}"\n')
        path.chmod(0o755)

    def image_lacks(self, *commands: str) -> None:
        """Take commands off the image, whether a fake of the image or a stub."""
        for command in commands:
            (self.bin / command).unlink(missing_ok=True)
            (self.stubs / command).unlink(missing_ok=True)

    def metadata(self, key: str, value: str) -> None:
        """Set an instance metadata value."""
        (self.fake / "metadata" / key).write_text(value)

    def boot(self, script: str) -> subprocess.CompletedProcess:
        """Run a script as the VM's startup would, with the node's folders in place."""
        path = self.script_dir / "startup.sh"
        path.write_text(script)
        binds = []
        for target in SANDBOXED:
            source = self.root / "disk" / target.strip("/").replace("/", "-")
            source.mkdir(parents=True, exist_ok=True)
            binds.append(f"mount --bind {source} {target}")
        # The real mount makes the sandbox, and the stubs come into PATH only after it:
        # a script must never run against this machine's own folders.
        setup = "set -e; " + "; ".join(binds)
        journal = self.fake / "journal"
        journal.unlink(missing_ok=True)
        env = {**os.environ, "FAKE": str(self.fake)}
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c",
             f'{setup}; PATH={self.stubs}:{self.bin}:/usr/bin exec bash "$0"', str(path)],
            env=env, capture_output=True, text=True, timeout=60)
        self.wait_for_journal(done.returncode)
        return done

    def wait_for_journal(self, returncode: int) -> None:
        """The journal writer drains after the script exits: wait for its last line."""
        last = "is up" if returncode == 0 else "FAILED"
        deadline = time.monotonic() + 5
        while last not in self.journal() and time.monotonic() < deadline:
            time.sleep(0.05)

    def journal(self) -> str:
        """What the scripts logged."""
        path = self.fake / "journal"
        return path.read_text() if path.exists() else ""

    def calls(self) -> list[str]:
        """Every stubbed command the scripts ran, and clears the record."""
        path = self.fake / "calls"
        lines = path.read_text().splitlines() if path.exists() else []
        path.unlink(missing_ok=True)
        return lines

    def file(self, path: str) -> Path:
        """A file the scripts wrote, under the node's sandboxed folders."""
        for target in SANDBOXED:
            if path.startswith(target + "/"):
                name = target.strip("/").replace("/", "-")
                return self.root / "disk" / name / path[len(target) + 1:]
        raise AssertionError(f"{path} is outside the sandbox")


@pytest.fixture
def node(tmp_path) -> Node:
    """A fresh VM; unshare needs root, like the Slurm tests."""
    assert os.geteuid() == 0 and shutil.which("unshare"), "these tests need root and unshare"
    return Node(tmp_path)


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    """The cpu-small blueprint's rendered files."""
    return rendered_files(load_checked("blueprints/cpu-small.yaml"))


@pytest.fixture(scope="module")
def a3mega() -> dict[str, str]:
    """The a3mega blueprint's rendered files: Lustre scratch and a bucket."""
    return rendered_files(load_checked("blueprints/a3mega.yaml"))


@pytest.fixture(scope="module")
def a4() -> dict[str, str]:
    """The a4 blueprint's rendered files: GPU nodes, /home on Lustre, a bucket."""
    return rendered_files(load_checked("blueprints/a4.yaml"))


@pytest.fixture
def gpu_node(node) -> Node:
    """An a4 node whose image has everything but Slurm's gpu/nvml plugin (Ubuntu 24.04's)."""
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.metadata(node_metadata.HOME_SOURCE, "lustre:10.9.8.7@tcp:/shared")
    node.image_has("mount.lustre", "22.05.8")
    (node.fake / "lustre-modules").touch()
    (node.fake / "absent").write_text("slurm-wlm-nvml-plugin\n")
    smi = node.bin / "nvidia-smi"
    smi.write_text('#!/bin/bash\nfor i in {0..7}; do echo "GPU $i: NVIDIA B200"; done\n')
    smi.chmod(0o755)
    return node


NO_NVML_WARNING = "<4>software: WARNING: Slurm on this image has no gpu/nvml plugin"
NVML_STATE = "/var/lib/clusterprint/nvml-plugin"


def test_a_gpu_node_without_the_nvml_plugin_looks_once_and_warns_at_every_boot(gpu_node, a4):
    first = gpu_node.boot(a4["scripts/compute-a4.sh"])
    assert first.returncode == 0, gpu_node.journal()
    apt = [c for c in gpu_node.calls() if c.startswith("apt")]
    assert [c.split()[-1] for c in apt] == ["update", "slurm-wlm-nvml-plugin"]
    journal = gpu_node.journal()
    assert NO_NVML_WARNING + ": GPUs are bound to jobs by gres.conf's File= line" in journal
    assert "GPUs: the driver shows 8 of 8" in journal
    assert (gpu_node.file(NVML_STATE).read_text()
            == "slurm-wlm-nvml-plugin is not in this image's apt sources\n")

    again = gpu_node.boot(a4["scripts/compute-a4.sh"])
    assert again.returncode == 0, gpu_node.journal()
    assert not [c for c in gpu_node.calls() if c.startswith("apt")]
    journal = gpu_node.journal()
    assert "not in this image's apt sources (found out on an earlier boot)" in journal
    assert NO_NVML_WARNING in journal


def test_a_gpu_node_without_internet_access_is_not_held_up_by_the_plugin(gpu_node, a4):
    (gpu_node.fake / "offline").touch()
    started = time.monotonic()
    done = gpu_node.boot(a4["scripts/compute-a4.sh"])
    assert done.returncode == 0, gpu_node.journal()
    assert time.monotonic() - started < 30
    assert sum(c.endswith(" update") for c in gpu_node.calls()) == 1
    assert NO_NVML_WARNING in gpu_node.journal()
    assert "apt-get update failed" in gpu_node.file(NVML_STATE).read_text()


def test_controller_creates_munge_key_once_and_is_unchanged_after_reboot(node, files):
    first = node.boot(files["scripts/controller.sh"])
    assert first.returncode == 0, node.journal()
    calls = node.calls()
    assert "mount -t nfs -o hard,timeo=600,retrans=3,_netdev 10.1.2.3:/home /home" in calls
    assert sum(c.startswith("gcloud secrets versions add cpu-small-munge-key") for c in calls) == 1
    key = node.file("/etc/munge/munge.key")
    assert key.read_text() == (node.fake / "secret" / "1").read_text()
    assert oct(key.stat().st_mode & 0o777) == "0o400"
    assert node.file("/etc/slurm/slurm.conf").read_text() == files["slurm.conf"]
    assert "systemctl restart slurmctld" in calls and "systemctl restart munge" in calls
    assert not [c for c in calls if c.startswith("apt-get")]
    assert "software: the image has every package this role needs" in node.journal()

    again = node.boot(files["scripts/controller.sh"])
    assert again.returncode == 0, node.journal()
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("mount", "gcloud secrets versions add"))]
    assert "systemctl start slurmctld" in calls and "systemctl restart slurmctld" not in calls
    assert sorted(os.listdir(node.fake / "secret")) == ["1"]


def test_compute_waits_for_home_then_starts_slurmd_as_dynamic_node(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    (node.fake / "unreachable").touch()
    done = node.boot(files["scripts/compute-cpu.sh"])
    assert done.returncode == 0, node.journal()
    assert "mount Filestore 10.1.2.3:/home on /home: not yet, retrying" in node.journal()
    assert node.file("/etc/munge/munge.key").read_text() == "key from the controller"
    dropin = node.file("/etc/systemd/system/slurmd.service.d/clusterprint.conf").read_text()
    assert ('-D -s -Z --conf-server cpu-small-controller:6817 --conf "Feature=cpu"'
            in dropin)
    # Ubuntu's Slurm 23.11 unit is Type=notify, which a foreground (-D) slurmd never satisfies.
    assert "\nType=simple\n" in dropin
    assert "systemctl restart slurmd" in node.calls()


def test_a_missing_metadata_value_fails_loudly(node, files):
    (node.fake / "metadata" / node_metadata.HOME_SOURCE).unlink()
    done = node.boot(files["scripts/login.sh"])
    assert done.returncode != 0
    assert f"<3>FAILED: metadata {node_metadata.HOME_SOURCE}: not set on this VM" in node.journal()
    assert not [c for c in node.calls() if c.startswith("mount")]


def test_a_missing_lustre_address_fails_at_once_naming_its_key(node, a3mega):
    (node.fake / "secret" / "1").write_text("key from the controller")
    key = node_metadata.lustre_source("scratch")
    started = time.monotonic()
    done = node.boot(a3mega["scripts/login.sh"])
    assert done.returncode != 0
    assert time.monotonic() - started < 30
    assert f"<3>FAILED: metadata {key}: not set on this VM" in node.journal()
    assert "retrying" not in node.journal()
    assert not [c for c in node.calls() if c.startswith("mount -t lustre")]


def test_a_bare_image_gets_what_the_node_lacks_once(node, files):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.image_lacks("slurmd", "munged", "mount.nfs")
    first = node.boot(files["scripts/compute-cpu.sh"])
    assert first.returncode == 0, node.journal()
    installs = [c for c in node.calls() if c.startswith("apt-get")]
    assert installs[0].endswith(" update")
    assert installs[1].endswith(" install slurmd munge nfs-common")
    assert "software: Slurm 23.11.4" in node.journal()
    dropin = node.file("/etc/systemd/system/slurmd.service.d/clusterprint.conf").read_text()
    assert f"ExecStart={node.bin}/slurmd -D -s -Z" in dropin

    again = node.boot(files["scripts/compute-cpu.sh"])
    assert again.returncode == 0, node.journal()
    assert not [c for c in node.calls() if c.startswith("apt-get")]


def test_an_image_with_slurm_older_than_22_05_is_refused(node, files):
    node.image_has("slurmctld", "21.08.5")
    done = node.boot(files["scripts/controller.sh"])
    assert done.returncode != 0
    assert "FAILED: software: Slurm 21.08.5 is too old" in node.journal()
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("apt-get", "gcloud", "systemctl"))]


def test_lustre_and_buckets_come_from_googles_repositories_for_this_release(node, a3mega):
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.metadata(node_metadata.lustre_source("scratch"), "10.9.8.7@tcp:/scratch")
    node.image_lacks("gcsfuse")
    first = node.boot(a3mega["scripts/login.sh"])
    assert first.returncode == 0, node.journal()
    codename = next(line.split("=", 1)[1].strip('"') for line in
                    Path("/etc/os-release").read_text().splitlines()
                    if line.startswith("VERSION_CODENAME="))
    sources = node.root / "disk" / "etc-apt" / "sources.list.d"
    assert (f"https://packages.cloud.google.com/apt gcsfuse-{codename} main"
            in (sources / "gcsfuse.list").read_text())
    assert (f"https://us-apt.pkg.dev/projects/lustre-client-binaries lustre-client-ubuntu-"
            f"{codename} main" in (sources / "lustre-client.list").read_text())
    calls = node.calls()
    install = next(c for c in calls if c.startswith("apt-get") and " install " in c)
    assert install.endswith(f" install gcsfuse lustre-client-modules-{os.uname().release}"
                            " lustre-client-utils")
    assert "modprobe lustre" in calls
    assert "mount -t lustre -o _netdev 10.9.8.7@tcp:/scratch /lustre" in calls
    assert ("gcsfuse --implicit-dirs --file-mode=666 --dir-mode=777 -o allow_other"
            " my-project-a3mega-ckpts /gcs/checkpoints") in calls

    again = node.boot(a3mega["scripts/login.sh"])
    assert again.returncode == 0, node.journal()
    assert not [c for c in node.calls() if c.startswith(("apt-get", "curl", "modprobe"))]


def test_a_kernel_without_lustre_modules_fails_naming_the_package(node, a3mega):
    module = f"lustre-client-modules-{os.uname().release}"
    (node.fake / "absent").write_text(module + "\n")
    done = node.boot(a3mega["scripts/login.sh"])
    assert done.returncode != 0
    assert f"FAILED: software: no package {module} in this image's apt sources" in node.journal()
    assert not [c for c in node.calls() if " install " in c or c.startswith("mount")]
