"""What every node program shares: one line per reason and log entry, bounded JSON, atomic
files under a lock, commands with a timeout, the metadata server, Slurm's node lines, and
the controller programs' Compute API client.

The health check, the remediation loop and config-sync each carried their own copy of
these, with different limits (a reason cut at 250 characters in one and 256 in another);
a fix in one left the others open. Like AWS ParallelCluster's node package, whose daemons
share its ``common/``, they import this one module, which the renderer ships beside them
(clusterprint/render/node_programs.py). Standard library only, Python 3.10+: it runs on
any image's python3.

Every helper here fails closed: a value that proves nothing (JSON too deep, bytes that are
not UTF-8, an answer of the wrong shape) raises an error that names what was wrong, never
a result that looks healthy.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Every reason the health check gives starts so: the remediation loop acts only on those.
PREFIX = "cp:"
#: How several reasons are joined in one Slurm reason.
SEPARATOR = "; "
#: The longest reason a program sets. Slurm stores any length, but sinfo -R and
#: `scontrol show node` print it whole on one line and the Compute API's
#: reportHostAsFaulty description is a short free text: one cap for every program.
REASON_MAX = 250
#: syslog(3) priorities of the severities the programs log at. Under systemd the journal
#: reads a leading ``<N>`` as the line's PRIORITY (systemd.exec(5), SyslogLevelPrefix=, on
#: by default) and the Ops Agent maps PRIORITY 1 to ALERT in Cloud Logging
#: (GoogleCloudPlatform/ops-agent confgenerator/logging_receivers.go).
SYSLOG_LEVELS = {"ALERT": 1, "ERROR": 3, "WARNING": 4, "INFO": 6}
#: JSON a program reads (its config, its state, a tool's report, a metadata value, an API
#: answer) nests no deeper than this; anything deeper is refused, not parsed.
JSON_DEPTH_MAX = 32
#: The metadata server, as every Google Cloud VM reaches it.
METADATA_ROOT = "http://metadata.google.internal/computeMetadata/v1/"
METADATA_HEADERS = {"Metadata-Flavor": "Google"}
#: An access token's lifetime is an hour (Google's OAuth 2.0 docs); a longer expires_in is
#: not believed, a token is refreshed this long before it runs out.
TOKEN_LIFETIME_MAX_S = 3600
TOKEN_MARGIN_S = 60

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


# --- Lines -------------------------------------------------------------------------------

def one_line(text: object) -> str:
    """``text`` as one printable line: every control character escaped (``\\n``,
    ``\\x00``), so a tool's output can never add a line to a log or a reason."""
    return _CONTROL.sub(lambda m: _NAMED.get(m[0], f"\\x{ord(m[0]):02x}"
                                             if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}"),
                        str(text))


def clip(text: object, limit: int = REASON_MAX) -> str:
    """``text`` on one line and at most ``limit`` characters, ``...`` where it was cut
    (never in the middle of an escape; ASCII, as Slurm and every terminal show it)."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[:limit - 3]
    escape = cut.rfind("\\")
    if escape >= len(cut) - 5:  # an escape (at most \uXXXX) would be cut in two
        cut = cut[:escape]
    return cut + "..."


def joined(reasons: list[str], limit: int = REASON_MAX) -> str:
    """Reasons joined with SEPARATOR, cut at a whole reason (``+N more``) to fit ``limit``;
    each reason is one line whatever it holds."""
    lines = [one_line(reason) for reason in reasons]
    text = clip(lines[0], limit)
    for count, reason in enumerate(lines[1:], start=1):
        left = len(lines) - count - 1
        tail = f"{SEPARATOR}+{left} more" if left else ""
        if len(text) + len(SEPARATOR) + len(reason) + len(tail) > limit:
            more = f"{SEPARATOR}+{len(lines) - count} more"
            return text[:limit - len(more)] + more
        text += SEPARATOR + reason
    return text


#: journald's socket for native entries (systemd's "Native Journal Protocol").
JOURNAL_SOCKET = "/run/systemd/journal/socket"
#: The journal tag (SYSLOG_IDENTIFIER) of a program's entries: ``clusterprint-<program>``.
JOURNAL_TAG_PREFIX = "clusterprint-"


def journal_tag(program: str) -> str:
    """The SYSLOG_IDENTIFIER a program's entries carry, which the Ops Agent keeps."""
    return program if program.startswith(JOURNAL_TAG_PREFIX) else JOURNAL_TAG_PREFIX + program


