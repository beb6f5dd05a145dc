"""Slurm's files on a running controller or login node follow their instance metadata key.

Standard library only (it runs on the node's stock python3, 3.10 or newer), with the node
programs' shared module (common.py) beside it. The components put every Slurm file a node
installs into one metadata key, ``clusterprint-slurm-config`` (a JSON object of file name
to text, clusterprint/node_metadata.py): the one source of those files. The boot script
installs them with this program (``--install``, the value on stdin); from then on the
clusterprint-config-sync service waits on the metadata server for the key to change
(``wait_for_change`` with the last ETag, so a change made between two waits is never
missed) and on a change:

1. checks the new files before anything is swapped: a value of bounded size and depth,
   UTF-8, known names only, texts without control characters, a slurm.conf of the same
   ClusterName (slurmctld refuses another cluster's state) which the installed Slurm
   parses (``scontrol -V`` reads slurm.conf and stops on any error in it), and a
   gres.conf and cgroup.conf of known keys and well-formed lines (``check_gres``,
   ``check_cgroup``: slurmctld reads cgroup.conf and stops on a bad one, every slurmd
   stops on either). A value that fails is one error line; the files in place are kept
   and the service waits for the next change;
2. writes each file that differs atomically, every one staged (written and synced beside
   its old one) before the first is renamed over its old one, mode 0644 as the boot
   script writes them, and removes a known file the value no longer holds;
3. on the controller, applies them: ``scontrol reconfigure``, which also pushes them to
   the configless compute nodes, or, where a changed key takes effect only when slurmctld
   restarts (``restart_keys``, per Slurm version), ``systemctl restart slurmctld``:
   slurmctld saves its state on the way down and running jobs go on. When slurmctld does
   not take them (Slurm 22.05 stops on a reconfigure that hits a fatal error: a partition
   naming an unknown node or nodeset, which ``scontrol -V`` does not catch), the old files
   go back and slurmctld is made to run with them (restarted if it stopped), in one line.
   On a login node nothing runs: the client commands read slurm.conf (and srun
   plugstack.conf) at every run.

An unchanged value changes nothing and reconfigures nothing. The metadata server's errors
(unreachable, HTTP 5xx, 429) are retried with backoff for ever; the service never exits
on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

#: The metadata key (clusterprint/node_metadata.py SLURM_CONFIG; a test holds them equal).
KEY = "clusterprint-slurm-config"
METADATA_URL = common.METADATA_ROOT + "instance/attributes/"
#: How long one wait may hang (``timeout_sec``): the server then answers with the value as
#: it is, changed or not. The socket waits a little longer than the server does.
WAIT_S = 300
SOCKET_MARGIN_S = 30
#: Backoff between failed requests to the metadata server, doubling up to the last.
BACKOFF_S = (1.0, 60.0)
#: Compute Engine holds a metadata value of at most 256 KB: a longer one is not its answer.
VALUE_MAX = 256 * 1024
#: The files this program may write, in the folder it is given (/etc/slurm).
KNOWN_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf", "topology.yaml")
MODE = 0o644
#: A Slurm file is text: tabs and line ends, no other control character (a NUL ends the
#: line where Slurm's parser reads it, an escape sequence hides a line in a terminal).
BAD_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
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

#: cgroup.conf's keys and the kind of value each takes, as Slurm's parser has them
#: (src/common/cgroup.c slurm-22-05-8-1; src/interfaces/cgroup.c slurm-23-11-4-1, which
#: drops the kernel memory keys and adds two). Slurm stops on any other key. The only
#: Slurm tool that reads cgroup.conf without a daemon, ``slurmd -G``, needs slurmd, which
#: the controller does not install; a test holds this table to it.
CGROUP_KEYS_22_05 = {
    "CgroupAutomount": "bool", "CgroupMountpoint": "str", "CgroupReleaseAgentDir": "str",
    "ConstrainCores": "bool", "ConstrainRAMSpace": "bool", "AllowedRAMSpace": "float",
    "MaxRAMPercent": "float", "MinRAMSpace": "uint", "ConstrainSwapSpace": "bool",
    "ConstrainKmemSpace": "bool", "AllowedKmemSpace": "float", "MaxKmemPercent": "float",
    "MinKmemSpace": "uint", "AllowedSwapSpace": "float", "MaxSwapPercent": "float",
    "MemoryLimitEnforcement": "bool", "MemoryLimitThreshold": "float",
    "ConstrainDevices": "bool", "AllowedDevicesFile": "str", "MemorySwappiness": "uint",
    "CgroupPlugin": "str", "IgnoreSystemd": "bool", "IgnoreSystemdOnFailure": "bool"}
CGROUP_KEYS_23_11 = {
    **{key: kind for key, kind in CGROUP_KEYS_22_05.items() if "Kmem" not in key},
    "EnableControllers": "bool", "SignalChildrenProcesses": "bool"}
#: gres.conf: AutoDetect alone, or a line that starts with Name= or NodeName= and holds
#: the keys of one GRES (src/common/gres.c slurm-22-05-8-1 _gres_options, the same in 23.11).
GRES_LINE_KEYS = frozenset({
    "AutoDetect", "Count", "CPUs", "Cores", "File", "Files", "Flags", "Link", "Links",
    "MultipleFiles", "Name", "Type", "NodeName"})
GRES_LINE_STARTS = frozenset({"name", "nodename"})
#: What Slurm's parser (src/common/parse_config.c s_p_handle_boolean) takes as a boolean.
BOOLEANS = frozenset({"yes", "no", "true", "false", "up", "down", "1", "0"})
VALUE_KINDS = {"bool": lambda v: v.lower() in BOOLEANS,
               "float": lambda v: re.fullmatch(r"\d+(\.\d*)?|\.\d+", v) is not None,
               "uint": lambda v: v.isdigit(), "str": bool}

log = common.Log("config-sync")
Run = Callable[[list[str], float, "Mapping[str, str] | None"], subprocess.CompletedProcess]


class NotSet(common.MetadataError):
    """The key is not set on this VM (HTTP 404): retried too, a ``pulumi up`` may add it."""


class InvalidConfig(Exception):
    """A value this node must not install: the message says what is wrong with it."""


@dataclass(frozen=True)
class Fetched:
    """The key's value (its bytes, as the server sent them) and the ETag that names this
    version of it."""

    value: bytes
    etag: str


def fetch(url: str, etag: str | None = None, wait_s: int = WAIT_S) -> Fetched:
    """The key's value now (``etag`` None), or once it differs from version ``etag``: the
    server answers at once when it already differs, else when it changes or after
    ``wait_s`` seconds with the same value."""
    query = "" if etag is None else "?" + urllib.parse.urlencode(
        {"wait_for_change": "true", "last_etag": etag, "timeout_sec": wait_s})
    try:
        answer = common.metadata_get(url + KEY + query, wait_s + SOCKET_MARGIN_S)
    except common.MetadataError as exc:
        if exc.status == 404:
            raise NotSet(f"metadata {KEY} is not set on this VM", 404) from None
        raise
    if not answer.etag:
        raise common.MetadataError("metadata server: an answer without an ETag")
    return Fetched(answer.body, answer.etag)


def parse_value(data: bytes | str) -> dict[str, str]:
    """The files a value holds, by name; InvalidConfig unless it is what the components
    write: a JSON object of known file names to text, slurm.conf among them, no longer than
    Compute Engine keeps, nested no deeper than JSON_DEPTH_MAX, UTF-8, texts without
    control characters."""
    size = len(data.encode("utf-8") if isinstance(data, str) else data)
    if size > VALUE_MAX:
        raise InvalidConfig(f"{size} bytes, over the {VALUE_MAX} bytes of a metadata value")
    try:
        files = common.expect(common.load_json(data, "the value"), dict, "the value")
        for name, text in files.items():
            common.expect(text, str, f"the value's {common.clip(name, 40)}")
    except common.BadJSON as exc:
        raise InvalidConfig(str(exc)) from None
    unknown = sorted(set(files) - set(KNOWN_FILES))
    if unknown:
        raise InvalidConfig(f"unknown files {common.clip(unknown, 120)}: only "
                            f"{', '.join(KNOWN_FILES)}")
    for name, text in files.items():
        bad = BAD_TEXT.search(text)
        if bad:
            line = text.count("\n", 0, bad.start()) + 1
            raise InvalidConfig(f"{name} line {line}: control character "
                                f"{common.one_line(bad[0])}")
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


def settings(name: str, text: str) -> Iterable[tuple[int, list[tuple[str, str]]]]:
    """Each line of a Slurm ``Key=Value ...`` file (gres.conf, cgroup.conf) with its
    settings, comments and blank lines left out; InvalidConfig naming the file and line
    for a word that is not ``Key=Value``."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            raise InvalidConfig(f"{name} line {number}: an unclosed quote") from None
        pairs = []
        for word in words:
            key, equals, value = word.partition("=")
            if not equals or not re.fullmatch(r"[A-Za-z]+", key) or not value:
                raise InvalidConfig(f"{name} line {number}: {common.clip(word, 60)!r} is not "
                                    "Key=Value")
            pairs.append((key, value))
        yield number, pairs


