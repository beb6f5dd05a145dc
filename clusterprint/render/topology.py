"""What Slurm is told of the network: topology.yaml, each partition's topology, and what the
nodes run to join it.

A nodeset gets a topology when its family has one (``MachineFamily.topology``,
clusterprint/facts/topology.py) and the cluster builds its GPU network: without GPU networks
NCCL runs over one gVNIC and a close neighbour is worth nothing. A cluster with no such
nodeset gets no topology.yaml at all, and Slurm its default (flat). One with some gets up to
three topologies:

- ``fabric``, a tree (the cluster default): its root switch only is declared; each node
  registers below it under its cluster, block and sub-block (clusterprint/node/topology.py),
  and Slurm creates those switches. Jobs ask for the fewest sub-blocks with ``--switches``.
- ``nvlink``, a block topology of NVLink domains (A4X): one empty block per node the
  nodesets may hold (``nvl1`` ...), base block size 18; the controller's
  clusterprint-nvlink-blocks service puts each sub-block's nodes into a block of their own
  (clusterprint/node/nvlink_blocks.py). Jobs ask for ``--segment``.
- ``flat``, for partitions with a nodeset outside both (CPU nodes, A2, or families mixed in
  one partition): a node outside a partition's tree or blocks takes part in no job of more
  than one node there.

Every partition names its topology (``Topology=`` on its line). No TopologyParam: Slurm
26.05 already orders a job's dynamic nodes by topology for their ranks (RELEASE_NOTES "Add
topology-based sorting for node ranks when using dynamic nodes"; src/slurmctld/job_test.c
calls topology_g_get_rank), SwitchAsNodeRank and BlockAsNodeRank sort only nodes slurm.conf
lists, and RouteTree is "Incompatible with dynamic nodes" (slurm.conf.5 at slurm-26-05-3-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from clusterprint.blueprint.model import Blueprint, Nodeset, Partition
from clusterprint.facts import machines
from clusterprint.facts.topology import PHYSICAL_TOPOLOGY_KEY, NetworkTopology
from clusterprint.node import nccl_blocks, nvlink_blocks, topology
from clusterprint.render import node_programs, remediation
from clusterprint.render.environment import render
from clusterprint.render.gpu_fabric import family_fabric

#: The tree topology, also the name of its root switch.
TREE = "fabric"
#: The block topology of NVLink domains, and the prefix of its blocks' names.
BLOCKS = "nvlink"
BLOCK_PREFIX = "nvl"
FLAT = "flat"
#: The most blocks declared: 4096 NVLink domains of 18 VMs are 73,728 A4X VMs. A
#: nodeset's every VM in a domain of its own would need more; the controller's service
#: then logs the domains it has no block for.
BLOCKS_MAX = 4096
#: Where both programs run from: the folder where the health check (on compute nodes) and
#: the remediation loop (on the controller) put common.py.
FOLDER = remediation.FOLDER
PLACE_PROGRAM = f"{FOLDER}/topology.py"
BLOCKS_PROGRAM = f"{FOLDER}/nvlink_blocks.py"
BLOCKS_UNIT = "clusterprint-nvlink-blocks.service"
#: The login node's command that runs a partition's NCCL proof once per block.
NCCL_BLOCKS_COMMAND = "/usr/local/bin/clusterprint-nccl-blocks"


def nodeset_topologies(blueprint: Blueprint, nodeset: Nodeset) -> tuple[NetworkTopology, ...]:
    """The topologies the nodeset's nodes join: its family's, where its GPU network is built."""
    family = family_fabric(blueprint, nodeset)
    return family.topology if family else ()


def _kinds(blueprint: Blueprint, nodeset: Nodeset) -> set[str]:
    return {t.kind for t in nodeset_topologies(blueprint, nodeset)}


def tree_nodesets(blueprint: Blueprint) -> list[Nodeset]:
    """The nodesets whose nodes register in the tree."""
    return [n for n in blueprint.slurm.nodesets if "tree" in _kinds(blueprint, n)]


def block_nodesets(blueprint: Blueprint) -> list[Nodeset]:
    """The nodesets whose nodes the controller puts in NVLink blocks."""
    return [n for n in blueprint.slurm.nodesets if "block" in _kinds(blueprint, n)]


def block_nodes(blueprint: Blueprint) -> int | None:
    """The base block size of the cluster's block topology (None without one)."""
    sizes = {t.block_nodes for n in block_nodesets(blueprint)
             for t in nodeset_topologies(blueprint, n) if t.kind == "block"}
    return max(sizes, default=None)


def partition_topology(blueprint: Blueprint, partition: Partition) -> str | None:
    """The topology a partition's jobs are placed by; None where the cluster has none."""
    if not tree_nodesets(blueprint):
        return None
    kinds = [_kinds(blueprint, n) for n in blueprint.slurm.nodesets if n.name in partition.nodesets]
    if kinds and all("block" in k for k in kinds):
        return BLOCKS
    if kinds and all("tree" in k for k in kinds):
        return TREE
    return FLAT


