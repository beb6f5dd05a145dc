"""The node health check against recorded tool output: as functions on the parsed text,
and as the process Slurm runs, its tools stand-ins on PATH (tests/support/healthcheck_fakes.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from clusterprint.node import healthcheck as hc
from clusterprint.node.common import REASON_MAX
from tests.support.healthcheck_fakes import (
    FIXTURES,
    PROGRAM,
    calls,
    node_config,
    run_patched,
    run_program,
    scenario,
    stub_bin,
    write_config,
)

FAMILIES = ["h100", "h200", "b200"]


def recorded(name: str, family: str = "h100", fault: str | None = None) -> str:
    """One recorded output: the fault's file where it has one, else the healthy node's."""
    path = FIXTURES / "faults" / fault / name if fault else None
    return (path if path and path.exists() else FIXTURES / family / name).read_text()


def gpus(family: str = "h100", fault: str | None = None) -> list[hc.Gpu]:
    return hc.parse_gpus(recorded("nvidia-smi-query-gpu", family, fault))


# As functions on the recorded text.

@pytest.mark.parametrize("family", FAMILIES)
def test_a_healthy_node_of_each_family_has_no_reason(family):
    found = gpus(family)
    assert [g.index for g in found] == list(range(8))
    assert hc.gpu_reasons(found, 8, family.upper()) == []
    assert hc.remap_reasons(recorded("nvidia-smi-query-remapped-rows", family), found) == []
    assert hc.nvlink_reasons(recorded("nvidia-smi-nvlink-e", family), 8, 0) == []
    assert hc.parse_xids(recorded("journalctl", family)) == []
    assert hc.dcgm_reasons(recorded("dcgmi-diag-r1", family), 1) == []
    assert hc.dcgm_reasons(recorded("dcgmi-diag-r2", family), 2) == []


def test_the_ecc_count_is_read_from_its_own_column_on_every_gpu():
    # Cluster Toolkit's gpu-test summed column 2 of a one-column query: always 0.
    assert hc.gpu_reasons(gpus(fault="ecc"), 8, "H100") == [
        "cp:gpu-ecc: 3 uncorrected errors on GPU 5"]


def test_ecc_that_reports_no_count_is_unhealthy():
    assert hc.gpu_reasons(gpus(fault="ecc-off"), 8, "H100") == [
        "cp:gpu-ecc: GPU 2 reports no uncorrected ECC count (ECC off?)"]


def test_a_missing_gpu_and_a_foreign_model_are_named():
    assert hc.gpu_reasons(gpus(fault="gpu-missing"), 8, "H100") == [
        "cp:gpu-count: 7 GPUs, the machine type has 8"]
    assert hc.gpu_reasons(gpus(fault="gpu-model"), 8, "H100") == [
        "cp:gpu-model: GPU 3 is NVIDIA A100-SXM4-80GB, not H100"]


@pytest.mark.parametrize(("fault", "reason"), [
    ("remap-pending", "cp:gpu-remap: row remap pending on GPU 2 (needs a reset)"),
    ("remap-failed", "cp:gpu-remap: row remapping failed on GPU 6"),
])
def test_row_remap_pending_or_failed_names_the_gpu(fault, reason):
    text = recorded("nvidia-smi-query-remapped-rows", fault=fault)
    assert hc.remap_reasons(text, gpus()) == [reason]


def test_nvlink_errors_are_read_on_every_gpu_and_link():
    text = recorded("nvidia-smi-nvlink-e", fault="nvlink-crc")
    assert hc.nvlink_reasons(text, 8, 0) == ["cp:gpu-nvlink: GPU 3 link 7 CRC Errors 12"]
    assert hc.nvlink_reasons(text, 8, 12) == []
    assert len(hc.parse_nvlink(text)) == 8
    assert all(len(links) == 18 for links in hc.parse_nvlink(text).values())


def test_a_gpu_missing_from_the_nvlink_counters_is_unhealthy():
    text = recorded("nvidia-smi-nvlink-e", fault="nvlink-gpu-missing")
    assert hc.nvlink_reasons(text, 8, 0) == [
        "cp:gpu-nvlink: nvidia-smi nvlink -e lists no GPU 7"]


def test_blackwell_counters_count_errors_not_corrected_symbols():
    links = hc.parse_nvlink(recorded("nvidia-smi-nvlink-e", "b200"))
    counters = set(links[0][0])
    assert "Rx Errors" in counters and "Link recovery failed events" in counters
    assert not {"Symbol Errors", "Effective BER", "Link recovery successful events",
                "Total link recovery events"} & counters


def test_a_draining_xid_is_named_with_its_gpu_and_meaning():
    xids = hc.parse_xids(recorded("journalctl", fault="xid-79"))
    assert xids == [("0000:8a:00", 79)]
    assert hc.xid_reasons(xids, gpus()) == [
        "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)"]


@pytest.mark.parametrize("xid", sorted(hc.APPLICATION_XIDS))
def test_application_xids_do_not_drain(xid):
    assert hc.xid_reasons([("0000:04:00", xid)], gpus()) == []


def test_an_unlisted_xid_drains_fail_closed():
    xids = hc.parse_xids(recorded("journalctl", fault="xid-unknown"))
    assert hc.xid_reasons(xids, gpus()) == [
        "cp:gpu-xid: Xid 999 on GPU 1 (not in the classification table)"]


def test_the_classification_tables_do_not_overlap():
    assert not set(hc.APPLICATION_XIDS) & set(hc.DRAINING_XIDS)
    assert set(hc.APPLICATION_XIDS) == {13, 31, 43, 45, 68}


def test_the_kernel_log_cursor_is_the_last_one_shown():
    assert hc.last_cursor(recorded("journalctl", fault="xid-79")) == (
        "s=8e1f;i=b77;b=5c2e;m=2f00;t=62;x=12")
    assert hc.last_cursor("") is None


def test_dcgm_failures_name_the_test_and_gpu():
    assert hc.dcgm_reasons(recorded("dcgmi-diag-r2", fault="dcgm-r2-memory"), 2) == [
        "cp:gpu-dcgm: diag -r 2 memory failed on GPU 5: GPU 5 memory: DBE detected in the "
        "memory test"]
    assert hc.dcgm_reasons(recorded("dcgmi-diag-r1", fault="dcgm-fail"), 1) == [
        "cp:gpu-dcgm: diag -r 1 software failed"]


@pytest.mark.parametrize("text", ["", "Error: unable to connect", "[]", "{}",
                                  json.dumps({"DCGM Diagnostic": {"test_categories": []}})])
def test_a_dcgm_report_that_is_not_one_fails_closed(text):
    (reason,) = hc.dcgm_reasons(text, 1)
    assert reason.startswith("cp:gpu-dcgm: dcgmi diag -r 1 ")


def test_the_primary_nic_is_the_default_routes():
    assert hc.route_device(recorded("ip-route")) == "enp0s12"
    assert hc.route_device(recorded("ip-route", fault="nic-no-route")) is None
    assert hc.has_ipv4(recorded("ip-addr"))
    assert not hc.has_ipv4(recorded("ip-addr", fault="nic-no-address"))


def test_bus_ids_of_nvidia_smi_and_the_kernel_log_match():
    assert hc.normal_bus_id("00000000:8A:00.0") == hc.normal_bus_id("0000:8a:00")


@pytest.mark.parametrize(("environ", "failed"), [
    ({"SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_JOB_EXIT_CODE": "0"}, False),
    ({"SLURM_JOB_EXIT_CODE2": "1:0", "SLURM_JOB_EXIT_CODE": "256"}, True),
    ({"SLURM_JOB_EXIT_CODE2": "0:9", "SLURM_JOB_EXIT_CODE": "9"}, True),
    ({"SLURM_JOB_EXIT_CODE": "256"}, True),
    ({}, False),
])
def test_the_epilog_knows_a_failed_job_from_its_exit_code_or_signal(environ, failed):
    assert hc.job_failed(environ) is failed


# As a process, its tools on PATH.

@pytest.fixture
def node(tmp_path):
    """A node's fixtures folder, the fakes' bin folder and a config factory."""
    def make(family="h100", *faults, tools=None, **config):
        fixtures = scenario(tmp_path / "fixtures", family or "h100", *faults)
        bin_dir = stub_bin(tmp_path / "bin", *([tools] if tools is not None else []))
        path = write_config(tmp_path, node_config(tmp_path, family, **config))
        return fixtures, bin_dir, path
    return make


@pytest.mark.parametrize("family", FAMILIES)
def test_a_healthy_node_exits_0_and_prints_nothing(node, family):
    fixtures, bin_dir, config = node(family)
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert "dcgmi diag -r 1 -j" in calls(fixtures)
    assert not [c for c in calls(fixtures) if c.startswith("scontrol")]


PROCESS_FAULTS = [
    ("ecc", "cp:gpu-ecc: 3 uncorrected errors on GPU 5"),
    ("ecc-off", "cp:gpu-ecc: GPU 2 reports no uncorrected ECC count (ECC off?)"),
    ("gpu-model", "cp:gpu-model: GPU 3 is NVIDIA A100-SXM4-80GB, not H100"),
    ("remap-pending", "cp:gpu-remap: row remap pending on GPU 2 (needs a reset)"),
    ("remap-failed", "cp:gpu-remap: row remapping failed on GPU 6"),
    ("nvlink-crc", "cp:gpu-nvlink: GPU 3 link 7 CRC Errors 12"),
    ("nvlink-gpu-missing", "cp:gpu-nvlink: nvidia-smi nvlink -e lists no GPU 7"),
    ("xid-79", "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)"),
    ("dcgm-fail", "cp:gpu-dcgm: diag -r 1 software failed"),
    ("dcgm-no-hostengine", "cp:gpu-dcgm: dcgmi diag -r 1 failed (exit 255): Error: Unable to "
                           "connect to host engine. Host engine connection invalid/disco..."),
    ("nvidia-smi-fails", "cp:gpu-count: nvidia-smi failed (exit 9): NVIDIA-SMI has failed "
                         "because it couldn't communicate with the NVIDIA driver...."),
    ("nic-no-address", "cp:nic: the primary NIC enp0s12 has no IPv4 address"),
    ("nic-no-route", "cp:nic: no default route, so no primary NIC"),
]


@pytest.mark.parametrize(("fault", "reason"), PROCESS_FAULTS, ids=[f for f, _ in PROCESS_FAULTS])
def test_each_fault_exits_1_with_its_one_reason(node, fault, reason):
    fixtures, bin_dir, config = node("h100", fault)
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout.splitlines()) == (1, [reason]), done.stderr
    assert not [c for c in calls(fixtures) if c.startswith("scontrol")]


def test_an_application_xid_keeps_the_node_healthy(node):
    fixtures, bin_dir, config = node("h100", "xid-13")
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (0, "")
    assert "Xid 13 on 0000:04:00 (graphics engine exception): an application error" in (
        done.stderr)


@pytest.mark.parametrize("tool", ["nvidia-smi", "dcgmi"])
def test_a_gpu_node_without_its_tools_is_unhealthy(node, tool):
    fixtures, bin_dir, config = node(tools=tuple(t for t in ("nvidia-smi", "dcgmi",
                                                             "journalctl", "ip") if t != tool))
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout.splitlines()) == (
        1, [f"cp:gpu-tools: {tool} is not on PATH"])


def test_a_cpu_node_runs_no_gpu_tool(node):
    fixtures, bin_dir, config = node(None, tools=("ip",))
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert calls(fixtures) == ["ip -j route show default", "ip -j -4 addr show dev enp0s12"]


def test_a_hung_nvidia_smi_is_cut_off_and_unhealthy(node):
    fixtures, bin_dir, config = node("h100", "nvidia-smi-hangs", command_timeout_s=2)
    done = run_program(config, fixtures, bin_dir, "--no-drain", "--mode", "interval")
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["cp:gpu-count: nvidia-smi did not answer within 2s"]


def test_a_full_disk_and_a_missing_mount_are_named(node, tmp_path):
    unmounted = tmp_path / "scratch"
    unmounted.mkdir()
    # /dev/shm: a mounted file system any user can write (the unit tier runs unprivileged).
    fixtures, bin_dir, config = node(
        None, tools=("ip",), mounts=[str(unmounted), "/dev/shm"],
        disks=[{"path": str(tmp_path), "min_free_gib": 10**9, "if_mounted": False},
               {"path": str(tmp_path / "localssd"), "min_free_gib": 1, "if_mounted": True}])
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    (disk, mount) = done.stdout.splitlines()
    assert done.returncode == 1
    assert disk.startswith(f"cp:disk: {tmp_path} has ") and disk.endswith(" needs 1000000000")
    assert mount == f"cp:mount: {unmounted} is not mounted"


def test_a_mount_that_cannot_be_written_is_named(node):
    fixtures, bin_dir, config = node(None, tools=("ip",), mounts=["/proc"])
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert done.returncode == 1
    assert done.stdout.startswith("cp:mount: /proc is not writable (")


def test_an_unreadable_config_is_unhealthy(tmp_path):
    fixtures, bin_dir = scenario(tmp_path / "f"), stub_bin(tmp_path / "bin")
    done = run_program(tmp_path / "missing.json", fixtures, bin_dir, "--no-drain")
    assert done.returncode == 1
    assert done.stdout.startswith(f"cp:config: cannot read {tmp_path / 'missing.json'}")


def test_without_no_drain_it_drains_the_node_with_every_reason(node):
    fixtures, bin_dir, config = node("h100", "ecc", "remap-pending")
    done = run_program(config, fixtures, bin_dir)
    assert done.returncode == 1
    reason = ("cp:gpu-ecc: 3 uncorrected errors on GPU 5; "
              "cp:gpu-remap: row remap pending on GPU 2 (needs a reset)")
    assert f"scontrol update nodename=node-1 state=drain reason={reason}" in calls(fixtures)


def test_a_node_drained_by_an_operator_keeps_its_reason(node):
    fixtures, bin_dir, config = node("h100", "ecc")
    (fixtures / "scontrol-show-node").write_text(
        "NodeName=node-1 State=IDLE+DRAIN Reason=disk swap [admin@2026-12-01T09:00:00]\n")
    done = run_program(config, fixtures, bin_dir)
    assert done.returncode == 1
    assert not [c for c in calls(fixtures) if c.startswith("scontrol update")]
    assert "already drained by someone else (disk swap)" in done.stderr


def test_an_xid_is_reported_once_per_occurrence(node):
    fixtures, bin_dir, config = node("h100", "xid-79")
    first = run_program(config, fixtures, bin_dir)
    again = run_program(config, fixtures, bin_dir)
    assert first.stdout.splitlines() == [
        "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)"]
    assert (again.returncode, again.stdout) == (0, "")
    assert "journalctl -k -b 0 -q --no-pager -o short-iso --show-cursor "\
           "--after-cursor=s=8e1f;i=b77;b=5c2e;m=2f00;t=62;x=12" in calls(fixtures)


def test_no_drain_reads_the_kernel_log_again_next_time(node):
    fixtures, bin_dir, config = node("h100", "xid-79")
    for _ in range(2):
        done = run_program(config, fixtures, bin_dir, "--no-drain")
        assert done.stdout.startswith("cp:gpu-xid: Xid 79 on GPU 6")


def test_an_xid_is_remembered_only_once_the_drain_worked(node):
    fixtures, bin_dir, config = node("h100", "xid-79")
    (bin_dir / "scontrol").unlink()
    assert run_program(config, fixtures, bin_dir).returncode == 1
    assert "could not drain" in run_program(config, fixtures, bin_dir).stderr
    assert not (config.parent / "state.json").exists()


@pytest.mark.parametrize(("exit_code", "ran"), [("0:0", False), ("1:0", True)])
def test_the_epilog_runs_dcgm_level_2_only_after_a_failed_job(node, exit_code, ran):
    fixtures, bin_dir, config = node("h100", "dcgm-r2-memory")
    done = run_program(config, fixtures, bin_dir, "--mode", "epilog", "--no-drain",
                       env={"SLURM_JOB_EXIT_CODE2": exit_code})
    assert done.returncode == (1 if ran else 0)
    assert ("dcgmi diag -r 2 -j" in calls(fixtures)) is ran
    assert calls(fixtures) == [] or ran


def test_the_interval_run_skips_the_dcgm_diagnostic(node):
    fixtures, bin_dir, config = node("h100", "dcgm-fail")
    done = run_program(config, fixtures, bin_dir, "--mode", "interval", "--no-drain")
    assert (done.returncode, done.stdout) == (0, "")
    assert not [c for c in calls(fixtures) if c.startswith("dcgmi")]


def test_a_config_missing_what_a_check_needs_is_unhealthy(node):
    fixtures, bin_dir, config = node("h100", gpu={"nvlink": True})
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (1, f"cp:config: {config}: gpu: no model\n")
    assert calls(fixtures) == []


# Fail closed: a tool's output that proves nothing is a reason naming the tool.

QUERY = recorded("nvidia-smi-query-gpu")
REMAP = recorded("nvidia-smi-query-remapped-rows")
NVLINK = recorded("nvidia-smi-nvlink-e")
LINES = QUERY.splitlines(keepends=True)


def nvlink_gpu(text: str, index: int) -> str:
    """GPU ``index``'s block of ``nvidia-smi nvlink -e``: its header and its links."""
    return text[text.index(f"GPU {index}:"):text.index(f"GPU {index + 1}:")
                if f"GPU {index + 1}:" in text else len(text)]


