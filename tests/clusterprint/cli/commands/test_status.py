"""`clusterprint status` as a process against the Compute fake: what it prints, its exit
status, and every request it sends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.build import compute
from clusterprint.cli.cluster_status import vm_state
from clusterprint.contract import naming, node_metadata
from tests.support.cli_imports import clusterprint, offline_env
from tests.support.compute_fake import FakeCompute
from tests.support.paths import ROOT, blueprint_path

CPU_SMALL = str(blueprint_path("cpu-small"))
PROJECT, ZONE = "my-project", "us-central1-c"
CONTROLLER, LOGIN = "cpu-small-controller", "cpu-small-login-0"
#: cpu-small's nodeset cpu: 2 static nodes in one group, 2 elastic ones in another.
GROUP, ELASTIC = "cpu-small-nodeset-cpu-group-1a2b", "cpu-small-nodeset-cpu-elastic-3c4d"
#: Its first elastic node.
E1 = naming.elastic_nodes("cpu-small", "cpu", 1)
STATE = f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_STATE}"
LOG = f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_LOG}"
HEAD = f"cluster cpu-small in {ZONE} (project {PROJECT})"
ZONAL = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}"
ATTRIBUTES = "getGuestAttributes?queryPath=clusterprint%2F"
STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'projects/my-project/zones/us-central1-c'"
            " does not have enough resources available to fulfill the request.")


@pytest.fixture
def cluster(tmp_path):
    """cpu-small deployed and booted: every VM ready."""
    fake = FakeCompute(PROJECT, ZONE, groups={
        GROUP: (naming.base_instance_name("cpu-small", "cpu"),
                {"cpu-small-cpu-ab12": "RUNNING", "cpu-small-cpu-cd34": "RUNNING"}),
        ELASTIC: (naming.elastic_base_instance_name("cpu-small", "cpu"), {})})
    fake.standalone = {CONTROLLER: "RUNNING", LOGIN: "RUNNING"}
    fake.guest_attributes = {vm: {STATE: "ready"} for vm in (
        CONTROLLER, LOGIN, "cpu-small-cpu-ab12", "cpu-small-cpu-cd34")}
    fake.env = {**offline_env(tmp_path), compute.API_VARIABLE: f"{fake.url}/compute/v1",
                "GOOGLE_APPLICATION_CREDENTIALS": str(fake.credentials_file(tmp_path))}
    yield fake
    fake.stop()


def status(fake: FakeCompute, *flags: str) -> subprocess.CompletedProcess:
    return clusterprint("status", CPU_SMALL, *flags, env=fake.env)


def requests(fake: FakeCompute) -> list[str]:
    return [f"{c.method} {c.path.removeprefix(ZONAL + '/')}" for c in fake.calls]


def test_a_ready_cluster_exits_0_from_these_reads_only(cluster):
    done = status(cluster)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        HEAD, f"controller {CONTROLLER}: ready", f"login {LOGIN}: ready",
        "nodeset cpu: 2 wanted, 2 created, 0 booting, 2 ready, 0 failed; up to 2 more on demand"]
    # Reads only, one list of groups, one look at each VM's boot.
    assert requests(cluster) == [
        "GET instanceGroupManagers",
        f"GET instances/{CONTROLLER}", f"GET instances/{CONTROLLER}/{ATTRIBUTES}",
        f"GET instances/{LOGIN}", f"GET instances/{LOGIN}/{ATTRIBUTES}",
        f"POST instanceGroupManagers/{GROUP}/listManagedInstances",
        f"GET instances/cpu-small-cpu-ab12/{ATTRIBUTES}",
        f"GET instances/cpu-small-cpu-cd34/{ATTRIBUTES}",
        f"GET instanceGroupManagers/{GROUP}/listErrors",
        f"POST instanceGroupManagers/{ELASTIC}/listManagedInstances",
        f"GET instanceGroupManagers/{ELASTIC}/listErrors"]
    assert all(c.body is None for c in cluster.calls)


def test_a_stockout_a_failed_boot_and_a_booting_node_are_each_shown_and_exit_1(cluster):
    vms = cluster.groups[GROUP][1]
    vms["cpu-small-cpu-ef56"] = ""  # still being created: the group retries for ever
    cluster.failed["cpu-small-cpu-ef56"] = STOCKOUT
    cluster.group_errors[GROUP] = [
        {"error": {"code": STOCKOUT[0], "message": STOCKOUT[1]},
         "timestamp": f"2026-12-03T10:0{i}:00.000-08:00",
         "instanceActionDetails": {"action": "CREATING", "instance": "cpu-small-cpu-ef56"}}
        for i in range(3)]
    cluster.guest_attributes["cpu-small-cpu-ab12"] = {STATE: "booting install_munge_key"}
    cluster.guest_attributes["cpu-small-cpu-cd34"] = {
        STATE: "failed mount_home",
        LOG: "mount.nfs: Connection timed out\n"
             "<3>FAILED: mount Filestore 10.1.2.3:/home on /home: still failing after 1800s"}
    cluster.guest_attributes[LOGIN] = {STATE: "booting wait_for_controller"}
    done = status(cluster)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        HEAD, f"controller {CONTROLLER}: ready", f"login {LOGIN}: booting (wait_for_controller)",
        "nodeset cpu: 2 wanted, 2 created, 1 booting, 0 ready, 1 failed; up to 2 more on demand",
        "  cpu-small-cpu-ab12: booting (install_munge_key)",
        "  cpu-small-cpu-cd34: failed at mount_home",
        "      mount.nfs: Connection timed out",
        "      <3>FAILED: mount Filestore 10.1.2.3:/home on /home: still failing after 1800s",
        f"  cpu-small-cpu-ef56: being created: {STOCKOUT[0]}: {STOCKOUT[1]}",
        f"  group {GROUP}: {STOCKOUT[0]} (x3, last 2026-12-03T10:02:00.000-08:00): "
        f"{STOCKOUT[1]}"]
    # A VM not created yet has no guest attributes to read.
    assert f"GET instances/cpu-small-cpu-ef56/{ATTRIBUTES}" not in requests(cluster)


def test_booting_without_a_failure_exits_3_and_the_json_says_each_stage(cluster):
    cluster.standalone[CONTROLLER] = "STAGING"
    cluster.guest_attributes["cpu-small-cpu-ab12"] = {STATE: "booting start_slurmd"}
    del cluster.guest_attributes["cpu-small-cpu-cd34"]  # running, no step published yet
    done = status(cluster, "--json")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert (report["ready"], report["failed"]) == (False, False)
    assert report["controller"] == {"name": CONTROLLER, "state": "booting", "status": "STAGING",
                                    "stage": "staging", "lines": [], "error": ""}
    (nodeset,) = report["nodesets"]
    assert {k: nodeset[k] for k in ("name", "wanted", "elastic", "created", "booting",
                                    "ready", "failed", "creating")} == {
        "name": "cpu", "wanted": 2, "elastic": 2, "created": 2, "booting": 2, "ready": 0,
        "failed": 0, "creating": 0}
    assert [(vm["name"], vm["stage"]) for vm in nodeset["vms"]] == [
        ("cpu-small-cpu-ab12", "start_slurmd"), ("cpu-small-cpu-cd34", "starting")]
    # The controller is not RUNNING: its boot script has not started, nothing to read.
    assert f"GET instances/{CONTROLLER}/{ATTRIBUTES}" not in requests(cluster)


def test_a_cluster_not_deployed_says_so_and_exits_1(cluster):
    cluster.groups.clear()
    cluster.standalone.clear()
    done = status(cluster)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        HEAD,
        f"controller {CONTROLLER}: missing (no such VM)",
        f"login {LOGIN}: missing (no such VM)",
        "nodeset cpu: 2 wanted, 0 created, 0 booting, 0 ready, 0 failed; up to 2 more on demand",
        f"  no instance group of cpu-small-cpu-* VMs in {ZONE}: has `pulumi up` created the "
        "cluster?"]


def test_every_page_of_a_large_group_is_read(cluster):
    vms = cluster.groups[GROUP][1]
    for i in range(5):
        vms[f"cpu-small-cpu-x{i:03d}"] = "RUNNING"
        cluster.guest_attributes[f"cpu-small-cpu-x{i:03d}"] = {STATE: "ready"}
    cluster.page_size = 2
    done = status(cluster)
    assert done.returncode == 0
    assert "nodeset cpu: 2 wanted, 7 created, 0 booting, 7 ready, 0 failed" in done.stdout
    assert [r for r in requests(cluster) if f"{GROUP}/listManagedInstances" in r] == [
        f"POST instanceGroupManagers/{GROUP}/listManagedInstances",
        f"POST instanceGroupManagers/{GROUP}/listManagedInstances?pageToken=2",
        f"POST instanceGroupManagers/{GROUP}/listManagedInstances?pageToken=4",
        f"POST instanceGroupManagers/{GROUP}/listManagedInstances?pageToken=6"]


def test_vms_a_group_deletes_or_recreates_are_not_failures(cluster):
    # power saving deletes an idle elastic node; the remediation loop recreates a static one
    cluster.groups[ELASTIC][1][E1] = "STOPPING"
    cluster.actions[E1] = "DELETING"
    cluster.groups[GROUP][1]["cpu-small-cpu-cd34"] = "TERMINATED"
    cluster.actions["cpu-small-cpu-cd34"] = "RECREATING"
    done = status(cluster, "--json")
    assert done.returncode == 3, done.stderr
    (nodeset,) = json.loads(done.stdout)["nodesets"]
    assert [(vm["name"], vm["state"], vm["stage"]) for vm in nodeset["vms"]] == [
        ("cpu-small-cpu-ab12", "ready", ""), ("cpu-small-cpu-cd34", "booting", "recreating"),
        (E1, "deleting", "")]
    assert {k: nodeset[k] for k in ("created", "booting", "ready", "failed", "deleting")} == {
        "created": 2, "booting": 1, "ready": 1, "failed": 0, "deleting": 0}
    assert nodeset["on_demand"] == {"created": 0, "creating": 0, "booting": 0, "ready": 0,
                                    "failed": 0, "deleting": 1}
    assert status(cluster).stdout.splitlines()[3:] == [
        "nodeset cpu: 2 wanted, 2 created, 1 booting, 1 ready, 0 failed; up to 2 more on demand"
        ": 0 created, 0 booting, 0 ready, 0 failed",
        "  cpu-small-cpu-cd34: booting (recreating)",
        f"  {E1}: being deleted"]


def test_a_ready_elastic_vm_does_not_stand_in_for_a_static_one_still_booting(cluster):
    cluster.groups[ELASTIC][1][E1] = "RUNNING"
    cluster.guest_attributes[E1] = {STATE: "ready"}
    cluster.guest_attributes["cpu-small-cpu-cd34"] = {STATE: "booting mount_home"}
    done = status(cluster)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[3:] == [
        "nodeset cpu: 2 wanted, 2 created, 1 booting, 1 ready, 0 failed; up to 2 more on demand"
        ": 1 created, 0 booting, 1 ready, 0 failed",
        "  cpu-small-cpu-cd34: booting (mount_home)"]
    report = json.loads(status(cluster, "--json").stdout)
    (nodeset,) = report["nodesets"]
    assert report["ready"] is False
    assert (nodeset["wanted"], nodeset["created"], nodeset["ready"]) == (2, 2, 1)
    assert (nodeset["on_demand"]["created"], nodeset["on_demand"]["ready"]) == (1, 1)
    assert [(vm["name"], vm["elastic"]) for vm in nodeset["vms"]] == [
        ("cpu-small-cpu-ab12", False), ("cpu-small-cpu-cd34", False), (E1, True)]


def test_nodesets_whose_groups_would_share_a_base_name_are_refused_before_any_read(
        cluster, tmp_path):
    """cpu's elastic groups and cpu-e's static ones would both be cpu-small-cpu-e's: each
    nodeset would count the other's VMs."""
    path = tmp_path / "alike.yaml"
    path.write_text(Path(CPU_SMALL).read_text().replace(
        "  partitions:\n", "    - {name: cpu-e, machine_type: n2-standard-4, count: 1}\n"
                           "  partitions:\n").replace("nodesets: [cpu]", "nodesets: [cpu, cpu-e]"))
    done = clusterprint("status", str(path), env=cluster.env)
    assert done.returncode == 1 and done.stdout == ""
    assert "both would be named 'cpu-small-cpu-e'" in done.stderr
    assert cluster.calls == []


