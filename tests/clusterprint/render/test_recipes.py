"""Training recipes: one sbatch job per blueprint recipe, valid shell, asking for whole GPU
nodes of its partition, in its family's container and launch form, checkpointing where the
cluster keeps data. tests/slurm/test_recipes.py runs them on real Slurm.

Here the rendered script also runs as the batch shell of one start, with stub ``srun``,
``squeue``, ``scontrol`` and a clock the test sets, its trainer CLUSTERPRINT_RECIPE_PROGRAM:
what it resumes from in each framework's checkpoint layout, whether it requeues itself, and
its exit status are what a user would see of that start."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterprint.facts import catalog
from clusterprint.render import rendered_files
from clusterprint.render.recipes import recipe_path
from tests.support.job_blueprints import FAMILIES, every_recipe, sbatch_options, with_recipes
from tests.support.paths import blueprint_path
from tests.support.recipe_stubs import DATE_STUB, NOW, SQUEUE_STUB, SRUN_STUB, STUBS


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_recipe_parses_and_passes_shellcheck(name, tmp_path):
    assert shutil.which("shellcheck"), "install shellcheck (make system-packages)"
    files = rendered_files(every_recipe(name, tmp_path))
    recipes = {path: text for path, text in files.items() if path.startswith("recipes/")}
    assert sorted(recipes) == sorted(recipe_path(r) for r in catalog.RECIPES)
    for path, text in recipes.items():
        script = tmp_path / Path(path).name
        script.write_text(text)
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, path
        checked = subprocess.run(["shellcheck", "--severity=style", str(script)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout
        assert not re.search(r"#\s*shellcheck\s+disable", text)


@pytest.mark.parametrize(("name", "image", "tasks", "launch"), [
    ("a3ultra", "nvcr.io#nvidia/nemo:25.11", "1", "exec torchrun --nproc-per-node"),
    ("a4", "nvcr.io#nvidia/nemo:25.09", "8", "LAUNCH=(--mpi=pmi2 --kill-on-bad-exit=1)"),
])
def test_each_family_gets_its_public_recipes_image_and_launch_form(name, image, tasks, launch,
                                                                   tmp_path):
    text = rendered_files(every_recipe(name, tmp_path))[recipe_path("llama3-70b-pretrain")]
    assert f"readonly IMAGE='{image}'" in text
    assert launch in text
    options = sbatch_options(text)
    assert options["ntasks-per-node"] == tasks
    assert options["nodes"] == "4" and options["gpus-per-node"] == "8"
    assert options["requeue"] == "" and options["signal"] == "TERM@300"
    assert options["partition"] == FAMILIES[name]
    # RL runs Ray: one task per node, in NeMo-RL's image, whatever the family.
    rl = rendered_files(every_recipe(name, tmp_path))[recipe_path("gemma3-27b-rl")]
    assert sbatch_options(rl)["ntasks-per-node"] == "1"
    assert "readonly IMAGE='nvcr.io#nvidia/nemo-rl:v0.7.0'" in rl
    assert 'ray start --head --port="$RAY_PORT"' in rl


def test_the_nccl_environment_is_sourced_from_the_node_never_copied(tmp_path):
    for text in (t for p, t in rendered_files(every_recipe("a4", tmp_path)).items()
                 if p.startswith("recipes/")):
        assert 'source "$CLUSTERPRINT_NCCL_ENV"' in text
        assert "export CLUSTERPRINT_NCCL_ENV=/etc/clusterprint/nccl-env.sh" in text
        assert not re.search(r"^\s*(export )?NCCL_\w+=", text, re.MULTILINE)
        assert 'MOUNTS+=",/usr/local/gib:/usr/local/gib"' in text


def test_parallelism_follows_the_catalog_capped_to_the_gpus(tmp_path):
    blueprint = with_recipes("a4", [
        {"name": "llama3-70b-pretrain", "partition": "a4spot", "nodes": 4},
        {"name": "gemma-7b-sft", "partition": "a4spot", "nodes": 1}], tmp_path)
    files = rendered_files(blueprint)
    assert "-tp 4 -pp 4 train.exit_signal_handler=true" in files[recipe_path(
        "llama3-70b-pretrain")]
    assert "-tp 4 -pp 1 train.exit_signal_handler=true" in files[recipe_path("gemma-7b-sft")]


@pytest.mark.parametrize(("storage", "root"), [
    (None, "/lustre"),
    ({"home": {"filestore": {"capacity_gib": 10240}},
      "buckets": [{"bucket": "my-data", "create": False}]}, "/gcs/my-data"),
    ({"home": {"filestore": {"capacity_gib": 10240}}}, "/home"),
])
def test_checkpoints_go_to_lustre_else_the_bucket_else_home(storage, root, tmp_path):
    changes = {"storage": storage} if storage else {}
    blueprint = with_recipes("a3ultra", [{"name": "llama3-8b-pretrain", "partition": "a3ultra"}],
                             tmp_path, **changes)
    text = rendered_files(blueprint)[recipe_path("llama3-8b-pretrain")]
    assert (f"readonly RUN_DIR=${{CLUSTERPRINT_RUN_DIR:-{root}/$USER/clusterprint/"
            "llama3-8b-pretrain}") in text
    assert "export CLUSTERPRINT_CHECKPOINT_DIR=$RUN_DIR/checkpoints" in text


@pytest.mark.parametrize("tensorboard", [True, False])
def test_the_tensorboard_dir_is_named_next_to_the_checkpoints_only_with_tensorboard(
        tensorboard, tmp_path):
    blueprint = with_recipes("a3ultra", [{"name": "gemma3-1b-rl", "partition": "a3ultra"},
                                         {"name": "llama3-8b-pretrain", "partition": "a3ultra"}],
                             tmp_path, observability={"tensorboard": tensorboard})
    for name in ("gemma3-1b-rl", "llama3-8b-pretrain"):
        text = rendered_files(blueprint)[recipe_path(name)]
        assert ("export CLUSTERPRINT_TENSORBOARD_DIR=$RUN_DIR/tensorboard" in text) == tensorboard
        assert ("TENSORBOARD_DIR" in text.replace("CLUSTERPRINT_TENSORBOARD_DIR=", "")) == (
            tensorboard)


def test_a_data_path_replaces_mock_data_and_is_mounted(tmp_path):
    blueprint = with_recipes("a3ultra", [{"name": "llama3-8b-pretrain", "partition": "a3ultra",
                                          "data_path": "/lustre/data/web_text"}],
                             tmp_path)
    text = rendered_files(blueprint)[recipe_path("llama3-8b-pretrain")]
    assert ("export CLUSTERPRINT_DATA_PATH=${CLUSTERPRINT_DATA_PATH:-"
            "/lustre/data/web_text}") in text
    assert 'TRAIN+=("dataset.blend=[[$CLUSTERPRINT_DATA_PATH],null]")' in text


def test_sft_imports_its_hugging_face_checkpoint_once(tmp_path):
    blueprint = with_recipes("a3ultra", [{"name": "gemma3-1b-sft", "partition": "a3ultra"}],
                             tmp_path)
    text = rendered_files(blueprint)[recipe_path("gemma3-1b-sft")]
    assert "AutoBridge.import_ckpt('google/gemma-3-1b-pt', '$IMPORTED.partial')" in text
    assert 'mv -T "$IMPORTED.partial" "$IMPORTED"' in text
    assert 'TRAIN+=(--pretrained_checkpoint "$IMPORTED")' in text


#: A recipe of each method, by the framework whose checkpoint layout it resumes from.
FRAMEWORKS = {"llama3-8b-pretrain": "megatron", "gemma3-1b-sft": "megatron",
              "gemma3-1b-rl": "nemo-rl"}
#: The trainer: says what it was told to resume from, then exits as the test asks.
TRAINER = r"""#!/bin/bash
echo "trainer resumes from ${CLUSTERPRINT_RESUME_STEP:-scratch}"
exit "$FAKE_TRAINER_EXIT"
"""


def megatron_save(folder: Path, step: int, complete: bool) -> None:
    """Megatron-Bridge's save: iter_NNNNNNN/, then latest_checkpointed_iteration.txt naming
    it once every rank's part is written (a cut save never gets there)."""
    iteration = folder / f"iter_{step:07d}"
    iteration.mkdir()
    (iteration / "common.pt").write_text(f"{step}")
    if complete:
        (folder / "latest_checkpointed_iteration.txt").write_text(f"{step}")


