"""The node programs' shared module, as a module and as a process: what each program relies
on when a tool, a file or a server answers something that proves nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from clusterprint.node import common
from tests.support.local_http import serve
from tests.support.paths import ROOT

NODE = ROOT / "clusterprint" / "node"


# --- Lines ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line"), [
    ("GPU 3\nfell off", "GPU 3\\nfell off"),
    ("nul\x00byte", "nul\\x00byte"),
    ("tab\there\r", "tab\\there\\r"),
    ("c1\x85 and \x9b[31m", "c1\\x85 and \\x9b[31m"),
    ("line\u2028separator", "line\\u2028separator"),
    ("plain: ünïcode stays", "plain: ünïcode stays"),
])
def test_one_line_escapes_every_control_character_and_keeps_the_rest(text, line):
    assert common.one_line(text) == line
    assert len(common.one_line(text).splitlines()) == 1


def test_clip_fits_the_limit_and_never_cuts_an_escape_in_two():
    assert common.clip("x" * 300) == "x" * 247 + "..."
    for cut in range(240, 251):
        clipped = common.clip("y" * cut + "\x00" * 20, 250)
        assert len(clipped) <= 250 and clipped.endswith("...")
        assert not clipped[:-3].endswith(("\\", "\\x", "\\x0")), clipped[-12:]
    assert common.clip("short") == "short"


def test_joined_keeps_whole_reasons_counts_the_rest_and_fits_slurms_field():
    reasons = [f"cp:gpu-xid: Xid 79 on GPU {i} (GPU has fallen off the bus)" for i in range(8)]
    text = common.joined(reasons)
    assert len(text) <= common.REASON_MAX
    kept = text.split(common.SEPARATOR)
    assert kept[-1].startswith("+") and kept[-1].endswith(" more")
    assert len(kept) - 1 + int(kept[-1].split()[0][1:]) == len(reasons)
    assert all(part in reasons for part in kept[:-1])
    assert common.joined(["cp:a: one", "cp:b: two"]) == "cp:a: one; cp:b: two"


def test_joined_reasons_stay_one_line_even_when_a_tool_printed_newlines():
    text = common.joined(["cp:gpu-dcgm: diag said\nDRAIN ME", "cp:nic: x" * 100])
    assert "\n" not in text and len(text) <= common.REASON_MAX


def test_a_log_entry_is_one_json_line_with_its_syslog_priority(capsys):
    common.Log("remediate")("a4-0001\nfell off", "ALERT", node="a4\x00", count=3)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("<1>{")
    entry = json.loads(err[3:])
    assert entry == {"severity": "ALERT", "program": "remediate",
                     "message": "a4-0001\\nfell off", "node": "a4\\x00", "count": 3}


@pytest.fixture
def journal(tmp_path):
    """A datagram socket where journald's would be: what a program sends it."""
    path = tmp_path / "journal.socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        yield path, sock


def test_an_entry_outside_a_units_stream_also_goes_to_the_journal_with_its_tag(
        journal, capsys, monkeypatch):
    path, sock = journal
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)  # as slurmd runs the health check
    common.Log("healthcheck", journal=str(path))("gpu 3 lost", "ERROR", node="n1")
    fields = dict(line.split("=", 1) for line in sock.recv(65536).decode().splitlines())
    assert fields["SYSLOG_IDENTIFIER"] == "clusterprint-healthcheck"
    assert fields["PRIORITY"] == "3"
    assert json.loads(fields["MESSAGE"])["message"] == "gpu 3 lost"
    assert capsys.readouterr().err.startswith("<3>{")  # and stderr, as before


def test_an_entry_whose_stderr_is_the_journal_is_written_once(journal, monkeypatch):
    path, sock = journal
    status = os.fstat(2)
    monkeypatch.setenv("JOURNAL_STREAM", f"{status.st_dev}:{status.st_ino}")
    common.Log("remediate", journal=str(path))("ok")
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):
        sock.recv(65536)


def test_no_journal_socket_leaves_stderr_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    common.Log("capacity", journal=str(tmp_path / "none"))("resumed", node="n1")
    assert '"resumed"' in capsys.readouterr().err


