"""Slurm as the remediation loop sees it, without slurmctld: node lines, a fake scontrol.

A node line is what Debian's Slurm 22.05 ``scontrol show node -o`` printed on this
machine, with the fields the loop reads made to order. ``FakeSlurm`` answers the loop in
the test process; ``fake_scontrol`` puts an ``scontrol`` command on PATH for the loop run
as a process (the service, ``--once``, ``--reset``), reading its nodes from a file and
writing down every command.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from clusterprint.contract import naming
from clusterprint.node import common, remediate

ECC = "cp:gpu-ecc: 3 uncorrected errors on GPU 5"
START = "2026-12-01T10:31:52"
STAMP = "root@2026-12-01T10:31:53"


def node_line(name: str = "a4-a4-0001", state: str = "IDLE+DRAIN+DYNAMIC_NORM",
              reason: str = ECC, start: str = START, stamp: str = STAMP,
              feature: str = "a4") -> str:
    """One node; no reason field when ``reason`` is empty (a healthy node)."""
    line = (f"NodeName={name} Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
            f"CPULoad=5.60 AvailableFeatures={feature} ActiveFeatures={feature} Gres=gpu:8 "
            "NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 "
            "SMP PREEMPT_DYNAMIC @0  RealMemory=24105 AllocMem=0 FreeMem=21133 Sockets=1 "
            f"Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
            f"MCS_label=N/A Partitions={feature}  BootTime=2026-12-01T09:28:18 "
            f"SlurmdStartTime={start} LastBusyTime={start} "
            "CfgTRES=cpu=2,mem=24105M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 "
            "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")
    return line + (f" Reason={reason} [{stamp}]" if reason else "")


class FakeSlurm(remediate.Slurm):
    """Nodes from scontrol lines; every command the loop runs, recorded."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.commands = lines, []
        super().__init__(self._run)

    def _run(self, argv: list[str]) -> str:
        self.commands.append(argv)
        if argv[:3] == ["scontrol", "show", "reservation"]:
            return json.dumps({"reservations": []})  # the host-event watch's read
        return "\n".join(self.lines) if argv[:3] == ["scontrol", "show", "node"] else ""

    def changes(self) -> list[list[str]]:
        """Every command but the reads."""
        return [c for c in self.commands if c[:2] != ["scontrol", "show"]]


def config_for(on_failure: str, share: float = 1.0, nodes: int = 4, state: Path | None = None,
               api: dict[str, str] | None = None, report: bool = False,
               nodesets: tuple[str, ...] = ("a4",), **settings: object) -> remediate.Config:
    """A config of nodesets of ``nodes`` VMs each (of cluster ``c``), all with one
    policy; ``api``: FakeCompute.config()."""
    settings.setdefault("sizes_url", "")  # no desired counts unless a test gives them
    return remediate.Config(
        project="p", zone="z", state_file=str(state or "/nonexistent/state.json"),
        max_share_per_hour=share, **(api or {}), **settings,
        nodesets={n: remediate.NodesetPolicy(n, naming.base_instance_name("c", n),
                                             naming.vm_names("c", n), nodes, on_failure, report)
                  for n in nodesets})


def write_config(path: Path, config: remediate.Config) -> Path:
    path.write_text(json.dumps(config.to_json()))
    return path


def fake_scontrol(folder: Path) -> dict[str, str]:
    """An environment whose ``scontrol`` prints ``folder/nodes.txt`` for ``show node``,
    ``folder/topology.txt`` for ``show topology`` and ``folder/reservations.json`` for
    ``show reservation`` (none, unless a test writes it), and appends every other command
    line, as JSON, to ``folder/scontrol.log``. While ``folder/scontrol.fails`` exists, every command
    fails (exit 1) with its text on stderr, as scontrol does when slurmctld does not answer."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"if os.path.exists({str(folder / 'scontrol.fails')!r}):\n"
        f"    sys.exit(open({str(folder / 'scontrol.fails')!r}).read())\n"
        "if sys.argv[1:3] == ['show', 'node']:\n"
        f"    print(open({str(folder / 'nodes.txt')!r}).read())\n"
        "elif sys.argv[1:3] == ['show', 'topology']:\n"
        f"    print(open({str(folder / 'topology.txt')!r}).read())\n"
        "elif sys.argv[1:3] == ['show', 'reservation']:\n"
        f"    print(open({str(folder / 'reservations.json')!r}).read())\n"
        "else:\n"
        f"    with open({str(folder / 'scontrol.log')!r}, 'a') as log:\n"
        "        log.write(json.dumps(['scontrol'] + sys.argv[1:]) + '\\n')\n")
    script.chmod(0o755)
    (folder / "nodes.txt").touch()
    (folder / "topology.txt").touch()
    if not (folder / "reservations.json").exists():
        (folder / "reservations.json").write_text('{"reservations": []}')
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def scontrol_log(folder: Path) -> list[list[str]]:
    log = folder / "scontrol.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


class Journal(common.Log):
    """The loop's log lines, kept as objects."""

    def __init__(self) -> None:
        super().__init__("remediate")
        self.entries: list[dict] = []

    def __call__(self, message: str, severity: str = "INFO", **fields: object) -> None:
        self.entries.append({"message": message, "severity": severity, **fields})

    def severities(self, severity: str) -> list[str]:
        return [e["message"] for e in self.entries if e["severity"] == severity]