def nemo_rl_save(folder: Path, step: int, complete: bool) -> None:
    """NeMo-RL's save: tmp_step_N/, renamed step_N/ once complete."""
    saving = folder / f"tmp_step_{step}"
    saving.mkdir()
    (saving / "training_info.json").write_text(f'{{"step": {step}}}')
    if complete:
        saving.rename(folder / f"step_{step}")


SAVES = {"megatron": megatron_save, "nemo-rl": nemo_rl_save}


class Start:
    """One start of a rendered recipe as its batch shell on a fake node: its checkpoints in
    ``checkpoints``, its trainer a stand-in that exits as told when the job has ``left``
    seconds of its time limit."""

    def __init__(self, root: Path, script: str, framework: str) -> None:
        self.root = root
        self.fake = root / "fake"
        stubs = self.fake / "bin"
        stubs.mkdir(parents=True)
        for name, text in (("srun", SRUN_STUB), ("squeue", SQUEUE_STUB), ("date", DATE_STUB),
                           ("trainer", TRAINER)):
            (stubs / name).write_text(text)
            (stubs / name).chmod(0o755)
        (stubs / "scontrol").symlink_to(STUBS / "scontrol")
        self.run_dir = root / "run"
        self.checkpoints = self.run_dir / "checkpoints"
        self.checkpoints.mkdir(parents=True)
        self.framework = framework
        self.script = root / "recipe.sbatch"
        self.script.write_text(script)

    def save(self, step: int, complete: bool = True) -> None:
        """A checkpoint of ``step`` in the recipe's framework layout, complete or cut off."""
        SAVES[self.framework](self.checkpoints, step, complete)

    def __call__(self, left: int = 3600, trainer_exit: int = 0,
                 steps: int = 100) -> subprocess.CompletedProcess:
        env = {"PATH": f"{self.fake / 'bin'}:/usr/bin:/bin", "HOME": str(self.root),
               "USER": "alice", "TZ": "UTC", "FAKE": str(self.fake), "FAKE_NOW": str(NOW),
               "FAKE_LEFT": str(left), "FAKE_TRAINER_EXIT": str(trainer_exit),
               "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "a3ultra-0",
               "SLURM_JOB_NUM_NODES": "1", "CLUSTERPRINT_RUN_DIR": str(self.run_dir),
               "CLUSTERPRINT_RECIPE_PROGRAM": str(self.fake / "bin" / "trainer"),
               "CLUSTERPRINT_MAX_STEPS": str(steps)}
        return subprocess.run(["bash", str(self.script)], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30, cwd=self.root)

    def requeues(self) -> list[str]:
        calls = self.fake / "calls"
        lines = calls.read_text().splitlines() if calls.exists() else []
        return [line for line in lines if line.startswith("scontrol requeue")]