class Answering:
    """A runner whose every command prints one recorded text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def output(self, argv: list[str]) -> str:
        return self.text


def answering(text: str) -> hc.Check:
    """A check of an 8-GPU H100 node whose every command prints ``text``."""
    return hc.Check(hc.Config.from_json(json.dumps(node_config(FIXTURES))), Answering(text),
                    "all")


GPU_QUERY_FAULTS = [
    ("nine", QUERY + "8, NVIDIA H100 80GB HBM3, 00000000:8C:00.0, 0\n",
     ["cp:gpu-count: 9 GPUs, the machine type has 8"]),
    ("index-twice", "".join(LINES[:7]) + LINES[6].replace("8A", "8B"),
     ["cp:gpu-count: nvidia-smi --query-gpu lists GPU 6 twice"]),
    ("bus-twice", "".join(LINES[:7]) + LINES[6].replace("6,", "7,", 1),
     ["cp:gpu-count: nvidia-smi --query-gpu lists PCI 0000:8a:00 twice"]),
    ("index-gap", "".join(LINES[:7]) + LINES[7].replace("7,", "9,", 1),
     ["cp:gpu-count: nvidia-smi --query-gpu lists GPUs 0, 1, 2, 3, 4, 5, 6, 9, not 0 to 7"]),
    ("ecc-garbage", QUERY.replace("0A:00.0, 0", "0A:00.0, ²"),
     ["cp:gpu-ecc: nvidia-smi --query-gpu gives GPU 2 an uncorrected ECC count of '²'"]),
    ("bus-garbage", QUERY.replace("00000000:0A:00.0", "[N/A]"),
     ["cp:gpu-count: nvidia-smi --query-gpu printed an unexpected line: "
      "2, NVIDIA H100 80GB HBM3, [N/A], 0"]),
]


def interval_run_with(node, fixture: str, text: str):
    """The program as HealthCheckProgram runs it on an H100 node whose tool prints ``text``
    for ``fixture`` (the other tools answer as a healthy node's do)."""
    fixtures, bin_dir, config = node("h100")
    (fixtures / fixture).write_text(text)
    return run_program(config, fixtures, bin_dir, "--no-drain", "--mode", "interval")


@pytest.mark.parametrize(("case", "text", "reasons"), GPU_QUERY_FAULTS,
                         ids=[c for c, _, _ in GPU_QUERY_FAULTS])
def test_a_gpu_query_that_proves_nothing_is_unhealthy(case, text, reasons, node):
    check = answering(text)
    assert check.guarded("gpu-count", check.query_gpus) == reasons
    done = interval_run_with(node, "nvidia-smi-query-gpu", text)
    assert done.returncode == 1 and set(reasons) <= set(done.stdout.splitlines()), done.stdout


REMAP_FAULTS = [
    ("seven", "".join(REMAP.splitlines(keepends=True)[:7]),
     ["cp:gpu-remap: nvidia-smi --query-remapped-rows lists no GPU 7"]),
    ("nine", REMAP + "00000000:8C:00.0, 0, 0\n",
     ["cp:gpu-remap: nvidia-smi --query-remapped-rows lists '00000000:8C:00.0', "
      "which nvidia-smi --query-gpu does not"]),
    ("twice", REMAP.replace("00000000:8B:00.0", "00000000:8A:00.0"),
     ["cp:gpu-remap: nvidia-smi --query-remapped-rows lists GPU 6 twice",
      "cp:gpu-remap: nvidia-smi --query-remapped-rows lists no GPU 7"]),
    ("pending-na", REMAP.replace("0A:00.0, 0, 0", "0A:00.0, [N/A], 0"),
     ["cp:gpu-remap: nvidia-smi --query-remapped-rows gives GPU 2 no remap state "
      "(pending [N/A], failure 0)"]),
    ("failure-na", REMAP.replace("0A:00.0, 0, 0", "0A:00.0, 0, [N/A]"),
     ["cp:gpu-remap: nvidia-smi --query-remapped-rows gives GPU 2 no remap state "
      "(pending 0, failure [N/A])"]),
    ("empty", "", ["cp:gpu-remap: nvidia-smi --query-remapped-rows lists no GPU "
                   "0, 1, 2, 3, 4, 5, 6, 7"]),
]


@pytest.mark.parametrize(("case", "text", "reasons"), REMAP_FAULTS,
                         ids=[c for c, _, _ in REMAP_FAULTS])
def test_a_remap_query_that_proves_nothing_is_unhealthy(case, text, reasons, node):
    assert hc.remap_reasons(text, gpus()) == reasons
    done = interval_run_with(node, "nvidia-smi-query-remapped-rows", text)
    assert (done.returncode, done.stdout.splitlines()) == (1, reasons), done.stderr


NVLINK_FAULTS = [
    ("nine", NVLINK + nvlink_gpu(NVLINK, 7).replace("GPU 7:", "GPU 8:"),
     ["cp:gpu-nvlink: nvidia-smi nvlink -e lists GPU 8, the machine type has 8"]),
    ("twice", NVLINK.replace(nvlink_gpu(NVLINK, 7), nvlink_gpu(NVLINK, 6)),
     ["cp:gpu-nvlink: nvidia-smi nvlink -e lists GPU 6 twice"]),
    ("na", NVLINK.replace("Link 4: CRC Errors: 0", "Link 4: CRC Errors: [N/A]", 1),
     ["cp:gpu-nvlink: nvidia-smi nvlink -e gives GPU 0 link 4 CRC Errors as '[N/A]'"]),
    ("no-links", NVLINK.replace(nvlink_gpu(NVLINK, 3), nvlink_gpu(NVLINK, 3).split("\n")[0]
                                + "\n"),
     ["cp:gpu-nvlink: nvidia-smi nvlink -e lists no link of GPU 3"]),
    ("empty", "", [f"cp:gpu-nvlink: nvidia-smi nvlink -e lists no GPU {n}" for n in range(8)]),
]


@pytest.mark.parametrize(("case", "text", "reasons"), NVLINK_FAULTS,
                         ids=[c for c, _, _ in NVLINK_FAULTS])
def test_nvlink_counters_that_prove_nothing_are_unhealthy(case, text, reasons, node):
    check = answering(text)
    assert check.guarded("gpu-nvlink", check.nvlink) == reasons
    done = interval_run_with(node, "nvidia-smi-nvlink-e", text)
    assert (done.returncode, done.stdout.splitlines()) == (1, reasons), done.stderr


def report(*statuses: str) -> str:
    """A dcgmi diag -j report with one test per status."""
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": f"test{n}", "results": [{"status": status}]}
        for n, status in enumerate(statuses)]}]}})


