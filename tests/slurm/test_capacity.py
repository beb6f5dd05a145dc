"""Power saving on real slurmctld (26.05): nodes resumed, suspended, backed off.

The harness (tests/support/power_saving.py) runs slurmctld with the rendered programs and
the fake Compute API, which starts a real dynamic slurmd in a network namespace of its own
for each VM created, so a job of several elastic nodes runs as on VMs.
"""

from __future__ import annotations

import time

from tests.support.power_saving import NODESET

STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/my-project/zones/us-central1-c' does not have enough "
            "resources available to fulfill the request.")


E1, E2, E3 = (f"cpu-small-cpu-e{number:05d}" for number in (1, 2, 3))


def test_elastic_nodes_are_declared_powered_down_once(saving):
    setup = saving()
    for name in (E1, E2):
        assert {"IDLE", "CLOUD", "POWERED_DOWN"} <= setup.states(name), setup.node(name)
        assert setup.node(name)["ActiveFeatures"] == NODESET
    setup.run_program("declare")  # again, as on the controller's next boot: nothing new
    assert setup.fake.verbs("createInstances") == []


def test_a_job_of_three_nodes_resumes_three_elastic_nodes_at_once_and_they_idle_out(saving):
    setup = saving(count=1, max_count=4)
    job = setup.submit("-N", "3")
    setup.wait(lambda: setup.job(job).get("JobState") == "COMPLETED", "3-node job on resume")
    assert setup.job(job)["NodeList"] == "cpu-small-cpu-e[00001-00003]"
    created = [i["name"] for c in setup.fake.verbs("createInstances")
               for i in c.body["instances"]]
    assert sorted(created) == [E1, E2, E3]
    # Three slurmds at once, each at the address of its own VM.
    addresses = {setup.node(n)["NodeAddr"] for n in (E1, E2, E3)}
    assert addresses == {setup.networks.addresses[n] for n in (E1, E2, E3)}, addresses
    setup.wait(lambda: all("POWERED_DOWN" in setup.states(n) for n in (E1, E2, E3)),
               "the idle nodes powered down")
    deleted = [i for c in setup.fake.verbs("deleteInstances") for i in c.body["instances"]]
    assert sorted(deleted) == [E1, E2, E3] and setup.fake.groups[setup.group][1] == {}
    assert not set(setup.slurmd) & {E1, E2, E3}


def test_a_flex_start_job_waits_for_its_resize_request_then_runs_on_its_vms(saving):
    setup = saving(count=1, max_count=4, provisioning="flex-start")
    setup.fake.flex_capacity = False
    job = setup.submit("-N", "3")
    setup.wait(lambda: setup.fake.resize_requests.get(setup.group), "the resize request")
    ((name, request),) = setup.fake.resize_requests[setup.group].items()
    assert sorted(request["instances"]) == [E1, E2, E3] and request["state"] == "ACCEPTED"
    assert setup.fake.verbs("createInstances") == []
    # While Dynamic Workload Scheduler looks for capacity the job waits, its nodes powering
    # up, and a watch pass changes nothing.
    setup.watch()
    assert setup.job(job).get("JobState") in ("PENDING", "CONFIGURING"), setup.job(job)
    assert "POWERING_UP" in setup.states(E1)
    setup.fake.provide_flex()
    setup.wait(lambda: setup.job(job).get("JobState") == "COMPLETED", "flex-start job")
    assert setup.job(job)["NodeList"] == "cpu-small-cpu-e[00001-00003]"
    setup.watch()
    assert setup.fake.resize_requests[setup.group] == {}, "the finished request is deleted"


def test_a_stockout_powers_the_node_down_with_the_reason_then_it_runs_after_back_off(saving):
    setup = saving()
    setup.fake.create_errors = STOCKOUT
    job = setup.submit("-w", E1)
    setup.wait(lambda: setup.fake.verbs("createInstances"), "the create")
    setup.watch()
    reason = f"cp:capacity: stockout: {STOCKOUT[0]}: {STOCKOUT[1]}"
    assert [c.body["instances"] for c in setup.fake.verbs("deleteInstances")] == [[E1]]
    setup.wait(lambda: f"Reason={reason}" in setup.cluster.run("scontrol", "show", "node", E1),
               "the node's reason")
    # The job is requeued and waits; the node stays out of service with its reason.
    setup.wait(lambda: setup.job(job).get("JobState") == "PENDING", "the job requeued")
    setup.wait(lambda: "POWERED_DOWN" in setup.states(E1), "the node powered down")
    setup.watch()
    setup.wait(lambda: "DOWN" in setup.states(E1), "the node held down")
    shown = setup.cluster.run("sinfo", "-h", "-R", "-o", "%E|%N")
    assert f"{reason[:60]}" in shown and E1 in shown
    assert setup.job(job).get("JobState") == "PENDING"
    # Capacity returns; after the back-off the node is back and the job runs on it.
    setup.fake.create_errors = None
    setup.now += 61
    setup.watch()
    setup.wait(lambda: setup.job(job).get("JobState") == "COMPLETED", "job after back-off",
               timeout=180)
    assert setup.job(job)["NodeList"] == E1


def test_a_static_node_is_never_powered_down(saving):
    setup = saving()
    static = "cpu-small-cpu-a1b2"
    setup.slurmd[static] = setup.cluster.start_node(static, setup.node_conf, 0)
    time.sleep(15)  # three times the global SuspendTime
    assert "POWER" not in setup.node(static)["State"], setup.node(static)
    assert setup.fake.verbs("deleteInstances") == []
