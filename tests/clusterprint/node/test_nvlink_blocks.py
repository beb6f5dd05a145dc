"""The controller loop that puts each NVLink domain (an A4X sub-block) in a Slurm block of its
own: the pure decision over plain nodes and blocks, the parsing of what scontrol prints, and
one pass as a process against a fake scontrol (tests/support/remediation_fakes.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from clusterprint.node import common, nvlink_blocks
from clusterprint.node.nvlink_blocks import Move, Placed
from tests.support.node_log import entries, messages
from tests.support.paths import ROOT
from tests.support.remediation_fakes import fake_scontrol, node_line, scontrol_log

PROGRAM = ROOT / "clusterprint" / "node" / "nvlink_blocks.py"
BLOCKS = [f"nvl{i}" for i in range(1, 11)]
S1 = "fabric:fabric:c-x:b-1:s-1"
S2 = "fabric:fabric:c-x:b-1:s-2"
S3 = "fabric:fabric:c-x:b-2:s-3"


def assign(nodes: list[Placed], blocks: list[str] = BLOCKS):
    return nvlink_blocks.assignments(nodes, blocks, "nvlink")


def applied(nodes: list[Placed], moves: list[Move]) -> list[Placed]:
    """The nodes as Slurm holds them once the moves are made."""
    to = {move.node: move.block for move in moves}
    return [replace(node, block=to.get(node.name, node.block)) for node in nodes]


def blocks_of(nodes: list[Placed]) -> dict[str, set[str]]:
    """Each block's nodes."""
    found: dict[str, set[str]] = {}
    for node in nodes:
        if node.block:
            found.setdefault(node.block, set()).add(node.name)
    return found


def settled(nodes: list[Placed], blocks: list[str] = BLOCKS) -> list[Placed]:
    """The nodes after one pass's moves; a second pass must find nothing left to do."""
    moves, left = assign(nodes, blocks)
    after = applied(nodes, moves)
    assert assign(after, blocks) == ([], left), "a second pass moved nodes again"
    return after


# --- Assignments ---------------------------------------------------------------------------

def test_no_nodes_no_moves():
    assert assign([]) == ([], [])
    assert assign([], []) == ([], [])


def test_each_domain_gets_a_free_block_of_its_own_in_natural_order():
    nodes = [Placed("n1", S1, ""), Placed("n2", S1, ""), Placed("n3", S2, ""),
             Placed("n4", S2, "")]
    moves, left = assign(nodes, ["nvl10", "nvl2", "nvl1"])
    assert left == []
    assert moves == [Move("n1", "nvl1", f"{S1},nvlink:nvl1"),
                     Move("n2", "nvl1", f"{S1},nvlink:nvl1"),
                     Move("n3", "nvl2", f"{S2},nvlink:nvl2"),
                     Move("n4", "nvl2", f"{S2},nvlink:nvl2")]
    moves, _ = assign(nodes, ["nvl10", "nvl2"])
    assert {m.node: m.block for m in moves} == {"n1": "nvl2", "n2": "nvl2", "n3": "nvl10",
                                                "n4": "nvl10"}


def test_the_same_sub_block_name_under_another_block_is_the_same_domain():
    """The domain is the tree's leaf switch: Slurm has one switch of a name in a tree."""
    nodes = [Placed("n1", "fabric:fabric:c-x:b-1:s-1", ""),
             Placed("n2", "fabric:fabric:c-x:b-2:s-1", "")]
    assert blocks_of(settled(nodes)) == {"nvl1": {"n1", "n2"}}


def test_nodes_already_in_their_block_stay_and_a_second_pass_moves_nothing():
    nodes = [Placed("n1", S1, "nvl3"), Placed("n2", S1, "nvl3"), Placed("n3", S1, ""),
             Placed("n4", S2, "nvl1")]
    moves, left = assign(nodes)
    assert (moves, left) == ([Move("n3", "nvl3", f"{S1},nvlink:nvl3")], [])
    assert blocks_of(settled(nodes)) == {"nvl3": {"n1", "n2", "n3"}, "nvl1": {"n4"}}


