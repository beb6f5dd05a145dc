"""Safe scale-down as a module and, inside the remediation loop, as a process: which VMs go
for a lowered count and when, what a raised count creates, and that nothing is done on a
partial view.

Real slurmctld is in tests/slurm/test_scale_down.py; here Slurm is its node lines and the
Compute API and metadata server are local fakes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.contract import node_metadata
from clusterprint.facts import catalog
from clusterprint.node import common, remediate, scale_down
from clusterprint.render import remediation
from tests.support import remediation_fakes as fakes
from tests.support.compute_fake import FakeCompute
from tests.support.metadata_fake import FakeMetadata
from tests.support.remediation_fakes import FakeSlurm, node_line

GROUP = "c-nodeset-a4-group-5e1f2a9"
T0 = 1_000_000.0
IDLE = "IDLE+DYNAMIC_NORM"
DRAINED = "IDLE+DRAIN+DYNAMIC_NORM"
ALLOCATED = "ALLOCATED+DYNAMIC_NORM"


def vm(index: int) -> str:
    return f"c-a4-{index:04d}"


def node(index: int, state: str = IDLE, reason: str = "") -> common.SlurmNode:
    return common.parse_nodes(node_line(vm(index), state, reason))[0]


def listing(*indexes: int, status: str = "RUNNING") -> dict[str, scale_down.Listing]:
    return {"a4": {GROUP: {vm(i): status for i in indexes}}}


def decide(nodes, listings, desired, state=None, now=T0):
    return scale_down.decide(nodes, listings, {"a4": "c-a4"}, {"a4": desired},
                             state or scale_down.State(), now)


def acts(actions) -> list:
    return [a for a in actions if not isinstance(a, scale_down.Note)]


# --- The contract -------------------------------------------------------------------------

def test_the_key_and_the_group_limit_are_the_renderer_s():
    assert scale_down.KEY == node_metadata.NODESET_SIZES
    assert scale_down.GROUP_VMS_MAX == catalog.GROUP_VMS_MAX


@pytest.mark.parametrize("value, why", [
    ("[1]", "expected dict"), ('{"a4": "4"}', "expected int"), ('{"a4": true}', "expected int"),
    ('{"a4": -1}', "below 0"), ("{", "not JSON"), ('{"a4": 1.5}', "expected int")])
def test_counts_that_are_not_a_json_object_of_counts_are_refused(value, why):
    with pytest.raises(common.BadJSON, match=why):
        scale_down.parse_sizes(value)


# --- Deciding -------------------------------------------------------------------------------

def test_the_surplus_goes_in_order_unregistered_out_of_service_idle_then_the_least_busy():
    nodes = [node(2, "ALLOCATED+DYNAMIC_NORM"), node(3, "MIXED+DYNAMIC_NORM"),
             node(4, "COMPLETING+ALLOCATED+DYNAMIC_NORM"), node(5, IDLE),
             node(6, DRAINED, "cp:gpu-ecc: 3 uncorrected errors on GPU 5")]
    order = []
    for desired in range(5, -1, -1):
        actions, _ = decide(nodes, listing(1, 2, 3, 4, 5, 6), desired)
        picked = sorted({a.node for a in acts(actions) if isinstance(a, scale_down.SetState)}
                        | {n for a in acts(actions) if isinstance(a, scale_down.VMCall)
                           for n in a.names})
        order.append([n for n in picked if n not in sum(order, [])])
    # 0001 has no Slurm node (its VM still boots): deleted at once, nothing to drain.
    assert order == [[vm(1)], [vm(6)], [vm(5)], [vm(4)], [vm(3)], [vm(2)]]


def test_an_idle_node_is_drained_then_deleted_and_its_slurm_node_goes_with_its_vm():
    actions, state = decide([node(1), node(2)], listing(1, 2), 1)
    assert acts(actions) == [scale_down.SetState(
        vm(1), "drain", "cp:scale-down: nodeset a4 is down to 1 nodes")]
    assert set(state.draining) == {vm(1)}
    # Next pass: Slurm holds it drained, no job: exactly its VM is deleted.
    drained = node(1, DRAINED, "cp:scale-down: nodeset a4 is down to 1 nodes")
    actions, state = decide([drained, node(2)], listing(1, 2), 1, state, T0 + 60)
    assert acts(actions) == [scale_down.VMCall("delete", GROUP, (vm(1),))]
    assert set(state.deleting) == {vm(1)} and not state.draining
    # The group still lists it while it is deleted: not counted, nothing more goes.
    actions, state = decide([drained, node(2)], listing(1, 2), 1, state, T0 + 120)
    assert acts(actions) == []
    # The VM is gone: its Slurm node is deleted, then the state forgets it.
    actions, state = decide([drained, node(2)], listing(2), 1, state, T0 + 180)
    assert acts(actions) == [scale_down.DeleteNodes((vm(1),))]
    actions, state = decide([node(2)], listing(2), 1, state, T0 + 240)
    assert acts(actions) == [] and state == scale_down.State()


def test_a_busy_node_is_drained_and_its_vm_waits_for_its_jobs_to_end():
    reason = "cp:scale-down: nodeset a4 is down to 0 nodes"
    actions, state = decide([node(1, ALLOCATED)], listing(1), 0)
    assert acts(actions) == [scale_down.SetState(vm(1), "drain", reason)]
    for state_now in ("ALLOCATED+DRAIN+DYNAMIC_NORM", "MIXED+DRAIN+DYNAMIC_NORM",
                      "COMPLETING+DRAIN+DYNAMIC_NORM"):
        actions, state = decide([node(1, state_now, reason)], listing(1), 0, state, T0 + 60)
        assert acts(actions) == [], f"deleted while {state_now}"
    actions, state = decide([node(1, DRAINED, reason)], listing(1), 0, state, T0 + 120)
    assert acts(actions) == [scale_down.VMCall("delete", GROUP, (vm(1),))]


def test_a_node_the_health_check_drained_keeps_its_reason_and_is_the_first_to_go():
    ecc = "cp:gpu-ecc: 3 uncorrected errors on GPU 5"
    actions, _ = decide([node(1), node(2, DRAINED, ecc)], listing(1, 2), 1)
    assert acts(actions) == [scale_down.SetState(
        vm(2), "drain", f"{ecc}; cp:scale-down: nodeset a4 is down to 1 nodes")]


def test_a_reason_written_over_by_the_health_check_keeps_the_node_scale_down_s():
    """The health check replaces a cp: reason with its own: the state still holds it."""
    _, state = decide([node(1)], listing(1), 0)
    failed = node(1, DRAINED, "cp:gpu-xid: Xid 79 on GPU 2")
    assert scale_down.claimed([failed], state) == {vm(1)}
    actions, _ = decide([failed], listing(1), 0, state, T0 + 60)
    assert acts(actions) == [scale_down.VMCall("delete", GROUP, (vm(1),))]


def test_a_raised_count_gives_back_the_busiest_drained_nodes_first():
    reason = "cp:scale-down: nodeset a4 is down to 1 nodes"
    nodes = [node(1, "MIXED+DYNAMIC_NORM"), node(2, ALLOCATED), node(3, ALLOCATED)]
    _, state = decide(nodes, listing(1, 2, 3), 1)
    assert set(state.draining) == {vm(1), vm(2)}
    ecc = "cp:gpu-ecc: 3 uncorrected errors on GPU 5"
    drained = [node(1, "MIXED+DRAIN+DYNAMIC_NORM", f"{ecc}; {reason}"),
               node(2, "ALLOCATED+DRAIN+DYNAMIC_NORM", reason), node(3, ALLOCATED)]
    actions, state = decide(drained, listing(1, 2, 3), 2, state, T0 + 60)
    # 0002 (a whole node in use) back to work; 0001 keeps draining.
    assert acts(actions) == [scale_down.SetState(vm(2), "resume")]
    assert set(state.draining) == {vm(1)}
    drained[1] = node(2, ALLOCATED)  # resumed, as Slurm shows it now
    actions, state = decide(drained, listing(1, 2, 3), 3, state, T0 + 120)
    # The health check's reason stays: only scale-down's own is taken off.
    assert acts(actions) == [scale_down.SetState(vm(1), "drain", ecc)] and not state.draining


def test_a_missing_count_creates_vms_once_and_counts_them_until_the_group_lists_them():
    actions, state = decide([node(1)], listing(1), 3)
    (create,) = acts(actions)
    assert create.verb == "create" and create.group == GROUP
    assert len(create.names) == 2 and all(n.startswith("c-a4-") and len(n) == 9
                                          for n in create.names)
    assert set(state.creating) == set(create.names)
    # Not listed yet (the call timed out, or the group is slow): counted, not asked again.
    actions, state = decide([node(1)], listing(1), 3, state, T0 + 60)
    assert acts(actions) == []
    # Listed: the state forgets them.
    listed = {"a4": {GROUP: {vm(1): "RUNNING", **dict.fromkeys(create.names, "")}}}
    actions, state = decide([node(1)], listed, 3, state, T0 + 120)
    assert acts(actions) == [] and not state.creating
    # Never listed within CREATE_GRACE_S: asked for again.
    _, state = decide([node(1)], listing(1), 3)
    actions, _ = decide([node(1)], listing(1), 3, state, T0 + scale_down.CREATE_GRACE_S)
    assert [getattr(a, "verb", "") for a in acts(actions)] == ["create"]


def test_vms_are_created_in_the_groups_with_room():
    full = {f"c-a4-f{i:03d}": "RUNNING" for i in range(scale_down.GROUP_VMS_MAX)}
    second = "c-nodeset-a4-group-2-0a1b2c3"
    listings = {"a4": {GROUP: full, second: {}}}
    actions, _ = decide([], listings, scale_down.GROUP_VMS_MAX + 2)
    assert [(a.group, len(a.names)) for a in acts(actions)] == [(second, 2)]


def test_nothing_is_done_when_any_group_does_not_list():
    listings = {**listing(1, 2), "b": None}
    actions, state = scale_down.decide([node(1), node(2)], listings, {"a4": "c-a4", "b": "c-b"},
                                       {"a4": 0, "b": 0}, scale_down.State(), T0)
    assert acts(actions) == [] and state == scale_down.State()


def test_a_nodeset_without_a_count_is_left_as_it_is():
    actions, _ = scale_down.decide([node(1)], listing(1), {"a4": "c-a4"}, {},
                                   scale_down.State(), T0)
    assert acts(actions) == []


def test_a_marked_node_the_state_forgot_is_taken_up_again():
    """A state file put aside: the reason in Slurm says the node is scale-down's."""
    reason = "cp:scale-down: nodeset a4 is down to 0 nodes"
    marked = node(1, DRAINED, reason)
    assert scale_down.claimed([marked], scale_down.State()) == {vm(1)}
    actions, _ = decide([marked], listing(1), 0)
    assert acts(actions) == [scale_down.VMCall("delete", GROUP, (vm(1),))]
    actions, _ = decide([marked], listing(1), 1)
    assert acts(actions) == [scale_down.SetState(vm(1), "resume")]