def check_cgroup(text: str, version: tuple[int, int] | None) -> None:
    """InvalidConfig naming the line of cgroup.conf that this Slurm stops on: a key it does
    not know or a value of the wrong kind. With the version unknown, only the keys both
    tables know."""
    if version is None:
        table = {k: v for k, v in CGROUP_KEYS_22_05.items() if k in CGROUP_KEYS_23_11}
    else:
        table = CGROUP_KEYS_23_11 if version >= (23, 11) else CGROUP_KEYS_22_05
    known = {key.lower(): (key, kind) for key, kind in table.items()}
    for number, pairs in settings("cgroup.conf", text):
        key, value = single(pairs, "cgroup.conf", number)
        if key.lower() not in known:
            raise InvalidConfig(f"cgroup.conf line {number}: unknown key {key}")
        spelled, kind = known[key.lower()]
        if not VALUE_KINDS[kind](value):
            raise InvalidConfig(f"cgroup.conf line {number}: {spelled}="
                                f"{common.clip(value, 40)} is not a {kind}")


def single(pairs: list[tuple[str, str]], name: str, number: int) -> tuple[str, str]:
    """The one setting of a line: Slurm's parser takes several on one line only after a
    key that starts a record (gres.conf's Name= and NodeName=)."""
    if len(pairs) > 1:
        raise InvalidConfig(f"{name} line {number}: {pairs[0][0]}= takes the whole line "
                            f"(one Key=Value), not {pairs[1][0]}= too")
    return pairs[0]