def test_a_domain_spread_over_two_blocks_ends_in_one():
    nodes = [Placed("n1", S1, "nvl1"), Placed("n2", S1, "nvl2"), Placed("n3", S1, "nvl2"),
             Placed("n4", S1, "nvl2")]
    after = settled(nodes)
    assert len(blocks_of(after)) == 1
    assert set().union(*blocks_of(after).values()) == {"n1", "n2", "n3", "n4"}


def test_two_domains_in_one_block_the_larger_keeps_it_the_other_moves_to_a_free_one():
    nodes = [Placed("a1", S1, "nvl1"), Placed("b1", S2, "nvl1"), Placed("b2", S2, "nvl1")]
    moves, left = assign(nodes)
    assert (moves, left) == ([Move("a1", "nvl2", f"{S1},nvlink:nvl2")], [])
    assert blocks_of(settled(nodes)) == {"nvl1": {"b1", "b2"}, "nvl2": {"a1"}}


def test_a_tie_in_a_shared_block_is_decided_the_same_way_every_pass():
    nodes = [Placed("a1", S1, "nvl1"), Placed("b1", S2, "nvl1")]
    first = assign(nodes)
    assert first == assign(list(reversed(nodes)))
    assert len(first[0]) == 1 and first[0][0].block == "nvl2"
    assert len(blocks_of(settled(nodes))) == 2


def test_a_node_outside_the_tree_or_unplaced_gets_a_block_of_its_own():
    nodes = [Placed("n1", S1, ""), Placed("n2", S1, ""),
             Placed("u1", "fabric:fabric:unplaced", ""),
             Placed("u2", "fabric:fabric:unplaced", ""),
             Placed("t1", "", ""), Placed("t2", "fabric:fabric:c-x:b-1", "")]
    after = blocks_of(settled(nodes))
    assert sorted(after.values(), key=sorted) == [{"n1", "n2"}, {"t1"}, {"t2"}, {"u1"}, {"u2"}]


def test_a_node_with_no_tree_part_gets_only_its_block():
    moves, _ = assign([Placed("t1", "", "")])
    assert moves == [Move("t1", "nvl1", "nvlink:nvl1")]


def test_a_block_no_longer_declared_counts_as_no_block():
    nodes = [Placed("n1", S1, "nvl99"), Placed("n2", S1, "nvl99")]
    moves, left = assign(nodes, ["nvl1"])
    assert (moves, left) == ([Move("n1", "nvl1", f"{S1},nvlink:nvl1"),
                              Move("n2", "nvl1", f"{S1},nvlink:nvl1")], [])


def test_a_domain_without_a_free_block_is_reported_and_nothing_of_it_moves():
    nodes = [Placed("a1", S1, "nvl1"), Placed("b1", S2, ""), Placed("c1", S3, ""),
             Placed("u1", "fabric:fabric:unplaced", "")]
    moves, left = assign(nodes, ["nvl1", "nvl2"])
    assert left == ["s-2", "s-3"]
    assert moves == [Move("u1", "nvl2", "fabric:fabric:unplaced,nvlink:nvl2")]
    moves, left = assign(nodes, [])
    assert moves == [] and len(left) == 4


# --- What scontrol prints ------------------------------------------------------------------

def slurm_node(topology: str) -> common.SlurmNode:
    return common.SlurmNode("n1", frozenset(), ("a4x",), "", "", "", topology)


def test_placed_splits_the_tree_part_from_the_block():
    assert nvlink_blocks.placed(slurm_node(f"{S1},nvlink:nvl3"), "fabric", "nvlink") == \
        Placed("n1", S1, "nvl3")
    assert nvlink_blocks.placed(slurm_node(f"nvlink:nvl3,{S1}"), "fabric", "nvlink") == \
        Placed("n1", S1, "nvl3")


def test_placed_with_only_one_part_or_none():
    assert nvlink_blocks.placed(slurm_node(S1), "fabric", "nvlink") == Placed("n1", S1, "")
    assert nvlink_blocks.placed(slurm_node("nvlink:nvl2"), "fabric", "nvlink") == \
        Placed("n1", "", "nvl2")
    assert nvlink_blocks.placed(slurm_node(""), "fabric", "nvlink") == Placed("n1", "", "")