def test_a_vm_still_listed_long_after_its_deletion_is_asked_again():
    state = scale_down.State(deleting={vm(1): scale_down.Claim("a4", GROUP, T0)})
    actions, _ = decide([], listing(1), 0, state, T0 + 60)
    assert acts(actions) == []
    actions, _ = decide([], listing(1), 0, state, T0 + scale_down.DELETE_RETRY_S)
    assert acts(actions) == [scale_down.VMCall("delete", GROUP, (vm(1),))]


def test_a_refused_delete_drains_on_and_a_refused_create_is_not_counted():
    state = scale_down.State(deleting={vm(1): scale_down.Claim("a4", GROUP, T0)},
                             creating={vm(2): scale_down.Claim("a4", GROUP, T0)})
    state = scale_down.undo_refused(state, {vm(1), vm(2)})
    assert set(state.draining) == {vm(1)} and not state.deleting and not state.creating


# --- Inside the remediation loop ------------------------------------------------------------

@pytest.fixture
def fake():
    api = FakeCompute("p", "z", groups={GROUP: ("c-a4", {vm(1): "RUNNING", vm(2): "RUNNING"})})
    yield api
    api.stop()


@pytest.fixture
def metadata():
    server = FakeMetadata()
    yield server
    server.stop()


def loop(tmp_path, fake, metadata, slurm, on_failure="reboot"):
    config = fakes.config_for(on_failure, state=tmp_path / "state.json", api=fake.config(),
                        sizes_url=metadata.url + scale_down.KEY)
    compute = common.Compute("p", "z", config.api, config.token_url, config.http_timeout_s)
    return remediate.Remediator(config, slurm, compute,
                                clock=lambda: remediate.Reading(T0, T0, "test"))


