"""Instance metadata stays inside the Compute API's limits, or clusterprint refuses it first."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.contract import node_metadata
from clusterprint.contract.node_metadata import (
    TOTAL_LIMIT_BYTES,
    VALUE_LIMIT_BYTES,
    MetadataTooLarge,
    check_size,
)
from clusterprint.render import node_scripts


def test_a_value_of_exactly_256_kib_is_taken_and_one_byte_more_is_refused():
    check_size("vm", {"startup-script": "x" * VALUE_LIMIT_BYTES})
    with pytest.raises(MetadataTooLarge, match="vm: metadata startup-script is 262145 bytes"):
        check_size("vm", {"startup-script": "x" * (VALUE_LIMIT_BYTES + 1)})


def test_all_values_and_keys_together_stay_under_512_kb():
    # Two values of 256 KiB each are each allowed, but with their keys they are too many.
    with pytest.raises(MetadataTooLarge, match=r"vm: its metadata is 524\d\d\d bytes in all"):
        check_size("vm", {"a": "x" * VALUE_LIMIT_BYTES, "b": "x" * VALUE_LIMIT_BYTES})
    # One byte short of 512 KiB, keys included.
    check_size("vm", {"a": "x" * VALUE_LIMIT_BYTES,
                      "b": "x" * (TOTAL_LIMIT_BYTES - 1 - VALUE_LIMIT_BYTES - 2)})


def test_values_only_the_cloud_knows_do_not_count():
    check_size("vm", {"home": object(), "startup-script": "x" * VALUE_LIMIT_BYTES})


def test_a_large_cluster_fits_the_controllers_metadata():
    # Nodes are dynamic, so a cluster's node count never grows its files; its nodesets and
    # partitions do. 64 of each with the longest counts leave ample room.
    nodesets = [{"name": f"gpu{i:02d}", "machine_type": "a3-megagpu-8g", "count": 16384,
                 "max_count": 16384} for i in range(64)]
    bp = Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "large",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": nodesets,
                  "partitions": [{"name": n["name"], "nodesets": [n["name"]]}
                                 for n in nodesets]}})
    scripts = node_scripts(bp)
    controller = {"startup-script": scripts.controller,
                  node_metadata.SLURM_CONFIG: scripts.slurm_config["controller"]}
    check_size("large-controller", controller)
    assert sum(len(v) for v in controller.values()) < TOTAL_LIMIT_BYTES / 2
