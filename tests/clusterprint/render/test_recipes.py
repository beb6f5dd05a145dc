"""Training recipes: one sbatch job per blueprint recipe, valid shell, asking for whole GPU
nodes of its partition, in its family's container and launch form, checkpointing where the
cluster keeps data. tests/slurm/test_recipes.py runs them on real Slurm."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterprint.facts import catalog
from clusterprint.render import rendered_files
from clusterprint.render.recipes import recipe_path
from tests.support.job_blueprints import FAMILIES, every_recipe, sbatch_options, with_recipes


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
