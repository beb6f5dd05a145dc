"""Nodes join Slurm 26.05's topology where the metadata server places them, and jobs follow it.

Each node's Topology= word comes from the node program the compute script runs
(clusterprint/node/topology.py, as a process) on the ``physical_host_topology`` its VM's
metadata server gives (the compute script's reading of it is proven in the sandbox:
tests/clusterprint/render/test_node_scripts_boot.py); slurmd registers with the rendered
nodeset's --conf line and that word, as the compute script starts it. The nodes register one
after the other (one slurmd at a time: tests/support/local_slurm.py) and stay idle in
slurmctld's view, so where the scheduler would place a job is asked with ``sbatch
--test-only``: the real scheduler's answer, without starting the job. On A4X the
controller's NVLink-blocks program runs as a process from the Slurm root against the same
slurmctld.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.node import nccl_blocks, nvlink_blocks, topology
from clusterprint.render import topology as render_topology
from clusterprint.render.nccl_job import nccl_job_path
from tests.support.local_slurm import sbatch_test_only

PLACE = Path(topology.__file__)
BLOCKS_PROGRAM = Path(nvlink_blocks.__file__)
NCCL_BLOCKS = Path(nccl_blocks.__file__)
#: Two blocks of one cluster, a sub-block each, two hosts each; a third host in block 2.
CLUSTER = "us-central1-cluster-jfhb"
HOSTS = {
    "b1-h1": {"cluster": CLUSTER, "block": "a1" * 16, "subBlock": "b1" * 16, "host": "c1" * 16},
    "b1-h2": {"cluster": CLUSTER, "block": "a1" * 16, "subBlock": "b1" * 16, "host": "c2" * 16},
    "b2-h1": {"cluster": CLUSTER, "block": "a2" * 16, "subBlock": "b2" * 16, "host": "c3" * 16},
    "b2-h2": {"cluster": CLUSTER, "block": "a2" * 16, "subBlock": "b2" * 16, "host": "c4" * 16},
    "b2-h3": {"cluster": CLUSTER, "block": "a2" * 16, "subBlock": "b2" * 16, "host": "c5" * 16},
}
#: Where each node first boots.
FIRST = {"n1": "b1-h1", "n2": "b1-h2", "n3": "b2-h1", "n4": "b2-h2"}
TREE_FAMILIES = ("a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g")


def cluster_of(machine_type: str) -> Blueprint:
    """One reserved nodeset of ``machine_type`` on its GPU network, one partition."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "topo",
        "region": "us-central1", "zone": "us-central1-b",
        "slurm": {"nodesets": [{"name": "gpu", "machine_type": machine_type, "count": 4,
                                "max_count": 6}],
                  "partitions": [{"name": "gpu", "nodesets": ["gpu"]}]}})


