"""The Topology= word a compute node registers with, as a module and as the process the boot
runs: its place from the metadata server when the value is one it can trust, else a switch of
its own, and never a character of the value outside the checked id pattern (the word lands
in a systemd unit's ExecStart, where ``%`` is a specifier, and in slurmd's ``--conf``, where
``:`` and ``,`` separate switches and topologies)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.facts.topology import PHYSICAL_TOPOLOGY_KEY
from clusterprint.node import common, topology
from tests.support.paths import ROOT

PROGRAM = ROOT / "clusterprint" / "node" / "topology.py"
#: A value as Google's "View VM topology" page shows it (ids longer than 16 digits, so the
#: switch names show the cut).
VALUE = {"cluster": "europe-west1-cluster-jfhb", "block": "3e3056e2a1b4c5d6e7f8",
         "subBlock": "1fc18636aa0b1c2d3e4f", "host": "6a1f3c2d"}
PLACED = "Topology=fabric:fabric:c-europe-west1-cluster-jfhb:b-3e3056e2a1b4c5d6:s-1fc18636aa0b1c2d"
UNPLACED = "Topology=fabric:fabric:unplaced"
#: What the word may hold at all: the tree, then switch names of the id characters.
WORD = re.compile(r"Topology=fabric:fabric(:[A-Za-z0-9_-]+)+")


def value_file(folder: Path, data: str | bytes) -> Path:
    path = folder / "value.json"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def word_of(folder: Path, data: str | bytes | object) -> tuple[str, str | None]:
    """The word and warning for a value: text or bytes as the file holds them, else JSON."""
    text = data if isinstance(data, str | bytes) else json.dumps(data)
    return topology.topology_word("fabric", "a4-x7k2", str(value_file(folder, text)))


def run(*args: str, cwd: Path | str = "/") -> subprocess.CompletedProcess:
    """The program as the boot runs it: a file whose common.py is beside it, no package."""
    return subprocess.run([sys.executable, "-s", "-E", str(PROGRAM), *args],
                          capture_output=True, text=True, timeout=30, cwd=cwd)


def test_the_key_is_the_one_the_facts_name():
    """The boot reads the attribute the facts name; the program's messages name its own."""
    assert topology.KEY == PHYSICAL_TOPOLOGY_KEY


# --- Placed --------------------------------------------------------------------------------

def test_a_placed_vm_joins_its_cluster_block_and_sub_block_with_ids_cut_to_16_digits(tmp_path):
    assert word_of(tmp_path, VALUE) == (PLACED, None)


def test_the_compute_api_spelling_subblock_is_read_too(tmp_path):
    value = {k: v for k, v in VALUE.items() if k != "subBlock"} | {"subblock": VALUE["subBlock"]}
    assert word_of(tmp_path, value) == (PLACED, None)


def test_the_metadata_servers_spelling_wins_when_both_are_there(tmp_path):
    word, _ = word_of(tmp_path, {**VALUE, "subblock": "ffff"})
    assert word == PLACED


def test_short_ids_are_kept_whole_and_the_host_is_not_part_of_the_word(tmp_path):
    word, warning = word_of(tmp_path, {"cluster": "c1", "block": "b_2", "subBlock": "s-3",
                                       "host": "h:o,s t%"})
    assert (word, warning) == ("Topology=fabric:fabric:c-c1:b-b_2:s-s-3", None)


def test_the_longest_cluster_id_makes_a_switch_name_slurm_takes(tmp_path):
    word, warning = word_of(tmp_path, {**VALUE, "cluster": "c" * 62})
    assert warning is None
    assert max(len(switch) for switch in word.split(":")[2:]) == topology.SWITCH_MAX


# --- Unplaced ------------------------------------------------------------------------------