def test_placed_ignores_topologies_it_was_not_given():
    node = slurm_node(f"other:x:y,{S1},nvlink:nvl1")
    assert nvlink_blocks.placed(node, "fabric", "nvlink") == Placed("n1", S1, "nvl1")
    assert nvlink_blocks.placed(node, "fabric", "blocks") == Placed("n1", S1, "")


SHOW_TOPOLOGY = """\
BlockName=nvl1 BlockIndex=0 Nodes=a4x-[0001-0002] BlockSize=18
BlockName=nvl2 BlockIndex=1 Nodes= BlockSize=18
BlockName=nvl10 BlockIndex=9 Nodes=(null) BlockSize=18
AggregatedBlock=nvl[1-2] BlockIndex=0 Nodes=a4x-[0001-0002] BlockSize=36
"""


def test_block_names_reads_the_blocks_and_not_the_aggregated_ones():
    assert nvlink_blocks.block_names(SHOW_TOPOLOGY) == ["nvl1", "nvl2", "nvl10"]
    assert nvlink_blocks.block_names("") == []
    assert nvlink_blocks.block_names("  BlockName=nvl1 BlockIndex=0\nSwitchName=s Level=0\n"
                                     ) == []


# --- As a process --------------------------------------------------------------------------

def nvlink_node(name: str, topology: str, feature: str = "a4x") -> str:
    return node_line(name, state="IDLE+DYNAMIC_NORM", reason="", feature=feature) + (
        f" Topology={topology}" if topology else "")


def run_once(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-s", "-E", str(PROGRAM), "--tree", "fabric",
                           "--block", "nvlink", "--nodesets", "a4x,a4xb", "--once"],
                          env=env, capture_output=True, text=True, timeout=60, cwd="/")


def test_one_pass_moves_the_nodes_of_the_nvlink_nodesets_into_their_blocks(tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "topology.txt").write_text(SHOW_TOPOLOGY)
    (tmp_path / "nodes.txt").write_text("\n".join([
        nvlink_node("a4x-0001", f"{S1},nvlink:nvl1"),
        nvlink_node("a4x-0002", S1),
        nvlink_node("a4x-0003", S2),
        nvlink_node("b-0001", "fabric:fabric:unplaced", feature="a4xb"),
        nvlink_node("a4-0001", S3, feature="a4"),  # not an NVLink nodeset: left alone
    ]))
    done = run_once(env)
    assert done.returncode == 0, done.stderr
    # nvl1 stays a4x-0001's sub-block's; the free blocks go in natural order to the other
    # domains in name order (a node of its own is named node:<name>); the moves are made in
    # node order
    assert scontrol_log(tmp_path) == [
        ["scontrol", "update", "NodeName=a4x-0002", f"Topology={S1},nvlink:nvl1"],
        ["scontrol", "update", "NodeName=a4x-0003", f"Topology={S2},nvlink:nvl10"],
        ["scontrol", "update", "NodeName=b-0001",
         "Topology=fabric:fabric:unplaced,nvlink:nvl2"]]
    assert messages(done.stderr, "INFO") == ["a4x-0002 into block nvl1",
                                             "a4x-0003 into block nvl10",
                                             "b-0001 into block nvl2"]


def test_a_pass_with_every_node_in_place_changes_nothing(tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "topology.txt").write_text(SHOW_TOPOLOGY)
    (tmp_path / "nodes.txt").write_text(nvlink_node("a4x-0001", f"{S1},nvlink:nvl1"))
    done = run_once(env)
    assert (done.returncode, done.stderr) == (0, "")
    assert scontrol_log(tmp_path) == []


