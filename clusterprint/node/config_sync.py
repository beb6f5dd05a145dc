"""Slurm's files on a running controller or login node follow their instance metadata key.

Standard library only (it runs on the node's stock python3, 3.10 or newer). The components
put every Slurm file a node installs into one metadata key, ``clusterprint-slurm-config``
(a JSON object of file name to text, clusterprint/node_metadata.py): the one source of
those files. The boot script installs them with this program (``--install``, the value on
stdin); from then on the clusterprint-config-sync service waits on the metadata server for
the key to change (``wait_for_change`` with the last ETag, so a change made between two
waits is never missed) and on a change:

1. checks the new files before anything is swapped: known names only, a slurm.conf of
   the same ClusterName (slurmctld refuses another cluster's state), which the installed
   Slurm parses (``scontrol -V`` reads slurm.conf and stops on any error in it). A value
   that fails is logged as an error and the files in place are kept;
2. writes each file that differs atomically (a temp file in the same folder, renamed
   over the old one), mode 0644 as the boot script writes them, and removes a known file
   the value no longer holds;
3. on the controller, applies them: ``scontrol reconfigure``, which also pushes them to
   the configless compute nodes, or, where a changed key takes effect only when slurmctld
   restarts (``restart_keys``, per Slurm version), ``systemctl restart slurmctld``:
   slurmctld saves its state on the way down and running jobs go on. Files slurmctld
   refuses are replaced by the old ones again. On a login node nothing runs: the client
   commands read slurm.conf (and srun plugstack.conf) at every run.

An unchanged value changes nothing and reconfigures nothing. The metadata server's errors
(unreachable, HTTP 5xx, 429) are retried with backoff for ever; the service never exits
on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The metadata key (clusterprint/node_metadata.py SLURM_CONFIG; a test holds them equal).
KEY = "clusterprint-slurm-config"
METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
#: How long one wait may hang (``timeout_sec``): the server then answers with the value as
#: it is, changed or not. The socket waits a little longer than the server does.
WAIT_S = 300
SOCKET_MARGIN_S = 30
#: Backoff between failed requests to the metadata server, doubling up to the last.
BACKOFF_S = (1.0, 60.0)
#: The files this program may write, in the folder it is given (/etc/slurm).
KNOWN_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf")
MODE = 0o644
#: The longest a Slurm or systemctl command may take (a restart saves slurmctld's state).
COMMAND_TIMEOUT_S = 600
#: How long a restarted slurmctld has to answer before the old files are put back.
RESTART_BUDGET_S = 300

#: slurm.conf keys a Slurm before 23.11 applies only when slurmctld restarts: slurm.conf(5)
#: of 22.05 says "A restart of slurmctld is required" of each (AuthType and SwitchType:
#: every daemon), scontrol(1) that nodes added or removed need one, and
#: src/slurmctld/read_config.c (slurm-22-05-8-1) fatal()s a reconfigure that changes
#: MaxNodeCount ("MaxNodeCount has changed ... slurmctld must be restarted"): reconfiguring
#: would stop slurmctld.
RESTART_BEFORE_23_11 = frozenset({
    "AccountingStorageEnforce", "AuthType", "CredType", "GresTypes", "JobContainerType",
    "MaxJobCount", "MaxNodeCount", "NodeName", "PluginDir", "PowerPlugin", "ProctrackType",
    "SchedulerType", "SelectType", "SelectTypeParameters", "SlurmctldHost",
    "SlurmctldParameters", "SlurmctldPort", "SlurmdPort", "StateSaveLocation", "SwitchType"})
#: From 23.11 ``scontrol reconfigure`` starts a new slurmctld that reads the whole file and
#: takes over (the old one goes on if it fails), which "will not be able to change the
#: daemons' listening TCP port settings or authentication mechanism" (scontrol(1), 23.11).
RESTART_FROM_23_11 = frozenset({"SlurmctldPort", "SlurmdPort", "AuthType", "AuthAltTypes"})
#: Keys slurmd applies only when it restarts (slurm.conf(5) 22.05: "A restart of ... the
#: slurmd daemons is required"; ports and authentication from 23.11 likewise). The
#: controller cannot restart the compute nodes' slurmd: it says how.
SLURMD_RESTART = frozenset({"AuthType", "AuthAltTypes", "CoreSpecPlugin", "GresTypes",
                            "NodeName", "PluginDir", "SelectType", "SlurmdPort", "SwitchType"})
#: What a compute node needs for those: a reboot once it is idle restarts its slurmd.
SLURMD_HINT = "scontrol reboot ASAP nextstate=RESUME ALL"

Run = Callable[..., subprocess.CompletedProcess]


def log(message: str, level: str = "") -> None:
    """One journal line (stderr: stdout carries ``--install``'s answer); an error or a
    warning carries its syslog priority prefix, which journald reads."""
    prefix = {"ERROR": "<3>ERROR: ", "WARNING": "<4>WARNING: "}.get(level, "")
    print(prefix + message, file=sys.stderr, flush=True)


class MetadataError(Exception):
    """The metadata server did not answer, or answered an error: worth retrying."""


class NotSet(MetadataError):
    """The key is not set on this VM (HTTP 404): retried too, a ``pulumi up`` may add it."""


class InvalidConfig(Exception):
    """A value this node must not install: the message says what is wrong with it."""


@dataclass(frozen=True)
class Fetched:
    """The key's value and the ETag that names this version of it."""

    value: str
    etag: str


def fetch(url: str, etag: str | None = None, wait_s: int = WAIT_S) -> Fetched:
    """The key's value now (``etag`` None), or once it differs from version ``etag``: the
    server answers at once when it already differs, else when it changes or after
    ``wait_s`` seconds with the same value."""
    query = "" if etag is None else "?" + urllib.parse.urlencode(
        {"wait_for_change": "true", "last_etag": etag, "timeout_sec": wait_s})
    request = urllib.request.Request(url + KEY + query, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=wait_s + SOCKET_MARGIN_S) as response:
            value = response.read().decode("utf-8")
            new_etag = response.headers.get("ETag") or ""
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotSet(f"metadata {KEY} is not set on this VM") from None
        raise MetadataError(f"metadata server: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # URLError, a reset or timed-out socket, bad bytes
        raise MetadataError(f"metadata server: {exc}") from None
    if not new_etag:
        raise MetadataError("metadata server: an answer without an ETag")
    return Fetched(value, new_etag)


def parse_value(text: str) -> dict[str, str]:
    """The files a value holds, by name; InvalidConfig unless it is what the components
    write: a JSON object of known file names to text, slurm.conf among them."""
    try:
        files = json.loads(text)
    except ValueError as exc:
        raise InvalidConfig(f"not JSON: {exc}") from None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise InvalidConfig("not an object of file names to their text")
    unknown = sorted(set(files) - set(KNOWN_FILES))
    if unknown:
        raise InvalidConfig(f"unknown files {unknown}: only {', '.join(KNOWN_FILES)}")
    if not files.get("slurm.conf", "").strip():
        raise InvalidConfig("no slurm.conf")
    return files


def conf_lines(text: str) -> dict[str, tuple[str, ...]]:
    """slurm.conf's settings: each key (lowercased: Slurm reads keys in any case) with its
    lines, in order, comments and blank lines left out."""
    lines: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.setdefault(line.split("=", 1)[0].strip().lower(), []).append(line)
    return {key: tuple(found) for key, found in lines.items()}


def changed_keys(old: str, new: str) -> set[str]:
    """The slurm.conf keys (lowercased) whose lines differ between two texts."""
    before, after = conf_lines(old), conf_lines(new)
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def cluster_name(text: str) -> str | None:
    """slurm.conf's ClusterName, if it sets one."""
    found = conf_lines(text).get("clustername")
    return found[-1].split("=", 1)[1].strip() if found else None


def slurm_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of what ``slurmctld -V`` prints (``slurm-wlm 22.05.8``), if it says."""
    found = re.search(r"\b(\d+)\.(\d+)\.\d+", text)
    return (int(found[1]), int(found[2])) if found else None


def restart_keys(version: tuple[int, int] | None) -> frozenset[str]:
    """The keys whose change this Slurm applies only on a slurmctld restart; with the
    version unknown, both sets (a restart too many costs seconds, one too few a stop)."""
    if version is None:
        return RESTART_BEFORE_23_11 | RESTART_FROM_23_11
    return RESTART_FROM_23_11 if version >= (23, 11) else RESTART_BEFORE_23_11


def named(keys: Iterable[str], table: Iterable[str]) -> list[str]:
    """The entries of ``table`` among the lowercased ``keys``, as slurm.conf(5) spells them."""
    lowered = set(keys)
    return sorted(k for k in table if k.lower() in lowered)


@dataclass
class Commands:
    """What the program runs, as argument lists (tests run them against local daemons)."""

    parse: list[str]
    version: list[str]
    ping: list[str]
    reconfigure: list[str]
    restart: list[str]


COMMAND_NAMES = tuple(f.name for f in dataclasses.fields(Commands))
DEFAULT_COMMANDS = Commands(parse=["scontrol", "-V"], version=["slurmctld", "-V"],
                            ping=["scontrol", "ping"], reconfigure=["scontrol", "reconfigure"],
                            restart=["systemctl", "restart", "slurmctld"])


class Node:
    """The Slurm files of one node in ``folder``, and what its role does with new ones."""

    def __init__(self, folder: Path, role: str, commands: Commands = DEFAULT_COMMANDS,
                 run: Run = subprocess.run, sleep: Callable[[float], None] = time.sleep,
                 restart_budget_s: float = RESTART_BUDGET_S) -> None:
        self.folder, self.role, self.commands = folder, role, commands
        self.run, self.sleep, self.restart_budget_s = run, sleep, restart_budget_s

    def installed(self) -> dict[str, str]:
        """The known files in the folder now, by name."""
        return {name: (self.folder / name).read_text("utf-8") for name in KNOWN_FILES
                if (self.folder / name).is_file()}

    def check(self, files: Mapping[str, str], installed: Mapping[str, str]) -> None:
        """InvalidConfig unless this node may swap ``files`` in: the same ClusterName as the
        installed slurm.conf, and a slurm.conf the installed Slurm parses."""
        if "slurm.conf" in installed:
            old, new = cluster_name(installed["slurm.conf"]), cluster_name(files["slurm.conf"])
            if old != new:
                raise InvalidConfig(f"ClusterName changes from {old} to {new}: another "
                                    "cluster's files (slurmctld refuses its state under them)")
        with tempfile.TemporaryDirectory(prefix="clusterprint-config-sync-") as staged:
            for name, text in files.items():
                Path(staged, name).write_text(text, "utf-8")
            try:
                done = self._run(self.commands.parse,
                                 env={**os.environ, "SLURM_CONF": f"{staged}/slurm.conf"})
            except FileNotFoundError:
                log(f"{self.commands.parse[0]} is not installed: slurm.conf goes in unparsed",
                    "WARNING")
                return
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout or "").split())
            raise InvalidConfig(f"Slurm cannot parse the new slurm.conf: {said}")

    def install(self, value: str) -> tuple[list[str], dict[str, str]]:
        """Check and write a value's files: the paths it changed and the files as they
        were before (to put back). InvalidConfig leaves every file as it is."""
        files = parse_value(value)
        before = self.installed()
        self.check(files, before)
        changed = [name for name in KNOWN_FILES
                   if name in files and before.get(name) != files[name]]
        removed = [name for name in before if name not in files]
        self.write({name: files[name] for name in changed})
        for name in removed:
            (self.folder / name).unlink()
            log(f"removed {self.folder / name}: the new value has no {name}")
        return [str(self.folder / n) for n in changed + removed], before

    def write(self, files: Mapping[str, str]) -> None:
        """Each file atomically: every temp file is written before the first is renamed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        staged = []
        try:
            for name, text in files.items():
                handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=self.folder)
                staged.append((temp, self.folder / name))
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(temp, MODE)
        except BaseException:
            for temp, _ in staged:
                Path(temp).unlink(missing_ok=True)
            raise
        for temp, path in staged:
            os.replace(temp, path)
            log(f"wrote {path}")

    def restore(self, before: Mapping[str, str]) -> None:
        """The files as they were before a change slurmctld refused."""
        self.write(before)
        for name in set(self.installed()) - set(before):
            (self.folder / name).unlink()

    def apply(self, value: str) -> bool:
        """Install a new value and make the node run with it; False where it was refused
        or put back (the old files stay). An unchanged value does nothing."""
        try:
            changed, before = self.install(value)
        except InvalidConfig as exc:
            log(f"REFUSED the new Slurm files of metadata {KEY}, keeping the ones in place: "
                f"{exc}", "ERROR")
            return False
        if not changed:
            return True
        if self.role != "controller":
            log("the client commands read the new files from their next run")
            return True
        return self.activate(before)

    def activate(self, before: Mapping[str, str]) -> bool:
        """slurmctld takes the new files: reconfigured, or restarted where a changed key
        needs it; the old files go back when it refuses them."""
        now = self.installed()
        keys = changed_keys(before.get("slurm.conf", ""), now["slurm.conf"])
        if not self.answers():
            log("slurmctld does not answer: it reads the new files when it starts", "WARNING")
            return True
        version = self.version()
        restart = named(keys, restart_keys(version))
        if restart:
            said = f"{version[0]}.{version[1]:02d}" if version else "(version unknown)"
            log(f"{', '.join(restart)} changed, which Slurm {said} applies only on a "
                "restart: restarting slurmctld (it saves its state; jobs go on)")
            ok = self.restart()
        else:
            done = self._run(self.commands.reconfigure)
            ok = done.returncode == 0
            if ok:
                log("scontrol reconfigure: slurmctld and the configless nodes read the new "
                    "files")
            else:
                log(f"scontrol reconfigure failed: {' '.join(done.stderr.split())}", "ERROR")
        if not ok:
            log("slurmctld did not take the new files: putting the old ones back", "ERROR")
            self.restore(before)
            if restart:
                self.restart()
            return False
        slurmd = named(keys, SLURMD_RESTART)
        if slurmd:
            log(f"{', '.join(slurmd)} changed: compute nodes apply it only when slurmd "
                f"restarts; reboot them once idle with `{SLURMD_HINT}`", "WARNING")
        return True

    def answers(self) -> bool:
        """True when slurmctld answers a ping."""
        done = self._run(self.commands.ping)
        return done.returncode == 0 and "UP" in done.stdout

    def version(self) -> tuple[int, int] | None:
        """The installed Slurm's (major, minor), None if slurmctld does not say."""
        try:
            done = self._run(self.commands.version)
        except FileNotFoundError:
            return None
        return slurm_version(done.stdout) if done.returncode == 0 else None

    def restart(self) -> bool:
        """Restart slurmctld and wait for it to answer."""
        done = self._run(self.commands.restart)
        if done.returncode != 0:
            log(f"restarting slurmctld failed: {' '.join(done.stderr.split())}", "ERROR")
            return False
        deadline = time.monotonic() + self.restart_budget_s
        while not self.answers():
            if time.monotonic() > deadline:
                log(f"slurmctld not answering {self.restart_budget_s:.0f}s after its restart",
                    "ERROR")
                return False
            self.sleep(1)
        log("slurmctld restarted and answering with the new files")
        return True

    def _run(self, argv: list[str], env: Mapping[str, str] | None = None
             ) -> subprocess.CompletedProcess:
        """``argv``'s result; one that hangs past COMMAND_TIMEOUT_S fails (status 124)."""
        try:
            return self.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                            env=dict(env) if env is not None else None)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"timed out after "
                                               f"{COMMAND_TIMEOUT_S}s")


