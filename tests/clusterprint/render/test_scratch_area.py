"""Lustre scratch users can write to: a node's boot opens a new file system's root as a
sticky, world-writable area (mode 1777, as /tmp), and a recipe run as an unprivileged user
makes its own folder there and writes its checkpoint, while a folder of its name that another
user made first is refused.

The boot runs in the sandbox (tests/support/boot_sandbox.py), whose /lustre is a folder of
the node's own; the recipe then runs as ``nobody`` with that folder bound at /lustre, its
``srun`` and trainer stand-ins (tests/support/recipe_stubs.py) writing a
Megatron checkpoint as the real trainer would.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from clusterprint.render import rendered_files
from clusterprint.render.recipes import recipe_path
from tests.support.boot_sandbox import Node, storage_ready
from tests.support.job_blueprints import with_recipes
from tests.support.recipe_stubs import DATE_STUB, NOW, SQUEUE_STUB, SRUN_STUB, STUBS

RECIPE = "llama3-8b-pretrain"
NOBODY = 65534
#: The trainer: saves step 10 as Megatron-Bridge does, its tracker last.
SAVING_TRAINER = r"""#!/bin/bash
set -eu
mkdir "$CLUSTERPRINT_CHECKPOINT_DIR/iter_0000010"
echo 10 >"$CLUSTERPRINT_CHECKPOINT_DIR/iter_0000010/common.pt"
echo 10 >"$CLUSTERPRINT_CHECKPOINT_DIR/latest_checkpointed_iteration.txt"
"""


@pytest.fixture(scope="module")
def a3ultra(tmp_path_factory) -> dict[str, str]:
    """The a3ultra blueprint (Lustre scratch at /lustre) with a recipe, rendered."""
    return rendered_files(with_recipes("a3ultra", [{"name": RECIPE, "partition": "a3ultra"}],
                                       tmp_path_factory.mktemp("blueprint")))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def booted_login(tmp_path: Path, files: dict[str, str]) -> Node:
    """A login node of the cluster, booted on a new file system (root's 0755 root)."""
    node = storage_ready(Node(tmp_path), "a3ultra")
    lustre = node.file("/lustre/x").parent
    lustre.mkdir(parents=True, exist_ok=True)
    lustre.chmod(0o755)
    node.booted_from(files, "login")
    return node


def test_the_boot_opens_a_new_lustre_root_to_every_user_with_the_sticky_bit(
        sandbox, tmp_path, a3ultra):
    node = booted_login(tmp_path, a3ultra)
    assert mode(node.file("/lustre/x").parent) == 0o1777
    assert "/lustre: a new Lustre root: mode 1777 (sticky)" in node.journal()


def test_a_mode_an_admin_set_is_kept_at_the_next_boot(sandbox, tmp_path, a3ultra):
    node = booted_login(tmp_path, a3ultra)
    lustre = node.file("/lustre/x").parent
    lustre.chmod(0o750)
    node.booted_from(a3ultra, "login")
    assert mode(lustre) == 0o750
    assert "a new Lustre root" not in node.journal()


def run_as_nobody(lustre: Path, script: str) -> subprocess.CompletedProcess:
    """One start of the recipe ``script`` as user ``nobody``, ``lustre`` bound at /lustre."""
    # The job's own files, where nobody can read them (pytest's folders are root's 0700).
    job = Path(tempfile.mkdtemp(prefix="recipe-", dir="/tmp"))
    try:
        job.chmod(0o777)
        bin_ = job / "bin"
        bin_.mkdir(mode=0o755)
        for name, text in (("srun", SRUN_STUB), ("squeue", SQUEUE_STUB), ("date", DATE_STUB),
                           ("trainer", SAVING_TRAINER)):
            (bin_ / name).write_text(text)
            (bin_ / name).chmod(0o755)
        (bin_ / "scontrol").symlink_to(STUBS / "scontrol")
        (job / "recipe.sbatch").write_text(script)
        env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(job), "USER": "nobody",
               "TZ": "UTC", "FAKE": str(job), "FAKE_NOW": str(NOW), "FAKE_LEFT": "3600",
               "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "a3ultra-0",
               "SLURM_JOB_NUM_NODES": "1", "CLUSTERPRINT_RECIPE_PROGRAM": str(bin_ / "trainer"),
               "CLUSTERPRINT_MAX_STEPS": "10"}
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c",
             f'set -e; mount --bind "$0" /lustre; cd "$1"; exec setpriv --reuid={NOBODY} '
             f'--regid={NOBODY} --clear-groups bash "$1/recipe.sbatch"', str(lustre), str(job)],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(job)


def test_a_recipe_run_as_an_unprivileged_user_writes_its_checkpoint_on_lustre(
        sandbox, tmp_path, a3ultra):
    lustre = booted_login(tmp_path, a3ultra).file("/lustre/x").parent
    done = run_as_nobody(lustre, a3ultra[recipe_path(RECIPE)])
    assert done.returncode == 0, done.stdout + done.stderr
    (own,) = lustre.iterdir()
    assert own.name == "nobody" and own.stat().st_uid == NOBODY
    (tracker,) = own.rglob("latest_checkpointed_iteration.txt")
    assert tracker.read_text() == "10\n" and tracker.stat().st_uid == NOBODY
    assert tracker.parent.name == "checkpoints"


def test_a_folder_of_the_user_s_name_that_another_user_made_first_is_refused(
        sandbox, tmp_path, a3ultra):
    lustre = booted_login(tmp_path, a3ultra).file("/lustre/x").parent
    squatted = lustre / "nobody"
    squatted.mkdir(mode=0o777)
    os.chown(squatted, 1000, 1000)
    squatted.chmod(0o777)
    done = run_as_nobody(lustre, a3ultra[recipe_path(RECIPE)])
    assert done.returncode == 1
    assert "/lustre/nobody is not yours but " in done.stderr
    assert "CLUSTERPRINT_RUN_DIR to a folder of your own" in done.stderr
    assert list(squatted.iterdir()) == []