def partition_recipes(folder: Path, max_time: str | None = "3-00:00:00") -> dict[str, str]:
    """Each FRAMEWORKS recipe's script on the a3ultra partition with ``max_time`` (None:
    none)."""
    slurm = yaml.safe_load(Path(blueprint_path("a3ultra")).read_text())["slurm"]
    (partition,) = slurm["partitions"]
    partition.pop("max_time", None)
    if max_time is not None:
        partition["max_time"] = max_time
    files = rendered_files(with_recipes("a3ultra", [
        {"name": name, "partition": partition["name"]} for name in FRAMEWORKS], folder,
        slurm=slurm))
    return {name: files[recipe_path(name)] for name in FRAMEWORKS}


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> dict[str, str]:
    return partition_recipes(tmp_path_factory.mktemp("blueprint"))


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("saves", "resumed"), [
    # The newest save cut off mid-write: the one before it, numbers compared as numbers.
    ([(9, True), (10, True), (11, False)], 10),
    ([(40, True), (50, False), (60, False)], 40),
    # Nothing complete: from scratch.
    ([(50, False)], None),
    ([], None),
])
def test_every_start_resumes_from_the_newest_complete_checkpoint_of_its_frameworks_layout(
        name, saves, resumed, recipes, tmp_path):
    start = Start(tmp_path, recipes[name], FRAMEWORKS[name])
    for step, complete in saves:
        start.save(step, complete)
    done = start()
    assert f"trainer resumes from {resumed or 'scratch'}\n" in done.stdout, done.stderr
    if resumed:
        assert f"resuming from step {resumed} of {start.checkpoints} (start 1)" in done.stdout
    else:
        assert (f"starting at step 0: no complete checkpoint in {start.checkpoints}"
                in done.stdout)


