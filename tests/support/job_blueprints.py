"""Blueprints and job texts the NCCL-job and recipe tests share with their real-Slurm
counterparts: hand-made GPU clusters rendering needs no validation for, the reference
blueprints with recipes, and the #SBATCH options of a rendered job."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import catalog
from tests.support.paths import blueprint_path


def blueprint_of(nodesets: list[dict], partitions: list[dict], **network) -> Blueprint:
    """A blueprint of these nodesets and partitions (rendering needs no validation)."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "proof",
        "region": "us-central1", "zone": "us-central1-a", "network": network,
        "slurm": {"nodesets": nodesets, "partitions": partitions}})


def nodeset(name: str, machine_type: str, count: int = 2) -> dict:
    return {"name": name, "machine_type": machine_type, "count": count}


A3HIGH = blueprint_of([nodeset("h100", "a3-highgpu-8g")], [{"name": "gpu", "nodesets": ["h100"]}])
#: A cheap debug nodeset beside the GPUs, in one partition and in its own.
MIXED = blueprint_of(
    [nodeset("cpu", "n2-standard-4"), nodeset("mega", "a3-megagpu-8g"),
     nodeset("l4", "g2-standard-96", count=1)],
    [{"name": "all", "nodesets": ["cpu", "l4", "mega"]}, {"name": "debug", "nodesets": ["cpu"]},
     {"name": "l4", "nodesets": ["l4"], "max_time": "0:10:00"}])
NO_FABRIC = blueprint_of([nodeset("mega", "a3-megagpu-8g")],
                         [{"name": "mega", "nodesets": ["mega"]}], gpu_networks="none")
#: Reserved and spot nodes of one machine type in one partition: the job may use either.
TWO_NODESETS = blueprint_of([nodeset("a4", "a4-highgpu-8g", count=1),
                             nodeset("a4spot", "a4-highgpu-8g", count=1)],
                            [{"name": "a4", "nodesets": ["a4", "a4spot"]}])
GENERATED = {"mixed": MIXED, "a3high": A3HIGH, "no-fabric": NO_FABRIC,
             "two-nodesets": TWO_NODESETS}


def sbatch_options(job: str) -> dict[str, str]:
    """The job's #SBATCH options by name."""
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S*))?$", job, re.MULTILINE))


#: Where each family's recipes are drawn: a3ultra launches torchrun per node, a4 srun ranks.
FAMILIES = {"a3ultra": "a3ultra", "a4": "a4spot"}


def with_recipes(name: str, recipes: list[dict], folder: Path, **changes) -> Blueprint:
    """The reference blueprint ``name`` with ``recipes`` (and top-level ``changes``), checked."""
    data = yaml.safe_load(Path(blueprint_path(name)).read_text())
    data.update(recipes=recipes, **changes)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_checked(str(path))


def every_recipe(name: str, folder: Path) -> Blueprint:
    """The blueprint with every catalog recipe, each on the nodes its model needs."""
    return with_recipes(name, [
        {"name": r.name, "partition": FAMILIES[name], "nodes": -(-r.gpus // 8)}
        for r in catalog.RECIPES.values()], folder)
