"""A sandboxed VM for booting the rendered scripts: its disk, its cloud and its image.

Each script runs as root in its own mount namespace: the folders it writes (/etc/munge,
/etc/slurm, /etc/systemd/system, /etc/apt, /var/spool, /var/lib, /home, /etc/udev,
/etc/clusterprint, /dev/aperture_devices) and the kernel's NICs (/sys/class/net) are
bind-mounted from a temp folder, the trees a GPU node writes anywhere in (/dev, /etc, /mnt,
/usr, /var) are overlays whose changes land in the temp folder too, and stubs stand in for the
metadata server, Secret Manager, systemd, mounts, apt, dpkg, DKMS, udev, Docker, mdadm and mkfs.
The image's commands are fakes in the node's own folder: the scripts search only that,
the stubs and /usr/bin, never this machine's /usr/sbin, so what they find is what the test
put there.

Every call of a stub is recorded whole (tests/clusterprint/render/stubs/record.bash): its
arguments, its stdin and the files its arguments name. bash traces every command the script
runs, with its arguments, to a file of its own, and temp files go to a sandboxed TMPDIR: so a
test can say where a secret went, and a step can be made to fail for good (the scripts' retry
budgets set to 0). The waits between tries are 0 s here (CLUSTERPRINT_RETRY_DELAY_S): a step
that fails once is retried at once, and no test sleeps production's 5 s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clusterprint.contract import node_metadata
from clusterprint.facts import machines
from clusterprint.render import config_sync

#: The stub commands and the NIC samples stay beside the boot tests that use most of them.
RENDER_TESTS = Path(__file__).parents[1] / "clusterprint" / "render"
STUBS = RENDER_TESTS / "stubs"
#: The folder of Slurm's plugins (Debian's and Ubuntu's), where a GPU node's script looks for
#: gpu/nvml and installs the one it builds; under the /usr overlay.
PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
NICS = RENDER_TESTS / "fixtures" / "nics"
#: Public samples of what GPU commands print (tests/fixtures/gpu/README.md).
FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"
SANDBOXED = ("/etc/munge", "/etc/slurm", "/etc/systemd/system", "/etc/apt", "/var/spool",
             "/var/lib", "/home", "/etc/udev", "/etc/clusterprint", "/dev/aperture_devices",
             "/sys/class/net")
#: Trees a script may write anywhere in (limits, sysctl, /dev/md, /mnt/localssd, pyxis in
#: /usr/local): overlays on this machine's own, whose changes stay in the node's folder.
OVERLAID = ("/dev", "/etc", "/mnt", "/usr", "/var")
#: Where the login node stages the rendered jobs for every user, and its login hint.
SANDBOXED += ("/opt", "/etc/profile.d")
#: The controller's clusterprint-remediate command.
SANDBOXED += ("/usr/local/sbin",)
#: The scripts' retry budgets (CLUSTERPRINT_<NAME>_BUDGET_S), all set to 0 by fail_for_good.
BUDGETS = ("MOUNT", "MUNGE_KEY", "APT", "DOWNLOAD", "SECRET", "SLURMCTLD", "CONTROLLER",
           "SLURMD", "NIC", "DB", "SLURMDBD")
#: What a ready image has: the Slurm daemons, munge and the NFS client.
IMAGE_COMMANDS = ("slurmd", "slurmctld", "munged", "mount.nfs", "slurmdbd", "mariadbd")
SECRET = "projects/my-project/secrets/cpu-small-munge-key"
JWT_SECRET = "projects/my-project/secrets/cpu-small-jwt-key"
#: What Slurm 26.05's slurmrestd serves, as ``slurmrestd -s list`` prints it (the real one in
#: tests/slurm/test_rest_api.py): slurmctld's plugin, the accounting database's and the
#: shared one; the OpenAPI versions are data_parser plugins since 23.11 (``-d list``).
REST_PLUGINS = ("openapi/slurmctld", "openapi/slurmdbd", "openapi/util")
DB_SECRET = "projects/my-project/secrets/cpu-small-db-password"
#: The controller's state disk, as Compute Engine names the attached device.
STATE_DEVICE = f"google-{node_metadata.STATE_DISK_DEVICE}"

@dataclass(frozen=True)
class Record:
    """One call of a stub: its arguments, what it read on stdin, the files its arguments named."""

    name: str
    argv: list[bytes]
    stdin: bytes
    files: list[bytes]


class Node:
    """One VM's disk and cloud, shared by the runs of its scripts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = root / "fake"
        for sub in ("metadata", "mounted", "secret"):
            (self.fake / sub).mkdir(parents=True)
        self.metadata(node_metadata.HOME_SOURCE, "nfs:10.1.2.3:/home")
        self.metadata(node_metadata.MUNGE_SECRET, SECRET)
        self.metadata(node_metadata.JWT_SECRET, JWT_SECRET)
        (self.fake / "internal-ip").write_text("10.0.0.5")
        self.metadata(node_metadata.DB_SECRET, DB_SECRET)
        self.script_dir = root / "scripts"
        self.script_dir.mkdir()
        self.stubs = root / "stubs"
        shutil.copytree(STUBS, self.stubs, symlinks=True)
        self.bin = self.fake / "bin"
        self.bin.mkdir()
        self.tmp = root / "disk" / "tmp"
        self.tmp.mkdir(parents=True)
        #: What the scripts' environment adds to this process's: no wait between tries.
        self.env: dict[str, str] = {"CLUSTERPRINT_RETRY_DELAY_S": "0"}
        for command in IMAGE_COMMANDS:
            self.image_has(command, "22.05.8")
        # The distribution's archive, as Ubuntu 24.04 lists it (deb822, binary packages only),
        # and Slurm's plugin folder, in every Slurm.
        self.write(f"/etc/apt/sources.list.d/{os_release_id()}.sources",
                   f"Types: deb\nURIs: {ARCHIVE}\nSuites: noble noble-updates\n"
                   "Components: main universe multiverse\n")
        self.write(f"{PLUGIN_DIR}/gpu_generic.so", "Slurm's gpu/generic plugin")
        # The image's slurmrestd, and what installing the package brings (stubs/apt-get).
        rest = self.fake / "slurmrestd"
        listing = "\\n".join(("Possible OpenAPI plugins:", *REST_PLUGINS))
        rest.write_text(f'#!/bin/bash\nif [[ $* == "-s list" && $SLURMRESTD_SECURITY == '
                        f'disable_user_check ]]; then printf "{listing}\\n" >&2\n'
                        f'else echo "slurmrestd $*" >>"$FAKE/calls"; exit 1; fi\n')
        rest.chmod(0o755)
        shutil.copy(rest, self.bin / "slurmrestd")
        # The controller's state disk is attached (it is blank until mkfs.ext4 runs).
        by_id = self.overlay("/dev") / "disk" / "by-id"
        by_id.mkdir(parents=True, exist_ok=True)
        (by_id / STATE_DEVICE).touch()

    def image_has(self, command: str, slurm_version: str) -> None:
        """Put a command on the image; Slurm's report ``slurm_version`` for -V, and any
        other run of them (a daemon started by hand) is recorded in the calls."""
        path = self.bin / command
        path.write_text(f'#!/bin/bash\nif [[ $1 == -V ]]; then echo "slurm-wlm {slurm_version}"'
                        f'\nelse echo "{command} $*" >>"$FAKE/calls"; fi\n')
        path.chmod(0o755)

    def fake_command(self, command: str, body: str) -> None:
        """Put a command on the image that runs ``body`` (bash)."""
        path = self.bin / command
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)

    def write(self, path: str, text: str) -> None:
        """A file on the node's disk, in its sandboxed folders or overlays, as the image has it."""
        target = self.file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def image_has_nvml_plugin(self) -> None:
        """An image whose Slurm has the gpu/nvml plugin (as a custom image may carry it)."""
        self.write(f"{PLUGIN_DIR}/gpu_nvml.so", "the image's plugin")

    def fail_for_good(self, call: str) -> None:
        """Every stub call containing ``call`` fails, and no step retries: the boot must stop."""
        with (self.fake / "broken").open("a") as broken:
            broken.write(call + "\n")
        self.env.update({f"CLUSTERPRINT_{name}_BUDGET_S": "0" for name in BUDGETS})

    def image_lacks(self, *commands: str) -> None:
        """Take commands off the image, whether a fake of the image or a stub."""
        for command in commands:
            (self.bin / command).unlink(missing_ok=True)
            (self.stubs / command).unlink(missing_ok=True)

    def nics(self, fixture: str, down: tuple[str, ...] = ()) -> None:
        """The VM's NICs from fixtures/nics: the metadata server's listing and the kernel's
        interfaces (/sys/class/net from the ``ip -o link`` listing), ``down`` not up yet."""
        shutil.copy(NICS / f"{fixture}-network-interfaces.json",
                    self.fake / "network-interfaces.json")
        sysfs = self.root / "disk" / "sys-class-net"
        for line in (NICS / f"{fixture}-ip-link.txt").read_text().splitlines():
            name, mac = re.match(r"\d+: (\S+): .*link/\S+ (\S+)", line).groups()
            (sysfs / name).mkdir(parents=True, exist_ok=True)
            (sysfs / name / "address").write_text(mac + "\n")
            state = "unknown" if name == "lo" else "down" if name in down else "up"
            (sysfs / name / "operstate").write_text(state + "\n")

    def carries_fabric(self) -> None:
        """An image that has every part of every GPU fabric (as a custom image may)."""
        for command in ("docker", "dkms"):
            os.symlink(self.stubs / "packages" / command, self.bin / command)
        for command in ("nvidia-container-runtime-hook", "ibv_devinfo"):
            self.image_has(command, "")
        (self.fake / "modules").mkdir(exist_ok=True)
        (self.fake / "modules" / "import-helper").touch()
        (self.fake / "dpkg").mkdir(exist_ok=True)
        for package in ("apt-transport-artifact-registry", "libnccl2", "nccl-gib"):
            (self.fake / "dpkg" / package).touch()

    def local_ssds(self, count: int) -> None:
        """Attach ``count`` local SSDs, as Compute Engine names them in /dev/disk/by-id."""
        by_id = self.overlay("/dev") / "disk" / "by-id"
        by_id.mkdir(parents=True, exist_ok=True)
        for n in range(count):
            link = by_id / f"google-local-nvme-ssd-{n}"
            link.unlink(missing_ok=True)
            link.symlink_to(f"../../nvme0n{n + 1}")

    def driver(self, gpu: str, gpus: int) -> None:
        """The NVIDIA driver on the image: ``nvidia-smi`` prints the public sample of
        tests/fixtures/gpu/``gpu``, and ``-L`` lists ``gpus`` GPUs named as in it; NVML's
        library is in the linker cache."""
        sample = FIXTURES / gpu / "nvidia-smi.txt"
        name = re.search(r"\|\s+0\s+(NVIDIA [\w ]+?)\s{2,}", sample.read_text())[1]
        smi = self.bin / "nvidia-smi"
        smi.write_text(f'#!/bin/bash\nif [[ $1 == -L ]]; then\n  for i in {{0..{gpus - 1}}}; do '
                       f'echo "GPU $i: {name}"; done\nelse\n  cat {sample}\nfi\n')
        smi.chmod(0o755)
        # The driver's libnvidia-ml.so in the linker cache, which slurmd opens NVML by.
        self.fake_command("ldconfig", "echo '\tlibnvidia-ml.so (libc6,x86-64) => "
                                      "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so'")

    def gpu_software_on_image(self) -> None:
        """An image that carries every part a GPU node gets: DCGM, the Ops Agent, enroot,
        pyxis (the array of local SSDs is the VM's, not the image's)."""
        for command in ("dcgmi", "enroot"):
            (self.bin / command).write_text("#!/bin/bash\n")
            (self.bin / command).chmod(0o755)
        (self.fake / "dpkg").mkdir(exist_ok=True)
        (self.fake / "dpkg" / "google-cloud-ops-agent").touch()
        plugin = self.overlay("/usr") / "local" / "lib" / "slurm" / "spank_pyxis.so"
        plugin.parent.mkdir(parents=True, exist_ok=True)
        plugin.touch()

    def metadata(self, key: str, value: str) -> None:
        """Set an instance metadata value."""
        (self.fake / "metadata" / key).write_text(value)

    def serve_slurm_config(self, files: dict[str, str], role: str) -> None:
        """Metadata clusterprint-slurm-config as the components set it on a VM of ``role``,
        from a blueprint's rendered Slurm files."""
        self.metadata(node_metadata.SLURM_CONFIG, config_sync.slurm_config_value(files, role))

    def boot_from(self, files: dict[str, str], script: str) -> subprocess.CompletedProcess:
        """Boot ``scripts/{script}.sh`` of a blueprint's rendered files; the controller and
        login nodes get their Slurm files as metadata, as the components set it."""
        if script in config_sync.ROLE_FILES:
            self.serve_slurm_config(files, script)
        return self.boot(files[f"scripts/{script}.sh"])

    def booted_from(self, files: dict[str, str], script: str) -> subprocess.CompletedProcess:
        """``boot_from`` that must succeed: a failed boot fails the test with its journal."""
        done = self.boot_from(files, script)
        assert done.returncode == 0, self.journal()
        return done

    def booted(self, script: str) -> subprocess.CompletedProcess:
        """``boot`` that must succeed: a failed boot fails the test with its journal."""
        done = self.boot(script)
        assert done.returncode == 0, self.journal()
        return done

    def boot(self, script: str) -> subprocess.CompletedProcess:
        """Run a script as the VM's startup would, with the node's folders in place."""
        path = self.script_dir / "startup.sh"
        path.write_text(script)
        binds = []
        for target in OVERLAID:
            upper, work = self.overlay(target), self.root / "overlay-work" / target.strip("/")
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            binds.append(f"mount -t overlay overlay -o lowerdir={target},upperdir={upper},"
                         f"workdir={work} {target}")
        for target in SANDBOXED:
            source = self.root / "disk" / target.strip("/").replace("/", "-")
            source.mkdir(parents=True, exist_ok=True)
            # A folder this machine lacks (/etc/udev in a container) is made, empty, as the
            # mount point: what the scripts write there still lands in the sandbox.
            Path(target).mkdir(parents=True, exist_ok=True)
            binds.append(f"mount --bind {source} {target}")
        # The real mount makes the sandbox, and the stubs come into PATH only after it:
        # a script must never run against this machine's own folders.
        setup = "set -e; " + "; ".join(binds)
        for log in ("journal", "xtrace"):
            (self.fake / log).unlink(missing_ok=True)
        env = {**os.environ, **self.env, "FAKE": str(self.fake), "TMPDIR": str(self.tmp)}
        # bash traces every command it runs, arguments expanded, to fd 9: the xtrace file.
        trace = 'exec 9>"$FAKE/xtrace"; export BASH_XTRACEFD=9'
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c",
             f'{setup}; {trace}; PATH={self.stubs}:{self.bin}:/usr/bin exec bash -x "$0"',
             str(path)],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
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

    def records(self) -> list[Record]:
        """Every stub call so far, whole (stubs/record.bash); calls() does not clear them."""
        folder = self.fake / "record"
        return [Record(d.name.rsplit(".", 1)[0],
                       (d / "argv").read_bytes().split(b"\0")[:-1],
                       (d / "stdin").read_bytes() if (d / "stdin").exists() else b"",
                       [f.read_bytes() for f in sorted(d.glob("file-*"))])
                for d in sorted(folder.iterdir())] if folder.exists() else []

    def overlay(self, target: str) -> Path:
        """Where what the scripts write under ``target`` (one of OVERLAID) lands."""
        return self.root / "overlay" / target.strip("/")

    def file(self, path: str) -> Path:
        """A file the scripts wrote, under the node's sandboxed folders or overlays."""
        for target in SANDBOXED:
            if path.startswith(target + "/"):
                name = target.strip("/").replace("/", "-")
                return self.root / "disk" / name / path[len(target) + 1:]
        for target in OVERLAID:
            if path.startswith(target + "/"):
                return self.overlay(target) / path[len(target) + 1:]
        raise AssertionError(f"{path} is outside the sandbox")