# A tracker cut off while written, not a step, or naming a save whose folder is gone.
@pytest.mark.parametrize("tracker", ["", "4x", "release", "40"])
def test_a_megatron_tracker_naming_no_saved_step_resumes_nothing(tracker, recipes, tmp_path):
    start = Start(tmp_path, recipes["llama3-8b-pretrain"], "megatron")
    start.save(30, complete=False)
    (start.checkpoints / "latest_checkpointed_iteration.txt").write_text(tracker)
    assert "trainer resumes from scratch\n" in start().stdout


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("max_time", "left", "requeued"), [
    # The signal comes 300 s before the end, or up to 60 s earlier, and the save takes time:
    # a stop with up to 300 + 90 s left requeues, one earlier is no signal's doing.
    ("3-00:00:00", 391, False),
    ("3-00:00:00", 390, True),
    ("3-00:00:00", 360, True),
    ("3-00:00:00", 60, True),
    # A partition too short for a 300 s lead: half its 5 minutes, the window with it.
    ("0:05:00", 241, False),
    ("0:05:00", 240, True),
])
def test_a_start_stopped_inside_the_signal_window_requeues_itself_and_an_earlier_stop_fails(
        name, max_time, left, requeued, tmp_path):
    script = partition_recipes(tmp_path, max_time)[name]
    start = Start(tmp_path, script, FRAMEWORKS[name])
    start.save(60)
    done = start(left=left)
    if requeued:
        assert done.returncode == 0, done.stdout + done.stderr
        assert start.requeues() == ["scontrol requeue 42"]
        assert (f"time limit near ({left} s left): the ranks saved on SIGTERM at step 60\n"
                "requeueing: the next start resumes from step 60\n") in done.stdout
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert start.requeues() == []
        assert "training stopped at step 60 of 100 (exit 0)" in done.stdout


@pytest.mark.parametrize(("max_time", "minutes", "lead"), [
    ("2:00:00", 120, 300),       # below the recipe's day: the partition's limit
    ("1-00:00:00", 1440, 300),   # the day itself
    ("3-00:00:00", 1440, 300),   # above it: a day, each requeue resuming
    (None, 1440, 300),           # no max_time: a day
    ("UNLIMITED", 1440, 300),
    ("0:30:30", 31, 300),        # Slurm keeps a partition's limit in minutes, rounded up
    ("0:05:00", 5, 150),         # too short for the lead: half the limit
])
def test_the_time_limit_is_a_day_capped_at_the_partitions_max_time(max_time, minutes, lead,
                                                                    tmp_path):
    for name, script in partition_recipes(tmp_path, max_time).items():
        options = sbatch_options(script)
        assert options["time"] == str(minutes), name
        assert options["signal"] == f"TERM@{lead}", name


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("saved", "trainer_exit", "status"), [
    (100, 0, 0),    # its steps reached: success
    (120, 0, 0),
    (99, 0, 1),     # short of them far from the time limit: a failure, even at exit 0
    (None, 0, 1),
    (60, 3, 3),     # the trainer's own failure keeps its status
])
def test_a_start_that_stops_short_of_its_steps_fails_and_one_that_reaches_them_succeeds(
        name, saved, trainer_exit, status, recipes, tmp_path):
    start = Start(tmp_path, recipes[name], FRAMEWORKS[name])
    if saved is not None:
        start.save(saved)
    done = start(trainer_exit=trainer_exit, steps=100)
    assert done.returncode == status, done.stdout + done.stderr
    assert start.requeues() == []
    last = done.stdout.splitlines()[-1]
    if status == 0:
        assert last == f"training finished at step {saved}: checkpoints in {start.checkpoints}"
    else:
        assert last.startswith(f"training stopped at step {saved or 0} of 100 "
                               f"(exit {trainer_exit}): sbatch it again, or scontrol requeue 42")


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_start_that_reaches_its_steps_near_the_time_limit_finishes_without_a_requeue(
        name, recipes, tmp_path):
    start = Start(tmp_path, recipes[name], FRAMEWORKS[name])
    start.save(100)
    done = start(left=320)
    assert done.returncode == 0, done.stdout + done.stderr
    assert start.requeues() == []
    assert done.stdout.splitlines()[-1].startswith("training finished at step 100:")
