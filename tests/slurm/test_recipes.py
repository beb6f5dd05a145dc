"""The training recipes on real slurmctld 26.05, booted from the rendered configuration.

Every rendered recipe is a job slurmctld takes (``sbatch --test-only``). Then a recipe runs
for real, through its own requeue, signal and resume plumbing (the same rendered script):
only the container launch is replaced, by CLUSTERPRINT_RECIPE_PROGRAM, with a stand-in
trainer that counts steps, saves its step as Megatron-Bridge lays out checkpoints
(iter_NNNNNNN/ and latest_checkpointed_iteration.txt, written once the save is complete)
every CLUSTERPRINT_SAVE_INTERVAL steps and at the end, and saves and stops on SIGTERM as
Megatron's exit signal handler does. Requeued jobs wait cred_expire before they start again: it is
shortened here as in test_training_conf.py.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.render.recipes import recipe_path, recipe_run
from tests.support.job_blueprints import every_recipe, with_recipes
from tests.support.local_slurm import (
    CRED_EXPIRE_S,
    NODE_CPUS,
    job_fields,
    sbatch_test_only,
    wait_until,
)
from tests.support.paths import blueprint_path

#: The stand-in trainer (see the module docstring); STANDIN_STEP_S is one step's time.
STANDIN = r"""#!/bin/bash
set -euo pipefail
dir=$CLUSTERPRINT_CHECKPOINT_DIR
step=${CLUSTERPRINT_RESUME_STEP:-0}
echo "stand-in started at step $step"
stop=no
trap 'stop=yes' TERM
save() {
  local iter
  iter=$(printf '%s/iter_%07d' "$dir" "$step")
  mkdir -p "$iter"
  echo "$step" >"$iter/state"
  echo "$step" >"$dir/.tracker"
  mv "$dir/.tracker" "$dir/latest_checkpointed_iteration.txt"
  echo "saved step $step"
}
while ((step < CLUSTERPRINT_MAX_STEPS)); do
  sleep "$STANDIN_STEP_S" || true  # slurmstepd signals every process of the step
  step=$((step + 1))
  if ((step % CLUSTERPRINT_SAVE_INTERVAL == 0)); then save; fi
  if [[ $stop == yes ]]; then
    save
    echo "stand-in stopped on SIGTERM at step $step"
    exit 0
  fi
