"""Real Slurm 26.05 daemons for the tests that prove rendered files.

Every daemon and command runs from the Slurm root (tests/support/slurm_root.py: Debian
unstable's 26.05, the series the images build), in the foreground as a child of the test
process, in its own temp folder, on free ports, and is stopped by its own PID; nothing is
left running or mounted. The rendered slurm.conf changes only in host, port, path, auth and
process-tracking lines.

gres.conf is the rendered one (``AutoDetect=nvidia``, no device files), and Slurm's own
gpu/nvidia plugin finds a GPU node's GPUs as on a VM: this machine has none, so a GPU node's
processes see fake ones where the plugin reads them (``fake_gpus``: the driver's
/proc/driver/nvidia/gpus/BUS/information with the GPU's model and minor number, its
/sys/bus/pci/drivers/nvidia/BUS/local_cpulist, character devices /dev/nvidia<N>). The plugin
names each GPU after the driver's model and takes the declared type that is a substring of
it, so a node registers the typed GPUs its ``--conf`` line declares.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.render import compute_script_path, rendered_files
from tests.support import slurm_root

#: The only slurm.conf keys a local run may change, by the reason they may.
LOCAL_KEYS = {
    "SlurmctldHost": "host", "SlurmctldPort": "port", "SlurmdPort": "port",
    "StateSaveLocation": "path", "SlurmdSpoolDir": "path", "SlurmctldPidFile": "path",
    "SlurmdPidFile": "path", "AuthInfo": "auth", "HealthCheckProgram": "path",
    # The JWT key of the REST API: a temp file instead of the controller's /etc/slurm one.
    "AuthAltParameters": "path",
    # The node's prolog.d and epilog.d: a temp folder per cluster instead of this machine's
    # /etc/slurm, so a test chooses what the node's scripts do.
    "Prolog": "path", "Epilog": "path",
    # cgroup confinement needs a systemd-managed host; CI containers have none.
    "ProctrackType": "process tracking", "TaskPlugin": "process tracking",
    "JobAcctGatherType": "process tracking",
    "AccountingStorageHost": "host", "AccountingStoragePort": "port",
    # What names the munge socket for connections to slurmdbd (AuthInfo does not).
    "AccountingStoragePass": "auth",
    # slurmctld refuses to start for the first time without its slurmdbd; only the
    # accounting variant (``LocalSlurm(..., accounting=...)``) runs one and keeps this line.
    "AccountingStorageType": "accounting", "AccountingStorageTRES": "accounting",
}
#: slurmdbd.conf keys a local run may change, by the reason they may.
LOCAL_DBD_KEYS = {"DbdHost": "host", "DbdPort": "port", "StorageHost": "host",
                  "StoragePort": "port", "PidFile": "path", "StorageLoc": "path",
                  "AuthInfo": "auth", "StoragePass": "auth"}
#: The character device major number of NVIDIA GPUs (/dev/nvidia0 is 195, 0).
NVIDIA_MAJOR = 195
#: Character devices every process expects in a fake GPU node's /dev: (major, minor).
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9),
           "tty": (5, 0)}
#: The links every /dev has: bash's process substitution (``< <(...)``) opens /dev/fd/N.
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                "stderr": "/proc/self/fd/2"}
#: The driver's model name of each GPU type a nodeset declares (``Gres=gpu:h100:8``), as
#: /proc/driver/nvidia/gpus/BUS/information and ``nvidia-smi -L`` print it (the names in
#: clusterprint/facts/machines.py's ``gres``).
DRIVER_MODELS = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "b200": "NVIDIA B200",
                 "gb200": "NVIDIA GB200", "a100": "NVIDIA A100-SXM4-80GB", "l4": "NVIDIA L4"}
#: How long a daemon may take to answer before the test fails: generous, since the whole
#: suite runs in parallel on two cores and a starting slurmctld shares them.
START_TIMEOUT_S = 60
#: How long one "are you up yet" request may wait before it counts as no answer.
POLL_TIMEOUT_S = 10


def localize(slurm_conf: str, values: dict[str, str | None],
             local: dict[str, str] = LOCAL_KEYS) -> str:
    """The rendered slurm.conf (or another file whose ``local`` keys are given) with
    ``values`` replacing (or added as) its local lines; a None value drops its line."""
    unknown = set(values) - set(local)
    assert not unknown, f"not a host, port, path, auth, process-tracking or plugin key: {unknown}"
    lines, seen = [], set()
    for line in slurm_conf.splitlines():
        key = line.split("=", 1)[0]
        if key in values:
            seen.add(key)
            if values[key] is None:
                continue
            line = f"{key}={values[key]}"
        lines.append(line)
    lines += [f"{key}={value}" for key, value in values.items()
              if key not in seen and value is not None]
    return "\n".join(lines) + "\n"


def node_conf_of(compute_script: str) -> str:
    """The exact ``slurmd --conf`` line a rendered compute script starts slurmd with, less
    what the boot adds to it (``$TOPOLOGY``: the node's place, found on the VM)."""
    assert ('slurmd -D -s -Z --conf-server $CONF_SERVER --conf "$NODE_CONF${TOPOLOGY:+ '
            '$TOPOLOGY}"') in compute_script
    match = re.search(r"^readonly NODE_CONF=(.+)$", compute_script, re.MULTILINE)
    assert match, "the compute script sets no NODE_CONF"
    (value,) = shlex.split(match.group(1))
    return value


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], what: str, log: Path | None = None,
               timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` and showing the daemon's log."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            pytest.fail(f"{what}: not within {timeout}s\n{tail}")
        time.sleep(0.2)


def poll(argv: list[str], env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess | None:
    """A client command asking whether a daemon is up yet; None when it got no answer in its
    time: a daemon still starting on a loaded machine may hold a request longer than one
    poll, which is "not yet", and the caller's deadline decides when that is a failure.
    """
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=POLL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None


class Daemon:
    """One daemon in the foreground, its output in a log file, stopped by its PID."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env)

    def running(self) -> bool:
        """True while the process has not exited."""
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; waits so no zombie is left. A daemon in a
        mount namespace of its own (one from the Slurm root) takes every process left in it
        along: a stopped slurmd leaves its slurmstepd and their jobs running."""
        if not self.running():
            return
        # Held open, the namespace outlives its processes: a new one cannot take its number.
        try:
            held = os.open(f"/proc/{self.process.pid}/ns/mnt", os.O_RDONLY)
        except FileNotFoundError:  # it has just exited
            self.process.wait()
            return
        try:
            namespace = mount_namespace(self.process.pid)
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
            if namespace and namespace != mount_namespace("self"):
                for pid in processes_in(namespace):
                    with contextlib.suppress(ProcessLookupError):  # gone since
                        os.kill(pid, signal.SIGKILL)
        finally:
            os.close(held)


def mount_namespace(pid: int | str) -> str | None:
    """The mount namespace a process is in (``mnt:[4026531841]``); None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def processes_in(namespace: str) -> list[int]:
    """Every process in the mount namespace ``namespace`` now."""
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and mount_namespace(entry.name) == namespace]


def private_dir(parent: Path | None = None, owner: str | None = None) -> Path:
    """A fresh folder other users can traverse (slurmctld runs as the slurm user)."""
    path = Path(tempfile.mkdtemp(prefix="clusterprint-slurm-", dir=parent))
    path.chmod(0o755)
    if owner:
        shutil.chown(path, owner, owner)
    return path


class LocalSlurm:
    """A rendered cluster on this machine: slurmctld plus one dynamic slurmd at a time.

    A dynamic node takes its port from SlurmdPort (``Port=`` is refused in ``--conf``),
    so nodes run one after the other, each under its own name and spool folder.
    """

    def __init__(self, blueprint: Blueprint, munge_socket: Path,
                 database: LocalMariaDB | None = None) -> None:
        self.blueprint = blueprint
        self.database = database
        self.files = rendered_files(blueprint)
        self.munge_socket = munge_socket
        self.root = private_dir()
        self.daemons: list[Daemon] = []
        state = private_dir(self.root, owner="slurm")
        self.state = state
        self.dbd_port = free_port()
        accounting = ({"AccountingStorageHost": "localhost",
                       "AccountingStoragePort": str(self.dbd_port),
                       "AccountingStoragePass": str(munge_socket)} if database
                      else {"AccountingStorageType": "accounting_storage/none",
                            "AccountingStorageTRES": None})
        self.conf = self.root / "slurm.conf"
        self.conf.write_text(localize(self.files["slurm.conf"], {
            **accounting, "JobAcctGatherType": "jobacct_gather/linux",
            "SlurmctldHost": "localhost",
            "SlurmctldPort": str(free_port()),
            "SlurmdPort": str(free_port()),
            "StateSaveLocation": str(state),
            "SlurmdSpoolDir": str(self.root / "spool-%n"),
            "SlurmctldPidFile": str(state / "slurmctld.pid"),
            "SlurmdPidFile": str(self.root / "slurmd-%n.pid"),
            "AuthInfo": f"socket={munge_socket}",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            **self.jwt_key(),
            **{key: f"{self.scripts(key.lower())}/*" for key in ("Prolog", "Epilog")
               if f"\n{key}=" in self.files["slurm.conf"]},
        }))
        for name in ("cgroup.conf", "gres.conf", "topology.yaml"):
            if name in self.files:
                (self.root / name).write_text(self.files[name])
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": slurm_root.PATH}
        if database:
            self.write_slurmdbd_conf(database, state)

    def write_slurmdbd_conf(self, database: LocalMariaDB, state: Path) -> None:
        """The rendered slurmdbd.conf, local, with StoragePass appended as the controller
        appends it from the secret; 0600 for the slurm user, as slurmdbd demands."""
        self.storage_loc = database.new_database()
        conf = self.root / "slurmdbd.conf"
        conf.write_text(localize(self.files["slurmdbd.conf"], {
            "DbdHost": "localhost", "DbdPort": str(self.dbd_port),
            "StorageHost": "127.0.0.1", "StoragePort": str(database.port),
            "PidFile": str(state / "slurmdbd.pid"), "StorageLoc": self.storage_loc,
            "AuthInfo": f"socket={self.munge_socket}", "StoragePass": database.password,
        }, LOCAL_DBD_KEYS))
        conf.chmod(0o600)
        shutil.chown(conf, "slurm", "slurm")

    def command(self, *argv: str, gpus: Path | None = None) -> list[str]:
        """``argv`` as a command line that runs it from the Slurm root, with this session's
        munged at Slurm's compiled-in socket and, for a GPU node, its fake GPUs."""
        return slurm_root.entered(argv, self.munge_socket, gpus)

    def daemon(self, log: str, *argv: str, gpus: Path | None = None,
               env: dict[str, str] | None = None) -> Daemon:
        """A daemon of this cluster from the Slurm root, stopped with the cluster."""
        daemon = Daemon(self.command(*argv, gpus=gpus), self.root / log, env or self.env)
        self.daemons.append(daemon)
        return daemon

    def start_dbd(self) -> Daemon:
        """slurmdbd with the rendered (localized) slurmdbd.conf, until sacctmgr gets answers."""
        dbd = self.daemon("slurmdbd.log", "slurmdbd", "-D")
        wait_until(lambda: dbd.running() and self.sacctmgr_answers(), "slurmdbd answering",
                   dbd.log)
        return dbd

    def sacctmgr_answers(self) -> bool:
        """True when slurmdbd answers sacctmgr."""
        done = poll(self.command("sacctmgr", "-n", "list", "cluster"), self.env)
        return done is not None and done.returncode == 0

    def jwt_key(self) -> dict[str, str]:
        """A random key of the REST API's tokens in this cluster's folder, as the controller
        script installs it (only SlurmUser may read it); its AuthAltParameters line."""
        if "\nAuthAltParameters=jwt_key=" not in self.files["slurm.conf"]:
            return {}
        key = self.root / "jwt_hs256.key"
        key.write_text(base64.b64encode(os.urandom(48)).decode())
        key.chmod(0o400)
        shutil.chown(key, "slurm", "slurm")
        return {"AuthAltParameters": f"jwt_key={key}"}

    def scripts(self, kind: str) -> Path:
        """The node's prolog.d or epilog.d, with a file of each name the rendered compute
        scripts install there (RxDM's ``10-rxdm``), standing in as one that succeeds, as
        RxDM's does for a job on one node. A test replaces one to make it fail.
        """
        folder = self.root / f"{kind}.d"
        if not folder.exists():
            folder.mkdir()
            names = {name for path, text in self.files.items() if path.startswith("scripts/")
                     for name in re.findall(rf"/etc/slurm/{kind}\.d/([\w.-]+)", text)}
            for name in sorted(names):
                self.add_script(kind, name, "exit 0")
        return folder

    def add_script(self, kind: str, name: str, body: str) -> Path:
        """A ``/bin/sh`` script ``name`` in the node's prolog.d or epilog.d running ``body``."""
        script = self.root / f"{kind}.d" / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
        return script

    def run(self, *argv: str, timeout: float = 60) -> str:
        """A command from the Slurm root (a Slurm client) against this cluster; its stdout,
        failing loudly."""
        done = subprocess.run(self.command(*argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.returncode}\n{done.stderr}"
        return done.stdout

    def run_failing(self, *argv: str, timeout: float = 60) -> str:
        """A Slurm client command that must fail (a request Slurm refuses); its stderr."""
        done = subprocess.run(self.command(*argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode != 0, f"{shlex.join(argv)} succeeded:\n{done.stdout}"
        return done.stderr

    def partitions(self) -> dict[str, dict[str, str]]:
        """Every partition's settings by name, as ``scontrol show partition -o`` prints them."""
        shown = {}
        for line in self.run("scontrol", "show", "partition", "-o").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            shown[fields["PartitionName"]] = fields
        return shown

    def config(self) -> dict[str, str]:
        """slurmctld's settings as ``scontrol show config`` prints them, by name."""
        return {key: value.removesuffix(" sec") for key, value in re.findall(
            r"^(\w+)\s+= (.*)$", self.run("scontrol", "show", "config"), re.MULTILINE)}

    def dropped_settings(self) -> dict[str, tuple[str, str]]:
        """Every rendered cluster-wide slurm.conf line that slurmctld does not keep as
        written, outside the local ones: name to (written, kept). scontrol prints some
        values in capitals, and SlurmUser with its uid: ``slurm(64030)``."""
        config = {key: value.split("(")[0].lower() if value[:1] != "(" else value
                  for key, value in self.config().items()}
        written = dict(line.split("=", 1) for line in self.files["slurm.conf"].splitlines()
                       if re.match(r"^[A-Z]\w+=", line) and not line.startswith(
                           ("NodeSet=", "PartitionName=")))
        return {key: (value, config.get(key, "")) for key, value in written.items()
                if key not in LOCAL_KEYS and config.get(key) != value.lower()}

    def dropped_partition_settings(self) -> dict[str, dict[str, tuple[str, str | None]]]:
        """Per partition, the rendered Exclusive, DefMemPerCPU, Default and State that
        slurmctld does not keep as written: name to (written, kept)."""
        shown, dropped = self.partitions(), {}
        for line in self.files["slurm.conf"].splitlines():
            if line.startswith("PartitionName="):
                written = dict(token.split("=", 1) for token in line.split())
                kept = shown[written["PartitionName"]]
                wrong = {key: (written[key], kept.get(key)) for key in
                         ("Exclusive", "DefMemPerCPU", "Default", "State")
                         if key in written and kept.get(key) != written[key]}
                if wrong:
                    dropped[written["PartitionName"]] = wrong
        return dropped

    def answers(self) -> bool:
        """True when slurmctld answers a ping."""
        ping = poll(self.command("scontrol", "ping"), self.env)
        return ping is not None and "UP" in ping.stdout

    def start_controller(self) -> Daemon:
        """slurmctld with the rendered (localized) configuration, until it answers."""
        ctld = self.daemon("slurmctld.log", "slurmctld", "-D", "-f", str(self.conf))
        wait_until(lambda: ctld.running() and self.answers(), "slurmctld answering", ctld.log)
        return ctld

    def refused_controller(self) -> str:
        """slurmctld with this configuration, which must exit without answering; its log."""
        ctld = self.daemon("slurmctld.log", "slurmctld", "-D", "-f", str(self.conf))
        wait_until(lambda: not ctld.running() or self.answers(), "slurmctld exiting", ctld.log)
        assert not ctld.running(), f"slurmctld started:\n{ctld.log.read_text()[-3000:]}"
        return ctld.log.read_text(errors="replace")

    def compute_node_conf(self, nodeset: str) -> str:
        """The ``--conf`` line of the nodeset's rendered compute script."""
        return node_conf_of(self.files[compute_script_path(nodeset)])

    def fake_gpus(self, count: int, node_conf: str) -> Path | None:
        """A folder of ``count`` fake GPUs of the type ``node_conf`` declares, as a GPU VM's
        driver shows them to gpu/nvidia (``enter_slurm_root.sh`` mounts it); None for none.
        Their CPU affinity is every CPU of this machine."""
        if not count:
            return None
        declared = re.search(r"Gres=gpu:(\w+):\d+", node_conf)
        assert declared, f"{count} GPUs on a node that declares no GPU type: {node_conf}"
        folder = self.root / f"gpus-{declared[1]}-{count}"
        if folder.exists():
            return folder
        devices = folder / "dev"
        devices.mkdir(parents=True)
        for name, (major, minor) in DEVICES.items():
            os.mknod(devices / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        for name, target in DEVICE_LINKS.items():
            (devices / name).symlink_to(target)
        cpus = f"0-{os.cpu_count() - 1}\n"
        for index in range(count):
            os.mknod(devices / f"nvidia{index}", 0o666 | stat.S_IFCHR,
                     os.makedev(NVIDIA_MAJOR, index))
            bus = f"0000:{0x10 + index:02x}:00.0"
            gpu = folder / "driver" / "nvidia" / "gpus" / bus
            gpu.mkdir(parents=True)
            (gpu / "information").write_text(
                f"Model: \t\t {DRIVER_MODELS[declared[1]]}\nIRQ:   \t\t {40 + index}\n"
                f"GPU UUID: \t GPU-00000000-0000-0000-0000-{index:012d}\n"
                f"Bus Type: \t PCIe\nBus Location: \t {bus}\nDevice Minor: \t {index}\n")
            pci = folder / "pci" / "nvidia" / bus
            pci.mkdir(parents=True)
            (pci / "local_cpulist").write_text(cpus)
        return folder

    def start_node(self, name: str, node_conf: str, gpus: int,
                   launcher: tuple[str, ...] = (), rebooted: bool = False) -> Daemon:
        """A dynamic slurmd registering as ``name`` with ``node_conf`` on a VM with ``gpus``
        (fake) GPUs, until it is idle.

        ``launcher`` runs slurmd (e.g. ``prlimit`` setting its limits, as systemd would).
        ``rebooted``: the node registers as a VM that booted since it last did (``slurmd
        -b``, slurmd.8: "Report node rebooted when daemon restarted"), which is when
        slurmctld takes what its --conf line says anew (a node started again on this same
        machine would otherwise keep the place it had).
        """
        (self.root / f"spool-{name}").mkdir(exist_ok=True)
        node_conf = self.placed(node_conf)
        before = self.slurmd_started(name)  # a node that is back is idle before it registers
        slurmd = self.daemon(f"slurmd-{name}.log", *launcher, "slurmd", "-D", "-Z",
                             *(["-b"] if rebooted else []), "-f",
                             str(self.conf), "-N", name, "--conf", node_conf,
                             gpus=self.fake_gpus(gpus, node_conf))
        wait_until(lambda: slurmd.running() and self.node_state(name) == "idle"
                   and self.slurmd_started(name) != before,
                   f"node {name} registering idle", slurmd.log)
        return slurmd

    def placed(self, node_conf: str) -> str:
        """``node_conf`` with the place a GPU node's boot adds where the cluster has a tree
        and the test gives none: unplaced, as a VM the metadata server places nowhere."""
        if "topology.yaml" in self.files and "Gres=" in node_conf and "Topology=" not in node_conf:
            return f"{node_conf} Topology=fabric:fabric:unplaced"
        return node_conf

    def slurmd_started(self, name: str) -> str:
        """When the node's slurmd that last registered started, "" for an unknown node."""
        done = poll(self.command("scontrol", "show", "node", "-o", name), self.env)
        found = re.search(r" SlurmdStartTime=(\S+)", done.stdout) if done else None
        return found[1] if found else ""

    def start_configless_node(self, name: str, nodeset: str) -> Daemon:
        """slurmd as the nodeset's rendered compute script starts it: configless, with the
        script's own arguments, fetching slurm.conf, gres.conf and cgroup.conf from this
        slurmctld (which must be running) instead of reading any local file; until idle.

        Only the server's address and the node's name (a VM's hostname) change. Before it
        has the configuration slurmd knows no AuthInfo, so it asks munge at its compiled-in
        socket (/run/munge/munge.socket.2), where the root's /run has this session's munged.
        """
        node_conf = self.placed(self.compute_node_conf(nodeset))
        port = re.search(r"^SlurmctldPort=(\d+)$", self.conf.read_text(), re.MULTILINE)
        (self.root / f"spool-{name}").mkdir()
        env = {k: v for k, v in self.env.items() if k != "SLURM_CONF"}
        (declared,) = [n.gpus for n in self.blueprint.slurm.nodesets if n.name == nodeset]
        slurmd = self.daemon(f"slurmd-{name}.log", "slurmd", "-D", "-s", "-Z", "--conf-server",
                             f"localhost:{port[1]}", "--conf", node_conf, "-N", name,
                             gpus=self.fake_gpus(declared, node_conf), env=env)
        wait_until(lambda: slurmd.running() and self.node_state(name) == "idle",
                   f"configless node {name} registering idle", slurmd.log)
        return slurmd

    def node_state(self, name: str) -> str:
        """The node's state as sinfo prints it, or "" while it is unknown."""
        done = poll(self.command("sinfo", "-h", "-N", "-n", name, "-o", "%T"), self.env)
        out = done.stdout.split() if done else []
        return out[0] if out else ""

    def stop(self) -> None:
        """Every daemon this cluster started, newest first, then its folder."""
        for daemon in reversed(self.daemons):
            daemon.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class LocalMariaDB:
    """One MariaDB server in a temp datadir on a free port, with the user slurmdbd connects
    as (``slurm``, a random password, as the controller sets it from its secret)."""

    def __init__(self) -> None:
        self.root = private_dir()
        self.datadir = self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.port = free_port()
        self.password = os.urandom(12).hex()
        self.count = 0
        # Its own temp folder: the bootstrap's temporary tables vanished from a shared /tmp
        # under load ("Could not remove temporary table ... error: 2", then Aborting).
        tmpdir = self.root / "tmp"
        tmpdir.mkdir()
        made = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
                               "--user=root", "--auth-root-authentication-method=socket",
                               "--skip-test-db", f"--tmpdir={tmpdir}"],
                              capture_output=True, text=True, timeout=120)
        if made.returncode != 0:  # its reason is on its output, which a bare error would hide
            pytest.fail(f"mariadb-install-db failed ({made.returncode}):\n"
                        f"{(made.stdout + made.stderr)[-3000:]}")
        self.daemon = Daemon(["mariadbd", "--no-defaults", f"--datadir={self.datadir}",
                              f"--socket={self.socket}", f"--port={self.port}",
                              "--bind-address=127.0.0.1", "--user=root",
                              f"--pid-file={self.root / 'mariadbd.pid'}",
                              "--innodb-buffer-pool-size=64M", "--skip-log-bin",
                              f"--tmpdir={tmpdir}"],
                             self.root / "mariadbd.log")
        wait_until(lambda: self.daemon.running() and self.answers(), "mariadbd answering",
                   self.daemon.log)
        self.sql(f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.password}'")

    def sql(self, statements: str) -> str:
        """Statements as MariaDB's root (over the socket); their output."""
        done = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}", "-u",
                               "root", "-N", "-e", statements], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def answers(self) -> bool:
        """True once the server takes connections on its socket."""
        done = poll(["mariadb-admin", "--no-defaults", f"--socket={self.socket}", "-u", "root",
                     "ping"])
        return done is not None and done.returncode == 0

    def new_database(self) -> str:
        """A fresh database name for one cluster, granted to ``slurm``: each local cluster
        keeps its records apart (its job ids start from 1 too)."""
        self.count += 1
        name = f"slurm_acct_{self.count}"
        self.sql(f"GRANT ALL ON `{name}`.* TO 'slurm'@'127.0.0.1'")
        return name

    def stop(self) -> None:
        """The server, then its folder."""
        self.daemon.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_munged() -> tuple[Daemon, Path]:
    """munged with a temp key and socket in a folder of its own; the daemon, the socket."""
    root = private_dir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = root / "munge.socket"
    munged = Daemon(slurm_root.entered([
        "munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
        f"--pid-file={root / 'munged.pid'}", f"--seed-file={root / 'munged.seed'}",
        f"--log-file={root / 'munged.log'}"]), root / "munged.out")
    wait_until(lambda: munged.running() and sock.exists(), "munged socket", munged.log)
    return munged, sock


#: What a registering test node declares beyond its rendered --conf line: a GPU VM has many
#: more CPUs than this machine, and 16 are enough for one task per GPU.
NODE_CPUS = "CPUs=16"


def sbatch_test_only(cluster, script, *options: str) -> str:
    """What ``sbatch --test-only`` says of the job (on stderr), failing when it refuses it."""
    done = subprocess.run(cluster.command("sbatch", "--test-only", *options, str(script)),
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "to start at" in done.stderr, done.stderr
    return done.stderr


def job_fields(cluster, job: str) -> dict[str, str]:
    """``scontrol show job`` of ``job`` as a dict of its fields."""
    return dict(re.findall(r"(\w+)=(\S*)", cluster.run("scontrol", "show", "job", job)))


#: Seconds a requeued job waits before it may start again: AuthInfo's cred_expire, 120 by
#: default (slurm.conf(5)); the prolog test shortens it to keep the test short.
CRED_EXPIRE_S = 10
