"""A sandboxed VM for booting the rendered scripts: its disk, its cloud and its image.

Each script runs as root in its own mount namespace: the folders it writes (/etc/munge,
/etc/slurm, /etc/systemd/system, /etc/apt, /var/spool, /var/lib, /home, /etc/udev,
/etc/clusterprint, /dev/aperture_devices) and the kernel's NICs (/sys/class/net) are
bind-mounted from a temp folder, the trees a node writes anywhere in (/dev, /etc, /mnt,
/usr, /var) are overlays whose changes land in the temp folder too, and stubs stand in for the
metadata server, Secret Manager, systemd, mounts, apt, dpkg, git, make, DKMS, udev, Docker,
mdadm and mkfs. The image's commands are fakes in the node's own folder: the scripts search
only that, the stubs and /usr/bin, never this machine's /usr/sbin, so what they find is what
the test put there.

A Node is a VM of a built image unless told otherwise: its manifest
(/etc/clusterprint/image.json) lists every part (clusterprint/render/node_software.py), and
the image holds what the sandbox keeps of each (PART_ON_IMAGE), its Slurm reporting the
release the images pin. ``Node(root, built=False)`` is a VM of the bare base image, as a
builder VM boots: no manifest, none of the parts, so an image install script
(``images/NAME.sh``) run on it installs each once.

Every call of a stub is recorded whole (tests/clusterprint/render/stubs/record.bash): its
arguments, its stdin and the files its arguments name; the calls that install a package or
download anything are listed apart, and ``forbid_installs`` makes them fail. bash traces
every command the script runs, with its arguments, to a file of its own, and temp files go to
a sandboxed TMPDIR: so a test can say where a secret went, and a step can be made to fail for
good (the scripts' retry budgets set to 0). The waits between tries are 0 s here
(CLUSTERPRINT_RETRY_DELAY_S): a step that fails once is retried at once, and no test sleeps
production's 5 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.contract import node_metadata
from clusterprint.facts import gpu_software, machines, ops_agent, slurm
from clusterprint.facts.images import FAMILY_PREFIX
from clusterprint.render import config_sync, images, node_software
from tests.support.paths import blueprint_path

#: The stub commands and the NIC samples stay beside the boot tests that use most of them.
RENDER_TESTS = Path(__file__).parents[1] / "clusterprint" / "render"
STUBS = RENDER_TESTS / "stubs"
NICS = RENDER_TESTS / "fixtures" / "nics"
#: Public samples of what GPU commands print (tests/fixtures/gpu/README.md).
FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"
SANDBOXED = ("/etc/munge", "/etc/slurm", "/etc/systemd/system", "/etc/apt", "/var/spool",
             "/var/lib", "/home", "/etc/udev", "/etc/clusterprint", "/dev/aperture_devices",
             "/sys/class/net")
#: Trees a script may write anywhere in (limits, sysctl, /dev/md, /mnt/localssd, Slurm in
#: /usr, pyxis in /usr/local, downloads in /var/cache): overlays on this machine's own,
#: whose changes stay in the node's folder.
OVERLAID = ("/dev", "/etc", "/mnt", "/usr", "/var")
#: Where the login node stages the rendered jobs for every user, and its login hint.
SANDBOXED += ("/opt", "/etc/profile.d")
#: The controller's clusterprint-remediate command.
SANDBOXED += ("/usr/local/sbin",)
#: The reference blueprints' Lustre scratch mount: its root's owner and mode are the node's.
SANDBOXED += ("/lustre",)
#: The scripts' retry budgets (CLUSTERPRINT_<NAME>_BUDGET_S), all set to 0 by fail_for_good.
BUDGETS = ("MOUNT", "MUNGE_KEY", "APT", "DOWNLOAD", "SECRET", "SLURMCTLD", "CONTROLLER",
           "SLURMD", "NIC", "DB", "SLURMDBD")
SECRET = "projects/my-project/secrets/cpu-small-munge-key"
JWT_SECRET = "projects/my-project/secrets/cpu-small-jwt-key"
#: What Slurm 26.05's slurmrestd serves, as ``slurmrestd -s list`` prints it (the real one in
#: tests/slurm/test_rest_api.py; stubs/packages/slurmrestd prints the same): slurmctld's
#: plugin, the accounting database's and the shared one; the OpenAPI versions are
#: data_parser plugins since 23.11 (``-d list``).
REST_PLUGINS = ("openapi/slurmctld", "openapi/slurmdbd", "openapi/util")
DB_SECRET = "projects/my-project/secrets/cpu-small-db-password"
#: The controller's state disk, as Compute Engine names the attached device.
STATE_DEVICE = f"google-{node_metadata.STATE_DISK_DEVICE}"
#: The name a built image's manifest gives (an install script writes its own).
IMAGE_NAME = f"{FAMILY_PREFIX}sandbox-000000000000"
#: Where a build of Slurm's source puts the daemons the image install script checks.
SLURM_SBIN = "/usr/sbin"


@dataclass(frozen=True)
class PartOnImage:
    """What the sandbox keeps of one part (node_software.PARTS) on a built image, and takes
    off an image that lacks it, so that an install step finds none of it there: the Debian
    packages in dpkg's database (fake/dpkg), the commands in the image's bin (the fake of
    stubs/packages by that name, else one that records its runs), marks the stubs read in
    fake/ (modinfo's modules), files on the node's disk (path: text, written executable) and
    the folder they are in, where the part is one."""

    packages: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    folder: str | None = None


#: Each part as the sandbox keeps it: gcloud is the Secret Manager stub, always there (the
#: base images carry the CLI's snap); Slurm's daemons report $FAKE/slurm-version, and its
#: headers are what pyxis builds against.
PART_ON_IMAGE = {
    "base": PartOnImage(packages=node_software.BASE_PACKAGES),
    "gcloud": PartOnImage(),
    "ops_agent": PartOnImage(packages=(ops_agent.PACKAGE,),
                             files=((ops_agent.ENGINE, "#!/bin/bash\n"),)),
    "munge": PartOnImage(packages=node_software.MUNGE_PACKAGES, commands=("munged",)),
    "slurm": PartOnImage(commands=("slurmd", "slurmctld", "slurmdbd", "slurmrestd"),
                         files=((gpu_software.PYXIS_HEADERS, "/* Slurm's spank.h */\n"),)),
    "nfs": PartOnImage(packages=node_software.NFS_PACKAGES, commands=("mount.nfs",)),
    "lustre": PartOnImage(packages=("lustre-client-utils",), commands=("mount.lustre",),
                          marks=("lustre-modules",)),
    "gcsfuse": PartOnImage(packages=("gcsfuse",), commands=("gcsfuse",)),
    "mariadb": PartOnImage(packages=node_software.MARIADB_PACKAGES, commands=("mariadbd",)),
    "tensorboard": PartOnImage(
        files=((f"{node_software.TENSORBOARD_VENV}/bin/tb-gcp-uploader", "#!/bin/bash\n"),
               (f"{node_software.TENSORBOARD_VENV}/clusterprint-package",
                node_software.TENSORBOARD_UPLOADER_PACKAGE + "\n")),
        folder=node_software.TENSORBOARD_VENV),
    "pyxis": PartOnImage(files=((gpu_software.PYXIS_PLUGIN, "pyxis's SPANK plugin\n"),)),
    "gpu": PartOnImage(packages=(gpu_software.CUDA_KEYRING_PACKAGE,),
                       commands=("dcgmi", "enroot")),
    "fabric": PartOnImage(packages=("apt-transport-artifact-registry", "libnccl2", "nccl-gib"),
                          commands=("docker", "dkms", "nvidia-container-runtime-hook",
                                    "ibv_devinfo"),
                          marks=("modules/import-helper",)),
}
#: The daemons a build of Slurm's source installs, by the stub that fakes each.
SLURM_FAKES = {"slurmd": "slurm-daemon", "slurmctld": "slurm-daemon",
               "slurmdbd": "slurm-daemon", "slurmrestd": "slurmrestd"}


@dataclass(frozen=True)
class Record:
    """One call of a stub: its arguments, what it read on stdin, the files its arguments named."""

    name: str
    argv: list[bytes]
    stdin: bytes
    files: list[bytes]


class Node:
    """One VM's disk and cloud, shared by the runs of its scripts."""

    def __init__(self, root: Path, built: bool = True) -> None:
        self.root = root
        self.fake = root / "fake"
        for sub in ("metadata", "mounted", "secret", "dpkg"):
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
        # What the image's Slurm reports, and the plugins a build of its source installs.
        self.slurm_reports(slurm.SLURM_VERSION)
        (self.fake / "slurm-plugins").write_text("\n".join(images.SLURM_PLUGINS) + "\n")
        # The controller's state disk is attached (it is blank until mkfs.ext4 runs).
        by_id = self.overlay("/dev") / "disk" / "by-id"
        by_id.mkdir(parents=True, exist_ok=True)
        (by_id / STATE_DEVICE).touch()
        #: The parts the image holds, as its manifest lists them.
        self.parts: tuple[str, ...] = ()
        if built:
            self.image_built()
        else:
            # This machine's own Slurm daemon must not pass for one the image built.
            self.hide(f"{SLURM_SBIN}/slurmd")

    def image_built(self, parts: tuple[str, ...] = node_software.PARTS,
                    name: str = IMAGE_NAME) -> None:
        """The image holds ``parts`` and its manifest, as its install script leaves them."""
        for part in parts:
            held = PART_ON_IMAGE[part]
            for package in held.packages:
                (self.fake / "dpkg" / package).touch()
            for command in held.commands:
                self._put_command(command)
            for mark in held.marks:
                (self.fake / mark).parent.mkdir(parents=True, exist_ok=True)
                (self.fake / mark).touch()
            for path, text in held.files:
                self.write(path, text)
                self.file(path).chmod(0o755)
        self.parts = tuple(p for p in node_software.PARTS if p in {*self.parts, *parts})
        self.manifest(name, self.parts)

    def image_lacks_parts(self, *parts: str) -> None:
        """The image's manifest does not list ``parts``, nor does it hold anything of them."""
        for part in parts:
            held = PART_ON_IMAGE[part]
            for package in held.packages:
                (self.fake / "dpkg" / package).unlink(missing_ok=True)
            self.image_lacks(*held.commands)
            for mark in held.marks:
                (self.fake / mark).unlink(missing_ok=True)
            for path, _ in held.files:
                self.file(path).unlink(missing_ok=True)
            if held.folder:
                shutil.rmtree(self.file(held.folder), ignore_errors=True)
        self.parts = tuple(p for p in self.parts if p not in parts)
        self.manifest(IMAGE_NAME, self.parts)

    def manifest(self, name: str, parts: tuple[str, ...]) -> None:
        """The image's /etc/clusterprint/image.json, as an install script writes it."""
        self.write(images.MANIFEST, json.dumps({"name": name, "parts": list(parts),
                                                "slurm": slurm.SLURM_VERSION}) + "\n")

    def _put_command(self, command: str) -> None:
        packaged = self.stubs / "packages" / SLURM_FAKES.get(command, command)
        if packaged.exists():
            (self.bin / command).unlink(missing_ok=True)
            (self.bin / command).symlink_to(packaged)
        else:
            self.fake_command(command, f'echo "{command} $*" >>"$FAKE/calls"')

    def slurm_reports(self, version: str) -> None:
        """The image's Slurm commands report ``version`` for -V (``slurm 26.05.3``)."""
        (self.fake / "slurm-version").write_text(version + "\n")

    def fake_command(self, command: str, body: str) -> None:
        """Put a command on the image that runs ``body`` (bash)."""
        path = self.bin / command
        path.unlink(missing_ok=True)
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)

    def write(self, path: str, text: str) -> None:
        """A file on the node's disk, in its sandboxed folders or overlays, as the image has it."""
        target = self.file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def hide(self, path: str) -> None:
        """This machine's ``path`` (under an overlay) is not on the node: a whiteout."""
        target = self.file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path) and not os.path.lexists(target):
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))

    def fail_for_good(self, call: str) -> None:
        """Every stub call containing ``call`` fails, and no step retries: the boot must stop."""
        with (self.fake / "broken").open("a") as broken:
            broken.write(call + "\n")
        self.no_retries()

    def no_retries(self) -> None:
        """Every step that retries tries once: the scripts' retry budgets are 0."""
        self.env.update({f"CLUSTERPRINT_{name}_BUDGET_S": "0" for name in BUDGETS})

    def forbid_installs(self) -> None:
        """A VM that may install no package and download nothing: each stub call that would
        (record.bash's installs) fails, at once, and is listed in ``refused``."""
        (self.fake / "no-installs").touch()
        self.no_retries()

    def installs(self) -> list[str]:
        """Every stub call so far that installed a package or downloaded anything."""
        return _lines(self.fake / "installs")

    def refused(self) -> list[str]:
        """The installs and downloads ``forbid_installs`` refused."""
        return _lines(self.fake / "refused")

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

    def local_ssds(self, count: int) -> None:
        """Attach ``count`` local SSDs, as Compute Engine names them in /dev/disk/by-id."""
        by_id = self.overlay("/dev") / "disk" / "by-id"
        by_id.mkdir(parents=True, exist_ok=True)
        for n in range(count):
            link = by_id / f"google-local-nvme-ssd-{n}"
            link.unlink(missing_ok=True)
            link.symlink_to(f"../../nvme0n{n + 1}")

    def driver(self, gpu: str, gpus: int) -> None:
        """The NVIDIA driver on the base image: ``nvidia-smi`` prints the public sample of
        tests/fixtures/gpu/``gpu``, and ``-L`` lists ``gpus`` GPUs named as in it."""
        sample = FIXTURES / gpu / "nvidia-smi.txt"
        name = re.search(r"\|\s+0\s+(NVIDIA [\w ]+?)\s{2,}", sample.read_text())[1]
        self.fake_command("nvidia-smi", f'if [[ $1 == -L ]]; then\n  for i in {{0..{gpus - 1}}}; '
                                        f'do echo "GPU $i: {name}"; done\nelse\n  cat {sample}\nfi')

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
        """Run a startup script as the VM's boot would; it logs to the journal."""
        done = self.run(script)
        self.wait_for_journal(done.returncode)
        return done

    def install(self, image: images.NodeImage) -> subprocess.CompletedProcess:
        """Run an image's install script as its builder VM does; it logs to stdout."""
        return self.run(image.script)

    def run(self, script: str) -> subprocess.CompletedProcess:
        """Run a script as root on the VM, with the node's folders in place."""
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
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c",
             f'{setup}; {trace}; PATH={self.stubs}:{self.bin}:/usr/bin exec bash -x "$0"',
             str(path)],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

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

    def guest_attribute_writes(self) -> list[str]:
        """Every guest attribute the scripts wrote, in order: ``NAMESPACE/KEY=VALUE`` (a
        newline of VALUE as ``\\n``)."""
        return (self.fake / "guest-attribute-writes").read_text().split("\n")[:-1] if (
            self.fake / "guest-attribute-writes").exists() else []

    def guest_attribute(self, key: str) -> str | None:
        """The guest attribute ``NAMESPACE/KEY`` as the VM left it; None where never written."""
        path = self.fake / "guest-attributes" / key
        return path.read_text() if path.exists() else None

    def calls(self) -> list[str]:
        """Every stubbed command the scripts ran, and clears the record."""
        path = self.fake / "calls"
        lines = _lines(path)
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

    def tree(self) -> dict[str, str]:
        """Every file and link the VM's scripts and the stubs keep (its disk, its overlays,
        the stubs' state), by path, with its mode and a digest of what it holds: what a run
        that changes nothing leaves as it found it. The records of the calls are left out."""
        kept = {}
        for top in ("disk", "overlay", "fake"):
            for path in sorted((self.root / top).rglob("*")):
                relative = str(path.relative_to(self.root))
                if relative in LOGS or relative.startswith(RECORDS):
                    continue
                if path.is_symlink():
                    kept[relative] = "-> " + os.readlink(path)
                elif path.is_file():
                    kept[relative] = (f"{oct(path.stat().st_mode)} "
                                      + hashlib.sha256(path.read_bytes()).hexdigest())
                else:
                    kept[relative] = oct(path.stat().st_mode)
        return kept

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


