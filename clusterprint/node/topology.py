"""Where this VM sits in Google's network, as the Topology= word its slurmd registers with.

Compute Engine gives a VM of a dense reservation (or of compact placement) its place in the
physical hierarchy through the metadata server: instance attribute
``physical_host_topology``, JSON with ``cluster``, ``block``, ``subBlock`` and ``host``
(Google's "View VM topology" page; clusterprint/facts/topology.py says why not
``physical_host``). At every boot, so that a VM a reboot or a replacement put on another host
registers at its new place, the compute script reads the attribute as it reads every other
(into a file; an attribute the server does not have leaves it empty) and runs::

    python3 topology.py --tree fabric --node a4-x7k2 --value FILE
    Topology=fabric:fabric:c-europe-west1-cluster-jfhb:b-3e3056e2a1b4c5d6:s-1fc18636aa0b1c2d

That is the topology's name, then the switches from the root down: the root (named as the
topology, ``--tree``, and declared in topology.yaml) holds a switch per cluster, block and
sub-block, which Slurm 26.05 creates as nodes name them; a node is a leaf of its
sub-block's switch. A VM placed nowhere (no reservation, the attribute absent or empty), or
placed with a value this program does not trust, is still a node: it joins the one switch
``unplaced`` right under the root, beside every other node whose place is not known. So a
cluster outside a reservation (every node unplaced) schedules as if flat, and a job asking
for one switch (``--switches=1@5:00``, the NCCL proof's and the recipes') starts at once on
unplaced nodes rather than waiting out its limit; where some nodes are placed, the unplaced
ones are simply one more group. That is a warning on stderr, never a failed boot. Exit
status 0 with the word printed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import re
import sys

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

#: The instance attribute (clusterprint/facts/topology.py PHYSICAL_TOPOLOGY_KEY; a test
#: holds them equal).
KEY = "physical_host_topology"
#: What a part of the value may be: Google's ids are hexadecimal, its cluster names
#: ``europe-west1-cluster-jfhb``; anything else could not be told apart from an attack on
#: the unit file and the Topology= line it lands in.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,61}")
#: Slurm's longest switch name (topology.yaml.5: "cannot be longer than 64 characters"): an
#: id of at most 62 characters and its ``c-`` prefix.
SWITCH_MAX = 64
#: The node names (and tree names) this program takes: VM names and Slurm's.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: Hex digits of a block or sub-block id kept in its switch name: 64 bits tell apart the
#: few blocks of one cluster as surely as the whole id.
ID_DIGITS = 16
#: The switch of every node whose place is not known.
UNPLACED = "unplaced"
#: The longest value read: Google's is about 150 bytes.
VALUE_MAX = 4096


class Unplaced(Exception):
    """The metadata server places this VM nowhere this program can name; why."""


def _part(value: dict, *keys: str) -> str:
    """The first of ``keys`` the value holds, checked."""
    for key in keys:
        if key in value:
            part = value[key]
            if not isinstance(part, str) or not _ID.fullmatch(part):
                raise Unplaced(f"{key} is {common.clip(repr(part), 80)}, not an id")
            return part
    raise Unplaced(f"the value has no {' or '.join(keys)}")


def switches(value: object) -> tuple[str, str, str]:
    """The cluster, block and sub-block switch names of a ``physical_host_topology`` value.

    ``subBlock`` is the metadata server's and the REST samples' spelling, ``subblock`` the
    Compute API protos'; either is read.
    """
    if not isinstance(value, dict):
        raise Unplaced("the value is not a JSON object")
    cluster = _part(value, "cluster")
    block = _part(value, "block")
    sub_block = _part(value, "subBlock", "subblock")
    return f"c-{cluster}", f"b-{block[:ID_DIGITS]}", f"s-{sub_block[:ID_DIGITS]}"


def read_value(path: str) -> object:
    """The attribute's JSON from the file the boot wrote; Unplaced when it is empty (the
    server has no such attribute), unreadable, too long or not JSON."""
    try:
        with open(path, "rb") as file:
            data = file.read(VALUE_MAX + 1)
    except OSError as exc:
        raise Unplaced(f"{path}: {exc.strerror}") from None
    if not data.strip():
        raise Unplaced(f"the metadata server has no {KEY} for this VM")
    if len(data) > VALUE_MAX:
        raise Unplaced(f"{KEY} is longer than {VALUE_MAX} bytes")
    try:
        return common.load_json(data, KEY)
    except common.BadJSON as exc:
        raise Unplaced(str(exc)) from None


def topology_word(tree: str, node: str, path: str) -> tuple[str, str | None]:
    """The ``Topology=`` word of this node, and the warning to log when it is unplaced."""
    try:
        switch_path = switches(read_value(path))
    except Unplaced as exc:
        return f"Topology={tree}:{tree}:{UNPLACED}", (
            f"topology: {exc}; node {node} joins Slurm's {tree} tree under switch {UNPLACED}, "
            f"with the other nodes whose place is not known")
    return f"Topology={tree}:{tree}:{':'.join(switch_path)}", None


def main(argv: list[str]) -> int:
    """Print the node's Topology= word; warnings on stderr; 2 on bad usage."""
    parser = argparse.ArgumentParser(prog="topology.py", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, help="the tree topology and its root switch")
    parser.add_argument("--node", required=True, help="this node's Slurm name (its hostname)")
    parser.add_argument("--value", required=True,
                        help=f"a file holding metadata {KEY} (empty: the VM has none)")
    args = parser.parse_args(argv)
    for option, value in (("--tree", args.tree), ("--node", args.node)):
        if not _NAME.fullmatch(value):
            parser.error(f"{option} {value!r} is not a plain name")
    word, warning = topology_word(args.tree, args.node, args.value)
    if warning:
        print(f"<{common.SYSLOG_LEVELS['WARNING']}>{warning}", file=sys.stderr)
    print(word)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
