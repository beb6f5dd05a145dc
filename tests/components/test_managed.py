"""ManagedTrainingCluster: the blueprint as one Cluster Director resource."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterprint.blueprint.model import Nodeset
from clusterprint.blueprint.validate import load_checked
from clusterprint.components import program
from clusterprint.components.managed import ManagedTrainingCluster, managed_reservation
from clusterprint.contract import node_metadata

CLUSTER = "gcp:hypercomputecluster/cluster:Cluster"
MANAGED = str(Path(__file__).parent / "blueprints" / "managed.yaml")


def managed(cloud) -> tuple[dict, dict]:
    """Declare the managed test blueprint; return the Cluster's inputs and the exports."""
    bp = load_checked(MANAGED)
    exports = cloud.run(lambda: ManagedTrainingCluster(bp.name, bp).exports)
    return cloud.one(CLUSTER).inputs, exports


def keys_and_strings(value: Any) -> Iterator[str]:
    """Every mapping key and string value anywhere in a resource's inputs."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from keys_and_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys_and_strings(item)
    elif isinstance(value, str):
        yield value


def test_no_node_gets_a_self_managed_startup_script(cloud):
    cluster, _ = managed(cloud)
    found = list(keys_and_strings(cluster))
    assert "startupScript" not in found
    metadata_keys = (node_metadata.HOME_SOURCE, node_metadata.MUNGE_SECRET,
                     node_metadata.ROLE, node_metadata.lustre_source(""))
    assert not [text for text in found if any(key in text for key in metadata_keys)]
    controller = node_metadata.controller_hostname("a4managed")
    assert not [text for text in found if controller in text or ":6817" in text]


def test_the_blueprint_becomes_one_protected_cluster(cloud):
    cluster, exports = managed(cloud)
    assert cluster["clusterId"] == "a4managed" and cluster["location"] == "us-central1"
    assert cloud.one(CLUSTER).protect
    assert not cloud.of_type("gcp:compute/instance:Instance")
    assert exports["partitions"] == {"a4": ["a4"], "flex": ["flex"]}
    assert "dashboard" in exports


def test_compute_follows_each_nodesets_provisioning(cloud):
    cluster, _ = managed(cloud)
    compute = {c["id"]: c["config"] for c in cluster["computeResources"]}
    assert compute["a4"] == {"newReservedInstances": {
        "reservation": "projects/my-project/zones/us-central1-b/reservations/a4-res"}}
    flex = compute["flex"]["newFlexStartInstances"]
    assert flex["zone"] == "us-central1-b" and flex["machineType"] == "a4-highgpu-8g"
    assert flex["maxDuration"] == "604800s"


def test_slurm_layout_sizes_and_mounts(cloud):
    cluster, _ = managed(cloud)
    slurm = cluster["orchestrator"]["slurm"]
    sets = {s["id"]: s for s in slurm["nodeSets"]}
    assert (sets["a4"]["staticNodeCount"], sets["a4"]["maxDynamicNodeCount"]) == ("2", "4")
    assert sets["a4"]["computeInstance"]["bootDisk"] == {"sizeGb": "200",
                                                         "type": "hyperdisk-balanced"}
    mounts = {m["id"]: m["localMount"] for m in sets["flex"]["storageConfigs"]}
    assert mounts == {"home": "/home", "scratch": "/lustre/scratch", "bucket-0": "/gcs/data"}
    assert slurm["loginNodes"]["enablePublicIps"] is False
    assert slurm["defaultPartition"] == "a4"


def test_storage_is_created_by_the_api_with_string_sizes(cloud):
    cluster, _ = managed(cloud)
    storage = {s["id"]: s["config"] for s in cluster["storageResources"]}
    home = storage["home"]["newFilestore"]
    assert home["tier"] == "ZONAL" and home["fileShares"] == [{"capacityGb": "2560",
                                                              "fileShare": "home"}]
    assert home["filestore"] == (
        "projects/my-project/locations/us-central1-b/instances/a4managed-home")
    lustre = storage["scratch"]["newLustre"]
    assert (lustre["capacityGb"], lustre["perUnitStorageThroughput"]) == ("18000", "500")
    assert storage["bucket-0"] == {"existingBucket": {"bucket": "my-project-a4-data"}}


def test_program_picks_the_managed_cluster(cloud):
    cloud.run(lambda: program.build(MANAGED).exports["partitions"])
    assert cloud.one("clusterprint:index:ManagedTrainingCluster").name == "a4managed"


@pytest.mark.parametrize(("reservation", "expected"), [
    ("r1", "projects/p-roject/zones/z-a/reservations/r1"),
    ("projects/other-proj/reservations/r1", "projects/other-proj/zones/z-a/reservations/r1"),
])
def test_reservation_names_gain_the_zone(reservation, expected):
    nodeset = Nodeset(name="n", machine_type="a4-highgpu-8g", count=1,
                      provisioning="reservation", reservation=reservation)
    assert managed_reservation(nodeset, "p-roject", "z-a") == expected


def test_a_reservation_block_is_refused():
    nodeset = Nodeset(name="n", machine_type="a4-highgpu-8g", count=1, provisioning="reservation",
                      reservation="r1/reservationBlocks/b1")
    with pytest.raises(ValueError, match="not a block"):
        managed_reservation(nodeset, "p-roject", "z-a")