def test_a_group_gone_between_the_list_and_its_reads_is_left_out(cluster):
    cluster.vanished["cpu-small-nodeset-cpu-elastic-old"] = naming.elastic_base_instance_name(
        "cpu-small", "cpu")
    done = status(cluster)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[3] == (
        "nodeset cpu: 2 wanted, 2 created, 0 booting, 2 ready, 0 failed; up to 2 more on demand")


def test_boot_states_the_script_does_not_write_are_shown_escaped_not_obeyed(cluster):
    cluster.guest_attributes[LOGIN] = {STATE: "ready\n"}  # a stray newline: still ready
    cluster.guest_attributes["cpu-small-cpu-ab12"] = {STATE: "halfway \x1b[2J"}
    cluster.guest_attributes["cpu-small-cpu-cd34"] = {
        STATE: "failed", LOG: "\x1b]0;owned\x07mount failed"}
    done = status(cluster)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[2:] == [
        f"login {LOGIN}: ready",
        "nodeset cpu: 2 wanted, 2 created, 1 booting, 0 ready, 1 failed; up to 2 more on demand",
        "  cpu-small-cpu-ab12: booting (unknown boot state 'halfway \\x1b[2J')",
        "  cpu-small-cpu-cd34: failed at an unnamed step",
        "      \\x1b]0;owned\\x07mount failed"]