def stderr_is_journal(environ: Mapping[str, str] | None = None) -> bool:
    """Whether stderr is the journal's stream already (systemd sets JOURNAL_STREAM to its
    ``device:inode`` for a unit's stdout and stderr; a child of such a unit inherits the
    variable, not always the stream, so both are compared, as sd_journal_stream_fd(3) says)."""
    stream = (environ if environ is not None else os.environ).get("JOURNAL_STREAM", "")
    try:
        status = os.fstat(2)
    except OSError:
        return False
    return stream == f"{status.st_dev}:{status.st_ino}"


class Log:
    """One program's journal lines: ``<N>`` and one JSON object per entry, on stderr
    (stdout is the program's answer: the health check's reasons, ``--install``'s paths).

    A program run by a unit writes to the journal through stderr. One that slurmd or
    slurmctld runs (the health check, the prolog and epilog, the power-saving programs) has
    a stderr the journal never reads, so each entry is also sent to journald's socket, with
    its tag, priority and the same JSON: that way the Ops Agent ships it like any other.
    A socket that is not there (a container, a test) or refuses is left alone: the entry
    still went to stderr."""

    def __init__(self, program: str, stream=None, journal: str | None = JOURNAL_SOCKET) -> None:
        self.program, self.stream = program, stream
        self.journal = journal

    def __call__(self, message: str, severity: str = "INFO", **fields: object) -> None:
        entry = {"severity": severity, "program": self.program, "message": one_line(message),
                 **{key: one_line(value) if isinstance(value, str) else value
                    for key, value in fields.items()}}
        stream = self.stream or sys.stderr
        text = json.dumps(entry)
        print(f"<{SYSLOG_LEVELS[severity]}>{text}", file=stream, flush=True)
        if self.stream is None and self.journal and not stderr_is_journal():
            self.send(SYSLOG_LEVELS[severity], text)

    def send(self, priority: int, text: str) -> None:
        """One native journal entry (``KEY=value`` lines; the JSON holds no newline)."""
        import socket

        payload = (f"SYSLOG_IDENTIFIER={journal_tag(self.program)}\nPRIORITY={priority}\n"
                   f"MESSAGE={text}\n").encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(payload, self.journal)
        except OSError:
            pass  # no journald here: stderr has the entry


@dataclass(frozen=True)
class Note:
    """One log line a loop's pure decision asks for: its ``apply`` writes it."""

    message: str
    severity: str = "INFO"
    fields: dict = field(default_factory=dict)


# --- JSON --------------------------------------------------------------------------------

class BadJSON(ValueError):
    """JSON a program must not use: the message names what it is and what is wrong."""