DCGM_FAULTS = [
    ("exit-without-failure", report("Pass"), 3,
     "cp:gpu-dcgm: dcgmi diag -r 1 failed (exit 3), with no failed test in its report"),
    ("every-test-skipped", report("Skip", "Skip"), 0,
     "cp:gpu-dcgm: dcgmi diag -r 1 ran no tests (2 skipped or not run)"),
    ("not-run", report("Not Run"), 0,
     "cp:gpu-dcgm: dcgmi diag -r 1 ran no tests (1 skipped or not run)"),
    ("no-results", json.dumps({"DCGM Diagnostic": {"test_categories": [
        {"tests": [{"name": "memory", "results": []}]}]}}), 0,
     "cp:gpu-dcgm: dcgmi diag -r 1 ran no tests"),
    ("unknown-status", report("Pass", "Maybe"), 0,
     "cp:gpu-dcgm: dcgmi diag -r 1 gives test1 the status 'maybe'"),
]


@pytest.mark.parametrize(("case", "text", "code", "reason"), DCGM_FAULTS,
                         ids=[c for c, *_ in DCGM_FAULTS])
def test_a_dcgm_diagnostic_that_proves_nothing_is_unhealthy(case, text, code, reason, node):
    assert hc.dcgm_reasons(text, 1, code, "dcgmi said so" if code else "") == [reason]
    fixtures, bin_dir, config = node("h100")
    (fixtures / "dcgmi-diag-r1").write_text(text)
    (fixtures / "dcgmi-diag-r1.exit").write_text(str(code))
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout.splitlines()) == (1, [reason]), done.stderr


