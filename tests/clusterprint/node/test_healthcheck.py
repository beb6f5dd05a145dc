"""The node health check against recorded tool output: as functions on the parsed text,
and as the process Slurm runs, its tools stand-ins on PATH (tests/support/healthcheck_fakes.py)."""

from __future__ import annotations

import json

import pytest

from clusterprint.node import healthcheck as hc
from tests.support.healthcheck_fakes import (
    FIXTURES,
    calls,
    node_config,
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


def test_reasons_are_joined_within_the_limit_at_a_whole_reason():
    reasons = [f"cp:gpu-ecc: {n} uncorrected errors on GPU {n}" for n in range(20)]
    text = hc.joined(reasons)
    assert len(text) <= hc.REASON_MAX
    assert text.startswith("cp:gpu-ecc: 0 uncorrected errors on GPU 0; cp:gpu-ecc: 1 ")
    kept = text.split("; +")[0].split("; ")
    assert text.endswith(f"; +{20 - len(kept)} more")
    assert hc.joined(reasons[:2]) == "; ".join(reasons[:2])


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
    ("gpu-missing", "cp:gpu-count: 7 GPUs, the machine type has 8"),
    ("gpu-model", "cp:gpu-model: GPU 3 is NVIDIA A100-SXM4-80GB, not H100"),
    ("remap-pending", "cp:gpu-remap: row remap pending on GPU 2 (needs a reset)"),
    ("remap-failed", "cp:gpu-remap: row remapping failed on GPU 6"),
    ("nvlink-crc", "cp:gpu-nvlink: GPU 3 link 7 CRC Errors 12"),
    ("nvlink-gpu-missing", "cp:gpu-nvlink: nvidia-smi nvlink -e lists no GPU 7"),
    ("xid-79", "cp:gpu-xid: Xid 79 on GPU 6 (GPU has fallen off the bus)"),
    ("dcgm-fail", "cp:gpu-dcgm: diag -r 1 software failed"),
    ("dcgm-no-hostengine", "cp:gpu-dcgm: dcgmi diag -r 1 failed (exit 255): Error: Unable to "
                           "connect to host engine. Host engine connection invalid/disconne"),
    ("nvidia-smi-fails", "cp:gpu-count: nvidia-smi failed (exit 9): NVIDIA-SMI has failed "
                         "because it couldn't communicate with the NVIDIA driver. Ma"),
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
    fixtures, bin_dir, config = node("h100", gpu={"model": "H100"})
    done = run_program(config, fixtures, bin_dir, "--no-drain")
    assert done.returncode == 1
    assert done.stdout.startswith(f"cp:config: {config} is not a health check config (KeyError")