# --- JSON ----------------------------------------------------------------------------------

def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("data", "said"), [
    (nested(100_000), "nested deeper than 32 levels"),
    (nested(33), "nested deeper than 32 levels"),
    ('{"a": ' * 40 + "1" + "}" * 40, "nested deeper than 32 levels"),
    (b"{\"gpu\": \"\xff\xfe\"}", "not UTF-8 (byte 9)"),
    ("<html><body>502</body></html>", "not JSON"),
    ("", "not JSON"),
    ('{"a": "nul \x00 raw"}', "not JSON"),
])
def test_load_json_refuses_what_proves_nothing_naming_it(data, said):
    with pytest.raises(common.BadJSON) as refused:
        common.load_json(data, "dcgmi diag -j")
    assert str(refused.value).startswith("dcgmi diag -j: ") and said in str(refused.value)
    assert "\n" not in str(refused.value)


def test_load_json_takes_what_is_deep_enough_and_escaped_nuls():
    assert common.load_json(nested(32), "x") == json.loads(nested(32))
    assert common.load_json(b'{"a": "nul \\u0000 escaped"}', "x") == {"a": "nul \x00 escaped"}


def test_depth_counts_lists_and_objects_without_recursion():
    assert common.depth(1) == 0 and common.depth([]) == 1
    assert common.depth({"a": [1, {"b": [2]}]}) == 4
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert common.depth(deep) == 50_001


@pytest.mark.parametrize(("value", "kind", "ok"), [
    (3, int, True), (True, int, False), (True, bool, True), ("3", int, False),
    (2.5, (int, float), True), (None, str, False), ([], dict, False),
])
def test_expect_takes_only_its_kind_and_never_a_bool_for_a_number(value, kind, ok):
    if ok:
        assert common.expect(value, kind, "count") is value
    else:
        with pytest.raises(common.BadJSON, match="^count: expected "):
            common.expect(value, kind, "count")


# --- Files ---------------------------------------------------------------------------------

def test_atomic_write_replaces_the_file_whole_with_its_mode_and_leaves_no_temp(tmp_path):
    target = tmp_path / "state" / "s.json"
    common.atomic_write(target, '{"a": 1}', mode=0o600)
    common.atomic_write(target, b'{"a": 2}')
    assert json.loads(target.read_text()) == {"a": 2}
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["s.json"]


def test_a_write_cut_short_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "s.json"
    common.atomic_write(target, '{"old": true}')

    def full(fd, *args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        common.atomic_write(target, '{"new": true}')
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def write_many(path: str, writer: int, count: int) -> None:
    """A process writing ``path`` ``count`` times, as a second health check run would."""
    for number in range(count):
        common.atomic_write(path, json.dumps({"writer": writer, "n": number, "pad": "x" * 4096}))


def test_two_processes_writing_one_file_never_fail_and_a_reader_sees_it_whole(tmp_path):
    target = tmp_path / "healthcheck-state.json"
    common.atomic_write(target, "{}")
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=write_many, args=(str(target), w, 600)) for w in (1, 2)]
    for writer in writers:
        writer.start()
    reads = 0
    while any(w.is_alive() for w in writers):
        json.loads(target.read_text())  # never half a file
        reads += 1
    for writer in writers:
        writer.join()
    assert [w.exitcode for w in writers] == [0, 0]
    assert reads > 0 and json.loads(target.read_text())["n"] == 599
    assert [p.name for p in tmp_path.iterdir()] == ["healthcheck-state.json"]


def count_up(path: str, times: int) -> None:
    """Read, add one, write, under the lock: a lost update shows in the final count."""
    for _ in range(times):
        with common.locked(path):
            value = json.loads(Path(path).read_text())["count"]
            time.sleep(0.001)  # a pass deciding: the other process would write meanwhile
            common.atomic_write(path, json.dumps({"count": value + 1}))


def test_the_lock_keeps_two_processes_read_change_write_from_losing_an_update(tmp_path):
    target = tmp_path / "state.json"
    common.atomic_write(target, '{"count": 0}')
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=count_up, args=(str(target), 150)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert json.loads(target.read_text()) == {"count": 300}
    assert (tmp_path / "state.json.lock").exists()


