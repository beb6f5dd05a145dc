"""The proof a user runs first: one NCCL all-reduce job per GPU partition.

Every partition with a GPU nodeset gets `jobs/nccl-allreduce-<partition>.sbatch`. Where the
partition mixes machine types the job is pinned (``--constraint``) to the nodesets of one
of them, the first on a GPU network else the first with GPUs, so the bandwidth it is held
to is that machine's. Families without a GPU network (A2, G2) get the job too: NCCL over
the VM's NIC, printed, with no threshold to fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from clusterprint.blueprint import gpu_fabric
from clusterprint.blueprint.model import Blueprint, Nodeset, Partition
from clusterprint.blueprint.slurm_time import slurm_minutes, slurm_time_seconds
from clusterprint.facts import gpu_software, machines
from clusterprint.render.environment import render
from clusterprint.render.topology import close_nodes

#: The job's time limit when the partition allows it: the first run imports the image
#: (the toolkit's README: ~10 minutes for the PyTorch image) and builds nccl-tests.
JOB_MINUTES = 45
#: Nodes the job runs on unless `sbatch --nodes=N` says otherwise.
JOB_NODES = 2
#: Where the login node stages the rendered jobs/ and recipes/ folders for every user.
STAGED_ROOT = "/opt/clusterprint"
STAGED_JOBS = f"{STAGED_ROOT}/jobs"
STAGED_RECIPES = f"{STAGED_ROOT}/recipes"


@dataclass(frozen=True)
class NcclJob:
    """What one partition's job asks Slurm for and what it holds the result to."""

    partition: str
    machine_type: str
    networking: gpu_software.GpuNetworking
    nodesets: tuple[str, ...]
    gpus: int
    nodes: int
    minutes: int
    proof: gpu_software.NcclProof
    mounts: gpu_software.FabricMounts
    #: sbatch options that keep its nodes close in the network (render/topology.py)
    close: tuple[str, ...] = ()


def nccl_job_path(partition: str) -> str:
    """Where a partition's job lands under ``clusterprint render --out`` (and in jobs/)."""
    return f"jobs/nccl-allreduce-{partition}.sbatch"


def staged_job_path(rendered: str) -> str:
    """Where the login node puts a rendered job (``jobs/NAME``, ``recipes/NAME``) for every
    user: the same folder under STAGED_ROOT."""
    return f"{STAGED_ROOT}/{PurePosixPath(rendered)}"


def fabric_networking(blueprint: Blueprint, machine_type: str) -> gpu_software.GpuNetworking:
    """The fabric the nodes really get: none where the blueprint builds no GPU networks."""
    family = machines.gpu_family(machine_type)
    kind = family.networking if family else "none"
    return kind if kind in gpu_fabric.fabric_kinds(blueprint) else "none"


def _minutes(partition: Partition) -> int:
    limit = slurm_time_seconds(partition.max_time) if partition.max_time else None
    return JOB_MINUTES if limit is None else min(JOB_MINUTES, slurm_minutes(limit))


def nccl_job(blueprint: Blueprint, partition: Partition) -> NcclJob | None:
    """The partition's job, or None when none of its nodesets has GPUs."""
    nodesets = [n for n in blueprint.slurm.nodesets if n.name in partition.nodesets and n.gpus]
    if not nodesets:
        return None
    # The first nodeset on a GPU network, else the first with GPUs (max keeps the first).
    chosen = max(nodesets, key=lambda n: fabric_networking(blueprint, n.machine_type) != "none")
    alike: list[Nodeset] = [n for n in nodesets if n.machine_type == chosen.machine_type]
    networking = fabric_networking(blueprint, chosen.machine_type)
    proof = machines.nccl_proof(chosen.machine_type, networking)
    nodes = min(JOB_NODES, sum(n.upper_bound for n in alike))
    return NcclJob(partition=partition.name, machine_type=chosen.machine_type,
                   networking=networking, nodesets=tuple(n.name for n in alike),
                   gpus=chosen.gpus, nodes=nodes, minutes=_minutes(partition), proof=proof,
                   mounts=gpu_software.FABRIC_MOUNTS[networking],
                   close=tuple(close_nodes(blueprint, partition, nodes)))


def nccl_jobs(blueprint: Blueprint) -> list[NcclJob]:
    """Every GPU partition's job, in the blueprint's partition order."""
    return [job for p in blueprint.slurm.partitions if (job := nccl_job(blueprint, p))]


def render_nccl_job(blueprint: Blueprint, job: NcclJob) -> str:
    """The sbatch script of one partition's job."""
    return render("jobs/nccl-allreduce.sbatch.j2", cluster=blueprint.name, job=job,
                  path=staged_job_path(nccl_job_path(job.partition)),
                  sizes=gpu_software.NCCL_MESSAGE_SIZES,
                  tests_repository=gpu_software.NCCL_TESTS_REPOSITORY,
                  tests_version=gpu_software.NCCL_TESTS_VERSION,
                  env_file=gpu_software.NCCL_ENV_FILE)


def render_nccl_jobs(blueprint: Blueprint) -> dict[str, str]:
    """Every GPU partition's job by its rendered path."""
    return {nccl_job_path(job.partition): render_nccl_job(blueprint, job)
            for job in nccl_jobs(blueprint)}