def test_an_api_error_is_one_line_and_exit_2(cluster):
    cluster.answers["listManagedInstances"] = (403, b'{"error": {"message": "Required '
                                                    b'compute.instanceGroupManagers.get"}}')
    done = status(cluster)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith("clusterprint status: POST ")
    assert "HTTP 403: Required compute.instanceGroupManagers.get" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_answer_that_is_not_json_is_one_line_and_exit_2(cluster):
    cluster.answers["listErrors"] = (200, b"<html>Sign in to the proxy</html>")
    done = status(cluster)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("clusterprint status: GET ")
    assert line.endswith("HTTP 200 but not a JSON object: <html>Sign in to the proxy</html>")


@pytest.mark.parametrize(("verb", "body", "line", "code"), [
    ("listErrors", b'{"items": [{"error": "quota", "timestamp": 5}]}',
     f"  group {GROUP}:  (x1, last 5): ", 0),
    ("listManagedInstances", b'{"managedInstances": [{"name": "cpu-small-cpu-x1", '
                             b'"lastAttempt": "no", "currentAction": 3}]}',
     "  cpu-small-cpu-x1: being created", 3),
    ("getGuestAttributes", b'{"queryValue": ["ready"]}', f"controller {CONTROLLER}: booting "
                                                          "(starting)", 3),
], ids=["listErrors", "listManagedInstances", "getGuestAttributes"])
def test_an_answer_of_the_wrong_shape_reads_as_nothing_not_a_traceback(cluster, verb, body,
                                                                        line, code):
    cluster.answers[verb] = (200, body)
    done = status(cluster)
    assert done.returncode == code, done.stderr
    assert line in done.stdout.splitlines()