# --- Commands ------------------------------------------------------------------------------

def tool(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    """A PATH with one script ``name`` running ``body``."""
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}


def test_run_fails_closed_on_a_missing_a_hanging_and_a_failing_tool(tmp_path):
    env = tool(tmp_path, "nvidia-smi", "sleep 30")
    with pytest.raises(common.CommandFailed, match="^dcgmi is not on PATH$"):
        common.run(["dcgmi", "diag"], 5, env)
    started = time.monotonic()
    with pytest.raises(common.CommandFailed, match="^nvidia-smi did not answer within 1s$"):
        common.run(["nvidia-smi", "--query-gpu=index"], 1, env)
    assert time.monotonic() - started < 10
    with pytest.raises(common.CommandFailed, match="no time left"):
        common.run(["nvidia-smi"], 0, env)
    env = tool(tmp_path, "ip", "echo 'Cannot open netlink\nsocket' >&2; exit 2")
    with pytest.raises(common.CommandFailed,
                       match=r"^ip -j route failed \(exit 2\): socket$"):
        common.output(["ip", "-j", "route"], 5, env)


def test_run_keeps_every_byte_of_non_utf8_output(tmp_path):
    env = tool(tmp_path, "nvidia-smi", r"printf 'GPU\377\000x\n'")
    done = common.run(["nvidia-smi"], 5, env)
    assert done.stdout == "GPU\ufffd\x00x\n"
    assert common.one_line(done.stdout) == "GPU\ufffd\\x00x\\n"


# --- The metadata server -------------------------------------------------------------------

@pytest.fixture
def server():
    """A local server answering each path with the (status, body, headers) set for it."""
    answers: dict[str, tuple[int, bytes, dict[str, str]]] = {}

    def answer(handler: BaseHTTPRequestHandler, verb: str) -> None:
        status, body, headers = answers.get(handler.path, (404, b"not found", {}))
        if handler.headers.get("Metadata-Flavor") != "Google":
            status, body, headers = 403, b"no flavor", {}
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    http = serve(answer)
    http.answers = answers
    http.url = f"http://127.0.0.1:{http.server_address[1]}"
    yield http
    http.shutdown()
    http.server_close()


def test_metadata_get_sends_the_flavor_and_returns_body_and_etag(server):
    server.answers["/v1/key"] = (200, b"value", {"ETag": "abc"})
    assert common.metadata_get(server.url + "/v1/key", 5) == common.Answer(b"value", "abc")
    with pytest.raises(common.MetadataError) as missing:
        common.metadata_get(server.url + "/v1/other", 5)
    assert missing.value.status == 404 and str(missing.value) == "metadata server: HTTP 404"


def test_metadata_get_on_a_server_that_is_not_there_is_an_error_not_a_hang():
    started = time.monotonic()
    with pytest.raises(common.MetadataError, match="^metadata server: ") as refused:
        common.metadata_get("http://127.0.0.1:9/", 5)
    assert refused.value.status is None and time.monotonic() - started < 5


@pytest.mark.parametrize(("body", "said"), [
    (b"<html>Service Unavailable</html>", "not JSON"),
    (b'{"expires_in": 3599}', "access_token: expected str, got NoneType"),
    (b'{"access_token": 7, "expires_in": 3599}', "access_token: expected str, got int"),
    (b'{"access_token": "t", "expires_in": "soon"}', "expires_in: expected int or float"),
    (b'{"access_token": "", "expires_in": 3599}', "an empty access_token"),
    (b'[' * 50 + b']' * 50, "nested deeper"),
])
def test_a_token_answer_of_the_wrong_shape_is_a_metadata_error(server, body, said):
    server.answers["/token"] = (200, body, {})
    with pytest.raises(common.MetadataError, match=said):
        common.access_token(server.url + "/token", 5)