#: What the stubs and bash log of every run, which tree() leaves out: the calls and their
#: records, the journal, bash's trace, the installs made, the guest attributes written.
LOGS = ("fake/calls", "fake/journal", "fake/xtrace", "fake/installs", "fake/refused",
        "fake/record", "fake/guest-attributes", "fake/guest-attribute-writes")
#: ...and what lies below them, and each boot's own log (/var/log/clusterprint-ROLE-boot.log).
RECORDS = ("fake/record/", "fake/guest-attributes/", "overlay/var/log/clusterprint-")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


#: The GPU machine type of each reference blueprint and the public sample of its GPUs.
#: No public H200 nvidia-smi table exists (tests/fixtures/gpu/README.md): A3 Ultra boots with
#: the B200 sample, whose driver (R580, CUDA 13) is the accelerator image's.
GPU_SAMPLES = {"a3mega": ("a3-megagpu-8g", "h100"), "a3ultra": ("a3-ultragpu-8g", "b200"),
               "a4": ("a4-highgpu-8g", "b200")}


def storage_ready(node: Node, name: str) -> Node:
    """A node of blueprint ``name``'s cluster whose cloud has the munge key, the Lustre
    addresses (/home on Lustre for a4) and, where fixtures/nics has them, its NICs."""
    if not any((node.fake / "secret").iterdir()):
        (node.fake / "secret" / "1").write_text("key from the controller")
    node.metadata(node_metadata.lustre_source("scratch"), "10.9.8.7@tcp:/scratch")
    if name == "a4":
        node.metadata(node_metadata.HOME_SOURCE, "lustre:10.9.8.7@tcp:/shared")
    if (NICS / f"{name}-network-interfaces.json").exists():
        node.nics(name)
    return node


