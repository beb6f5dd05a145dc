"""The login node's MLOps broker: users' uploads and registrations run as root, not as them.

Only root may reach the metadata server (clusterprint/render/metadata_guard.py), so a user's
process holds no node credentials. ``clusterprint-tensorboard-upload`` and
``clusterprint-register-model`` still work for every user: run by a user, they hand their
request to this broker over a Unix socket, and the broker runs the same command as root with
the node's credentials. What a user's request may make root do is fixed and small:

- ``tensorboard-upload``: the user's own process reads LOGDIR and sends its files; the broker
  writes them into a staging folder only root can read and uploads that. Root never opens a
  path the user names, so nothing the user could not read reaches the TensorBoard.
- ``register-model``: the user's process first copies a checkpoint that lies outside the
  blueprint's buckets into the first bucket's mount itself (Cloud Storage FUSE, open to all
  users); the broker then registers a folder inside a bucket mount, which reads no file,
  and with ``--deploy`` serves it on an endpoint. The request's arguments are the folder
  then only the helper's known flags (REGISTER_VALUE_FLAGS, each with one value, and
  REGISTER_SWITCHES); the helper, run as root, checks every value (machine type,
  accelerator, replica counts) before it runs gcloud, without a shell.

The broker runs the helper with a clean environment, so nothing of the user's environment
(PATH, the helpers' test overrides) reaches root. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: Written by the login script: {"region": R, "buckets": [{"name": B, "mount": PATH}],
#: "broker": SOCKET or null}; the broker key is absent where users hold node credentials.
CONFIG = "/etc/clusterprint/mlops.json"
#: Where the broker listens (its folder root's, the socket open to every local user).
SOCKET = "/run/clusterprint/mlops.sock"
#: Root-only folder of the logs being uploaded, one folder a request, removed after it.
STAGING = "/var/lib/clusterprint/mlops-staging"
#: The commands the broker runs as root, by the name a request gives.
HELPERS = {"tensorboard-upload": "/usr/local/bin/clusterprint-tensorboard-upload",
           "register-model": "/usr/local/bin/clusterprint-register-model"}
#: The flags a register-model request may carry after its folder: each with one value...
REGISTER_VALUE_FLAGS = ("--display-name", "--region", "--container-image-uri", "--machine-type",
                        "--accelerator", "--min-replica-count", "--max-replica-count",
                        "--endpoint-name")
#: ... and the switches.
REGISTER_SWITCHES = ("--deploy", "--dry-run")
#: The most a request may stage: TensorBoard event files are small, the disk is not endless.
MAX_STAGED_BYTES = 1 << 30
#: How often a --watch upload sends what changed in LOGDIR (CLUSTERPRINT_WATCH_INTERVAL_S
#: sets it, so that tests need not wait).
WATCH_INTERVAL_S = 30.0
#: The environment the helpers run with as root: nothing of the user's.
ROOT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin",
            "HOME": "/root", "LANG": "C.UTF-8"}
#: Exit status when the broker cannot be reached or breaks the exchange.
UNAVAILABLE = 6


class Refused(Exception):
    """What stops a request, with the exit status that says why (the helpers' own codes)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_config(path: str, not_configured: int = 4) -> dict:
    """The blueprint's region, buckets and the broker's socket, as the login script wrote
    them; Refused with ``not_configured`` when the file is missing or not that shape."""
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise Refused(not_configured, f"cannot read {path} ({exc}): the login script "
                      "writes it at boot") from exc
    if not isinstance(config, dict) or not isinstance(config.get("buckets"), list):
        raise Refused(not_configured, f"{path} has no buckets list")
    return config


def broker_socket(environ: dict[str, str]) -> str | None:
    """The broker's socket when this process must use it (a user, not root, on a cluster
    whose users hold no node credentials), else None: run the command here."""
    if os.geteuid() == 0:
        return None
    try:
        config = json.loads(Path(environ.get("CLUSTERPRINT_MLOPS_CONFIG", CONFIG)).read_text())
    except (OSError, ValueError):
        return None
    broker = config.get("broker") if isinstance(config, dict) else None
    return broker if isinstance(broker, str) else None


# The exchange: JSON lines, and after a file's header line exactly its bytes.
# client -> broker: {"helper": H, "args": [...]}, then for uploads {"file": REL, "offset": N,
#   "size": N} + bytes ... {"sync": true}, repeated while watching; closing ends it.
# broker -> client: {"out": TEXT} ... {"status": N}.


def _send(sock: socket.socket, message: dict, data: bytes = b"") -> None:
    sock.sendall(json.dumps(message).encode() + b"\n" + data)


def changed_files(logdir: Path, sent: dict[str, int]) -> Iterator[tuple[str, int, bytes]]:
    """(relative path, offset, bytes) of every regular file under ``logdir`` that grew or
    is new since ``sent`` (path -> bytes sent), read as the user; a file that shrank is
    sent whole again. Links are not followed: only what lies in LOGDIR goes."""
    for folder, dirs, files in os.walk(logdir):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(logdir).as_posix()
            try:
                data = path.read_bytes()
            except OSError:
                continue  # unreadable to this user: it is not theirs to upload
            offset = sent.get(relative, 0)
            if len(data) < offset:
                offset = 0
            if len(data) > offset or relative not in sent:
                yield relative, offset, data[offset:]
                sent[relative] = len(data)


def request(socket_path: str, helper: str, args: list[str], upload: Path | None = None,
            watch: bool = False) -> int:
    """Hand a helper's request to the broker and relay what it says; the helper's status.

    With ``upload`` the files of that folder go along (again every WATCH_INTERVAL_S with
    ``watch``, until interrupted)."""
    name = f"clusterprint-{helper}"
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
    except OSError as exc:
        print(f"{name}: the MLOps broker at {socket_path} does not answer ({exc}): see "
              "journalctl -u clusterprint-mlops", file=sys.stderr)
        return UNAVAILABLE
    with sock:
        _send(sock, {"helper": helper, "args": args})
        if upload is not None:
            interval = float(os.environ.get("CLUSTERPRINT_WATCH_INTERVAL_S", WATCH_INTERVAL_S))
            threading.Thread(target=_send_uploads, args=(sock, upload, watch, interval),
                             daemon=True).start()
        try:
            return _relay(sock.makefile("rb"), name)
        except KeyboardInterrupt:
            return 130


def _send_uploads(sock: socket.socket, logdir: Path, watch: bool, interval: float) -> None:
    sent: dict[str, int] = {}
    try:
        while True:
            for relative, offset, data in changed_files(logdir, sent):
                _send(sock, {"file": relative, "offset": offset, "size": len(data)}, data)
            _send(sock, {"sync": True})
            if not watch:
                return
            time.sleep(interval)
    except OSError:
        return  # the broker ended the request; _relay reports its status


def _relay(answers, name: str) -> int:
    for line in answers:
        message = json.loads(line)
        if "out" in message:
            sys.stderr.write(message["out"])
            sys.stderr.flush()
        elif "status" in message:
            return int(message["status"])
    print(f"{name}: the MLOps broker closed the request without a status", file=sys.stderr)
    return UNAVAILABLE


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel says."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def staged_path(staging: Path, relative: object) -> Path:
    """Where a sent file goes under ``staging``; Refused for anything but a plain relative
    path inside it (no absolute path, no ``..``, no empty or control-character part)."""
    if not isinstance(relative, str) or not relative or relative.startswith("/"):
        raise Refused(3, f"refused file name {relative!r}")
    parts = relative.split("/")
    if any(p in ("", ".", "..") or any(ord(c) < 32 or ord(c) == 127 for c in p)
           for p in parts):
        raise Refused(3, f"refused file name {relative!r}")
    return staging.joinpath(*parts)


def receive_files(answers, staging: Path, budget: list[int]) -> bool:
    """Write sent files under ``staging`` until a sync line: True then, False when the
    client has closed. ``budget`` (one int, bytes left) bounds what a request stages."""
    for line in answers:
        message = json.loads(line)
        if message.get("sync"):
            return True
        offset, size = message.get("offset"), message.get("size")
        if not (isinstance(offset, int) and isinstance(size, int) and offset >= 0
                and size >= 0):
            raise Refused(3, "refused file header")
        budget[0] -= size
        if budget[0] < 0:
            raise Refused(3, f"the logs are over {MAX_STAGED_BYTES} bytes")
        target = staged_path(staging, message.get("file"))
        data = answers.read(size)
        if len(data) != size:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        # Never follows a link (none is ever made here); a shrunk file is written anew.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "r+b") as out:
            if offset == 0:
                out.truncate()
            out.seek(offset)
            out.write(data)
    return False


def _arguments(message: dict) -> tuple[str, list[str]]:
    helper, args = message.get("helper"), message.get("args")
    if helper not in HELPERS:
        raise Refused(2, f"unknown helper {helper!r}")
    if not (isinstance(args, list) and len(args) <= 32
            and all(isinstance(a, str) and "\0" not in a and len(a) <= 4096 for a in args)):
        raise Refused(2, "refused arguments")
    return helper, args


def check_register_flags(rest: list[str]) -> None:
    """A registration's arguments after its folder: known flags only, each value-taking
    one followed by a value that is not itself a flag; Refused otherwise."""
    rest = list(rest)
    while rest:
        flag = rest.pop(0)
        if flag in REGISTER_SWITCHES:
            continue
        if flag not in REGISTER_VALUE_FLAGS or not rest or rest[0].startswith("-"):
            raise Refused(2, f"refused register-model flag {flag!r}")
        rest.pop(0)


class Broker:
    """Serves requests on a Unix socket, each in a thread of its own."""

    def __init__(self, socket_path: str, staging: Path, helpers: dict[str, str],
                 config: str = CONFIG) -> None:
        self.socket_path, self.staging, self.helpers = socket_path, staging, helpers
        self.config = config

    def serve_forever(self) -> None:
        """Listen (the socket open to every local user) and answer until killed."""
        self.staging.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.staging, 0o700)
        Path(self.socket_path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.socket_path).unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.socket_path)
        os.chmod(self.socket_path, 0o666)
        server.listen(16)
        print(f"clusterprint-mlops: listening on {self.socket_path}", flush=True)
        while True:
            conn, _ = server.accept()
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        """One request, start to end; whatever goes wrong, the client gets a status."""
        with conn:
            uid = peer_uid(conn)
            answers = conn.makefile("rb")
            try:
                status = self._run(conn, answers, uid)
            except Refused as exc:
                self._out(conn, f"clusterprint-mlops: {exc}\n")
                status = exc.status
            except (OSError, ValueError) as exc:
                status = UNAVAILABLE
                self._out(conn, f"clusterprint-mlops: the request broke off ({exc})\n")
            print(f"clusterprint-mlops: uid {uid}: exit {status}", flush=True)
            with contextlib.suppress(OSError):
                _send(conn, {"status": status})

    def _run(self, conn: socket.socket, answers, uid: int) -> int:
        helper, args = _arguments(json.loads(answers.readline() or b"{}"))
        print(f"clusterprint-mlops: uid {uid}: {helper} {' '.join(args)}", flush=True)
        if helper == "register-model":
            self._check_in_bucket(args)
            check_register_flags(args[1:])
            return self._helper(conn, [self.helpers[helper], *args])
        staging = Path(tempfile.mkdtemp(prefix=f"{uid}-", dir=self.staging))
        try:
            logdir = staging / "logs"
            logdir.mkdir()
            budget = [MAX_STAGED_BYTES]
            if not receive_files(answers, logdir, budget):
                return 130
            command = [self.helpers[helper], str(logdir), *args]
            if "--watch" not in args:
                return self._helper(conn, command)
            process, relay = self._start(conn, command)
            while receive_files(answers, logdir, budget) and process.poll() is None:
                pass
            if process.poll() is None:
                process.terminate()
            status = process.wait()
            relay.join(10)
            return status
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _check_in_bucket(self, args: list[str]) -> None:
        """A registration names a folder inside a bucket mount: root reads none of it."""
        mounts = [Path(b.get("mount", "")).resolve()
                  for b in read_config(self.config)["buckets"] if isinstance(b, dict)]
        folder = Path(args[0]).resolve() if args and not args[0].startswith("-") else None
        if folder is None or not any(folder == m or m in folder.parents for m in mounts):
            raise Refused(3, "the broker registers folders inside a bucket mount only")

    def _start(self, conn: socket.socket, command: list[str]) -> tuple[subprocess.Popen,
                                                                      threading.Thread]:
        """Run a helper as root, its output relayed to the client as it comes."""
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=ROOT_ENV, cwd="/")
        relay = threading.Thread(target=self._pipe, args=(conn, process), daemon=True)
        relay.start()
        return process, relay

    def _helper(self, conn: socket.socket, command: list[str]) -> int:
        process, relay = self._start(conn, command)
        status = process.wait()
        relay.join(10)
        return status

    def _pipe(self, conn: socket.socket, process: subprocess.Popen) -> None:
        for line in iter(process.stdout.readline, b""):
            self._out(conn, line.decode(errors="replace"))

    @staticmethod
    def _out(conn: socket.socket, text: str) -> None:
        with contextlib.suppress(OSError):
            _send(conn, {"out": text})


def main(argv: list[str]) -> int:
    """``--listen SOCKET``: serve (the unit's command)."""
    parser = argparse.ArgumentParser(prog="clusterprint-mlops",
                                     description="Run users' MLOps requests as root.")
    parser.add_argument("--listen", default=SOCKET, help=f"the socket (default {SOCKET})")
    parser.add_argument("--staging", default=STAGING, help=f"staging folder (default {STAGING})")
    args = parser.parse_args(argv)
    Broker(args.listen, Path(args.staging), HELPERS).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