def test_a_gpu_missing_from_the_query_is_named_by_every_query_that_lists_it(node):
    fixtures, bin_dir, config = node("h100", "gpu-missing")
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout.splitlines()) == (1, [
        "cp:gpu-count: 7 GPUs, the machine type has 8",
        "cp:gpu-remap: nvidia-smi --query-remapped-rows lists '00000000:8B:00.0', which "
        "nvidia-smi --query-gpu does not"])


def test_a_gpu_nodeset_config_without_a_gpu_section_is_unhealthy(node, tmp_path):
    raw = node_config(tmp_path)
    del raw["gpu"]
    with pytest.raises(hc.BadConfig, match="gpus is 8 but there is no gpu section"):
        hc.Config.from_json(json.dumps(raw))
    fixtures, bin_dir, _ = node("h100")
    config = write_config(tmp_path, raw)
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (1, (
        f"cp:config: {config}: gpus is 8 but there is no gpu section (gpu: null turns the "
        "GPU checks off)\n"))
    assert calls(fixtures) == []


def test_gpu_null_on_a_gpu_nodeset_checks_the_node_but_not_its_gpus(node):
    fixtures, bin_dir, config = node("h100", "ecc", gpu=None)
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert not [c for c in calls(fixtures) if not c.startswith("ip ")]