def word(cluster, node: str, host: str | None) -> str:
    """The Topology= word the node program prints for ``node`` on ``host`` (None: the
    metadata server has no place for it, and the boot's file of it is empty)."""
    value = cluster.root / f"topology-{node}.json"
    value.write_text(json.dumps(HOSTS[host]) if host else "")
    done = subprocess.run([sys.executable, str(PLACE), "--tree", render_topology.TREE,
                           "--node", node, "--value", str(value)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def register(cluster, node: str, host: str | None, rebooted: bool = False) -> None:
    """The node boots on ``host``: slurmd registers with its nodeset's line and its place."""
    conf = f"{cluster.compute_node_conf('gpu')} {word(cluster, node, host)}"
    cluster.start_node(node, conf, cluster.blueprint.slurm.nodesets[0].gpus,
                       rebooted=rebooted).stop()


def leaves(cluster) -> dict[str, set[str]]:
    """The tree's leaf switches (Level=0) that hold nodes, with their nodes."""
    found = {}
    for line in cluster.run("scontrol", "show", "topology", render_topology.TREE).splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("Level") == "0" and fields.get("Nodes"):
            found[fields["SwitchName"]] = hostnames(cluster, fields["Nodes"])
    return found


def blocks(cluster) -> dict[str, set[str]]:
    """The NVLink blocks that hold nodes, with their nodes."""
    found = {}
    for line in cluster.run("scontrol", "show", "topology", render_topology.BLOCKS).splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "BlockName" in fields and fields.get("Nodes"):
            found[fields["BlockName"]] = hostnames(cluster, fields["Nodes"])
    return found


def hostnames(cluster, hostlist: str) -> set[str]:
    return set(cluster.run("scontrol", "show", "hostnames", hostlist).split())


def placed_on(cluster, *options: str) -> set[str]:
    """The nodes the scheduler would start a job of ``options`` on now."""
    script = cluster.root / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    said = sbatch_test_only(cluster, script, "-p", "gpu", *options)
    return hostnames(cluster, re.search(r" on nodes (\S+) in partition", said)[1])


def groups(*hosts: str) -> set[frozenset[str]]:
    return {frozenset(n for n, h in FIRST.items() if h in hosts)}


@pytest.mark.parametrize("machine_type", TREE_FAMILIES)
def test_nodes_join_the_tree_where_they_are_and_move_with_their_vm(machine_type, local_slurm):
    cluster = local_slurm(cluster_of(machine_type))
    for node, host in FIRST.items():
        register(cluster, node, host)
    sub_block = {h: f"s-{HOSTS[h]['subBlock'][:16]}" for h in HOSTS}
    assert leaves(cluster) == {sub_block["b1-h1"]: {"n1", "n2"},
                               sub_block["b2-h1"]: {"n3", "n4"}}
    # A job that asks for one sub-block gets one: what is left of it without a node it
    # excludes is the other.
    assert placed_on(cluster, "-N2", "--switches=1@1:00", "-x", "n3") == {"n1", "n2"}
    assert placed_on(cluster, "-N2", "--switches=1@1:00", "-x", "n1") == {"n3", "n4"}
    # n1's VM comes back on a host of block 2: it registers there, and block 1 keeps n2.
    register(cluster, "n1", "b2-h3", rebooted=True)
    assert leaves(cluster) == {sub_block["b1-h1"]: {"n2"},
                               sub_block["b2-h1"]: {"n1", "n3", "n4"}}
    assert placed_on(cluster, "-N3", "--switches=1@1:00") == {"n1", "n3", "n4"}


def test_nodes_the_metadata_server_places_nowhere_share_one_switch_and_stay_in_service(
        local_slurm):
    cluster = local_slurm(cluster_of("a3-megagpu-8g"))
    register(cluster, "n1", "b1-h1")
    register(cluster, "n2", "b1-h2")
    register(cluster, "lost1", None)
    register(cluster, "lost2", None)
    assert leaves(cluster)[topology.UNPLACED] == {"lost1", "lost2"}
    state = cluster.run("sinfo", "-h", "-N", "-n", "lost1,lost2", "-o", "%T")
    assert state.split() == ["idle", "idle"]
    # In service for jobs of several nodes; a job asking for one switch may have the
    # unplaced ones together (as on a cluster outside a reservation, where all are), never
    # an unplaced node beside a placed one.
    assert placed_on(cluster, "-N4") == {"n1", "n2", "lost1", "lost2"}
    assert placed_on(cluster, "-N2", "--switches=1@1:00", "-x", "n1,n2") == {"lost1", "lost2"}
    refused = cluster.run_failing("sbatch", "--test-only", "-p", "gpu", "-N2",
                                  "--switches=1", "-w", "lost1,n1", "--wrap", "true")
    assert "Requested node configuration is not available" in refused


def run_blocks_program(cluster) -> str:
    """One pass of the controller's NVLink-blocks program, from the Slurm root."""
    return cluster.run("python3", str(BLOCKS_PROGRAM), "--tree", render_topology.TREE,
                       "--block", render_topology.BLOCKS, "--nodesets", "gpu", "--once")


def test_a4x_nodes_share_a_block_with_their_nvlink_domain_only(local_slurm):
    blueprint = cluster_of("a4x-highgpu-4g")
    cluster = local_slurm(blueprint)
    assert cluster.partitions()["gpu"].get("Topology") == render_topology.BLOCKS
    for node, host in FIRST.items():
        register(cluster, node, host)
    register(cluster, "lost", None)
    assert blocks(cluster) == {}  # Slurm cannot make a block at registration
    run_blocks_program(cluster)
    placed = blocks(cluster)
    assert sorted(placed.values(), key=sorted) == [{"lost"}, {"n1", "n2"}, {"n3", "n4"}]
    assert set(placed) <= set(render_topology.block_names(blueprint))
    # A job in segments of two gets whole NVLink domains; its segments may be apart.
    assert placed_on(cluster, "-N2", "--segment=2", "-x", "n1") == {"n3", "n4"}
    assert placed_on(cluster, "-N4", "--segment=2", "-x", "lost") == {"n1", "n2", "n3", "n4"}
    # n1's VM comes back in n3's domain: it leaves its block at registration, and the next
    # pass puts it with n3 and n4; a pass with nothing to move moves nothing.
    register(cluster, "n1", "b2-h3", rebooted=True)
    assert {"n1"} not in blocks(cluster).values() and all(
        "n1" not in nodes for nodes in blocks(cluster).values())
    run_blocks_program(cluster)
    assert sorted(blocks(cluster).values(), key=sorted) == [{"lost"}, {"n1", "n3", "n4"},
                                                            {"n2"}]
    assert placed_on(cluster, "-N3", "--segment=3") == {"n1", "n3", "n4"}
    before = cluster.run("scontrol", "show", "node", "-o")
    run_blocks_program(cluster)
    assert cluster.run("scontrol", "show", "node", "-o") == before


def proofs_per_unit(cluster) -> dict[str, set[str]]:
    """The per-block NCCL proof, as the login node's clusterprint-nccl-blocks submits it
    (held, so that nothing runs): each job's name with the nodes it asks for."""
    jobs = cluster.root / "jobs"
    jobs.mkdir(exist_ok=True)
    path = nccl_job_path("gpu")
    (cluster.root / path).write_text(cluster.files[path])
    said = cluster.run("python3", str(NCCL_BLOCKS), "gpu", "--jobs", str(jobs), "--", "--hold")
    submitted = {}
    for line in said.splitlines():
        if ": job " in line:
            job = line.split(": job ")[1].split()[0]
            shown = dict(re.findall(r"(\w+)=(\S*)",
                                    cluster.run("scontrol", "show", "job", job)))
            submitted[shown["JobName"]] = hostnames(cluster, shown["ReqNodeList"])
    return submitted


def test_the_nccl_proof_runs_once_per_sub_block_and_per_nvlink_domain(local_slurm):
    for machine_type in ("a3-ultragpu-8g", "a4x-highgpu-4g"):
        cluster = local_slurm(cluster_of(machine_type))
        for node, host in FIRST.items():
            register(cluster, node, host)
        register(cluster, "lost", None)
        if machine_type.startswith("a4x"):
            run_blocks_program(cluster)
        units = {f"nccl-allreduce-gpu-{unit}": nodes
                 for unit, nodes in (blocks(cluster) if machine_type.startswith("a4x")
                                     else leaves(cluster)).items() if len(nodes) > 1}
        assert sorted(units.values(), key=sorted) == [{"n1", "n2"}, {"n3", "n4"}]
        # The node of a unit of its own has no neighbour to prove a link to: no job.
        assert proofs_per_unit(cluster) == units, machine_type