def test_a_domain_with_no_block_left_is_an_error_on_the_journal_and_the_pass_goes_on(tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "topology.txt").write_text("BlockName=nvl1 BlockIndex=0 Nodes= BlockSize=18\n")
    (tmp_path / "nodes.txt").write_text("\n".join([nvlink_node("a4x-0001", S1),
                                                   nvlink_node("a4x-0002", S2)]))
    done = run_once(env)
    assert done.returncode == 0, done.stderr
    assert [s for s, _ in entries(done.stderr)] == ["ERROR", "INFO"]
    assert "s-2" in messages(done.stderr, "ERROR")[0]
    assert scontrol_log(tmp_path) == [
        ["scontrol", "update", "NodeName=a4x-0001", f"Topology={S1},nvlink:nvl1"]]


def test_a_failing_scontrol_is_an_error_line_and_exit_1(tmp_path):
    env = fake_scontrol(tmp_path)
    (tmp_path / "scontrol.fails").write_text("slurm_load_topo error: Unable to contact slurm "
                                             "controller (connect failure)")
    done = run_once(env)
    assert (done.returncode, done.stdout) == (1, "")
    (error,) = messages(done.stderr, "ERROR")
    assert error.startswith("pass skipped: scontrol show topology nvlink failed (exit 1)")
    assert "Unable to contact slurm controller" in error
    assert scontrol_log(tmp_path) == []


def test_no_scontrol_on_path_is_an_error_line_and_exit_1(tmp_path):
    done = run_once({"PATH": str(tmp_path)})
    assert done.returncode == 1
    assert messages(done.stderr, "ERROR") == ["pass skipped: scontrol is not on PATH"]


def test_bad_usage_exits_2(tmp_path):
    done = subprocess.run([sys.executable, str(PROGRAM), "--tree", "fabric", "--once"],
                          capture_output=True, text=True, timeout=30, env={"PATH": str(tmp_path)})
    assert done.returncode == 2 and "--block" in done.stderr


def test_the_program_runs_from_its_own_folder_with_common_py_beside_it(tmp_path: Path):
    """What the controller installs: the two files in one folder, no package."""
    folder = tmp_path / "program"
    folder.mkdir()
    for name in ("nvlink_blocks.py", "common.py"):
        (folder / name).write_text((PROGRAM.parent / name).read_text())
    env = fake_scontrol(tmp_path)
    (tmp_path / "topology.txt").write_text(SHOW_TOPOLOGY)
    (tmp_path / "nodes.txt").write_text(nvlink_node("a4x-0002", S1))
    done = subprocess.run([sys.executable, "-s", "-E", str(folder / "nvlink_blocks.py"),
                           "--tree", "fabric", "--block", "nvlink", "--nodesets", "a4x",
                           "--once"], env=env, capture_output=True, text=True, timeout=60,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    assert scontrol_log(tmp_path)[-1] == ["scontrol", "update", "NodeName=a4x-0002",
                                          f"Topology={S1},nvlink:nvl1"]


def test_a_spread_domain_ends_in_the_block_most_of_its_nodes_are_in():
    """Fails on 442806a: the first block by node name wins (n1's nvl1), not the one that
    holds most of the domain, so three nodes move where one would do."""
    nodes = [Placed("n1", S1, "nvl1"), Placed("n2", S1, "nvl2"), Placed("n3", S1, "nvl2"),
             Placed("n4", S1, "nvl2")]
    moves, left = assign(nodes)
    assert (moves, left) == ([Move("n1", "nvl2", f"{S1},nvlink:nvl2")], [])


def test_a_domain_left_without_a_block_leaves_the_one_it_shares():
    # One block for two domains: s-1 (two nodes there) keeps it; s-2's node in it leaves it,
    # or a --segment job could take it for an NVLink neighbour of s-1's nodes.
    nodes = [nvlink_blocks.Placed("a", "fabric:fabric:c:b:s-1", "nvl1"),
             nvlink_blocks.Placed("b", "fabric:fabric:c:b:s-1", "nvl1"),
             nvlink_blocks.Placed("c", "fabric:fabric:c:b:s-2", "nvl1")]
    moves, left = nvlink_blocks.assignments(nodes, ["nvl1"], "nvlink")
    assert moves == [nvlink_blocks.Move("c", "", "fabric:fabric:c:b:s-2")]
    assert left == ["s-2"]