def test_the_loop_drains_then_deletes_exactly_the_surplus_and_never_remediates_it(
        tmp_path, fake, metadata):
    metadata.set(scale_down.KEY, json.dumps({"a4": 1}))
    slurm = FakeSlurm([node_line(vm(1), IDLE, ""), node_line(vm(2), ALLOCATED, "")])
    loop(tmp_path, fake, metadata, slurm).run_once()
    reason = "cp:scale-down: nodeset a4 is down to 1 nodes"
    assert slurm.changes() == [["scontrol", "update", f"nodename={vm(1)}", "state=drain",
                                f"reason={reason}"]]
    # Drained with a cp: reason, yet not rebooted: the node is scale-down's.
    slurm.lines = [node_line(vm(1), DRAINED, reason), node_line(vm(2), ALLOCATED, "")]
    loop(tmp_path, fake, metadata, slurm).run_once()
    assert [c.verb for c in fake.calls if c.method == "POST" and "list" not in c.verb] == [
        "deleteInstances"]
    assert fake.verbs("deleteInstances")[0].body == {
        "instances": [vm(1)], "skipInstancesOnValidationError": True}
    assert set(fake.groups[GROUP][1]) == {vm(2)}
    assert len(slurm.changes()) == 1, "remediation acted on a node drained for scale-down"
    loop(tmp_path, fake, metadata, slurm).run_once()
    assert slurm.changes()[1:] == [["scontrol", "delete", f"nodename={vm(1)}"]]