UNTRUSTED = {
    "empty (no such attribute)": "",
    "only blank": " \n\t\n",
    "not JSON": "{cluster: c}",
    "cut short": json.dumps(VALUE)[:40],
    "not UTF-8": b'{"cluster": "\xff"}',
    "too long": json.dumps({**VALUE, "pad": "x" * topology.VALUE_MAX}),
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "a list": json.dumps([VALUE]),
    "a string": json.dumps("c/b/s"),
    "null": "null",
    "no cluster": {k: v for k, v in VALUE.items() if k != "cluster"},
    "no block": {k: v for k, v in VALUE.items() if k != "block"},
    "no sub-block": {k: v for k, v in VALUE.items() if k != "subBlock"},
    "a number id": {**VALUE, "block": 12345},
    "a null id": {**VALUE, "cluster": None},
    "a list id": {**VALUE, "subBlock": ["s"]},
    "an empty id": {**VALUE, "cluster": ""},
    "an id too long": {**VALUE, "cluster": "c" * 63},
    "an id starting with -": {**VALUE, "block": "-3e30"},
    "a dot": {**VALUE, "cluster": "europe.west1"},
    "a slash": {**VALUE, "block": "3e30/56e2"},
    "non-ASCII letters": {**VALUE, "cluster": "europe-wëst1"},
}
#: What would break the word where it lands: Slurm's separators, the unit's specifier and
#: quotes, whitespace; in each part of the path, at the start, the middle and the end.
HOSTILE = [":", ",", " ", '"', "'", "\r", "%", "\t", "\x00", "=", "\\", ";", "$", "\u2028"]


def hostile(chars: list[str]) -> dict[str, dict]:
    """VALUE with each of ``chars`` put before, inside and after each id of the path (short
    ids: a block or sub-block is cut to 16 digits, which would hide a character past it)."""
    return {f"{key} {at} {char!r}": {**VALUE, key: text}
            for key in ("cluster", "block", "subBlock") for char in chars
            for at, text in (("before", char + "3e30"), ("inside", "3e" + char + "30"),
                             ("after", "3e30" + char))}


@pytest.mark.parametrize("data", hostile(HOSTILE).values(), ids=hostile(HOSTILE).keys())
def test_no_character_outside_the_id_pattern_reaches_the_word(tmp_path, data):
    word, warning = word_of(tmp_path, data)
    assert WORD.fullmatch(word), word
    assert (word, bool(warning)) == (UNPLACED, True)


@pytest.mark.parametrize("data", UNTRUSTED.values(), ids=UNTRUSTED.keys())
def test_a_value_it_cannot_trust_leaves_the_node_with_the_other_unplaced_ones(tmp_path, data):
    word, warning = word_of(tmp_path, data)
    assert word == UNPLACED
    assert warning and "a4-x7k2" in warning and "switch unplaced" in warning
    assert "\n" not in warning


def test_a_missing_file_is_a_node_placed_nowhere_not_a_failed_boot(tmp_path):
    word, warning = topology.topology_word("fabric", "a4-x7k2", str(tmp_path / "absent"))
    assert word == UNPLACED and "absent" in warning


def test_the_warning_says_the_metadata_server_has_no_place_for_an_empty_value(tmp_path):
    _, warning = word_of(tmp_path, "")
    assert f"no {PHYSICAL_TOPOLOGY_KEY}" in warning


def test_a_value_just_under_the_limit_is_read(tmp_path):
    text = json.dumps(VALUE)
    text += " " * (topology.VALUE_MAX - len(text))
    assert word_of(tmp_path, text) == (PLACED, None)


def test_a_value_one_byte_over_the_limit_is_not(tmp_path):
    text = json.dumps(VALUE)
    text += " " * (topology.VALUE_MAX + 1 - len(text))
    assert word_of(tmp_path, text)[0] == UNPLACED


# --- As a process --------------------------------------------------------------------------

def test_the_process_prints_the_word_alone_and_exits_0(tmp_path):
    done = run("--tree", "fabric", "--node", "a4-x7k2", "--value",
               str(value_file(tmp_path, json.dumps(VALUE))))
    assert (done.returncode, done.stdout, done.stderr) == (0, PLACED + "\n", "")