def os_release_id() -> str:
    """This machine's distribution (ID of /etc/os-release), which the scripts read as the VM's."""
    return re.search(r"^ID=\"?(\w+)", Path("/etc/os-release").read_text(), re.MULTILINE)[1]


ARCHIVE = "http://us-central1.gce.archive.ubuntu.com/ubuntu/"

#: The GPU machine type of each reference blueprint and the public sample of its GPUs.
#: No public H200 nvidia-smi table exists (tests/fixtures/gpu/README.md): A3 Ultra boots with
#: the B200 sample, whose driver (R580, CUDA 13) is the accelerator image's.
GPU_SAMPLES = {"a3mega": ("a3-megagpu-8g", "h100"), "a3ultra": ("a3-ultragpu-8g", "b200"),
               "a4": ("a4-highgpu-8g", "b200")}


def storage_ready(node: Node, name: str, carries_fabric: bool = True) -> Node:
    """A node whose cloud has the munge key and the file systems of blueprint ``name``, and
    whose image has their clients, Slurm's gpu/nvml plugin (the gpu_node tests build it) and
    the GPU fabric's parts, unless not ``carries_fabric``; its NICs are the blueprint's
    sample."""
    if not any((node.fake / "secret").iterdir()):
        (node.fake / "secret" / "1").write_text("key from the controller")
    node.metadata(node_metadata.lustre_source("scratch"), "10.9.8.7@tcp:/scratch")
    if name == "a4":
        node.metadata(node_metadata.HOME_SOURCE, "lustre:10.9.8.7@tcp:/shared")
    node.image_has("mount.lustre", "22.05.8")
    (node.fake / "lustre-modules").touch()
    node.image_has_nvml_plugin()
    if carries_fabric and not (node.bin / "docker").exists():
        node.carries_fabric()
    if (NICS / f"{name}-network-interfaces.json").exists():
        node.nics(name)
    return node


def ready(node: Node, name: str, carries_fabric: bool = True) -> Node:
    """A node whose cloud and image have all that blueprint ``name`` mounts and runs (but
    the GPU fabric's parts, unless ``carries_fabric``)."""
    storage_ready(node, name, carries_fabric)
    if name in GPU_SAMPLES:
        node.local_ssds(machines.bundled_local_ssds(GPU_SAMPLES[name][0]))
        node.gpu_software_on_image()
        node.driver(GPU_SAMPLES[name][1], 8)
    return node


def daemon_starts(calls: list[str]) -> list[str]:
    """The calls that start (or enable) slurmd or slurmctld, by systemd or by hand."""
    return [c for c in calls if re.match(
        r"(systemctl (start|restart|enable) slurm(d|ctld)$|slurm(d|ctld) )", c)]