# Never a crash: hostile output is a reason naming the tool, each one line within the cap.

DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE = [
    ("dcgmi-diag-r1", DEEP.encode(), "cp:gpu-dcgm: dcgmi diag -r 1 -j: nested deeper than "),
    ("dcgmi-diag-r1", json.dumps({"DCGM Diagnostic": {"test_categories": [
        {"tests": "memory"}]}}).encode(),
     "cp:gpu-dcgm: dcgmi diag -r 1 -j: tests: expected list, got str"),
    ("dcgmi-diag-r1", json.dumps({"DCGM Diagnostic": {"test_categories": [{"tests": [
        {"name": "memory", "results": [{"status": 7}]}]}]}}).encode(),
     "cp:gpu-dcgm: dcgmi diag -r 1 -j: the status of memory: expected str, got int"),
    ("dcgmi-diag-r1", json.dumps({"DCGM Diagnostic": {"test_categories": [{"tests": [
        {"name": "memory", "results": [{"status": "Fail", "warnings": [7]}]}]}]}}).encode(),
     "cp:gpu-dcgm: dcgmi diag -r 1 -j: memory: a warning: expected dict, got int"),
    ("dcgmi-diag-r1", b'{"DCGM Diagnostic": "\xff\xfe"}',
     "cp:gpu-dcgm: dcgmi diag -r 1 -j: DCGM Diagnostic: expected dict, got str"),
    ("ip-route", DEEP.encode(), "cp:nic: ip -j route show default: nested deeper than "),
    ("ip-route", b'{"dev": "enp0s12"}',
     "cp:nic: ip -j route show default: expected list, got dict"),
    ("ip-route", b'[{"dev": 12}]', "cp:nic: ip -j route show default: dev: expected str, got int"),
    ("ip-route", b'[{"dev": "-n\\u0000\\nx"}]',
     "cp:nic: ip -j route show default names the device '-n\\x00\\nx'"),
    ("ip-addr", b'[{"addr_info": {"local": "10.0.0.5"}}]',
     "cp:nic: ip -j -4 addr show dev: addr_info: expected list, got dict"),
    ("nvidia-smi-query-gpu", QUERY.replace("NVIDIA H100 80GB HBM3, 00000000:0B",
                                           "NVIDIA\x00A100\n, 00000000:0B").encode(),
     "cp:gpu-count: nvidia-smi --query-gpu printed an unexpected line: 3, NVIDIA\\x00A100"),
    ("nvidia-smi-query-gpu", QUERY.replace("NVIDIA H100 80GB HBM3, 00000000:0B",
                                           "NVIDIA \udcff\x1b[2J, 00000000:0B").encode(
                                               "utf-8", "surrogateescape"),
     "cp:gpu-model: GPU 3 is NVIDIA \ufffd\\x1b[2J, not H100"),
    ("nvidia-smi-query-remapped-rows", b"\xff\xff\x00, 0, 0\n" * 8,
     "cp:gpu-remap: nvidia-smi --query-remapped-rows lists '\ufffd\ufffd\\x00', which "),
    ("journalctl", b"NVRM: Xid (PCI:0000:8a:00): 79, pid=1\x00\xff\n-- cursor: s=1;i=2\x00\n",
     "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)"),
]


