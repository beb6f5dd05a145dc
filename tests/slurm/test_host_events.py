"""Host events on real slurmctld, through the remediation loop's pass and a fake Compute API.

A preempted Spot VM's node is DOWN after one pass with the reason and its running batch job
requeued (the rendered slurm.conf leaves JobRequeue at its default, 1); a maintenance notice
becomes a MAINT reservation on the node at the window, kept once across passes and a
restarted loop, moved with its window and removed when the notice goes; a nodeset that
opted out gets none. The harness is tests/support/remediation_cluster.py's.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from clusterprint.blueprint.validate import check_text
from tests.support.local_slurm import wait_until
from tests.support.paths import BLUEPRINTS
from tests.support.remediation_cluster import GROUP, Remediation

SPOT = {"scheduling": {"provisioningModel": "SPOT"}}
NAME = "cp-maintenance-a4-a4-0001"


def blueprint(reservations: bool = True):
    text = (BLUEPRINTS / "a4.yaml").read_text()
    if not reservations:
        text = text.replace("      placement: none\n    - name: a4spot\n",
                            "      placement: none\n      maintenance_reservations: false\n"
                            "    - name: a4spot\n", 1)
        assert "maintenance_reservations: false" in text
    checked = check_text("a4.yaml", text)
    assert checked.ok, [f.line_text() for f in checked.findings]
    return checked.blueprint


@pytest.fixture
def fleet(local_slurm, tmp_path):
    made = []

    def make(**kwargs) -> Remediation:
        made.append(Remediation.start(local_slurm, tmp_path, blueprint(**kwargs)))
        return made[-1]

    yield make
    for setup in made:
        setup.fake.stop()


def rfc3339(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def notice(setup: Remediation, start: float, end: float) -> None:
    """The fake API announces a maintenance window on a4-a4-0001's VM."""
    setup.fake.vm_details["a4-a4-0001"] = {"resourceStatus": {"upcomingMaintenance": {
        "type": "SCHEDULED", "canReschedule": True, "maintenanceStatus": "PENDING",
        "windowStartTime": rfc3339(start), "windowEndTime": rfc3339(end)}}}


def reservations(setup: Remediation) -> list[dict]:
    return json.loads(setup.cluster.run("scontrol", "show", "reservation", "--json")
                      )["reservations"]


def job_field(setup: Remediation, job: str, key: str) -> str:
    line = setup.cluster.run("scontrol", "show", "job", "-o", job)
    return re.search(rf"\b{key}=(\S*)", line)[1]


def test_the_rendered_slurm_conf_lets_batch_jobs_requeue_on_node_failure(fleet):
    setup = fleet()
    assert "JobRequeue=0" not in setup.cluster.conf.read_text()
    shown = setup.cluster.run("scontrol", "show", "config")
    assert re.search(r"^JobRequeue\s+= 1$", shown, re.M), "batch jobs not requeueable"


def test_a_preempted_vm_is_down_after_one_pass_and_its_job_requeued(fleet):
    setup = fleet()
    setup.add_vm("a4-a4-0001", keep_running=True)
    job = setup.cluster.run("sbatch", "--parsable", "-w", "a4-a4-0001", "-o", "/dev/null",
                            "--wrap", "sleep 300").strip()
    setup.wait_for("a4-a4-0001", lambda n: n.busy, "running the job")
    # Compute Engine preempts the Spot VM: the list shows it TERMINATED, slurmd is gone.
    setup.slurmd["a4-a4-0001"].stop()
    setup.fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    setup.fake.vm_details["a4-a4-0001"] = SPOT
    setup.pass_once()
    node = setup.node("a4-a4-0001")
    assert node.down and node.reason == "cp:host-event: preempted"
    wait_until(lambda: job_field(setup, job, "Restarts") == "1", "the job requeued",
               setup.cluster.root / "slurmctld.log", 30)
    assert job_field(setup, job, "JobState") in ("PENDING", "REQUEUED", "REQUEUE_FED")
    # The next pass: the loop's own on_failure (drain) tracks it; nothing marks it again.
    stamp = node.reason_stamp
    setup.pass_once()
    assert setup.node("a4-a4-0001").reason_stamp == stamp
    assert setup.state()["nodes"]["a4-a4-0001"]["action"] == "drain"
    assert [c.verb for c in setup.fake.calls if c.method == "POST"
            and c.verb != "listManagedInstances"] == []


def test_a_maintenance_notice_becomes_one_maint_reservation_at_the_window(fleet):
    setup = fleet()
    setup.add_vm("a4-a4-0001")
    start = float(int(time.time()) + 2 * 3600)
    notice(setup, start, start + 3600)
    setup.pass_once()
    (made,) = reservations(setup)
    assert made["name"] == NAME and made["node_list"] == "a4-a4-0001"
    assert {"MAINT", "IGNORE_JOBS"} <= set(made["flags"])
    assert made["start_time"]["number"] == start
    assert made["end_time"]["number"] == start + 3600
    shown = setup.cluster.run("scontrol", "show", "reservation", NAME)
    assert "Nodes=a4-a4-0001" in shown and "MAINT" in shown
    # Another pass and a restarted loop (a process of its own): still one, not made again.
    setup.pass_once()
    setup.run_program("--once", "--now", str(setup.now))
    assert [r["name"] for r in reservations(setup)] == [NAME]
    # The window moves: the reservation follows it; the notice goes: so does it.
    notice(setup, start + 3 * 3600, start + 4 * 3600)
    setup.pass_once()
    (moved,) = reservations(setup)
    assert moved["start_time"]["number"] == start + 3 * 3600
    del setup.fake.vm_details["a4-a4-0001"]
    setup.pass_once()
    assert reservations(setup) == []


def test_a_nodeset_that_opted_out_gets_no_reservation(fleet):
    setup = fleet(reservations=False)
    setup.add_vm("a4-a4-0001")
    start = float(int(time.time()) + 2 * 3600)
    notice(setup, start, start + 3600)
    setup.pass_once()
    assert reservations(setup) == []


def test_an_instance_list_that_fails_changes_nothing(fleet, capfd):
    setup = fleet()
    setup.add_vm("a4-a4-0001", keep_running=True)
    setup.wait_for("a4-a4-0001", lambda n: "IDLE" in n.state, "idle")
    setup.fake.groups[GROUP][1]["a4-a4-0001"] = "TERMINATED"
    setup.fake.answers["instances"] = (200, b'{"items": [{"name": 7}]}')
    setup.pass_once()
    assert not setup.node("a4-a4-0001").down
    assert "cannot list the VMs of nodeset a4" in capfd.readouterr().err
