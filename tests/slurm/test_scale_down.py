"""Safe scale-down on real slurmctld (26.05): the remediation loop's pass lowers a nodeset
to the count the controller's metadata gives, and no VM with a job on it is deleted.

The harness (tests/support/remediation_cluster.py) runs the rendered loop one pass at a
time against the fake Compute API, inside ``cluster_namespace()`` so that each node's
slurmd runs at once in a network namespace of its own, as on VMs; the desired counts come
from a fake metadata server at the config's ``sizes_url``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clusterprint.node import scale_down
from tests.support.metadata_fake import FakeMetadata
from tests.support.netns import cluster_namespace
from tests.support.remediation_cluster import GROUP, NODESET, Remediation, blueprint

IDLE, BUSY = "a4-a4-0001", "a4-a4-0002"


@pytest.fixture
def shrinking(local_slurm, tmp_path):
    """A cluster of two running a4 nodes, one busy with a long job, one idle, and the loop
    reading the desired counts from a fake metadata server; (setup, metadata, job)."""
    with cluster_namespace() as networks:
        setup = Remediation.start(local_slurm, tmp_path, blueprint("drain"), networks)
        metadata = FakeMetadata()
        config = json.loads(setup.config_path.read_text())
        setup.config_path.write_text(json.dumps(
            {**config, "sizes_url": f"{metadata.url}{scale_down.KEY}"}))
        setup.fake.on_delete = setup.halt
        try:
            for name in (IDLE, BUSY):
                setup.add_vm(name)
            job = setup.cluster.run("sbatch", "--parsable", "-w", BUSY, "-o", "/dev/null",
                                    "--wrap", "sleep 300").strip()
            setup.wait_for(BUSY, lambda n: n.busy, "running the job")
            yield setup, metadata, job
        finally:
            metadata.stop()
            setup.fake.stop()
            for name in list(setup.slurmd):
                setup.halt(name)


def deleted(setup: Remediation) -> list[list[str]]:
    """The VMs of each deleteInstances call, in order."""
    return [c.body["instances"] for c in setup.fake.verbs("deleteInstances")]


def job_state(setup: Remediation, job: str) -> str:
    shown = setup.cluster.run("scontrol", "show", "job", job)
    return re.search(r"JobState=(\S+)", shown)[1]


def test_a_lowered_count_deletes_the_idle_vm_and_the_busy_one_only_once_its_job_ends(
        shrinking):
    setup, metadata, job = shrinking
    setup.pass_once()  # no count given yet: nothing is resized
    assert deleted(setup) == [] and not setup.node(IDLE).drained
    metadata.set(scale_down.KEY, json.dumps({NODESET: 0}))
    setup.pass_once()  # both drained; a node drained this pass keeps its VM until the next
    for name in (IDLE, BUSY):
        node = setup.node(name)
        assert node.drained and node.reason.startswith("cp:scale-down: nodeset a4 is down "
                                                       "to 0 nodes"), node
    assert deleted(setup) == []
    setup.now += 60
    setup.pass_once()
    # Only the idle node's VM goes, by name, in its group; the busy one keeps its job.
    assert deleted(setup) == [[IDLE]]
    assert setup.fake.verbs("deleteInstances")[0].path.endswith(
        f"/instanceGroupManagers/{GROUP}/deleteInstances")
    assert setup.fake.verbs("deleteInstances")[0].body["skipInstancesOnValidationError"]
    assert set(setup.fake.groups[GROUP][1]) == {BUSY}
    busy = setup.node(BUSY)
    assert busy.busy and busy.drained and busy.reason.startswith("cp:scale-down"), busy
    assert job_state(setup, job) == "RUNNING"
    setup.now += 60
    setup.pass_once()  # the idle node's VM is gone: its Slurm node goes too
    assert setup.node(IDLE) is None and deleted(setup) == [[IDLE]]
    assert job_state(setup, job) == "RUNNING" and setup.node(BUSY).busy
    # The job ends: the next pass deletes the VM, the one after its Slurm node.
    setup.cluster.run("scancel", job)
    setup.wait_for(BUSY, lambda n: not n.busy, "done with the job")
    setup.now += 60
    setup.pass_once()
    assert deleted(setup) == [[IDLE], [BUSY]] and setup.fake.groups[GROUP][1] == {}
    setup.now += 60
    setup.pass_once()
    assert setup.node(BUSY) is None and setup.node(IDLE) is None
    setup.pass_once()  # and the pass after forgets it: nothing is left to do
    assert deleted(setup) == [[IDLE], [BUSY]]
    state_file = scale_down.state_path(json.loads(setup.config_path.read_text())["state_file"])
    assert json.loads(Path(state_file).read_text()) == {
        "creating": {}, "deleting": {}, "draining": {}}