def ready(node: Node, name: str) -> Node:
    """``storage_ready``, and a GPU VM of the blueprint's sample: its local SSDs attached,
    its driver on the base image."""
    storage_ready(node, name)
    if name in GPU_SAMPLES:
        node.local_ssds(machines.bundled_local_ssds(GPU_SAMPLES[name][0]))
        node.driver(GPU_SAMPLES[name][1], 8)
    return node


def installing_at_boot(name: str) -> Blueprint:
    """Reference blueprint ``name`` whose nodesets boot an image family of the user's own
    (``image: {project, family, install_at_boot: true}``): what their boot finds missing of
    their parts, it installs. Checked as any blueprint is."""
    document = load_checked(blueprint_path(name)).model_dump(mode="json", exclude_none=True)
    for nodeset in document["slurm"]["nodesets"]:
        nodeset["image"] = {"project": "my-project", "family": "my-images",
                            "install_at_boot": True}
    checked = check_text(f"{name}.json", json.dumps(document), is_json=True)
    assert checked.ok and checked.blueprint, [f.line_text() for f in checked.findings]
    return checked.blueprint


def daemon_starts(calls: list[str]) -> list[str]:
    """The calls that start (or enable) slurmd or slurmctld, by systemd or by hand."""
    return [c for c in calls if re.match(
        r"(systemctl (start|restart|enable) slurm(d|ctld)$|slurm(d|ctld) )", c)]