def test_a_resize_request_of_the_wrong_shape_reads_as_nothing_not_a_traceback(
        cluster, flex_blueprint):
    cluster.answers["resizeRequests"] = (200, b'{"items": [{"name": "r1", "state": "ACCEPTED", '
                                              b'"resizeBy": "two", "instances": 5, '
                                              b'"status": {"error": "none"}}]}')
    done = clusterprint("status", flex_blueprint, env=cluster.env)
    assert done.returncode == 0, done.stderr  # the wanted VMs are up all the same
    assert (f"  resize request r1 (group {GROUP}): waiting for capacity: 0 VMs, asked (no time)"
            in done.stdout.splitlines())


def test_watch_redraws_until_interrupted(cluster):
    with subprocess.Popen([sys.executable, "-m", "clusterprint.cli", "status", CPU_SMALL,
                           "--json", "--watch", "10"], cwd=ROOT, env=cluster.env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        first = json.loads(process.stdout.readline())
        cluster.guest_attributes["cpu-small-cpu-ab12"] = {STATE: "failed start_slurmd"}
        second = json.loads(process.stdout.readline())
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 130
    assert (first["ready"], second["failed"]) == (True, True)


@pytest.mark.parametrize("flags", [["--watch", "5"], ["--watch", "x"], ["--project", "A"]])
def test_bad_flags_are_usage_errors(tmp_path, flags):
    done = clusterprint("status", CPU_SMALL, *flags, env=offline_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""


def test_without_credentials_it_exits_2_saying_how_to_get_them(tmp_path):
    done = clusterprint("status", CPU_SMALL, env=offline_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith("run `gcloud auth application-default login`")


@pytest.mark.parametrize(("status", "attributes", "state", "stage"), [
    ("", {}, "creating", ""),
    ("PROVISIONING", {}, "booting", "provisioning"),
    ("RUNNING", {}, "booting", "starting"),
    ("RUNNING", {"boot": "booting mount_home"}, "booting", "mount_home"),
    ("RUNNING", {"boot": "ready"}, "ready", ""),
    ("RUNNING", {"boot": "failed start_slurmd"}, "failed", "start_slurmd"),
    ("TERMINATED", {"boot": "ready"}, "stopped", ""),
])
def test_a_vm_state_is_its_status_then_its_boots_word(status, attributes, state, stage):
    vm = vm_state("vm", status, attributes)
    assert (vm.state, vm.stage) == (state, stage)



@pytest.fixture
def flex_blueprint(tmp_path):
    """cpu-small with its nodeset on flex-start."""
    path = tmp_path / "flex.yaml"
    path.write_text(Path(CPU_SMALL).read_text().replace(
        "provisioning: spot", "provisioning: flex-start"))
    return str(path)


def test_a_flex_start_nodeset_waiting_for_capacity_is_not_ready_and_says_on_what(
        cluster, flex_blueprint):
    cluster.groups[GROUP][1].clear()  # Pulumi's request for count has no VM yet
    cluster.resize_requests[GROUP] = {"cpu-small-cpu-resize-0": {
        "state": "ACCEPTED", "error": None, "resize_by": 2,
        "created": "2026-12-03T09:00:00.000-08:00"}}
    cluster.resize_requests[ELASTIC] = {"cp-resume-1": {
        "state": "SUCCEEDED", "error": None, "instances": ["cpu-small-cpu-e1"]}}
    done = clusterprint("status", flex_blueprint, env=cluster.env)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[3:] == [
        "nodeset cpu: 2 wanted, 0 created, 0 booting, 0 ready, 0 failed; up to 2 more on demand",
        f"  resize request cpu-small-cpu-resize-0 (group {GROUP}): waiting for capacity: 2 VMs, "
        "asked 2026-12-03T09:00:00.000-08:00"]
    assert [r for r in requests(cluster) if "resizeRequests" in r] == [
        f"GET instanceGroupManagers/{GROUP}/resizeRequests",
        f"GET instanceGroupManagers/{ELASTIC}/resizeRequests"]


def test_a_failed_flex_start_request_needs_the_user_and_the_json_has_it(cluster, flex_blueprint):
    cluster.resize_requests[ELASTIC] = {"cp-resume-7": {
        "state": "FAILED", "error": ("RESOURCE_POOL_EXHAUSTED", "no capacity in 7 days"),
        "instances": ["cpu-small-cpu-e1", "cpu-small-cpu-e2"]}}
    done = clusterprint("status", flex_blueprint, "--json", env=cluster.env)
    assert done.returncode == 1, done.stderr
    (nodeset,) = json.loads(done.stdout)["nodesets"]
    assert nodeset["resize_requests"] == [{
        "name": "cp-resume-7", "group": ELASTIC, "state": "FAILED", "count": 2, "created": "",
        "error": "RESOURCE_POOL_EXHAUSTED: no capacity in 7 days"}]


def test_a_nodeset_not_on_flex_start_reads_no_resize_requests(cluster):
    status(cluster)
    assert not [r for r in requests(cluster) if "resizeRequests" in r]