def block_names(blueprint: Blueprint) -> list[str]:
    """The declared blocks: one per node the NVLink nodesets may hold (each node may be the
    only one of its domain), at most BLOCKS_MAX."""
    count = min(sum(n.upper_bound for n in block_nodesets(blueprint)), BLOCKS_MAX)
    return [f"{BLOCK_PREFIX}{i}" for i in range(1, count + 1)]


def render_topology_yaml(blueprint: Blueprint) -> str | None:
    """topology.yaml, or None for a cluster with no nodeset in a topology."""
    if not tree_nodesets(blueprint):
        return None
    return render("slurm/topology.yaml.j2", cluster=blueprint.name, tree=TREE,
                  blocks=BLOCKS, block_names=block_names(blueprint),
                  block_nodes=block_nodes(blueprint), flat=FLAT)


def known_at_boot(nodeset: Nodeset) -> bool:
    """Whether Compute Engine documents a place for the nodeset's VMs: those on reserved
    blocks and those under a compact placement policy (facts/topology.py's sources)."""
    return nodeset.provisioning == "reservation" or nodeset.compact_policy


def plan_rows(blueprint: Blueprint) -> list[dict[str, object]]:
    """Per GPU nodeset, what Slurm is told of where its nodes are, for the plan summary."""
    rows = []
    for nodeset in (n for n in blueprint.slurm.nodesets if n.gpus):
        found = nodeset_topologies(blueprint, nodeset)
        family = machines.gpu_family(nodeset.machine_type)
        rows.append({
            "nodeset": nodeset.name,
            "topologies": [TREE if t.kind == "tree" else BLOCKS for t in found],
            "blockNodes": next((t.block_nodes for t in found if t.kind == "block"), None),
            "knownAtBoot": known_at_boot(nodeset) if found else None,
            "why": None if found else (
                "the cluster builds no GPU network" if family and family.topology
                else f"Google publishes no physical topology for {family.family}")})
    return rows


#: How long a job that asks for one sub-block waits for one before it takes nodes under
#: more: Slurm caps the wait at SchedulerParameters' max_switch_wait, 300 s by default
#: (slurm.conf.5 at slurm-26-05-3-1), so a longer one would not be kept.
SWITCH_WAIT = "5:00"


def segment_size(nodes: int, block: int) -> int:
    """The largest segment of at most a block's nodes that divides the job: Slurm refuses a
    job whose node count its segment does not divide (sbatch.1 --segment)."""
    return max(size for size in range(1, min(nodes, block) + 1) if nodes % size == 0)


def close_nodes(blueprint: Blueprint, partition: Partition, nodes: int) -> list[str]:
    """The sbatch options that keep a job of ``nodes`` nodes of ``partition`` close: its
    nodes in segments inside NVLink domains on blocks; on a tree, one sub-block if one frees
    up within SWITCH_WAIT, else the fewest Slurm finds; none on one node or without a tree."""
    topology = partition_topology(blueprint, partition)
    if nodes < 2 or topology not in (TREE, BLOCKS):
        return []
    if topology == BLOCKS:
        return [f"--segment={segment_size(nodes, block_nodes(blueprint) or nodes)}"]
    return [f"--switches=1@{SWITCH_WAIT}"]


@dataclass(frozen=True)
class Placement:
    """What a compute node runs to find its Topology= word (scripts/topology.sh.j2)."""

    tree: str
    program: str
    text: str
    key: str = PHYSICAL_TOPOLOGY_KEY


def placement(blueprint: Blueprint, nodeset: Nodeset) -> Placement | None:
    """How a node of ``nodeset`` joins the tree at registration; None outside it."""
    if "tree" not in _kinds(blueprint, nodeset):
        return None
    return Placement(TREE, PLACE_PROGRAM, node_programs.module_text(topology))


def topology_files(blueprint: Blueprint) -> dict[str, str]:
    """The programs by their paths under ``clusterprint render --out`` (``scripts/``, beside
    common.py): the placement where a nodeset joins the tree, the blocks' where one has
    NVLink blocks, the login node's commands."""
    modules = [*([topology] if tree_nodesets(blueprint) else []),
               *([nvlink_blocks] if block_nodesets(blueprint) else []),
               *login_commands(blueprint).values()]
    return {f"scripts/{m.__name__.rsplit('.', 1)[-1]}.py": node_programs.module_text(m)
            for m in modules}


def login_commands(blueprint: Blueprint) -> dict[str, ModuleType]:
    """The login node's topology commands by path, with the module each runs: the per-block
    NCCL proof where some partition places its jobs by a topology."""
    placed = any(partition_topology(blueprint, p) in (TREE, BLOCKS)
                 for p in blueprint.slurm.partitions)
    return {NCCL_BLOCKS_COMMAND: nccl_blocks} if placed else {}


def blocks_context(blueprint: Blueprint) -> dict[str, object] | None:
    """What the controller installs to keep NVLink nodes in their blocks; None without any."""
    nodesets = block_nodesets(blueprint)
    if not nodesets:
        return None
    return {"program": BLOCKS_PROGRAM, "text": node_programs.module_text(nvlink_blocks),
            "unit": BLOCKS_UNIT, "tree": TREE, "blocks": BLOCKS,
            "nodesets": ",".join(n.name for n in nodesets)}
