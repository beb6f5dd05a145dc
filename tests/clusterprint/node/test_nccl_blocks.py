"""clusterprint-nccl-blocks, the NCCL proof once per sub-block or NVLink domain: which nodes
count as in service, what each submission asks for, how its command line is read, and the
program as a process against fake scontrol, sinfo and sbatch that record what they are
asked (the real-Slurm run is tests/slurm/test_topology.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.node import nccl_blocks
from clusterprint.node.nccl_blocks import Unit
from clusterprint.render import nccl_job
from tests.support.paths import ROOT

PROGRAM = ROOT / "clusterprint" / "node" / "nccl_blocks.py"

#: ``scontrol show topology fabric`` of a tree with two sub-blocks and the unplaced switch,
#: in Slurm 26.05's layout (one switch a line; Level 0 are the leaves).
TREE = """\
SwitchName=fabric Level=2 LinkSpeed=1 Nodes=a[1-4],u1 Switches=c-x
SwitchName=c-x Level=1 LinkSpeed=1 Nodes=a[1-4] Switches=b-1
SwitchName=s-1 Level=0 LinkSpeed=1 Nodes=a[1-2]
SwitchName=s-2 Level=0 LinkSpeed=1 Nodes=a[3-4]
SwitchName=unplaced Level=0 LinkSpeed=1 Nodes=u1
SwitchName=s-empty Level=0 LinkSpeed=1 Nodes=
"""
BLOCKS = """\
BlockName=nvl1 BlockIndex=0 Nodes=a[1-2] BlockSize=18
BlockName=nvl2 BlockIndex=1 Nodes=a[3-4] BlockSize=18
BlockName=nvl3 BlockIndex=2 Nodes= BlockSize=18
"""


# --- Which nodes are in service ------------------------------------------------------------

IN_SERVICE = ["idle", "mix", "alloc", "comp", "plnd", "idle-", "MIX"]
OUT_OF_SERVICE = [
    "down", "drain", "drng", "fail", "failg", "maint", "resv", "boot", "inval", "unk", "npc",
    "futr", "blocked", "pow_dn", "pow_up", "reboot^",
    # A state that takes jobs, with a flag that says the node does not now.
    "idle*", "idle~", "idle#", "idle!", "idle%", "idle$", "idle@", "idle^", "mix*", "alloc$"]


@pytest.mark.parametrize("state", IN_SERVICE)
def test_a_node_that_takes_jobs_now_is_proved(state):
    assert nccl_blocks.in_service(f"a1 {state}\n") == {"a1"}


@pytest.mark.parametrize("state", OUT_OF_SERVICE)
def test_a_node_that_would_hold_up_or_mislead_the_proof_is_left_out(state):
    assert nccl_blocks.in_service(f"a1 {state}\na2 idle\n") == {"a2"}


def test_blank_and_short_sinfo_lines_are_no_nodes():
    assert nccl_blocks.in_service("\n   \na1\n") == set()


# --- Units and submissions -----------------------------------------------------------------

def test_a_tree_unit_is_a_leaf_switch_that_holds_nodes():
    assert nccl_blocks.unit_lines(TREE) == [
        ("switch", "s-1", "a[1-2]"), ("switch", "s-2", "a[3-4]"), ("switch", "unplaced", "u1")]


def test_a_block_unit_is_a_block_that_holds_nodes():
    assert nccl_blocks.unit_lines(BLOCKS) == [("block", "nvl1", "a[1-2]"),
                                             ("block", "nvl2", "a[3-4]")]


def test_a_tree_proof_asks_for_its_nodes_under_one_switch():
    command = nccl_blocks.submission("gpu", "switch", Unit("s-1", ("a1", "a2")), "/j.sbatch",
                                     ["--hold"])
    assert command == ["sbatch", "--parsable", "--job-name=nccl-allreduce-gpu-s-1",
                       "--nodes=2", "--nodelist=a1,a2", "--switches=1", "--hold", "/j.sbatch"]


def test_a_block_proof_asks_for_its_nodes_as_one_segment():
    command = nccl_blocks.submission("gpu", "block", Unit("nvl2", ("a3", "a4", "a5")),
                                     "/j.sbatch", [])
    assert "--segment=3" in command and "--nodes=3" in command
    assert not any(word.startswith("--switches") for word in command)


def test_the_default_jobs_folder_is_where_the_login_node_stages_them():
    assert nccl_blocks.JOBS == nccl_job.STAGED_JOBS


# --- As a process, against fakes -----------------------------------------------------------

class Fakes:
    """scontrol, sinfo and sbatch on PATH: each answers from ``answers.json`` (a command line
    joined by spaces, to its output; "!" first for a failure) and appends its argv to
    ``calls.log``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.bin = folder / "bin"
        self.bin.mkdir()
        self.answers: dict[str, str] = {}
        for name in ("scontrol", "sinfo", "sbatch"):
            tool = self.bin / name
            tool.write_text(
                f"#!{sys.executable}\nimport json, os, sys\n"
                f"folder = {str(folder)!r}\n"
                "argv = [os.path.basename(sys.argv[0])] + sys.argv[1:]\n"
                "with open(os.path.join(folder, 'calls.log'), 'a') as log:\n"
                "    log.write(json.dumps(argv) + '\\n')\n"
                "answers = json.load(open(os.path.join(folder, 'answers.json')))\n"
                "said = answers.get(' '.join(argv))\n"
                "if said is None and argv[0] == 'sbatch':\n"
                "    said = str(100 + sum(1 for _ in open(os.path.join(folder, 'calls.log'))))\n"
                "if said is None or said.startswith('!'):\n"
                "    sys.exit((said or '!no answer')[1:] + ': ' + ' '.join(argv))\n"
                "print(said)\n")
            tool.chmod(0o755)

    def answer(self, command: str, output: str) -> None:
        self.answers[command] = output

    def cluster(self, topology: str = "fabric", shown: str = TREE,
                sinfo: str = "a1 idle\na2 mix\na3 idle\na4 drain\nu1 idle\n") -> None:
        """A partition gpu over a1..a4 and u1, in ``topology``."""
        self.answer("scontrol show partition -o gpu",
                    f"PartitionName=gpu Nodes=a[1-4],u1 Topology={topology} State=UP")
        self.answer("scontrol show hostnames a[1-4],u1", "a1\na2\na3\na4\nu1")
        self.answer("scontrol show hostnames a[1-2]", "a1\na2")
        self.answer("scontrol show hostnames a[3-4]", "a3\na4")
        self.answer("scontrol show hostnames u1", "u1")
        self.answer("sinfo -h -N -p gpu -o %N %t", sinfo)
        self.answer(f"scontrol show topology {topology}", shown)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        (self.folder / "answers.json").write_text(json.dumps(self.answers))
        return subprocess.run([sys.executable, str(PROGRAM), *args], capture_output=True,
                              text=True, timeout=60, cwd="/",
                              env={**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}"})

    def submitted(self) -> list[list[str]]:
        log = self.folder / "calls.log"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
            else []
        return [call for call in calls if call[0] == "sbatch"]


@pytest.fixture
def fakes(tmp_path):
    return Fakes(tmp_path)


def test_one_proof_per_sub_block_on_its_nodes_in_service(fakes):
    fakes.cluster()
    done = fakes.run("gpu", "--jobs", "/staged")
    assert done.returncode == 0, done.stderr
    assert fakes.submitted() == [
        ["sbatch", "--parsable", "--job-name=nccl-allreduce-gpu-s-1", "--nodes=2",
         "--nodelist=a1,a2", "--switches=1", "/staged/nccl-allreduce-gpu.sbatch"]]
    # a4 is drained: s-2 has one node left, the unplaced switch one; neither is a proof.
    lines = done.stdout.splitlines()
    assert lines[0].startswith("s-1: job ") and lines[0].endswith(" on a1,a2")
    assert lines[1:] == ["s-2: skipped, 1 node(s) of gpu in service",
                         "unplaced: skipped, 1 node(s) of gpu in service"]


def test_blocks_are_proved_as_segments(fakes):
    fakes.cluster("nvlink", BLOCKS, sinfo="a1 idle\na2 idle\na3 alloc\na4 mix\nu1 idle\n")
    done = fakes.run("gpu")
    assert done.returncode == 0, done.stderr
    assert [call[2:6] for call in fakes.submitted()] == [
        ["--job-name=nccl-allreduce-gpu-nvl1", "--nodes=2", "--nodelist=a1,a2",
         "--segment=2"],
        ["--job-name=nccl-allreduce-gpu-nvl2", "--nodes=2", "--nodelist=a3,a4",
         "--segment=2"]]
    assert fakes.submitted()[0][-1] == f"{nccl_blocks.JOBS}/nccl-allreduce-gpu.sbatch"


@pytest.mark.parametrize("args", [
    ["gpu", "--jobs", "/staged", "--", "--hold", "--time=10"],
    ["gpu", "--", "--hold", "--time=10"],
    ["--jobs", "/staged", "gpu", "--", "--hold", "--time=10"],
])
def test_options_after_the_double_dash_go_to_every_sbatch(fakes, args):
    fakes.cluster(sinfo="a1 idle\na2 idle\na3 idle\na4 idle\nu1 idle\n")
    done = fakes.run(*args)
    assert done.returncode == 0, done.stderr
    assert len(fakes.submitted()) == 2
    assert all(call[-3:-1] == ["--hold", "--time=10"] for call in fakes.submitted())


def test_an_option_of_its_own_after_the_double_dash_is_sbatchs(fakes):
    fakes.cluster()
    done = fakes.run("gpu", "--", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert fakes.submitted()[0][-2] == "--dry-run"


def test_dry_run_prints_the_commands_and_submits_nothing(fakes):
    fakes.cluster()
    done = fakes.run("gpu", "--dry-run", "--", "--hold")
    assert done.returncode == 0, done.stderr
    assert fakes.submitted() == []
    assert done.stdout.splitlines()[0] == (
        "sbatch --parsable --job-name=nccl-allreduce-gpu-s-1 --nodes=2 --nodelist=a1,a2 "
        f"--switches=1 --hold {nccl_blocks.JOBS}/nccl-allreduce-gpu.sbatch")


@pytest.mark.parametrize("topology", ["flat", ""])
def test_a_partition_without_a_topology_is_exit_1_and_says_so(fakes, topology):
    fakes.cluster(topology)
    done = fakes.run("gpu")
    assert done.returncode == 1
    assert "places its jobs by no topology" in done.stderr
    assert fakes.submitted() == []


def test_a_failing_slurm_command_is_exit_1_with_its_error(fakes):
    fakes.cluster()
    fakes.answer("scontrol show topology fabric", "!slurm_load_topo error: Unable to contact")
    done = fakes.run("gpu")
    assert done.returncode == 1
    assert "Unable to contact" in done.stderr and fakes.submitted() == []


@pytest.mark.parametrize("args", [[], ["gp u"], ["gpu;id"], ["--bogus", "gpu"]])
def test_bad_usage_is_exit_2_and_runs_nothing(fakes, args):
    done = fakes.run(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert not (fakes.folder / "calls.log").exists()
