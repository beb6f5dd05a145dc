"""Root's TensorBoard step: every recipe run's logs uploaded during and after the run.

With ``observability.tensorboard`` the login node runs this as a root service
(clusterprint-tensorboard-sync). The recipes write their logs to
``ROOT/USER/clusterprint/JOB/tensorboard`` on shared storage (the login script writes ROOT
and the folder name to CONFIG's ``tensorboard_runs``); no user runs anything and no user
needs the node's credentials.

Root never reads a run's files itself. For each run folder whose every part, from the user's
folder down, is a real folder (lstat: no link followed) owned by one user other than root,
it runs ``clusterprint-tensorboard-upload LOGDIR --experiment USER-JOB --watch`` as that user
(setpriv, the user's uid and primary group, no other groups, a clean environment): the
user's own process reads LOGDIR, so what the owner cannot read (another user's or root's
file, a link to one) never leaves, and the upload goes through the MLOps broker as a user's
would. One watch per run; a run whose logs have not changed for QUIET_S (and whose watch has
run that long) is finished: its watch is stopped and the newest change it saw recorded, so a
finished run is never watched again unless it writes again (a requeued start).

Each watch is recorded in STATE (root's, written whole then renamed) before it starts: when
that write fails, nothing starts (the service exits non-zero and systemd restarts it). At most
MAX_WATCHES at once; more wait for a free one. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

CONFIG = "/etc/clusterprint/mlops.json"
STATE = "/var/lib/clusterprint/tensorboard-sync.json"
#: The user-side helper, beside this module on a login node.
PROGRAM = "/usr/local/lib/clusterprint/tensorboard_upload.py"
PYTHON = "/usr/bin/python3"
SCAN_INTERVAL_S = 60.0
QUIET_S = 900.0
MAX_WATCHES = 32
#: A Vertex AI TensorBoard experiment id (tensorboard_upload.EXPERIMENT).
EXPERIMENT_MAX = 128
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def experiment(user: str, job: str) -> str:
    """USER-JOB as an experiment id: lower-case letters, digits and hyphens, at most 128."""
    name = re.sub(r"[^a-z0-9]+", "-", f"{user}-{job}".lower()).strip("-")
    return name[:EXPERIMENT_MAX].rstrip("-") or "run"


def owned_folder(path: Path, uid: int | None) -> int | None:
    """The owner of ``path`` when it is a real folder (not a link) owned by ``uid`` (any
    user but root when None), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid == 0:
        return None
    return info.st_uid if uid in (None, info.st_uid) else None


def run_logdirs(root: Path, folder: str) -> Iterator[tuple[Path, int, str]]:
    """(LOGDIR, its owner's uid, the experiment) of every run under ``root``."""
    try:
        users = sorted(root.iterdir())
    except OSError:
        return
    for user_dir in users:
        uid = owned_folder(user_dir, None)
        if uid is None or owned_folder(user_dir / folder, uid) is None:
            continue
        try:
            jobs = sorted((user_dir / folder).iterdir())
            pwd.getpwuid(uid)
        except (OSError, KeyError):
            continue  # removed meanwhile, or no such user to upload as
        for job in jobs:
            logdir = job / "tensorboard"
            if owned_folder(job, uid) is not None and owned_folder(logdir, uid) is not None:
                yield logdir, uid, experiment(user_dir.name, job.name)


def newest_change(logdir: Path) -> float:
    """The latest mtime of LOGDIR and anything in it (lstat, links not followed)."""
    newest = 0.0
    for folder, dirs, files in os.walk(logdir):
        for name in [".", *dirs, *files]:
            try:
                newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
            except OSError:
                continue
    return newest


class Sync:
    """The watches of the runs' uploads and the state they are recorded in."""

    def __init__(self, config: str = CONFIG, state: str = STATE, program: str = PROGRAM,
                 python: str = PYTHON, quiet_s: float = QUIET_S,
                 clock: Callable[[], float] = time.time, env: dict[str, str] | None = None
                 ) -> None:
        runs = json.loads(Path(config).read_text())["tensorboard_runs"]
        self.root, self.folder = Path(runs["root"]), str(runs["folder"])
        self.config, self.state_path = config, Path(state)
        self.program, self.python, self.quiet_s, self.clock = program, python, quiet_s, clock
        self.env = {"PATH": PATH, "LANG": "C.UTF-8", "CLUSTERPRINT_MLOPS_CONFIG": config,
                    **(env or {})}
        self.watches: dict[str, subprocess.Popen] = {}

    def state(self) -> dict[str, dict]:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}

    def save(self, state: dict[str, dict]) -> None:
        """Written whole then renamed: an OSError here stops the tick before any start."""
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(temporary, self.state_path)

    def tick(self) -> None:
        """Start a watch for each run that changed since its last, stop the quiet ones."""
        state, now = self.state(), self.clock()
        for logdir, uid, name in run_logdirs(self.root, self.folder):
            key, changed = str(logdir), newest_change(logdir)
            entry = state.setdefault(key, {"uploads": 0})
            process = self.watches.get(key)
            if process is not None and process.poll() is not None:
                print(f"clusterprint-tensorboard-sync: {key}: the upload exited "
                      f"{process.returncode}", flush=True)
                del self.watches[key]
                entry["done"] = changed  # not retried until the run writes again
                self.save(state)
                continue
            if process is not None:
                if now - max(changed, entry["started"]) >= self.quiet_s:
                    self.stop(key)
                    entry["done"] = changed
                    self.save(state)
                continue
            if changed <= entry.get("done", -1.0) or len(self.watches) >= MAX_WATCHES:
                continue
            entry.update(uid=uid, experiment=name, started=now, uploads=entry["uploads"] + 1)
            entry.pop("done", None)
            self.save(state)  # recorded before it starts; a failed write starts nothing
            self.watches[key] = self.start(logdir, uid, name)

    def start(self, logdir: Path, uid: int, name: str) -> subprocess.Popen:
        """The user-side upload of LOGDIR, as its owner (primary group, no others)."""
        gid = pwd.getpwuid(uid).pw_gid
        print(f"clusterprint-tensorboard-sync: {logdir}: uploading as uid {uid} to "
              f"experiment {name}", flush=True)
        return subprocess.Popen(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
             self.python, "-s", "-E", self.program, str(logdir), "--experiment", name,
             "--watch"], env=self.env, cwd="/", stdin=subprocess.DEVNULL)

    def stop(self, key: str) -> None:
        process = self.watches.pop(key)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(f"clusterprint-tensorboard-sync: {key}: finished, upload stopped", flush=True)

    def stop_all(self) -> None:
        for key in list(self.watches):
            self.stop(key)


def main(argv: list[str]) -> int:
    """Scan every SCAN_INTERVAL_S until killed (the unit's command)."""
    parser = argparse.ArgumentParser(prog="clusterprint-tensorboard-sync",
                                     description="Upload recipe runs' TensorBoard logs.")
    parser.add_argument("--config", default=CONFIG)
    parser.add_argument("--state", default=STATE)
    args = parser.parse_args(argv)
    Path(args.state).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    sync = Sync(args.config, args.state)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            sync.tick()
            time.sleep(SCAN_INTERVAL_S)
    finally:
        sync.stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