def check_gres(text: str) -> None:
    """InvalidConfig naming the line of gres.conf that slurmd stops on: a key it does not
    know, or a line of more than AutoDetect that does not start with Name= or NodeName=."""
    known = {key.lower() for key in GRES_LINE_KEYS}
    for number, pairs in settings("gres.conf", text):
        if pairs[0][0].lower() not in GRES_LINE_STARTS:
            key, _ = single(pairs, "gres.conf", number)
            if key.lower() != "autodetect":
                raise InvalidConfig(f"gres.conf line {number}: unknown key {key} (a GRES "
                                    "line starts with Name= or NodeName=)")
            continue
        unknown = [key for key, _ in pairs if key.lower() not in known]
        if unknown:
            raise InvalidConfig(f"gres.conf line {number}: unknown key {unknown[0]}")


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
                 run: Run = common.run, sleep: Callable[[float], None] = time.sleep,
                 restart_budget_s: float = RESTART_BUDGET_S) -> None:
        self.folder, self.role, self.commands = folder, role, commands
        self.run, self.sleep, self.restart_budget_s = run, sleep, restart_budget_s

    def installed(self) -> dict[str, str]:
        """The known files in the folder now, by name."""
        return {name: (self.folder / name).read_text("utf-8") for name in KNOWN_FILES
                if (self.folder / name).is_file()}

    def check(self, files: Mapping[str, str], installed: Mapping[str, str]) -> None:
        """InvalidConfig unless this node may swap ``files`` in: the same ClusterName as the
        installed slurm.conf, a slurm.conf the installed Slurm parses, a gres.conf and a
        cgroup.conf Slurm would not stop on. A parser that cannot run proves nothing: the
        files are refused."""
        if "slurm.conf" in installed:
            old, new = cluster_name(installed["slurm.conf"]), cluster_name(files["slurm.conf"])
            if old != new:
                raise InvalidConfig(f"ClusterName changes from {old} to {new}: another "
                                    "cluster's files (slurmctld refuses its state under them)")
        if "gres.conf" in files:
            check_gres(files["gres.conf"])
        if "cgroup.conf" in files:
            check_cgroup(files["cgroup.conf"], self.version())
        with tempfile.TemporaryDirectory(prefix="clusterprint-config-sync-") as staged:
            for name, text in files.items():
                Path(staged, name).write_text(text, "utf-8")
            try:
                done = self.run(self.commands.parse, COMMAND_TIMEOUT_S,
                                {**os.environ, "SLURM_CONF": f"{staged}/slurm.conf"})
            except common.CommandFailed as exc:
                raise InvalidConfig(f"slurm.conf cannot be checked: {exc}") from None
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout or "").split())
            raise InvalidConfig(f"Slurm cannot parse the new slurm.conf: {said}")

    def install(self, value: bytes | str) -> tuple[list[str], dict[str, str]]:
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
        """Each file atomically, every one staged before the first is renamed: a write
        that fails (a full disk) leaves every old file as it was."""
        staged: list[tuple[Path, Path]] = []
        try:
            for name, text in files.items():
                staged.append((common.stage(self.folder / name, text, MODE), self.folder / name))
        except BaseException:
            for temp, _ in staged:
                temp.unlink(missing_ok=True)
            raise
        for temp, path in staged:
            common.commit(temp, path)
            log(f"wrote {path}")

    def restore(self, before: Mapping[str, str]) -> None:
        """The files as they were before a change slurmctld refused."""
        self.write(before)
        for name in set(self.installed()) - set(before):
            (self.folder / name).unlink()

    def apply(self, value: bytes | str) -> bool:
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
        needs it. When it refuses them, the old files go back and slurmctld runs with
        them (``recover``)."""
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
            failed = self.restart()
            if not failed:
                log("slurmctld restarted and answering with the new files")
        else:
            failed = self.reconfigure()
            if not failed:
                log("scontrol reconfigure: slurmctld and the configless nodes read the new "
                    "files")
        if failed:
            self.recover(before, failed)
            return False
        slurmd = named(keys, SLURMD_RESTART)
        if slurmd:
            log(f"{', '.join(slurmd)} changed: compute nodes apply it only when slurmd "
                f"restarts; reboot them once idle with `{SLURMD_HINT}`", "WARNING")
        return True

    def recover(self, before: Mapping[str, str], failed: str) -> None:
        """The old files back, and slurmctld running with them: left as it is when it
        still answers (it never took the new ones), restarted when it stopped on them.
        One line says what happened; ALERT when slurmctld stays down even so."""
        self.restore(before)
        said = f"slurmctld did not take the new files ({failed}): the old ones are back"
        if self.answers():
            log(f"{said}; slurmctld answers with them", "ERROR")
            return
        again = self.restart()
        if again:
            log(f"{said}, and slurmctld does not run with them either: {again}", "ALERT")
        else:
            log(f"{said}; slurmctld had stopped and was restarted with them", "ERROR")

    def command(self, argv: list[str]) -> tuple[subprocess.CompletedProcess | None, str]:
        """Run one of the Slurm commands: (its result, "") when it ran to an exit code,
        (None, why) when it is missing, cannot start or hangs past COMMAND_TIMEOUT_S."""
        try:
            return self.run(argv, COMMAND_TIMEOUT_S, None), ""
        except common.CommandFailed as exc:
            return None, str(exc)

    def succeeded(self, argv: list[str]) -> str:
        """Run ``argv``: "" when it exited 0, else what went wrong, on one line."""
        done, why = self.command(argv)
        if done is None:
            return why
        return common.failure(argv, done) if done.returncode else ""

    def reconfigure(self) -> str:
        """``scontrol reconfigure``, then a ping: what went wrong, "" when slurmctld took
        the files and still answers (Slurm 22.05 exits on a fatal error in them)."""
        failed = self.succeeded(self.commands.reconfigure)
        if failed:
            return failed
        return "" if self.answers() else "slurmctld stopped answering after scontrol reconfigure"

    def answers(self) -> bool:
        """True when slurmctld answers a ping."""
        done, _ = self.command(self.commands.ping)
        return done is not None and done.returncode == 0 and "UP" in done.stdout

    def version(self) -> tuple[int, int] | None:
        """The installed Slurm's (major, minor), None if slurmctld does not say."""
        done, _ = self.command(self.commands.version)
        return slurm_version(done.stdout) if done is not None and done.returncode == 0 else None

    def restart(self) -> str:
        """Restart slurmctld and wait for it to answer: what went wrong, "" when it does."""
        failed = self.succeeded(self.commands.restart)
        if failed:
            return failed
        deadline = time.monotonic() + self.restart_budget_s
        while not self.answers():
            if time.monotonic() > deadline:
                return f"not answering {self.restart_budget_s:.0f}s after its restart"
            self.sleep(1)
        return ""


def serve(node: Node, url: str, wait_s: int = WAIT_S,
          sleep: Callable[[float], None] = time.sleep,
          keep_going: Callable[[], bool] = lambda: True) -> None:
    """Follow the key for ever: the value now, then each change. Every metadata error is
    retried after a backoff; a value refused or put back waits for the next change (its
    ETag is the one waited on), so a bad value is fetched once, not in a loop."""
    etag: str | None = None
    delay = BACKOFF_S[0]
    while keep_going():
        try:
            got = fetch(url, etag, wait_s)
        except common.MetadataError as exc:
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
    printed; exit 1 if it is refused or cannot be written. Else the service: follow the
    key for ever."""
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
            changed, _ = node.install(sys.stdin.buffer.read())
        except InvalidConfig as exc:
            log(f"REFUSED the Slurm files of metadata {KEY}: {exc}", "ERROR")
            return 1
        except OSError as exc:  # a full disk: every old file is as it was
            log(f"writing the Slurm files failed, the old ones are kept: {exc}", "ERROR")
            return 1
        print("\n".join(changed))
        return 0
    log(f"following metadata {KEY} into {args.dir} ({args.role})")
    serve(node, args.metadata_url, args.wait_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
