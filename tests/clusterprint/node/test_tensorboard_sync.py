"""Root's TensorBoard step: a run's logs, written by its unprivileged owner, uploaded during
and after the run by the user-side helper run as that owner, through the MLOps broker.

The broker runs as a process with its stand-in uploader (test_mlops_broker's Cluster), the
run's folder is made and written by user ``nobody`` (setpriv), and the sync ticks with a
clock the test sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from clusterprint.node import tensorboard_sync, tensorboard_upload
from clusterprint.render import rendered_files
from clusterprint.render.recipes import recipe_path
from tests.support.job_blueprints import with_recipes
from tests.support.mlops_cluster import NOBODY, Cluster, wait_for
from tests.support.paths import NODE_PYTHON
from tests.support.recipe_stubs import DATE_STUB, NOW, SQUEUE_STUB, SRUN_STUB, STUBS


class Clock:
    def __init__(self) -> None:
        self.now = time.time()  # the files' mtimes are the real clock

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cluster(sandbox):
    made = Cluster()
    yield made
    made.stop()


def as_nobody(cluster: Cluster, script: str) -> None:
    """What the run does on shared storage, as its owner (a user, not root)."""
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    "bash", "-euc", script], check=True, cwd=cluster.home)


@pytest.fixture
def run(cluster):
    """nobody's run folder ROOT/nobody/clusterprint/llama/tensorboard with one event file,
    and the sync that watches ROOT."""
    root = cluster.root / "lustre"
    root.mkdir(mode=0o1777)
    root.chmod(0o1777)
    logdir = root / "nobody" / "clusterprint" / "Llama_3" / "tensorboard"
    as_nobody(cluster, f"mkdir -p {logdir} && printf 'event one' >{logdir}/events.out.1")
    config = json.loads(cluster.config.read_text())
    config["tensorboard_runs"] = {"root": str(root), "folder": "clusterprint"}
    cluster.config.write_text(json.dumps(config))
    clock = Clock()
    sync = tensorboard_sync.Sync(str(cluster.config), str(cluster.root / "state.json"),
                                 tensorboard_upload.__file__, NODE_PYTHON, quiet_s=900,
                                 clock=clock, env={"CLUSTERPRINT_WATCH_INTERVAL_S": "0.2"})
    yield sync, clock, logdir
    sync.stop_all()


def test_a_runs_logs_are_uploaded_by_root_as_their_owner_during_and_after_the_run(cluster, run):
    sync, clock, logdir = run
    sync.tick()
    wait_for(lambda: cluster.seen().get("events.out.1") == b"event one")
    assert cluster.argv()[1:] == ["--experiment", "nobody-llama-3", "--watch"]
    assert f"uid {NOBODY}: tensorboard-upload" in cluster.log_text()  # the owner asked
    as_nobody(cluster, f"printf ', event two' >>{logdir}/events.out.1")
    wait_for(lambda: cluster.seen().get("events.out.1") == b"event one, event two")
    # The run has ended: quiet for QUIET_S, its watch stops and is recorded done.
    clock.now += 901
    sync.tick()
    assert sync.watches == {}
    entry = json.loads((cluster.root / "state.json").read_text())[str(logdir)]
    assert entry["uploads"] == 1 and "done" in entry and entry["uid"] == NOBODY
    clock.now += 3600
    sync.tick()
    assert sync.watches == {}  # a finished run is not watched again


def test_what_the_owner_cannot_read_is_never_uploaded(cluster, run):
    sync, _, logdir = run
    secret = cluster.root / "munge.key"
    secret.write_bytes(b"the cluster's munge key")
    secret.chmod(0o400)
    as_nobody(cluster, f"ln -s {secret} {logdir}/key-link")
    os.link(secret, logdir / "hard-link")  # root's link into the owner's folder
    (logdir / "root-only").write_bytes(b"root's file")
    (logdir / "root-only").chmod(0o600)
    sync.tick()
    wait_for(lambda: "events.out.1" in cluster.seen())
    assert set(cluster.seen()) == {"events.out.1"}


def test_a_run_folder_that_is_a_link_or_not_the_users_is_not_watched(cluster, run):
    sync, _, logdir = run
    jobs = logdir.parent.parent
    as_nobody(cluster, f"ln -s {cluster.root} {jobs}/linked && mkdir {jobs}/other")
    (jobs / "other" / "tensorboard").mkdir()  # root's folder inside nobody's
    sync.tick()
    assert list(sync.watches) == [str(logdir)]


def test_a_watch_is_recorded_before_it_starts_and_a_failed_record_starts_none(cluster, run):
    sync, _, _ = run
    sync.state_path = cluster.root / "missing" / "state.json"
    with pytest.raises(OSError):
        sync.tick()
    assert sync.watches == {}


@pytest.mark.parametrize("user, job, expected", [
    ("alice", "llama3-8b-pretrain", "alice-llama3-8b-pretrain"),
    ("Bob.Smith", "Gemma_SFT", "bob-smith-gemma-sft"),
    ("u", "x" * 200, "u-" + "x" * 126),
])
def test_the_experiment_is_the_user_and_job_as_an_id(user, job, expected):
    name = tensorboard_sync.experiment(user, job)
    assert name == expected and tensorboard_upload.EXPERIMENT.match(name)


#: The trainer: writes one TensorBoard event file where the recipe told it to.
TRAINER = r"""#!/bin/bash
printf 'step 1 loss 2.5' >"$CLUSTERPRINT_TENSORBOARD_DIR/events.out.tfevents.1"
"""


def test_a_rendered_recipe_run_by_its_user_is_uploaded_without_the_user_running_anything(
        cluster, run, tmp_path):
    sync, _, logdir = run
    blueprint = with_recipes("a3ultra", [{"name": "llama3-8b-pretrain",
                                          "partition": "a3ultra"}],
                             tmp_path, observability={"tensorboard": True})
    script = rendered_files(blueprint)[recipe_path("llama3-8b-pretrain")]
    fake = cluster.root / "fake"
    (fake / "bin").mkdir(parents=True)
    for name, text in (("srun", SRUN_STUB), ("squeue", SQUEUE_STUB), ("date", DATE_STUB),
                       ("trainer", TRAINER)):
        (fake / "bin" / name).write_text(text)
        (fake / "bin" / name).chmod(0o755)
    (fake / "bin" / "scontrol").symlink_to(STUBS / "scontrol")
    os.chown(fake, NOBODY, NOBODY)  # srun's record of calls
    (fake / "recipe.sbatch").write_text(script)
    run_dir = logdir.parent.parent / "llama3-8b-pretrain"
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "bash",
         str(fake / "recipe.sbatch")], cwd=cluster.home, capture_output=True, text=True,
        timeout=60, env={"PATH": f"{fake / 'bin'}:/usr/bin:/bin", "HOME": str(cluster.home),
                         "USER": "nobody", "TZ": "UTC", "FAKE": str(fake),
                         "FAKE_NOW": str(NOW), "FAKE_LEFT": "3600", "SLURM_JOB_ID": "42",
                         "SLURM_JOB_NODELIST": "a3ultra-0", "SLURM_JOB_NUM_NODES": "1",
                         "CLUSTERPRINT_RUN_DIR": str(run_dir),
                         "CLUSTERPRINT_RECIPE_PROGRAM": str(fake / "bin" / "trainer")})
    events = run_dir / "tensorboard" / "events.out.tfevents.1"
    assert events.read_bytes() == b"step 1 loss 2.5", done.stdout + done.stderr
    assert events.stat().st_uid == NOBODY
    sync.tick()
    assert sorted(sync.watches) == sorted([str(logdir), str(events.parent)])
    wait_for(lambda: cluster.seen().get("events.out.tfevents.1") == b"step 1 loss 2.5")


def test_the_service_as_a_process_records_its_uploads_in_a_folder_it_makes(cluster, run):
    state = cluster.root / "var" / "state.json"
    process = subprocess.Popen([NODE_PYTHON, "-s", "-E", tensorboard_sync.__file__,
                                "--config", str(cluster.config), "--state", str(state)])
    try:
        wait_for(lambda: state.exists())
        assert json.loads(state.read_text())[str(run[2])]["uploads"] == 1
    finally:
        process.terminate()
        process.wait(30)
