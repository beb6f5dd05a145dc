"""Where a GPU VM sits in Google's network, and the Slurm topology that follows from it.

Compute Engine places the VMs of dense reservations (and of compact placement) in a
physical hierarchy: cluster, block, sub-block, host. Nodes under one sub-block share the
fewest switches; A4X's sub-block is also one NVLink domain. A machine family's row in
machines.py names the topologies its nodes join (``MachineFamily.topology``); the kinds
and their reasons live here, once.

Sources (read 2026-12):
- Google's "View VM topology" page (docs.cloud.google.com/ai-hypercomputer/docs/manage/
  instance-topology, updated 2026-04-06): inside the VM, metadata
  ``instance/attributes/physical_host_topology`` is JSON ``{"cluster", "block", "subBlock",
  "host"}``, for "A4X Max, A4X, A4, A3 Ultra, A3 Mega, and A3 High (8 GPUs) ... that run on
  reserved blocks of capacity" (Compute Engine's view-instance-topology page adds VMs with
  a compact placement policy). No source states what the server answers when it is absent.
- ``physical_host`` (a string ``/A/B/C``) is not used: its parts are positional and the
  sources disagree on what they are (the Compute API reference: "blockId/subBlockId/hostId";
  cluster-toolkit's slurm_files ``conf.py`` and Google's TCPXO topology labeler read
  cluster/rack/host).
- A4X: "a sub-block consists of 18 A4X instances (72 GPUs)" (one NVLink domain) and "An A4X
  block is composed of 25 sub-blocks" (ai-hypercomputer/docs/create/create-mig-with-a4x).
  No stored source gives a block or sub-block size for A3 High, A3 Mega, A3 Ultra or A4.
- Slurm 26.05 (SchedMD/slurm at slurm-26-05-3-1): a dynamic node joins a topology at
  registration (``slurmd -Z --conf "... Topology=NAME:UNIT"``, doc/html/topology.shtml
  "Dynamic Topology"); a tree creates the intermediate switches a node names below an
  existing one (``Topology=tree:root:s1:s2``, src/plugins/topology/tree/topology_tree.c
  topology_p_add_rm_node), while a block must already be declared in topology.yaml
  (src/plugins/topology/block/topology_block.c: "Tried to add to a block that doesn't
  exist"). ``--segment`` works on blocks only, ``--switches`` on trees only (sbatch.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The instance attribute a VM reads its place from (the "View VM topology" page).
PHYSICAL_TOPOLOGY_KEY = "physical_host_topology"


@dataclass(frozen=True, kw_only=True)
class NetworkTopology:
    """One way Slurm is told where a family's nodes are, and why it fits the family."""

    kind: Literal["tree", "block"]
    #: What Google calls the unit a job should stay within: the tree's leaf switch, or the
    #: block's base block.
    unit: str
    #: Nodes Slurm assumes per base block (topology.yaml's first ``block_sizes``); None for a
    #: tree, which needs no size.
    block_nodes: int | None
    why: str
    source: str


#: Every family with a physical topology: cluster, block and sub-block as switches, nodes
#: under their sub-block's.
FABRIC_TREE = NetworkTopology(
    kind="tree", unit="sub-block", block_nodes=None,
    why="no source gives the family's block or sub-block size, and a tree needs none: each "
        "node creates its cluster, block and sub-block switches when it registers, and "
        "`--switches` keeps a job under the fewest sub-blocks",
    source="docs.cloud.google.com/ai-hypercomputer/docs/manage/instance-topology")
#: A4X: one NVLink domain (a sub-block of 18 VMs) per base block, for ``--segment``.
NVLINK_DOMAINS = NetworkTopology(
    kind="block", unit="NVLink domain (sub-block)", block_nodes=18,
    why="a multi-node NVLink job needs each of its segments inside one NVLink domain, which "
        "`--segment` asks of a block topology; Slurm cannot create a block at registration, "
        "so the controller places each node in a declared block of its sub-block",
    source="docs.cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4x")