def test_the_process_runs_with_common_py_from_its_own_folder_only(tmp_path):
    """What the boot installs: the two files in one folder, run from elsewhere."""
    for name in ("topology.py", "common.py"):
        (tmp_path / name).write_text((PROGRAM.parent / name).read_text())
    done = subprocess.run([sys.executable, "-s", "-E", str(tmp_path / "topology.py"), "--tree",
                           "fabric", "--node", "a4-x7k2", "--value",
                           str(value_file(tmp_path, json.dumps(VALUE)))],
                          capture_output=True, text=True, timeout=30, cwd="/")
    assert (done.returncode, done.stdout) == (0, PLACED + "\n"), done.stderr


def test_an_unplaced_node_is_a_warning_on_the_journal_and_still_exits_0(tmp_path):
    done = run("--tree", "fabric", "--node", "a4-x7k2", "--value",
               str(value_file(tmp_path, "")))
    assert (done.returncode, done.stdout) == (0, UNPLACED + "\n")
    assert done.stderr.startswith(f"<{common.SYSLOG_LEVELS['WARNING']}>topology: ")
    assert done.stderr.count("\n") == 1 and "node a4-x7k2" in done.stderr


def test_a_missing_value_file_as_a_process_is_unplaced_not_a_failure(tmp_path):
    done = run("--tree", "fabric", "--node", "a4-x7k2", "--value", str(tmp_path / "absent"))
    assert (done.returncode, done.stdout) == (0, UNPLACED + "\n")
    assert done.stderr.startswith("<4>")


@pytest.mark.parametrize(("args", "said"), [
    (["--tree", "fabric", "--node", "a4-x7k2"], "--value"),
    (["--tree", "fabric", "--value", "v"], "--node"),
    (["--node", "a4-x7k2", "--value", "v"], "--tree"),
    (["--tree", "fabric", "--node", "a4:x", "--value", "v"], "not a plain name"),
    (["--tree", "fabric", "--node", "", "--value", "v"], "not a plain name"),
    (["--tree", "fabric", "--node=-a4", "--value", "v"], "not a plain name"),
    (["--tree", "fabric", "--node", "a4 x", "--value", "v"], "not a plain name"),
    (["--tree", "fabric", "--node", "a4%n", "--value", "v"], "not a plain name"),
    (["--tree", "fabric", "--node", "n" * 64, "--value", "v"], "not a plain name"),
    (["--tree", "fab,ric", "--node", "a4-x7k2", "--value", "v"], "not a plain name"),
    (["--tree", "fab:ric", "--node", "a4-x7k2", "--value", "v"], "not a plain name"),
])
def test_bad_usage_exits_2_and_prints_no_word(args, said):
    done = run(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert said in done.stderr


def test_the_longest_plain_node_name_is_taken(tmp_path):
    node = "n" * 63
    done = run("--tree", "fabric", "--node", node, "--value", str(value_file(tmp_path, "")))
    assert done.returncode == 0
    assert done.stdout == UNPLACED + "\n"


# --- Line breaks (fail on 442806a: ``$`` in the id and name patterns matches before a
# trailing newline, so ``"3e30\n"`` passes as an id and its newline reaches the word) --------

LINE_BREAKS = hostile(["\n"]) | {
    f"long {key}, a newline past the cut": {**VALUE, key: "a" * 17 + "\n"}
    for key in ("block", "subBlock")}


@pytest.mark.parametrize("data", LINE_BREAKS.values(), ids=LINE_BREAKS.keys())
def test_a_line_break_anywhere_in_an_id_leaves_the_node_unplaced(tmp_path, data):
    word, warning = word_of(tmp_path, data)
    assert (word, bool(warning)) == (UNPLACED, True)


@pytest.mark.parametrize("option", ["--node", "--tree"])
def test_a_name_ending_in_a_line_break_is_bad_usage(tmp_path, option):
    args = {"--tree": "fabric", "--node": "a4-x7k2"}
    args[option] += "\n"
    done = run(*[word for pair in args.items() for word in pair], "--value",
               str(value_file(tmp_path, json.dumps(VALUE))))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
