"""Recipe rules: a recipe runs on an existing partition that can hold it and its model."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, error
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.names import unknown_reference
from clusterprint.blueprint.rules.registry import rule
from clusterprint.facts import catalog


@rule("recipes.partition")
def check_recipe_partition(bp: Blueprint) -> Iterator[Finding]:
    """A recipe is submitted to a partition that exists, has the GPUs and enough nodes."""
    partitions = {p.name: p for p in bp.slurm.partitions}
    for index, job in enumerate(bp.recipes):
        partition = partitions.get(job.partition)
        if partition is None:
            yield unknown_reference(("recipes", index, "partition"), job.partition,
                                    list(partitions), "partition", "partitions")
            continue
        nodesets = [bp.slurm.nodeset(name) for name in partition.nodesets]
        if None in nodesets:
            continue  # names.partition-nodesets reports the missing nodeset
        needed = catalog.RECIPES[job.name].min_gpus_per_node
        # Slurm places a job asking for N GPUs per node only on nodes that have them, so a
        # partition mixing GPU and CPU nodesets holds as many nodes as its GPU nodesets.
        able = [ns for ns in nodesets if ns and ns.gpus >= needed]
        if not able:
            most = max(ns.gpus for ns in nodesets if ns)
            yield error(("recipes", index, "partition"),
                        f"{job.name} needs at least {needed} GPU(s) per node; partition "
                        f"{partition.name} has {most}", "submit it to a GPU partition")
            continue
        capacity = sum(ns.upper_bound for ns in able)
        holds = (f"holds ({capacity})" if len(able) == len(nodesets) else
                 f"holds with at least {needed} GPU(s) per node ({capacity})")
        if job.nodes > capacity:
            yield error(("recipes", index, "nodes"),
                        f"{job.nodes} nodes is more than partition {partition.name} {holds}",
                        f"use at most {capacity}")


@rule("recipes.gpus")
def check_recipe_gpus(bp: Blueprint) -> Iterator[Finding]:
    """A recipe's nodes hold the GPUs its model needs (the catalog's number per recipe):
    fewer do not fit the model as its public configuration shards it."""
    partitions = {p.name: p for p in bp.slurm.partitions}
    for index, job in enumerate(bp.recipes):
        recipe = catalog.RECIPES[job.name]
        partition = partitions.get(job.partition)
        nodesets = [bp.slurm.nodeset(name) for name in partition.nodesets] if partition else []
        # The nodes the job can land on; recipes.partition reports a partition with none.
        per_node = [ns.gpus for ns in nodesets if ns and ns.gpus >= recipe.min_gpus_per_node
                    and ns.gpus]
        if not per_node or job.nodes * min(per_node) >= recipe.gpus:
            continue
        nodes = -(-recipe.gpus // min(per_node))
        yield error(("recipes", index, "nodes"),
                    f"{job.name} needs {recipe.gpus} GPUs; {job.nodes} node(s) x "
                    f"{min(per_node)} GPU(s) of partition {partition.name} have "
                    f"{job.nodes * min(per_node)}", f"use at least {nodes} nodes")


@rule("recipes.data-path")
def check_recipe_data_path(bp: Blueprint) -> Iterator[Finding]:
    """`data_path` replaces pretraining's mock data; SFT and RL read their configuration's
    dataset, so a path there would be silently ignored."""
    for index, job in enumerate(bp.recipes):
        method = catalog.RECIPES[job.name].method
        if job.data_path is not None and method != "pretrain":
            yield error(("recipes", index, "data_path"),
                        f"{job.name} is {method.upper()}, which takes its dataset from its "
                        f"configuration: data_path is for pretraining recipes only",
                        "remove data_path")