def depth(value: object) -> int:
    """How deeply ``value`` nests lists and objects, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def load_json(data: bytes | str, what: str, max_depth: int = JSON_DEPTH_MAX) -> object:
    """``data`` parsed; BadJSON naming ``what`` when it is not UTF-8, not JSON, or nests
    deeper than ``max_depth`` (Python's parser would raise RecursionError, not ValueError,
    on a deep enough one)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJSON(f"{what}: not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(data)
    except RecursionError:
        raise BadJSON(f"{what}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise BadJSON(f"{what}: not JSON ({clip(exc, 80)})") from None
    if depth(value) > max_depth:
        raise BadJSON(f"{what}: nested deeper than {max_depth} levels")
    return value


def expect(value: object, kind: type | tuple[type, ...], what: str) -> object:
    """``value`` when it is a ``kind`` (a bool is never an int here); BadJSON otherwise."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        kinds = ()
    if not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise BadJSON(f"{what}: expected {names}, got {type(value).__name__}")
    return value


# --- Files -------------------------------------------------------------------------------

def atomic_write(path: str | os.PathLike, data: str | bytes, mode: int = 0o644) -> None:
    """``data`` into ``path`` so that a reader sees the old file or the new one, whole: a
    temporary file of a name no other writer uses, in the same folder, synced, then
    renamed over the old one (two programs writing at once never share a temp file)."""
    commit(stage(path, data, mode), path)


def stage(path: str | os.PathLike, data: str | bytes, mode: int = 0o644) -> Path:
    """``data`` written and synced to a temporary file beside ``path`` (a name no other
    writer uses), not yet in place: a program that swaps several files stages each before
    it renames the first, so a write that fails leaves every old file as it was. The
    temporary file is removed when the write fails."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                    dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Path(temp)


def commit(temp: str | os.PathLike, path: str | os.PathLike) -> None:
    """A file ``stage`` wrote, renamed over ``path`` (atomic: a reader sees the old file or
    this one) and its folder synced, so the rename survives a crash."""
    target = Path(path)
    try:
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (``path.lock``, beside it): the programs and
    commands that read, change and write one state file take it in turn."""
    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


# --- Commands ----------------------------------------------------------------------------

class CommandFailed(Exception):
    """An external command is missing, failed or did not finish: the message says which."""


def shown(argv: list[str]) -> str:
    """A command as a message names it: its leading words, not its long options."""
    return " ".join(word for word in argv[:4] if not word.startswith("--"))


def run(argv: list[str], timeout: float, env: Mapping[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    """The finished command, whatever its exit code, its output decoded with every byte
    kept (``errors="replace"``); CommandFailed when it is not on PATH, cannot start or does
    not finish within ``timeout`` seconds."""
    if shutil.which(argv[0], path=(env or os.environ).get("PATH")) is None:
        raise CommandFailed(f"{argv[0]} is not on PATH")
    if timeout <= 0:
        raise CommandFailed(f"{shown(argv)}: no time left")
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace",
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"{shown(argv)} did not answer within {timeout:.0f}s") from None
    except OSError as exc:
        raise CommandFailed(f"{shown(argv)}: {exc.strerror or exc}") from None


def failure(argv: list[str], done: subprocess.CompletedProcess) -> str:
    """What a failed command said last, with its exit code, on one line."""
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return (f"{shown(argv)} failed (exit {done.returncode})"
            + (f": {clip(said[-1].strip(), 80)}" if said else ""))


def output(argv: list[str], timeout: float, env: Mapping[str, str] | None = None) -> str:
    """The command's stdout; CommandFailed when it is missing, fails or hangs."""
    done = run(argv, timeout, env)
    if done.returncode:
        raise CommandFailed(failure(argv, done))
    return done.stdout


def repeat(one_pass: Callable[[], object], once: bool, interval_s: float,
           log: Callable[[str, str], None]) -> int:
    """A loop's passes, ``interval_s`` apart, for ever: a pass that fails on a command or a
    file is logged and the next one tried. ``once``: a single pass, 1 when it failed."""
    while True:
        try:
            one_pass()
        except (CommandFailed, OSError) as exc:
            log(f"pass skipped: {exc}", "ERROR")
            if once:
                return 1
        if once:
            return 0
        time.sleep(interval_s)


# --- The metadata server -----------------------------------------------------------------

class MetadataError(Exception):
    """The metadata server did not answer, or answered an error: worth retrying."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Answer:
    """What the metadata server answered: the body's bytes and its ETag."""

    body: bytes
    etag: str


def metadata_get(url: str, timeout: float) -> Answer:
    """GET ``url`` from the metadata server; MetadataError (with the HTTP status, if any)
    when it does not answer or answers an error."""
    request = urllib.request.Request(url, headers=METADATA_HEADERS)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.read(), response.headers.get("ETag") or "")
    except urllib.error.HTTPError as exc:
        raise MetadataError(f"metadata server: HTTP {exc.code}", exc.code) from None
    except (OSError, ValueError) as exc:  # URLError, a reset or timed-out socket
        raise MetadataError(f"metadata server: {clip(exc, 120)}") from None


def metadata_project(token_url: str, timeout: float) -> str:
    """The VM's own project, from the metadata server that hands out its token."""
    url = token_url.split("/instance/", 1)[0] + "/project/project-id"
    return metadata_get(url, timeout).body.decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class Token:
    """An access token and when (time.monotonic()) to fetch a new one."""

    value: str
    renew_at: float


def access_token(url: str, timeout: float) -> Token:
    """The VM's service account token from the metadata server's token URL. Its answer is
    checked (a string token, a number of seconds) and a lifetime past an hour is taken as
    an hour: a bad answer is a MetadataError, never a token that is kept for ever."""
    answer = metadata_get(url, timeout)
    try:
        token = expect(load_json(answer.body, "the token answer"), dict, "the token answer")
        value = expect(token.get("access_token"), str, "access_token")
        expires = expect(token.get("expires_in", 300), (int, float), "expires_in")
    except BadJSON as exc:
        raise MetadataError(f"metadata server: {exc}") from None
    if not value:
        raise MetadataError("metadata server: an empty access_token")
    lifetime = min(max(float(expires), 0.0), TOKEN_LIFETIME_MAX_S)
    return Token(value, time.monotonic() + max(lifetime - TOKEN_MARGIN_S, 0.0))


# --- Slurm's nodes -----------------------------------------------------------------------

#: The controller's programs call the Compute API with the VM's own token.
METADATA_TOKEN_URL = f"{METADATA_ROOT}instance/service-accounts/default/token"
COMPUTE_API = "https://compute.googleapis.com/compute/v1"
#: A list of more pages than this is an API fault (a loop of page tokens), not a group.
PAGES_MAX = 100
#: What instances.list returns for the host-event watch (a partial response: Compute API
#: ``fields``): Instance.status, .scheduling, .resourceStatus.upcomingMaintenance and
#: .resourceStatus.scheduling.terminationTimestamp (Compute v1 Instance reference).
VM_FIELDS = ("items(name,status,scheduling(provisioningModel,preemptible),"
             "resourceStatus(upcomingMaintenance,scheduling(terminationTimestamp))),"
             "nextPageToken")
#: An answer larger than this is not one a program asked for.
ANSWER_MAX_BYTES = 32 * 1024 * 1024


class ComputeError(Exception):
    """A Compute API call failed: the program logs it (a loop tries again next pass). ``refused``:
    the API answered an error status, so the call did nothing (a timeout may have acted)."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(clip(message, 400))
        self.refused = refused


def _last_error(item: dict) -> dict:
    """The first error of a managed VM's last attempt, ``{}`` for none."""
    attempt = item.get("lastAttempt")
    errors = attempt.get("errors") if isinstance(attempt, dict) else None
    listed = errors.get("errors") if isinstance(errors, dict) else None
    first = listed[0] if isinstance(listed, list) and listed else None
    return first if isinstance(first, dict) else {}


class Compute:
    """The Compute API calls the controller's programs make (the remediation loop, power
    saving), with the metadata server's token; every answer is checked, so an unexpected
    one is a ComputeError, never a traceback."""

    def __init__(self, project: str, zone: str, api: str = COMPUTE_API,
                 token_url: str = METADATA_TOKEN_URL, timeout: float = 30.0) -> None:
        self.project, self.zone, self.timeout = project, zone, timeout
        self.api, self.token_url = api.rstrip("/"), token_url
        self._token: Token | None = None
        #: calls made, for the benchmark and the log
        self.calls = 0

    def _bearer(self) -> str:
        if self._token is None or self._token.renew_at <= time.monotonic():
            try:
                self._token = access_token(self.token_url, self.timeout)
            except MetadataError as exc:
                raise ComputeError(f"no access token: {exc}") from None
        return self._token.value

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """The answer's JSON object; the whole call within ``timeout`` seconds (a server
        that answers a byte at a time is cut off too)."""
        what = f"{method} {path.split('?')[0]}"
        url = f"{self.api}/projects/{self.project}/zones/{self.zone}/{path}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self._bearer()}", "Content-Type": "application/json"})
        deadline = time.monotonic() + self.timeout
        self.calls += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = b""
                while chunk := answer.read(65536):
                    raw += chunk
                    if len(raw) > ANSWER_MAX_BYTES or time.monotonic() > deadline:
                        raise ComputeError(f"{what}: the answer is too large or too slow")
        except urllib.error.HTTPError as exc:
            try:
                said = exc.read(300).decode("utf-8", "replace")
            except (OSError, ValueError, AttributeError, http.client.HTTPException):
                said = ""
            raise ComputeError(f"{what}: HTTP {exc.code}: {said}", refused=True) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # URLError, a timeout, a reset connection, a bad status line, an answer cut short
            raise ComputeError(f"{what}: {exc}") from None
        try:
            return expect(load_json(raw, f"{what}'s answer"), dict,
                                 f"{what}'s answer")
        except BadJSON as exc:
            raise ComputeError(str(exc)) from None

    def items(self, method: str, path: str, key: str) -> Iterator[dict]:
        """Every item of a list, page by page; a page token seen before or more than
        PAGES_MAX pages is an error, not a loop."""
        seen, token = set(), ""
        joiner = "&" if "?" in path else "?"
        for _ in range(PAGES_MAX):
            page = self.call(method, path + (f"{joiner}pageToken={urllib.parse.quote(token)}"
                                             if token else ""))
            try:
                for item in expect(page.get(key, []), list, f"{path}: {key}"):
                    yield expect(item, dict, f"{path}: an item of {key}")
                token = expect(page.get("nextPageToken", ""), str, "nextPageToken")
            except BadJSON as exc:
                raise ComputeError(str(exc)) from None
            if not token:
                return
            if token in seen:
                raise ComputeError(f"{path}: nextPageToken {clip(token, 40)} repeats")
            seen.add(token)
        raise ComputeError(f"{path}: more than {PAGES_MAX} pages")

    @staticmethod
    def text_field(item: dict, key: str, default: str | None = None) -> str:
        value = item.get(key, default)
        if not isinstance(value, str):
            raise ComputeError(f"an item without a string {key}")
        return value

    def groups(self, base_instance_name: str) -> list[str]:
        """The instance groups whose VMs are named ``base_instance_name-xxxx`` (a nodeset
        larger than one group has several), by name."""
        found = sorted(self.text_field(item, "name")
                       for item in self.items("GET", "instanceGroupManagers", "items")
                       if item.get("baseInstanceName") == base_instance_name)
        if not found:
            raise ComputeError(f"no instance group of {base_instance_name}-* VMs")
        return found

    def managed(self, group: str) -> Iterator[dict]:
        """listManagedInstances' entries of the group, page by page."""
        return self.items("POST", f"instanceGroupManagers/{group}/listManagedInstances",
                           "managedInstances")

    def instances(self, group: str) -> dict[str, str]:
        """Every VM of the group, being created or not, by name: its status."""
        return {self.text_field(item, "instance").rsplit("/", 1)[-1]:
                self.text_field(item, "instanceStatus", "") for item in self.managed(group)}

    def vms(self, names: str) -> Iterator[dict]:
        """instances.list of the zone's VMs whose whole name ``names`` matches, page by
        page, each with only what the host-event watch reads (name, status, provisioning
        model, upcoming maintenance, end of run): one list a nodeset, never one call a VM.
        ``names`` is the nodeset's pattern from the config (clusterprint/contract/naming.py
        ``vm_names``), an RE2 expression the API's list filter (``eq``) matches against the
        whole name: exact, where a prefix would list a nodeset of a longer name too, and
        one VM that answered nonsense there would stop this one's watch."""
        query = urllib.parse.urlencode({
            "filter": f'name eq "{names}"',
            "fields": VM_FIELDS, "maxResults": "500"}, quote_via=urllib.parse.quote)
        return self.items("GET", f"instances?{query}", "items")

    def creations(self, group: str) -> dict[str, dict[str, str]]:
        """Every VM of the group by name: its ``status`` (empty while it is still being
        created) and the ``code`` and ``message`` of the last failed try to create it
        (empty where none failed). A group retries a failed create for ever and says why
        only here (listManagedInstances' ``lastAttempt``)."""
        found = {}
        for item in self.managed(group):
            name = self.text_field(item, "name",
                                   self.text_field(item, "instance", "").rsplit("/")[-1])
            status = self.text_field(item, "instanceStatus", "")
            error = _last_error(item) if not status else {}
            found[name] = {"status": status, "code": one_line(error.get("code", "")),
                           "message": one_line(error.get("message", ""))}
        return found

    def create(self, group: str, names: list[str]) -> None:
        """VMs of these names in the group (createInstances): the call only schedules
        them; a stockout or a quota shows later, in ``create_errors``."""
        self.call("POST", f"instanceGroupManagers/{group}/createInstances",
                  {"instances": [{"name": name} for name in names]})

    def delete(self, group: str, names: list[str]) -> None:
        """These VMs out of the group and deleted (deleteInstances, by name: a VM still
        queued for creation has no URL); a name the group no longer holds is skipped."""
        self.call("POST", f"instanceGroupManagers/{group}/deleteInstances",
                  {"instances": names, "skipInstancesOnValidationError": True})

    def machine_type(self, name: str) -> tuple[int, int]:
        """The vCPUs and MiB of memory of a machine type in this zone."""
        answer = self.call("GET", f"machineTypes/{name}")
        cpus, memory = answer.get("guestCpus"), answer.get("memoryMb")
        if not isinstance(cpus, int) or not isinstance(memory, int) or cpus < 1 or memory < 1:
            raise ComputeError(f"machine type {name}: no guestCpus and memoryMb")
        return cpus, memory

    def reset(self, instance: str) -> None:
        self.call("POST", f"instances/{instance}/reset")

    def recreate(self, group: str, instances: list[str]) -> None:
        self.call("POST", f"instanceGroupManagers/{group}/recreateInstances",
                  {"instances": [f"zones/{self.zone}/instances/{i}" for i in instances]})

    def report_faulty(self, instance: str, behavior: str, description: str) -> None:
        self.call("POST", f"instances/{instance}/reportHostAsFaulty",
                  {"disruptionSchedule": "IMMEDIATE",
                   "faultReasons": [{"behavior": behavior,
                                     "description": clip(description)}]})


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``scontrol show node -o`` prints it."""

    name: str
    #: the base state and its flags, upper case: {"IDLE", "DRAIN", "DYNAMIC_NORM"}
    state: frozenset[str]
    features: tuple[str, ...]
    reason: str
    slurmd_start: str
    #: who set the reason and when (``root@2026-12-01T10:31:53``): a new drain changes it
    reason_stamp: str = ""
    #: where it is in Slurm's topologies (``fabric:c-x:b-y:s-z,nvlink:nvl3``), "" if nowhere
    topology: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state

    @property
    def down(self) -> bool:
        return "DOWN" in self.state

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.state

    @property
    def busy(self) -> bool:
        """Jobs still run (or end) on it: a replacement waits."""
        return bool(self.state & {"ALLOCATED", "MIXED", "COMPLETING"})

    @property
    def rebooting(self) -> bool:
        """Slurm is rebooting it (``scontrol reboot``): hands off."""
        return bool(self.state & {"REBOOT", "REBOOT_REQUESTED", "REBOOT_ISSUED"})

    @property
    def checked_failed(self) -> bool:
        """Drained or down by the health check (its reason starts ``cp:``)."""
        return (self.drained or self.down) and self.reason.startswith(PREFIX)


#: The fields scontrol prints after Reason, each on a line of its own (one space apart with
#: -o): SchedMD/slurm src/api/node_info.c at slurm-26-05-3-1.
_AFTER_REASON = re.compile(r" (?=(?:Comment|Extra|InstanceId|InstanceType|ReservationName|"
                           r"TLSCertTokenSet|Topology|Parameters)=)")


def parse_nodes(text: str) -> list[SlurmNode]:
    """``scontrol show node -o``: one line per node. Reason, if any, has spaces and ends with
    ``[user@time]``; the optional fields after it (Topology among them) have none."""
    nodes = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        head, _, reason = line.partition(" Reason=")
        # The stamp is the last [user@time]: a reason may hold one of its own.
        stamp = next(reversed(list(re.finditer(r" \[([^\]\s]*@[^\]\s]*)\]", reason))), None)
        cut = stamp or _AFTER_REASON.search(reason)
        tail = reason[cut.end() if stamp else cut.start():] if cut else ""
        reason = (reason[:cut.start()] if cut else reason).strip()
        fields = dict(re.findall(r"(\w+)=(\S*)", head + tail))
        state = fields.get("State", "")
        flags = set(state.rstrip("*").split("+")) - {""}
        if state.endswith("*"):
            flags.add("NOT_RESPONDING")
        features = tuple(f for f in fields.get("ActiveFeatures", "").split(",") if f)
        nodes.append(SlurmNode(fields["NodeName"], frozenset(flags), features, reason,
                               fields.get("SlurmdStartTime", ""), stamp[1] if stamp else "",
                               fields.get("Topology", "")))
    return nodes