@pytest.mark.parametrize(("expires_in", "lifetime"), [
    (10**12, common.TOKEN_LIFETIME_MAX_S - common.TOKEN_MARGIN_S),
    (3599, 3599 - common.TOKEN_MARGIN_S), (-5, 0), (30, 0),
])
def test_a_token_is_renewed_within_an_hour_whatever_its_expires_in_says(server, expires_in,
                                                                          lifetime):
    server.answers["/token"] = (200, json.dumps({"access_token": "ya29.t",
                                                 "expires_in": expires_in}).encode(), {})
    before = time.monotonic()
    token = common.access_token(server.url + "/token", 5)
    assert token.value == "ya29.t"
    assert before + lifetime <= token.renew_at <= time.monotonic() + lifetime


# --- Slurm's nodes -------------------------------------------------------------------------

LINE = ("NodeName=a4-a4-0001 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 "
        "AvailableFeatures=a4 ActiveFeatures=a4,gpu Gres=gpu:8 NodeAddr=127.0.0.1 "
        "State=IDLE+DRAIN+DYNAMIC_NORM ThreadsPerCore=1 Partitions=a4 "
        "SlurmdStartTime=2026-12-01T10:31:52 LastBusyTime=2026-12-01T10:31:52 "
        "Reason=cp:gpu-ecc: 3 uncorrected errors on GPU 5; cp:disk: / has 2 GiB free "
        "[root@2026-12-01T10:31:53]")


def test_parse_nodes_reads_state_flags_features_and_the_whole_reason_with_its_stamp():
    (node,) = common.parse_nodes("header\n" + LINE + "\n")
    assert node.name == "a4-a4-0001" and node.features == ("a4", "gpu")
    assert node.state == {"IDLE", "DRAIN", "DYNAMIC_NORM"}
    assert node.reason == "cp:gpu-ecc: 3 uncorrected errors on GPU 5; cp:disk: / has 2 GiB free"
    assert node.reason_stamp == "root@2026-12-01T10:31:53"
    assert node.slurmd_start == "2026-12-01T10:31:52"
    assert node.drained and node.checked_failed and not node.busy and not node.down


@pytest.mark.parametrize(("state", "flags"), [
    ("DOWN+DYNAMIC_NORM*", {"DOWN", "DYNAMIC_NORM", "NOT_RESPONDING"}),
    ("MIXED+DRAIN", {"MIXED", "DRAIN"}), ("COMPLETING+DRAIN", {"COMPLETING", "DRAIN"}),
    ("IDLE*", {"IDLE", "NOT_RESPONDING"}), ("", set()),
])
def test_parse_nodes_reads_every_state_form(state, flags):
    (node,) = common.parse_nodes(LINE.replace("IDLE+DRAIN+DYNAMIC_NORM", state).split(
        " Reason=")[0])
    assert node.state == flags and node.reason == "" and node.reason_stamp == ""
    assert node.busy == bool(flags & {"MIXED", "COMPLETING"})
    assert not node.checked_failed


def test_an_operators_reason_is_not_the_health_checks():
    (node,) = common.parse_nodes(LINE.replace("Reason=cp:", "Reason=maintenance cp:"))
    assert node.drained and not node.checked_failed


#: Slurm 26.05 prints Topology (and Comment, Extra, ...) after Reason, one space apart.
TOPOLOGY = "fabric:fabric:c-x:b-3e30:s-1fc1,nvlink:nvl3"
HEAD = LINE.split(" Reason=")[0]


def test_parse_nodes_reads_the_topology_of_a_node_without_a_reason():
    (node,) = common.parse_nodes(f"{HEAD} Topology={TOPOLOGY}")
    assert node.topology == TOPOLOGY
    assert (node.reason, node.reason_stamp) == ("", "")
    assert node.slurmd_start == "2026-12-01T10:31:52" and node.features == ("a4", "gpu")


def test_a_reason_with_its_stamp_then_more_fields_keeps_both_and_the_topology():
    (node,) = common.parse_nodes(f"{LINE} Comment=rack-7 Extra=x Topology={TOPOLOGY}")
    assert node.reason == "cp:gpu-ecc: 3 uncorrected errors on GPU 5; cp:disk: / has 2 GiB free"
    assert node.reason_stamp == "root@2026-12-01T10:31:53"
    assert node.topology == TOPOLOGY and node.checked_failed


