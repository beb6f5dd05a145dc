"""The blueprint's training recipes as sbatch jobs that checkpoint, requeue and resume.

Every entry of ``recipes`` becomes ``recipes/<name>.sbatch``: the catalog's training run
(clusterprint/facts/catalog.py RECIPES) in the container of the partition's machine family
(machines.recipe_software), with the NCCL environment the node rendered, checkpoints on
the cluster's shared storage, a signal before the time limit that makes the ranks save and
the job requeue itself, and a resume from the newest complete checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.blueprint.model import Blueprint, RecipeJob
from clusterprint.blueprint.slurm_time import slurm_minutes, slurm_time_seconds
from clusterprint.facts import catalog, gpu_software, machines
from clusterprint.render.environment import render
from clusterprint.render.nccl_job import fabric_networking, staged_job_path
from clusterprint.render.topology import close_nodes

#: The job's time limit where the partition allows it (gpu-recipes' A4 submit.slurm asks
#: 24 hours); a longer run goes on through requeues, each resuming.
RECIPE_MINUTES = 24 * 60
#: Seconds before the time limit that Slurm sends the ranks SIGTERM to save and stop: it
#: may come up to 60 s earlier (sbatch(1) --signal), and a 70B checkpoint to Lustre takes
#: minutes.
SIGNAL_LEAD_S = 300
#: Under the storage root: one folder per user and recipe holds checkpoints and logs.
RUN_FOLDER = "clusterprint"


@dataclass(frozen=True)
class RecipeRun:
    """What one recipe asks Slurm for, runs, and where it keeps its state."""

    job: RecipeJob
    recipe: catalog.Recipe
    partition: str
    machine_type: str
    gpus_per_node: int
    nodesets: tuple[str, ...]
    minutes: int
    software: gpu_software.RecipeSoftware
    image: str
    mounts: gpu_software.FabricMounts
    networking: gpu_software.GpuNetworking
    storage_root: str
    tensor_parallel: int
    pipeline_parallel: int
    #: sbatch options that keep its nodes close in the network (render/topology.py)
    close: tuple[str, ...] = ()
    #: Whether the user's folder under ``storage_root`` must be the user's own: on Lustre,
    #: whose root every user can write (storage.sh.j2), and /home; not on a bucket, where
    #: gcsfuse shows every file as root's.
    owns_user_folder: bool = True

    @property
    def tasks_per_node(self) -> int:
        """One task per node (torchrun, Ray) or one per GPU (srun ranks)."""
        srun_ranks = self.recipe.method != "rl" and self.software.launch == "srun"
        return self.gpus_per_node if srun_ranks else 1


def recipe_path(name: str) -> str:
    """Where a recipe lands under ``clusterprint render --out`` (and the login node stages it
    under /opt/clusterprint/recipes/)."""
    return f"recipes/{name}.sbatch"


def storage_root(blueprint: Blueprint) -> str:
    """Where checkpoints go: the first Lustre (fast, shared) else the first bucket's mount,
    else the shared /home."""
    if blueprint.storage.lustre:
        return blueprint.mount_of(blueprint.storage.lustre[0])
    if blueprint.storage.buckets:
        return blueprint.storage.buckets[0].mount_path
    return "/home"


def recipe_run(blueprint: Blueprint, job: RecipeJob) -> RecipeRun | None:
    """The recipe's run, or None where its partition has no nodeset that can hold it (the
    recipes.* rules refuse such a blueprint)."""
    recipe = catalog.RECIPES[job.name]
    partition = next((p for p in blueprint.slurm.partitions if p.name == job.partition), None)
    nodesets = [n for n in blueprint.slurm.nodesets
                if partition and n.name in partition.nodesets
                and n.gpus >= max(recipe.min_gpus_per_node, 1)]
    if not partition or not nodesets:
        return None
    chosen = nodesets[0]
    software = machines.recipe_software(chosen.machine_type)
    limit = slurm_time_seconds(partition.max_time) if partition.max_time else None
    gpus = job.nodes * chosen.gpus
    tensor = min(recipe.tensor_parallel, chosen.gpus)
    networking = fabric_networking(blueprint, chosen.machine_type)
    return RecipeRun(
        job=job, recipe=recipe, partition=partition.name, machine_type=chosen.machine_type,
        gpus_per_node=chosen.gpus,
        nodesets=tuple(n.name for n in nodesets if n.machine_type == chosen.machine_type),
        minutes=RECIPE_MINUTES if limit is None else min(RECIPE_MINUTES, slurm_minutes(limit)),
        software=software,
        image=gpu_software.NEMO_RL_IMAGE if recipe.method == "rl" else software.image,
        mounts=gpu_software.FABRIC_MOUNTS[networking], networking=networking,
        storage_root=storage_root(blueprint), tensor_parallel=tensor,
        pipeline_parallel=max(1, min(recipe.pipeline_parallel, gpus // tensor)),
        close=tuple(close_nodes(blueprint, partition, job.nodes)),
        owns_user_folder=bool(blueprint.storage.lustre) or not blueprint.storage.buckets)


def render_recipe(blueprint: Blueprint, run: RecipeRun) -> str:
    """The sbatch script of one recipe."""
    return render("recipes/recipe.sbatch.j2", cluster=blueprint.name, run=run,
                  recipe=run.recipe, path=staged_job_path(recipe_path(run.job.name)),
                  signal_lead_s=min(SIGNAL_LEAD_S, run.minutes * 60 // 2),
                  run_folder=RUN_FOLDER, env_file=gpu_software.NCCL_ENV_FILE,
                  tensorboard=blueprint.observability.tensorboard,
                  bridge_dir=gpu_software.MEGATRON_BRIDGE_DIR,
                  nemo_rl_dir=gpu_software.NEMO_RL_DIR)


def render_recipes(blueprint: Blueprint) -> dict[str, str]:
    """Every blueprint recipe's job by its rendered path."""
    return {recipe_path(job.name): render_recipe(blueprint, run) for job in blueprint.recipes
            if (run := recipe_run(blueprint, job))}