def test_no_counts_to_read_means_nothing_resized_said_once(tmp_path, fake, metadata):
    slurm = FakeSlurm([node_line(vm(1), IDLE, ""), node_line(vm(2), IDLE, "")])
    remediator = loop(tmp_path, fake, metadata, slurm)
    log = remediator.scale_down.log = fakes.Journal()
    for value in (None, None, "{not json", "{not json"):
        if value is not None:
            metadata.set(scale_down.KEY, value)
        remediator.run_once()
    assert slurm.changes() == [] and not fake.verbs("deleteInstances")
    assert [(e["severity"], e["message"]) for e in log.entries] == [
        ("WARNING", f"scale-down idle: metadata {scale_down.KEY} is not set"),
        ("ERROR", "scale-down skipped: the desired counts cannot be read: "
                  f"{scale_down.KEY}: not JSON (Expecting property name enclosed in double "
                  "quotes: line 1 column 2 (char 1))")]


def test_a_group_that_does_not_list_stops_every_scale_down_step(tmp_path, fake, metadata):
    metadata.set(scale_down.KEY, json.dumps({"a4": 0}))
    fake.failing.add("listManagedInstances")
    slurm = FakeSlurm([node_line(vm(1), IDLE, ""), node_line(vm(2), IDLE, "")])
    loop(tmp_path, fake, metadata, slurm).run_once()
    assert slurm.changes() == [] and not fake.verbs("deleteInstances")
    assert not (tmp_path / scale_down.STATE_NAME).exists()


def test_a_raised_count_creates_the_missing_vms_in_the_group(tmp_path, fake, metadata):
    metadata.set(scale_down.KEY, json.dumps({"a4": 4}))
    slurm = FakeSlurm([node_line(vm(1), IDLE, ""), node_line(vm(2), IDLE, "")])
    loop(tmp_path, fake, metadata, slurm).run_once()
    (create,) = fake.verbs("createInstances")
    assert create.path.endswith(f"/instanceGroupManagers/{GROUP}/createInstances")
    assert len(create.body["instances"]) == 2 and len(fake.groups[GROUP][1]) == 4
    loop(tmp_path, fake, metadata, slurm).run_once()
    assert len(fake.verbs("createInstances")) == 1


def test_the_loop_as_a_process_counts_each_step_before_it_takes_it(tmp_path, fake, metadata):
    """Two processes with --once: the drain, then the delete; a third finds the VM gone."""
    metadata.set(scale_down.KEY, json.dumps({"a4": 1}))
    env = fakes.fake_scontrol(tmp_path)
    (tmp_path / "nodes.txt").write_text(node_line(vm(1), IDLE, "") + "\n"
                                        + node_line(vm(2), ALLOCATED, ""))
    config = fakes.write_config(tmp_path / "c.json", fakes.config_for(
        "reboot", state=tmp_path / "s.json", api=fake.config(),
        sizes_url=metadata.url + scale_down.KEY))
    for path, text in remediation.programs(str(tmp_path / "program")).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    argv = [sys.executable, str(tmp_path / "program" / "remediate.py"), "--config",
            str(config), "--once", "--now", str(T0)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reason = "cp:scale-down: nodeset a4 is down to 1 nodes"
    assert fakes.scontrol_log(tmp_path) == [["scontrol", "update", f"nodename={vm(1)}",
                                       "state=drain", f"reason={reason}"]]
    saved = json.loads((tmp_path / scale_down.STATE_NAME).read_text())
    assert set(saved["draining"]) == {vm(1)}
    (tmp_path / "nodes.txt").write_text(node_line(vm(1), DRAINED, reason) + "\n"
                                        + node_line(vm(2), ALLOCATED, ""))
    for _ in range(2):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert [c.body["instances"] for c in fake.verbs("deleteInstances")] == [[vm(1)]]
    assert fakes.scontrol_log(tmp_path)[1:] == [["scontrol", "delete", f"nodename={vm(1)}"]]
    # No traceback, and each line is one JSON log entry.
    assert all(line.startswith("<") for line in done.stderr.splitlines())