def serve(node: Node, url: str, wait_s: int = WAIT_S,
          sleep: Callable[[float], None] = time.sleep,
          keep_going: Callable[[], bool] = lambda: True) -> None:
    """Follow the key for ever: the value now, then each change. Every metadata error is
    retried after a backoff; a value refused or put back waits for the next change."""
    etag: str | None = None
    delay = BACKOFF_S[0]
    while keep_going():
        try:
            got = fetch(url, etag, wait_s)
        except MetadataError as exc:
            log(f"{exc}; retrying in {delay:.0f}s", "WARNING")
            sleep(delay)
            delay = min(delay * 2, BACKOFF_S[1])
            etag = None
            continue
        delay = BACKOFF_S[0]
        if got.etag == etag:
            continue  # the wait timed out: nothing changed
        try:
            node.apply(got.value)
        except OSError as exc:  # a full disk: the same value is tried again
            log(f"writing the Slurm files failed: {exc}; retrying in {delay:.0f}s", "ERROR")
            sleep(delay)
            continue
        etag = got.etag


def main(argv: list[str] | None = None) -> int:
    """``--install``: the value on stdin, written (no daemon touched), the changed paths
    printed; exit 1 if it is refused. Else the service: follow the key for ever."""
    parser = argparse.ArgumentParser(prog="clusterprint-config-sync", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=("controller", "login"), required=True)
    parser.add_argument("--dir", default="/etc/slurm", type=Path,
                        help="where the Slurm files live")
    parser.add_argument("--install", action="store_true",
                        help="install the value read from stdin, as the boot does")
    parser.add_argument("--metadata-url", default=METADATA_URL)
    parser.add_argument("--wait-s", type=int, default=WAIT_S, help=argparse.SUPPRESS)
    for name in COMMAND_NAMES:
        parser.add_argument(f"--{name}-command", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    commands = dataclasses.replace(DEFAULT_COMMANDS, **{
        name: shlex.split(given) for name in COMMAND_NAMES
        if (given := getattr(args, f"{name}_command"))})
    node = Node(args.dir, args.role, commands)
    if args.install:
        try:
            changed, _ = node.install(sys.stdin.read())
        except InvalidConfig as exc:
            log(f"REFUSED the Slurm files of metadata {KEY}: {exc}", "ERROR")
            return 1
        print("\n".join(changed))
        return 0
    log(f"following metadata {KEY} into {args.dir} ({args.role})")
    serve(node, args.metadata_url, args.wait_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