@pytest.mark.parametrize(("name", "data", "reason"), HOSTILE,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(HOSTILE)])
def test_hostile_tool_output_is_a_reason_naming_the_tool_never_a_crash(name, data, reason,
                                                                       node):
    fixtures, bin_dir, config = node("h100")
    (fixtures / name).write_bytes(data)
    done = run_program(config, fixtures, bin_dir)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert [line for line in lines if line.startswith(reason)], (lines, done.stderr)
    assert "Traceback" not in done.stderr and "cp:config" not in done.stdout
    assert all(line.startswith("cp:") and line.isprintable() and len(line) <= REASON_MAX
               for line in lines)
    (drained,) = [c for c in calls(fixtures) if c.startswith("scontrol update")]
    assert len(drained.split(" reason=", 1)[1]) <= REASON_MAX


def test_a_bad_cursor_in_the_kernel_log_is_never_put_on_journalctls_command_line(node):
    fixtures, bin_dir, config = node("h100")
    (fixtures / "journalctl").write_bytes(b"-- cursor: s=1;i=2\x00 --output=x\n")
    for _ in range(2):
        assert run_program(config, fixtures, bin_dir).returncode == 0
    assert not [c for c in calls(fixtures) if "--after-cursor" in c]


def test_the_drain_reason_of_many_faults_fits_slurms_reason_field(node):
    fixtures, bin_dir, config = node("h100")
    (fixtures / "nvidia-smi-query-gpu").write_text("".join(
        f"{n}, NVIDIA A100-SXM4-80GB {'x' * 200}, 00000000:{n + 4:02X}:00.0, 9\n"
        for n in range(8)))
    done = run_program(config, fixtures, bin_dir)
    assert done.returncode == 1 and len(done.stdout.splitlines()) >= 16
    assert all(len(line) <= REASON_MAX for line in done.stdout.splitlines())
    (drained,) = [c for c in calls(fixtures) if c.startswith("scontrol update")]
    reason = drained.split(" reason=", 1)[1]
    assert len(reason) <= REASON_MAX and re.search(r"; \+\d+ more$", reason), reason


