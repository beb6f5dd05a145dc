"""On the controller: every node of an NVLink-domain nodeset (A4X) in the block of its domain.

Slurm 26.05 places a dynamic node in a tree at registration, creating the switches it names,
but it cannot create a block: ``Topology=nvlink:X`` of a block X that topology.yaml does not
declare fails the node's registration. So topology.yaml declares empty blocks (``nvl1`` ...
``nvlN``, one per node the nodesets may hold: at most one NVLink domain per node), every node
registers in the tree only (``Topology=fabric:fabric:<cluster>:<block>:<sub-block>``,
clusterprint/node/topology.py), and this loop, every ``--interval`` seconds:

1. reads the declared blocks (``scontrol show topology BLOCK``) and the nodes
   (``scontrol show node -o``): each node of ``--nodesets`` with its Topology= string;
2. decides, in a pure function over plain data (``assignments``), which block each
   sub-block gets: the block most of its nodes are in already, if no other sub-block's node
   is there, else the first empty one. A node whose sub-block is not known (its tree leaf is the
   shared ``unplaced`` switch) gets a block of its own: no job takes it for an NVLink neighbour;
3. logs each move, then makes it: ``scontrol update NodeName=N Topology=<tree>,<block>:X``
   (the tree part kept as the node registered it). A node that re-registers from another
   host brings only its new tree place, leaves its block, and is moved here.

Nothing is written to a file and nothing reconfigures slurmctld: the blocks are in Slurm's
own node state, which survives a restart of slurmctld (and of this loop). Standard library
only, with the node programs' common.py beside it. Run by hand: ``--once`` makes one pass.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

INTERVAL_S = 10.0
TIMEOUT_S = 30.0
_BLOCK_LINE = re.compile(r"^BlockName=(\S+) ")


@dataclass(frozen=True)
class Placed:
    """A node of an NVLink nodeset as Slurm holds it: its tree place and its block."""

    name: str
    #: its Topology= part of the tree (``fabric:fabric:c-..:b-..:s-..``: the topology, then
    #: its switches from the root down), "" when it has none
    tree: str
    #: the block it is in, "" when none
    block: str


@dataclass(frozen=True)
class Move:
    """One node into one block ("": out of every block)."""

    node: str
    block: str
    #: the whole Topology= string it gets
    topology: str


def placed(node: common.SlurmNode, tree: str, block_topology: str) -> Placed:
    """The tree and block parts of a node's Topology= string (``fabric:...,nvlink:nvl3``)."""
    parts = dict(part.split(":", 1) for part in node.topology.split(",") if ":" in part)
    tree_unit = parts.get(tree)
    return Placed(node.name, f"{tree}:{tree_unit}" if tree_unit else "",
                  parts.get(block_topology, ""))


def domain(node: Placed) -> str:
    """What the node shares an NVLink domain with: its sub-block (the tree's leaf under a
    cluster and a block), or, unplaced or outside the tree, nothing but itself."""
    switches = node.tree.split(":")[1:]
    return switches[-1] if len(switches) == 4 else f"node:{node.name}"


def _natural(name: str) -> tuple:
    """nvl2 before nvl10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def assignments(nodes: Iterable[Placed], blocks: Iterable[str], block_topology: str
                ) -> tuple[list[Move], list[str]]:
    """The moves that put every domain's nodes in one block of ``block_topology`` of their
    own, and the domains left out because every block is taken (the errors to log).

    A domain keeps the block most of its nodes are in, unless a domain with more nodes there
    keeps it; the others get the blocks no domain keeps, empty ones first. A node of a domain
    left out leaves any block it is in: no job may take it for a neighbour of another domain.
    """
    nodes = sorted(nodes, key=lambda n: n.name)
    declared = sorted(set(blocks), key=_natural)
    held = Counter((domain(n), n.block) for n in nodes if n.block in declared)
    chosen: dict[str, str] = {}
    for (name, block), _ in sorted(held.items(),
                                   key=lambda kv: (-kv[1], kv[0][0], _natural(kv[0][1]))):
        if name not in chosen and block not in chosen.values():
            chosen[name] = block
    in_use = {block for _, block in held}
    free = sorted((b for b in declared if b not in chosen.values()),
                  key=lambda b: (b in in_use, _natural(b)))
    domains = sorted({domain(n) for n in nodes})
    for name in domains:
        if name not in chosen and free:
            chosen[name] = free.pop(0)
    moves = []
    for node in nodes:
        target = chosen.get(domain(node), "")
        if (node.block if node.block in declared else "") != target:
            topology = ",".join(p for p in (node.tree, target and f"{block_topology}:{target}")
                                if p)
            moves.append(Move(node.name, target, topology))
    return moves, [name for name in domains if name not in chosen]


def block_names(text: str) -> list[str]:
    """The blocks ``scontrol show topology BLOCK`` lists (aggregated blocks are not)."""
    return [m[1] for line in text.splitlines() if (m := _BLOCK_LINE.match(line))]


def one_pass(args: argparse.Namespace, log: common.Log) -> int:
    """Read, decide, act once; the moves made."""
    nodesets = set(args.nodesets.split(","))
    blocks = block_names(common.output(["scontrol", "show", "topology", args.block], TIMEOUT_S))
    nodes = [placed(n, args.tree, args.block)
             for n in common.parse_nodes(common.output(["scontrol", "show", "node", "-o"],
                                                       TIMEOUT_S))
             if nodesets & set(n.features)]
    moves, left = assignments(nodes, blocks, args.block)
    for name in left:
        log(f"no empty block in {args.block} for {name}: its nodes stay out of every block",
            "ERROR", domain=name)
    for move in moves:
        log(f"{move.node} into block {move.block}" if move.block else
            f"{move.node} out of every block: its domain has none", node=move.node,
            topology=move.topology)
        common.output(["scontrol", "update", f"NodeName={move.node}",
                       f"Topology={move.topology}"], TIMEOUT_S)
    return len(moves)


def main(argv: list[str]) -> int:
    """Loop for ever (``--once``: one pass, 1 when it failed)."""
    parser = argparse.ArgumentParser(prog="nvlink_blocks.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, help="the tree topology the nodes register in")
    parser.add_argument("--block", required=True, help="the block topology of NVLink domains")
    parser.add_argument("--nodesets", required=True, help="comma-separated NVLink nodesets")
    parser.add_argument("--interval", type=float, default=INTERVAL_S)
    parser.add_argument("--once", action="store_true")
    args = parser.parse_args(argv)
    log = common.Log("clusterprint-nvlink-blocks")
    return common.repeat(lambda: one_pass(args, log), args.once, args.interval, log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