done
save
echo "stand-in trained to step $step"
"""


def test_slurmctld_takes_every_rendered_recipe(local_slurm, tmp_path):
    for blueprint in (every_recipe("a4", tmp_path), every_recipe("a3ultra", tmp_path)):
        cluster = local_slurm(blueprint)
        runs = [recipe_run(blueprint, job) for job in blueprint.recipes]
        nodeset = runs[0].nodesets[0]
        conf = cluster.compute_node_conf(nodeset)
        for index in range(max(run.job.nodes for run in runs)):
            cluster.start_node(f"{nodeset}-{index}", f"{conf} {NODE_CPUS}",
                               runs[0].gpus_per_node).stop()
        for run in runs:
            script = cluster.root / Path(recipe_path(run.job.name)).name
            script.write_text(cluster.files[recipe_path(run.job.name)])
            assert f"in partition {run.partition}" in sbatch_test_only(cluster, script)
            held = cluster.run("sbatch", "--hold", "--parsable", str(script)).strip()
            fields = job_fields(cluster, held)
            cluster.run("scancel", held)
            assert fields["JobName"] == run.job.name
            assert fields["Requeue"] == "1"
            assert fields["NumNodes"] in (f"{run.job.nodes}", f"{run.job.nodes}-{run.job.nodes}")
            assert fields["NumTasks"] == str(run.job.nodes * run.tasks_per_node)
            assert fields["TresPerNode"] == f"gres/gpu:{run.gpus_per_node}"
        cluster.stop()


def test_the_reference_blueprints_recipes_are_jobs_slurmctld_takes(local_slurm):
    for name in ("a3mega", "a3ultra", "a4"):
        blueprint = load_checked(blueprint_path(name))
        cluster = local_slurm(blueprint)
        for number, job in enumerate(blueprint.recipes):
            run = recipe_run(blueprint, job)
            conf = cluster.compute_node_conf(run.nodesets[0])
            for index in range(job.nodes):
                cluster.start_node(f"r{number}-{index}", f"{conf} {NODE_CPUS}",
                                   run.gpus_per_node).stop()
            script = cluster.root / f"{job.name}.sbatch"
            script.write_text(cluster.files[recipe_path(job.name)])
            sbatch_test_only(cluster, script)
        cluster.stop()


class Training:
    """The llama3-8b-pretrain recipe on one a3ultra node, its trainer the stand-in."""

    def __init__(self, local_slurm, tmp_path: Path) -> None:
        blueprint = with_recipes("a3ultra", [{"name": "llama3-8b-pretrain",
                                              "partition": "a3ultra"}], tmp_path)
        self.cluster = local_slurm(blueprint, start=False)
        self.cluster.conf.write_text(re.sub(
            r"^(AuthInfo=.*)$", rf"\1,cred_expire={CRED_EXPIRE_S}",
            self.cluster.conf.read_text(), flags=re.MULTILINE))
        self.cluster.start_controller()
        self.node = self.cluster.start_node(
            "a3ultra-0", f"{self.cluster.compute_node_conf('a3ultra')} {NODE_CPUS}", 8)
        self.root = self.cluster.root
        self.run_dir = self.root / "run"
        self.checkpoints = self.run_dir / "checkpoints"
        standin = self.root / "standin.sh"
        standin.write_text(STANDIN)
        standin.chmod(0o755)
        self.script = self.root / "llama3-8b-pretrain.sbatch"
        self.script.write_text(self.cluster.files[recipe_path("llama3-8b-pretrain")])
        self.output = self.root / "train.out"
        self.env = {**self.cluster.env, "CLUSTERPRINT_RECIPE_PROGRAM": str(standin),
                    "CLUSTERPRINT_RUN_DIR": str(self.run_dir)}

    def submit(self, steps: int, save_interval: int, step_s: float, *options: str) -> str:
        env = {**self.env, "CLUSTERPRINT_MAX_STEPS": str(steps),
               "CLUSTERPRINT_SAVE_INTERVAL": str(save_interval), "STANDIN_STEP_S": str(step_s)}
        argv = self.cluster.command("sbatch", "--parsable", "-o", str(self.output), *options,
                                    str(self.script))
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                              cwd=self.root)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def saved(self) -> int:
        tracker = self.checkpoints / "latest_checkpointed_iteration.txt"
        return int(tracker.read_text()) if tracker.exists() else 0

    def lines(self, pattern: str) -> list[int]:
        text = self.output.read_text() if self.output.exists() else ""
        return [int(n) for n in re.findall(pattern, text, re.MULTILINE)]

    def finished(self, job: str, timeout: float) -> None:
        wait_until(lambda: job_fields(self.cluster, job)["JobState"] == "COMPLETED",
                   "the training finishing", self.output, timeout=timeout)


@pytest.fixture
def training(local_slurm, tmp_path) -> Training:
    return Training(local_slurm, tmp_path)


def test_a_requeued_recipe_resumes_from_its_last_complete_checkpoint(training):
    job = training.submit(200, 10, 0.05)
    wait_until(lambda: training.saved() >= 40, "two checkpoints", training.node.log)
    training.cluster.run("scontrol", "requeue", job)
    wait_until(lambda: job_fields(training.cluster, job)["JobState"] == "PENDING",
               "the job requeued")
    saved = training.saved()
    assert 40 <= saved < 200
    # A checkpoint cut off mid-write: its folder, no tracker naming it.
    cut = training.checkpoints / f"iter_{saved + 5:07d}"
    cut.mkdir()
    (cut / "state").write_text("")
    training.finished(job, CRED_EXPIRE_S + 90)

    assert training.lines(r"^resuming from step (\d+) ") == [saved]
    assert training.lines(r"^stand-in started at step (\d+)$") == [0, saved]
    assert training.lines(r"^stand-in trained to step (\d+)$") == [200]
    assert training.lines(r"^training finished at step (\d+):") == [200]
    assert "starting at step 0: no complete checkpoint" in training.output.read_text()
    assert job_fields(training.cluster, job)["Restarts"] == "1"


def test_a_recipe_near_its_time_limit_saves_requeues_itself_and_resumes(training):
    # One minute with the signal 15 s before the end: slurmctld sends it on its first 30 s
    # sweep once the end is less than the lead plus 30 s away (job_time_limit), so 15 to
    # 45 s into each start; 48 s of training outlasts the first start.
    job = training.submit(480, 10, 0.1, "--time=1", "--signal=TERM@15")
    training.finished(job, 300)
    text = training.output.read_text()
    stopped = training.lines(r"^stand-in stopped on SIGTERM at step (\d+)$")
    assert stopped and all(0 < step < 480 for step in stopped), text
    assert training.lines(r"^time limit near \(\d+ s left\): the ranks saved on SIGTERM at "
                          r"step (\d+)$") == stopped
    # Every start after the first resumes where the previous one saved on the signal.
    assert training.lines(r"^resuming from step (\d+) ") == stopped, text
    assert training.lines(r"^stand-in started at step (\d+)$") == [0, *stopped]
    assert training.lines(r"^requeueing: the next start resumes from step (\d+)$") == stopped
    assert training.lines(r"^training finished at step (\d+):") == [480]
    assert "TIMEOUT" not in job_fields(training.cluster, job)["JobState"]
    assert job_fields(training.cluster, job)["Restarts"] == str(len(stopped))
