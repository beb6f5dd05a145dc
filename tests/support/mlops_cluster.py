"""A login node's MLOps broker in a folder every user may enter, with a stand-in for the
helper it runs as root: what the broker's and the TensorBoard sync's tests drive."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from clusterprint.node import mlops_broker
from tests.support.paths import NODE_PYTHON

NOBODY = 65534
#: A stand-in for the helper the broker runs as root: records its uid and arguments, copies
#: the folder it was given (the staged logs) while it runs, and exits with $FAKE_STATUS's
#: value from the file beside it.
STAND_IN = """#!/bin/bash
echo "root side: uid $(id -u) args $*"
printf '%s\\0' "$@" >"{record}/argv"
status=$(cat "{record}/status" 2>/dev/null || echo 0)
while :; do
  rm -rf "{record}/seen.tmp"; cp -r "$1" "{record}/seen.tmp" 2>/dev/null || true
  rm -rf "{record}/seen"; mv "{record}/seen.tmp" "{record}/seen" 2>/dev/null || true
  [[ " $* " == *" --watch "* ]] || break
  sleep 0.1
done
exit "$status"
"""


class Cluster:
    """A login node in a folder every user may enter: the broker, its config, a bucket mount."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="broker-", dir="/tmp"))
        self.root.chmod(0o755)
        self.record = self.root / "record"
        self.record.mkdir()
        self.socket = str(self.root / "run" / "mlops.sock")
        self.staging = self.root / "staging"
        self.bucket = self.root / "gcs" / "ckpts"
        self.bucket.mkdir(parents=True)
        self.bucket.chmod(0o777)  # Cloud Storage FUSE with --dir-mode=777
        self.home = self.root / "home"
        self.home.mkdir()
        shutil.chown(self.home, NOBODY, NOBODY)
        self.config = self.root / "mlops.json"
        self.config.write_text(json.dumps({
            "region": "us-central1", "broker": self.socket,
            "buckets": [{"name": "ckpts", "mount": str(self.bucket)}]}))
        helpers = {}
        for name in mlops_broker.HELPERS:
            stand_in = self.root / name
            stand_in.write_text(STAND_IN.format(record=self.record))
            stand_in.chmod(0o755)
            helpers[name] = str(stand_in)
        code = (f"import sys; sys.path.insert(0, {str(Path(mlops_broker.__file__).parent)!r})\n"
                f"import mlops_broker\n"
                f"mlops_broker.Broker({self.socket!r}, mlops_broker.Path({str(self.staging)!r}),"
                f" {helpers!r}, {str(self.config)!r}).serve_forever()\n")
        self.log = self.root / "broker.log"
        with self.log.open("wb") as out:
            self.broker = subprocess.Popen([NODE_PYTHON, "-s", "-E", "-c", code],
                                           stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            assert self.broker.poll() is None and time.monotonic() < deadline, self.log_text()
            time.sleep(0.05)

    def log_text(self) -> str:
        return self.log.read_text()

    def as_user(self, module, *args: str, **env: str) -> subprocess.Popen:
        """A helper as ``nobody`` runs it on the login node: its file, by the system python."""
        return subprocess.Popen(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             NODE_PYTHON, module.__file__, *args],
            cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "CLUSTERPRINT_MLOPS_CONFIG": str(self.config),
                 **env})

    def run_as_user(self, module, *args: str) -> subprocess.CompletedProcess:
        process = self.as_user(module, *args)
        out, err = process.communicate(timeout=30)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def argv(self) -> list[str]:
        return (self.record / "argv").read_bytes().decode().split("\0")[:-1]

    def seen(self) -> dict[str, bytes]:
        """What the root side found in the folder it was given, by relative path."""
        seen = self.record / "seen"
        return {p.relative_to(seen).as_posix(): p.read_bytes()
                for p in sorted(seen.rglob("*")) if p.is_file()}

    def stop(self) -> None:
        self.broker.terminate()
        self.broker.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


def wait_for(check, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)


