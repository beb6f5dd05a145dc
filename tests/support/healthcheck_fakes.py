"""The node health check's fakes: recorded tool output and stand-in tools on PATH.

Shared by the program's tests, the real-Slurm tests and the benchmark, so that each runs
the same program against the same fixtures (tests/fixtures/healthcheck/README.md).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

from clusterprint.node import healthcheck
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "healthcheck"
FAKE_TOOL = FIXTURES / "bin" / "fake_tool.py"
PROGRAM = Path(healthcheck.__file__)
#: Every tool the program runs; scontrol only when it drains.
TOOLS = ("nvidia-smi", "dcgmi", "journalctl", "ip", "scontrol")
#: The model each recorded node's GPUs have, as the rendered config names it.
MODELS = {"h100": "H100", "h200": "H200", "b200": "B200"}


def scenario(folder: Path, family: str = "h100", *faults: str) -> Path:
    """A healthy ``family`` node's recorded output with each fault's files over it."""
    folder.mkdir(parents=True, exist_ok=True)
    for source in (FIXTURES / family, *(FIXTURES / "faults" / f for f in faults)):
        assert source.is_dir(), f"no fixture {source}"
        shutil.copytree(source, folder, dirs_exist_ok=True)
    return folder


def stub_bin(folder: Path, tools: tuple[str, ...] = TOOLS) -> Path:
    """A folder holding the fake of each of ``tools``, to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        (folder / tool).symlink_to(FAKE_TOOL)
    return folder


def node_config(folder: Path, family: str | None = "h100", **changes: object) -> dict:
    """A config as render writes it (the program's own Config, as JSON) for an 8-GPU
    ``family`` nodeset (None: a CPU one), with its state, mounts and disks in ``folder`` so
    that a test owns them; ``changes`` replace fields as JSON, so a test may break them."""
    gpu = None if family is None else healthcheck.GpuChecks(
        MODELS[family], nvlink=True, dcgm_level=1, dcgm_level_after_failure=2)
    config = healthcheck.Config("gpu", 0 if family is None else 8, gpu,
                                disks=(healthcheck.Disk(str(folder), 0),),
                                state_file=str(folder / "state.json"))
    return {**dataclasses.asdict(config), **changes}


def write_config(folder: Path, config: dict) -> Path:
    """``config`` as the JSON file the program reads."""
    path = folder / "healthcheck.json"
    path.write_text(json.dumps(config))
    return path


def environment(fixtures: Path, bin_dir: Path, env: dict[str, str] | None = None
                ) -> dict[str, str]:
    """What slurmd gives the program: a PATH with the fakes first, and the node's name."""
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HEALTHCHECK_FIXTURES": str(fixtures),
            "SLURMD_NODENAME": "node-1", **(env or {})}


def run_program(config: Path, fixtures: Path, bin_dir: Path, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The program as Slurm runs it: a process, its tools found on PATH."""
    return subprocess.run([sys.executable, str(PROGRAM), "--config", str(config), *args],
                          capture_output=True, text=True, env=environment(fixtures, bin_dir, env),
                          timeout=120)


def run_patched(patch: str, config: Path, fixtures: Path, bin_dir: Path, *args: str
                ) -> subprocess.CompletedProcess:
    """The program as a process, imported from its folder as a node runs it (``common``
    beside it), with ``patch`` run first: Python that stands in for a fault no fake tool
    can make, such as a file system call that never returns."""
    code = (f"import sys\nsys.path.insert(0, {str(PROGRAM.parent)!r})\nimport healthcheck\n"
            f"{patch}\nsys.exit(healthcheck.main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "--config", str(config), *args],
                          capture_output=True, text=True, env=environment(fixtures, bin_dir),
                          timeout=120)


def calls(fixtures: Path) -> list[str]:
    """Every command the fakes answered, in order."""
    log = fixtures / "calls.log"
    return log.read_text().splitlines() if log.exists() else []