WRONG_CONFIGS = [
    ({"gpu": "x"}, "gpu: expected dict, got str"),
    ({"mounts": 5}, "mounts: expected list, got int"),
    ({"mounts": ["home"]}, "'home' is not an absolute path"),
    ({"disks": [{"path": 5, "min_free_gib": 1}]}, "disks[0].path: expected str, got int"),
    ({"gpus": "8"}, "gpus: expected int, got str"),
    ({"gpus": 0}, "a gpu section on a nodeset with no GPUs"),
    ({"nvlink_error_threshold": True}, "nvlink_error_threshold: expected int, got bool"),
    ({"gpu": {"model": "H100", "dcgm_level": 3}}, "gpu: dcgm_level is 3, not one of [1, 2]"),
    ({"budget_s": {"interval": 70}}, "budget_s: interval is 70.0: it must be over 0 and at "
                                     "most 45s, so the run ends inside Slurm's 60s limit"),
    ({"budget_s": {"interval": float("nan")}}, "budget_s: interval is nan"),
    ({"budget_s": {"prolog": 60}}, "DCGM level 1 takes up to 90s, more than budget_s.prolog"),
    ({"command_timeout_s": 50}, "command_timeout_s is 50.0: it must be over 0 and at most "
                                "the interval budget, 45s"),
    ({"mount_timeout_s": 0}, "mount_timeout_s is 0.0"),
    ({"checks": []}, "the config: unknown key 'checks'"),
]


@pytest.mark.parametrize(("changes", "message"), WRONG_CONFIGS,
                         ids=[next(iter(c)) + str(i) for i, (c, _) in enumerate(WRONG_CONFIGS)])
def test_a_wrong_config_is_a_config_reason_never_a_traceback(changes, message, node, tmp_path):
    raw = {**node_config(tmp_path), **changes}
    with pytest.raises(hc.BadConfig) as refused:
        hc.Config.from_json(json.dumps(raw), "the file")
    assert message in str(refused.value) and str(refused.value).startswith("the file: ")
    fixtures, bin_dir, config = node("h100", **changes)
    done = run_program(config, fixtures, bin_dir, "--no-drain", "--mode", "interval")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"cp:config: {config}: ") and message in line


@pytest.mark.parametrize("text", ["[]", "null", "{}", '{"nodeset": "gpu"}', DEEP, "\xff"])
def test_a_config_that_is_no_object_of_its_fields_is_refused(text):
    with pytest.raises(hc.BadConfig, match="^the file: "):
        hc.Config.from_json(text.encode("utf-8", "surrogateescape") if text == "\xff"
                            else text, "the file")


def test_the_config_render_writes_reads_back_as_the_same_object():
    config = hc.Config("gpu", 8, hc.GpuChecks("H100", nvlink=True), mounts=("/home",))
    assert hc.Config.from_json(json.dumps(dataclasses.asdict(config))) == config


# The state file: the interval run and the prolog write it at once.

@pytest.fixture
def memory_folder():
    """A folder in memory (tmpfs): fsync is free there, so thousands of writes are quick."""
    folder = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    yield folder
    shutil.rmtree(folder)


WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
import healthcheck
for n in range(int(sys.argv[4])):
    healthcheck.save_cursor(sys.argv[2], f"s=1;i={2 * n + int(sys.argv[3]):x};b={'0' * 4000}")
