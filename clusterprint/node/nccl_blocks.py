"""clusterprint-nccl-blocks: a partition's NCCL proof job once per block, to find a bad one.

On the login node, beside the staged jobs: ``clusterprint-nccl-blocks PARTITION [--dry-run]
[-- SBATCH_OPTION...]``. It reads the topology the partition places its jobs by (``scontrol
show partition``: ``Topology=``), that topology's units (``scontrol show topology``: a tree's
leaf switches, which are sub-blocks, or a block topology's blocks, which are NVLink
domains), and submits the partition's staged proof job (``nccl-allreduce-PARTITION.sbatch``)
once per unit, on every node of the partition in it that is in service (not down, drained
or failing), named ``nccl-allreduce-PARTITION-UNIT``. A unit with a failing bandwidth is the
one whose job fails. A unit of fewer than two such nodes has nothing to prove and is listed
as skipped. ``--dry-run`` prints the sbatch command lines instead; options after ``--`` go
to every sbatch. Standard library only, with common.py beside it. Exit 0 once every job is
submitted, 1 when a command fails or the partition has no topology, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass

if __package__:
    from clusterprint.node import common
else:  # run as a file: common.py lies beside it
    import common

#: Where the login node stages the jobs (clusterprint/render/nccl_job.py STAGED_JOBS; a test
#: holds them equal).
JOBS = "/opt/clusterprint/jobs"
TIMEOUT_S = 60.0
#: sinfo's short states (``%t``) of a node that takes a new job now: any other state (down,
#: drained, failing, reserved, powering, rebooting, unknown...) or any flag but ``-``
#: (planned by backfill) after it (``*`` not responding, ``~`` powered off, ``#`` powering
#: up, ``!``/``%`` powering down, ``$`` maintenance, ``@``/``^`` reboot) is out of service:
#: a proof on such a node would wait, or prove a node that is not the one in the block.
_IN_SERVICE = re.compile(r"(idle|mix|alloc|comp|plnd)-?", re.I)


@dataclass(frozen=True)
class Unit:
    """A leaf switch or a block, and the partition's nodes in service in it."""

    name: str
    nodes: tuple[str, ...]


def fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S*)", line))


def unit_lines(text: str) -> list[tuple[str, str, str]]:
    """(kind, name, hostlist) of each unit that holds nodes in ``scontrol show topology``:
    ``switch`` for a tree's leaves (Level=0), ``block`` for base blocks."""
    found = []
    for line in text.splitlines():
        shown = fields(line)
        if shown.get("Nodes") and shown.get("Level") == "0" and "SwitchName" in shown:
            found.append(("switch", shown["SwitchName"], shown["Nodes"]))
        elif shown.get("Nodes") and "BlockName" in shown:
            found.append(("block", shown["BlockName"], shown["Nodes"]))
    return found


def in_service(sinfo: str) -> set[str]:
    """The nodes of ``sinfo -h -N -o '%N %t'`` that take new jobs."""
    return {name for name, state in (line.split()[:2] for line in sinfo.splitlines()
                                     if len(line.split()) >= 2)
            if _IN_SERVICE.fullmatch(state)}


def submission(partition: str, kind: str, unit: Unit, script: str,
               extra: list[str]) -> list[str]:
    """The sbatch command line of the proof job on ``unit``: all its nodes, kept as one
    segment (blocks) or under one switch (trees)."""
    close = f"--segment={len(unit.nodes)}" if kind == "block" else "--switches=1"
    return ["sbatch", "--parsable", f"--job-name=nccl-allreduce-{partition}-{unit.name}",
            f"--nodes={len(unit.nodes)}", f"--nodelist={','.join(unit.nodes)}", close,
            *extra, script]


def run(argv: list[str]) -> str:
    return common.output(argv, TIMEOUT_S)


def hostnames(hostlist: str) -> list[str]:
    return run(["scontrol", "show", "hostnames", hostlist]).split()


def main(argv: list[str]) -> int:
    """Submit (or print) one proof job per unit; 1 when a command fails or nothing applies."""
    parser = argparse.ArgumentParser(prog="clusterprint-nccl-blocks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("partition")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--jobs", default=JOBS, help=argparse.SUPPRESS)
    parser.add_argument("sbatch", nargs="*", help="options for every sbatch, after --")
    # Split at the first -- by hand: argparse (3.11, CPython gh-59317) refuses a positional
    # of nargs="*" that follows an option, as in "gpu --jobs DIR -- --hold".
    ours, sbatch = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    args = parser.parse_args(ours)
    args.sbatch = args.sbatch + sbatch
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.partition):
        parser.error(f"{args.partition!r} is not a partition name")
    script = f"{args.jobs}/nccl-allreduce-{args.partition}.sbatch"
    try:
        shown = fields(run(["scontrol", "show", "partition", "-o", args.partition]))
        topology = shown.get("Topology", "")
        if not topology or topology == "flat":
            print(f"partition {args.partition} places its jobs by no topology: nothing to "
                  "split by block", file=sys.stderr)
            return 1
        members = set(hostnames(shown["Nodes"])) if shown.get("Nodes") else set()
        ready = in_service(run(["sinfo", "-h", "-N", "-p", args.partition, "-o", "%N %t"]))
        units = [(kind, Unit(name, tuple(n for n in hostnames(nodes) if n in members & ready)))
                 for kind, name, nodes in unit_lines(run(["scontrol", "show", "topology",
                                                          topology]))]
        for kind, unit in units:
            if len(unit.nodes) < 2:
                print(f"{unit.name}: skipped, {len(unit.nodes)} node(s) of {args.partition} "
                      "in service")
                continue
            command = submission(args.partition, kind, unit, script, args.sbatch)
            if args.dry_run:
                print(shlex.join(command))
            else:
                print(f"{unit.name}: job {run(command).strip()} on {','.join(unit.nodes)}")
    except common.CommandFailed as exc:
        print(f"clusterprint-nccl-blocks: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
