"""Checked blueprints of each topology case (clusterprint/render/topology.py), made from the
reference blueprints: a tree family's cluster, an A4X one (tree and NVLink blocks), both in
one cluster, a GPU partition beside CPU nodes, and clusters with no topology at all.

No reference blueprint has A4X: ``a4x_cluster`` is a4's with both nodesets A4X (4 GPUs a
node), its recipes ones that run on 4 GPUs a node. Every case is checked as a user's
blueprint is, so what the tests render from it is what ``clusterprint render`` would write.
"""

from __future__ import annotations

import json
from typing import Any

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text, load_checked
from tests.support.blueprint_texts import apply_overrides, describe
from tests.support.paths import blueprint_path

#: The only family whose nodes Slurm also places in NVLink blocks.
A4X = "a4x-highgpu-4g"
#: A GPU family Google publishes no physical topology for.
G2 = "g2-standard-8"
#: The CPU nodeset ``mixed_partition`` adds beside a4's GPUs.
CPU_NODESET = {"name": "cpu", "machine_type": "n2-standard-4", "count": 1}


def reference_with(name: str, overrides: dict[str, Any] | None = None) -> Blueprint:
    """Reference blueprint ``name`` with ``overrides`` (dotted keys, as blueprint_texts
    takes them), checked: a finding fails the test that asked for it."""
    document = load_checked(blueprint_path(name)).model_dump(mode="json", exclude_none=True)
    text = json.dumps(apply_overrides(document, overrides or {}))
    checked = check_text(f"{name}.json", text, is_json=True)
    assert checked.ok and checked.blueprint, describe(checked)
    return checked.blueprint


def a4x_cluster(overrides: dict[str, Any] | None = None) -> Blueprint:
    """a4's cluster on A4X: nodesets a4 (4 reserved) and a4spot (2, up to 8) on their GPU
    network, one partition each; recipes of 4 nodes on a4 and of 8 on a4spot."""
    return reference_with("a4", {
        "name": "a4x", "slurm.nodesets[0].machine_type": A4X,
        "slurm.nodesets[1].machine_type": A4X,
        "recipes": [{"name": "gemma-7b-sft", "partition": "a4", "nodes": 4},
                    {"name": "gemma-2b-sft", "partition": "a4spot", "nodes": 8}],
        **(overrides or {})})


def tree_and_blocks() -> Blueprint:
    """a4 whose spot nodeset is A4X: an A4 partition, an A4X one, and partition ``both``
    over the two."""
    return reference_with("a4", {
        "slurm.nodesets[1].machine_type": A4X,
        "slurm.partitions[2]": {"name": "both", "nodesets": ["a4", "a4spot"]}})


def mixed_partition() -> Blueprint:
    """a4 with a CPU nodeset, in partition ``mixed`` beside the spot GPUs."""
    return reference_with("a4", {
        "slurm.nodesets[2]": CPU_NODESET,
        "slurm.partitions[2]": {"name": "mixed", "nodesets": ["a4spot", "cpu"]}})


def cpu_only() -> Blueprint:
    """cpu-small: CPU nodes only."""
    return load_checked(blueprint_path("cpu-small"))


def g2_only() -> Blueprint:
    """cpu-small whose nodes are G2: GPUs, but a family with no physical topology."""
    return reference_with("cpu-small", {"slurm.nodesets[0].machine_type": G2})


def without_gpu_network(blueprint: str = "a4") -> Blueprint:
    """Reference blueprint ``blueprint`` (or ``a4x``) built with ``gpu_networks: none``."""
    overrides = {"network.gpu_networks": "none"}
    return a4x_cluster(overrides) if blueprint == "a4x" else reference_with(blueprint, overrides)