"""


def writers(path: Path, count: int, parities: str = "01") -> list[subprocess.Popen]:
    """Processes saving ``count`` cursors each into ``path`` as the program does, one the
    even entries of one journal, the other the odd ones: each run reads further than the
    other in turn, as an interval run and a prolog do."""
    return [subprocess.Popen([sys.executable, "-c", WRITER, str(PROGRAM.parent), str(path),
                              parity, str(count)], stderr=subprocess.PIPE, text=True)
            for parity in parities]


def test_two_runs_saving_the_cursor_at_once_never_fail_and_a_reader_sees_a_whole_file(
        memory_folder):
    path = memory_folder / "state.json"
    hc.save_cursor(str(path), "s=1;i=0")
    running, seen = writers(path, 3000), [0]
    while any(p.poll() is None for p in running):
        cursor = hc.read_cursor(str(path))
        assert cursor is not None and cursor.startswith("s=1;i="), cursor
        seen.append(int(cursor.split(";")[1][2:], 16))
    assert [(p.returncode, p.stderr.read()) for p in running] == [(0, "")] * 2
    assert len(seen) > 10
    # The cursor never went back (which would report an Xid a second time), and the
    # furthest one read is the one kept.
    assert seen == sorted(seen)
    assert hc.read_cursor(str(path)).split(";")[1] == f"i={2 * 2999 + 1:x}"
    assert sorted(p.name for p in memory_folder.iterdir()) == ["state.json", "state.json.lock"]


def test_a_run_killed_mid_write_leaves_the_last_state_readable(memory_folder):
    path = memory_folder / "state.json"
    hc.save_cursor(str(path), "s=1;i=0")
    for delay in (0.05, 0.1, 0.2, 0.3):
        (writer,) = writers(path, 10**6, "1")
        time.sleep(delay)
        writer.kill()
        writer.wait()
        assert (hc.read_cursor(str(path)) or "").startswith("s=1;i=")


def test_a_failing_write_leaves_the_old_state_and_no_temp_file(memory_folder, monkeypatch):
    path = memory_folder / "state.json"
    hc.save_cursor(str(path), "s=1;i=1")

    def disk_full(handle):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        hc.save_cursor(str(path), "s=1;i=2")
    assert hc.read_cursor(str(path)) == "s=1;i=1"
    assert sorted(p.name for p in memory_folder.iterdir()) == ["state.json", "state.json.lock"]


def test_an_older_cursor_never_replaces_a_newer_one():
    assert hc.later("s=1;i=10", "s=1;i=f") and not hc.later("s=1;i=f", "s=1;i=10")
    assert hc.later("s=2;i=1", "s=1;i=f")  # another journal: the one just read counts


def test_a_state_that_cannot_be_saved_is_logged_and_the_run_ends_with_its_reasons(node,
                                                                                 tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    fixtures, bin_dir, config = node("h100", "xid-79", state_file=str(blocker / "state.json"))
    done = run_program(config, fixtures, bin_dir)
    assert (done.returncode, done.stdout) == (
        1, "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)\n")
    assert "cannot save the kernel log cursor" in done.stderr and "Traceback" not in done.stderr


def test_a_corrupt_state_file_reads_the_whole_boot_again(node, tmp_path):
    fixtures, bin_dir, config = node("h100", "xid-79")
    (tmp_path / "state.json").write_bytes(b'{"cursor": ' + b"[" * 10_000)
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert done.stdout.startswith("cp:gpu-xid: Xid 79 on GPU 6")
    assert "state.json: nested deeper than" in done.stderr


# Budgets and hangs: every run ends inside Slurm's limit, whatever hangs.

def test_the_default_budgets_end_inside_slurms_limits():
    budgets = hc.Budgets()
    assert budgets.interval + hc.DRAIN_S + hc.JOIN_GRACE_S < hc.HEALTH_CHECK_KILL_S
    for mode in ("all", "prolog", "epilog"):
        assert getattr(budgets, mode) + hc.DRAIN_S < hc.PROLOG_EPILOG_TIMEOUT_S
    assert hc.DCGM_S[2] < budgets.epilog and hc.DCGM_S[1] < budgets.prolog
    with pytest.raises(hc.BadConfig, match="interval is 46"):
        hc.Budgets(interval=46)


def test_the_budget_cuts_off_commands_that_each_keep_their_own_timeout(node):
    # Two ip calls of 2.5 s each, each within its 3 s timeout: the 4 s budget stops the second.
    fixtures, bin_dir, config = node(None, tools=("ip",), command_timeout_s=3,
                                     mount_timeout_s=3, budget_s={"interval": 4})
    for name in ("ip-route", "ip-addr"):
        (fixtures / f"{name}.sleep").write_text("2.5")
    start = time.monotonic()
    done = run_program(config, fixtures, bin_dir, "--no-drain", "--mode", "interval")
    assert time.monotonic() - start < 4 + hc.JOIN_GRACE_S + 2
    assert done.returncode == 1
    assert re.fullmatch(r"cp:nic: ip -j -4 addr did not answer within [12]s\n", done.stdout)


def test_a_check_that_never_returns_ends_the_interval_run_before_slurms_kill(node):
    # statvfs on a hung NFS mount blocks in the kernel: no timeout or kill reaches it. With
    # the default budget the run still reports and exits before Slurm's 60 s kill.
    fixtures, bin_dir, config = node("h100")
    start = time.monotonic()
    done = run_patched("import os, threading\nos.statvfs = lambda path: threading.Event().wait()",
                       config, fixtures, bin_dir, "--mode", "interval")
    elapsed = time.monotonic() - start
    assert hc.Budgets().interval <= elapsed < hc.HEALTH_CHECK_KILL_S - hc.MARGIN_S
    assert (done.returncode, done.stdout) == (
        1, "cp:disk: did not finish within the health check's budget\n"), done.stderr
    assert [c for c in calls(fixtures) if c.startswith("scontrol update")]


def test_a_step_that_blocks_is_named_once_the_budget_is_spent(monkeypatch):
    start = time.monotonic()
    reasons = hc.parallel([("disk", lambda: threading.Event().wait() or []),
                           ("nic", lambda: ["cp:nic: no default route, so no primary NIC"])],
                          start + 1)
    assert 1 <= time.monotonic() - start < 2
    assert reasons == ["cp:disk: did not finish within the health check's budget",
                       "cp:nic: no default route, so no primary NIC"]


def test_a_step_that_raises_is_a_reason_naming_it():
    assert hc.parallel([("gpu-xid", lambda: {}["x"])], time.monotonic() + 5) == [
        "cp:gpu-xid: check failed (KeyError: 'x')"]


HUNG_PROBE = "healthcheck.MOUNT_PROBE = 'import time; time.sleep(600)'"


def test_a_hung_mount_is_cut_off_by_its_probe_timeout(node, monkeypatch, tmp_path):
    fixtures, bin_dir, config = node(None, tools=("ip",), mounts=["/dev/shm"],
                                     mount_timeout_s=1)
    start = time.monotonic()
    done = run_patched(HUNG_PROBE, config, fixtures, bin_dir, "--no-drain", "--mode", "interval")
    assert time.monotonic() - start < 5
    assert (done.returncode, done.stdout) == (1, "cp:mount: /dev/shm did not answer within 1s\n")
    monkeypatch.setattr(hc, "MOUNT_PROBE", "import time; time.sleep(600)")
    check = hc.Check(hc.load_config(str(config)), hc.Runner(time.monotonic() + 10), "interval")
    assert check.mount("/dev/shm") == ["cp:mount: /dev/shm did not answer within 1s"]