def test_a_reason_without_a_stamp_ends_where_the_next_field_starts():
    (node,) = common.parse_nodes(f"{HEAD} Reason=maintenance window Topology={TOPOLOGY}")
    assert (node.reason, node.reason_stamp, node.topology) == ("maintenance window", "",
                                                               TOPOLOGY)
    (node,) = common.parse_nodes(f"{HEAD} Reason=maintenance Comment= Topology={TOPOLOGY}")
    assert (node.reason, node.topology) == ("maintenance", TOPOLOGY)


def test_a_bracketed_address_inside_a_reason_is_not_its_stamp():
    """Fails on 442806a: the stamp is the first `` [x@y]`` of the reason, no longer its last
    before the next field, so the reason is cut there and the stamp is wrong."""
    (node,) = common.parse_nodes(f"{HEAD} Reason=ask [ops@site] first [root@2026-12-01T10:31:53]"
                                 f" Topology={TOPOLOGY}")
    assert (node.reason, node.reason_stamp) == ("ask [ops@site] first",
                                                "root@2026-12-01T10:31:53")
    assert node.topology == TOPOLOGY


def test_nodes_without_a_topology_have_none():
    nodes = common.parse_nodes(f"{LINE}\n{HEAD}\n{HEAD} Topology={TOPOLOGY}\n")
    assert [n.topology for n in nodes] == ["", "", TOPOLOGY]
    assert nodes[0].reason_stamp == "root@2026-12-01T10:31:53"


# --- As a process --------------------------------------------------------------------------

def test_a_program_beside_it_imports_it_from_its_own_folder_outside_the_package(tmp_path):
    """What the renderer ships: common.py in the program's folder, no clusterprint package."""
    (tmp_path / "common.py").write_text((NODE / "common.py").read_text())
    (tmp_path / "program.py").write_text(
        "import common, sys\n"
        "print(common.joined(['cp:a: ' + sys.argv[1], 'cp:b: two']))\n"
        "common.Log('program')('done', 'WARNING')\n")
    done = subprocess.run([sys.executable, "-s", "-E", str(tmp_path / "program.py"), "x\ny"],
                          capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cp:a: x\\ny; cp:b: two\n"
    assert done.stderr.startswith("<4>{") and '"program": "program"' in done.stderr


@pytest.mark.parametrize(("reasons", "limit", "text"), [
    # The second reason does not fit beside "+1 more": the rest is counted.
    (["cp:a: 1234567890", "cp:b: 12345", "cp:c: x"], 30, "cp:a: 1234567890; +2 more"),
    # The last reason fits exactly (no count after it): all of them.
    (["cp:a: 1", "cp:b: 2"], 16, "cp:a: 1; cp:b: 2"),
    # One character less: the first reason and a count, cut to leave room for it.
    (["cp:a: 1", "cp:b: 2"], 15, "cp:a: ; +1 more"),
    # The first reason alone is longer than the limit: clipped to it, then cut for the count.
    (["cp:a: " + "x" * 34], 20, "cp:a: xxxxxxxxxxx..."),
    (["cp:a: " + "x" * 34, "cp:b: 2"], 20, "cp:a: xxxxx; +1 more"),
    # The first reason leaves too little room for the second: cut to fit the count.
    (["cp:a: 123456789012", "cp:b: 1"], 20, "cp:a: 12345; +1 more"),
])
def test_joined_gives_exactly_what_fits_at_each_boundary(reasons, limit, text):
    assert common.joined(reasons, limit) == text
    assert len(text) <= limit


def test_a_failed_commands_message_is_its_last_line_clipped_or_its_exit_code_alone():
    argv = ["nvidia-smi", "--query-gpu=index", "-i", "0"]
    said = subprocess.CompletedProcess(argv, 9, "", "first\n" + "e" * 100 + "\n")
    assert common.failure(argv, said) == f"nvidia-smi -i 0 failed (exit 9): {'e' * 77}..."
    silent = subprocess.CompletedProcess(argv, 9, "", "")
    assert common.failure(argv, silent) == "nvidia-smi -i 0 failed (exit 9)"
    stdout_only = subprocess.CompletedProcess(argv, 2, "no devices\n", "")
    assert common.failure(argv, stdout_only) == "nvidia-smi -i 0 failed (exit 2): no devices"
