"""Clusters whose nodesets differ in GPUs boot from one rendered gres.conf on real Slurm 26.05.

A CPU nodeset beside a GPU one (a cheap debug partition), and H100 nodesets of 4 and 8
GPUs: every node registers from its compute script's ``--conf`` line, the CPU node with no
GRES, each GPU node with its typed GPUs bound to their device files; a job step gets exactly
the GPUs it asked for, by their indices (the job holds its whole node: GPU partitions are
exclusive); no node is drained. A GPU node's GPUs are what Slurm's gpu/nvidia plugin finds in
the (fake) driver files of its node (tests/support/local_slurm.py).
"""

from __future__ import annotations

import re

import pytest

from clusterprint.blueprint.model import Blueprint

#: Each cluster: its nodesets by machine type, and the GRES each node must register with.
SHAPES = {
    "debug-beside-b200": {"cpu": ("n2-standard-4", None), "b200": ("a4-highgpu-8g", "b200:8")},
    "h100-4-and-8": {"four": ("a3-highgpu-4g", "h100:4"), "eight": ("a3-megagpu-8g", "h100:8"),
                     "debug": ("n2-standard-4", None)},
}


def cluster_of(name: str, nodesets: dict[str, tuple[str, str | None]]) -> Blueprint:
    """A blueprint with these nodesets, a partition each and one over all of them."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": name,
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": n, "machine_type": m, "count": 1}
                               for n, (m, _) in nodesets.items()],
                  "partitions": [*({"name": n, "nodesets": [n]} for n in nodesets),
                                 {"name": "all", "nodesets": list(nodesets)}]}})


def drained(cluster, node: str) -> str:
    """The node's reason when it is down or drained (``sinfo -R``), else ""."""
    return cluster.run("sinfo", "-h", "-R", "-n", node, "-o", "%N %E").strip()


@pytest.mark.parametrize("shape", SHAPES)
def test_every_node_of_a_mixed_cluster_registers_with_its_own_gpus(shape, local_slurm):
    blueprint = cluster_of(shape, SHAPES[shape])
    cluster = local_slurm(blueprint)
    for nodeset in blueprint.slurm.nodesets:
        node, gres = f"{nodeset.name}-vm", SHAPES[shape][nodeset.name][1]
        slurmd = cluster.start_node(node, cluster.compute_node_conf(nodeset.name), nodeset.gpus)
        shown = cluster.run("scontrol", "show", "node", node)
        assert f"Gres={f'gpu:{gres}' if gres else '(null)'}" in shown
        state = re.search(r"State=(\S+)", shown)[1]
        assert state.split("+")[0] == "IDLE" and "DRAIN" not in state, state
        assert drained(cluster, node) == ""
        if gres:
            check_gpu_jobs(cluster, node, gres)
        else:
            # A GPU job cannot land on the CPU node.
            refused = cluster.run_failing("srun", "-p", nodeset.name, "--gres=gpu:1", "-N1",
                                          "--immediate=5", "true")
            assert "Requested node configuration is not available" in refused
        slurmd.stop()


def check_gpu_jobs(cluster, node: str, gres: str) -> None:
    """Jobs on ``node`` get exactly the GPUs they ask for, by type and index, and no more."""
    gres_type, count = gres.split(":")
    for asked in (int(count) // 2, int(count)):
        # While it runs, the job reads back the device indices Slurm bound it to (a pattern
        # that does not match itself in the job's SubmitLine, which 26.05 shows).
        out = cluster.run("srun", "-w", node, "-p", "all", f"--gres=gpu:{gres_type}:{asked}",
                          "-N1", "bash", "-c", 'echo "$CUDA_VISIBLE_DEVICES"; '
                          'scontrol show -d job "$SLURM_JOB_ID" | '
                          'grep -o " GRES=gpu:[^ ]*(IDX:[^ ]*"')
        devices, bound = out.split()
        assert devices == ",".join(map(str, range(asked)))
        # The partition gives whole nodes (Exclusive=NODE): the job holds every GPU
        # of its node, by index, and its step the ones it asked for.
        assert bound == f"GRES=gpu:{gres_type}:{count}(IDX:0-{int(count) - 1})"
    # A request without a type (job scripts written for any GPU) is served by the typed GPUs.
    untyped = cluster.run("srun", "-w", node, "-p", "all", "--gres=gpu:1", "-N1", "bash", "-c",
                          'echo "$CUDA_VISIBLE_DEVICES"')
    assert untyped.split() == ["0"]
    # One GPU more than the node has is never granted.
    refused = cluster.run_failing("srun", "-w", node, "-p", "all",
                                  f"--gres=gpu:{gres_type}:{int(count) + 1}", "-N1",
                                  "--immediate=5", "true")
    assert "Requested node configuration is not available" in refused
