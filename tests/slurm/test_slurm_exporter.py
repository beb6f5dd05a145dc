"""The Slurm exporter against real slurmctld (26.05): the figures follow what the test does
to the cluster (a node drained, jobs queued and running, the remediation loop's pass, a job
waiting for its elastic node to boot, a long job array), and a scrape while slurmctld is
down says so and carries no Slurm figure.

The exporter runs as the rendered program beside the rendered loop, on the image's python3
(the Slurm root's), with the rendered config but for the state file's place.
"""

from __future__ import annotations

import json
from pathlib import Path

from clusterprint.node import slurm_exporter
from clusterprint.render import remediation
from clusterprint.render.node_programs import program_files
from tests.support.local_slurm import LocalSlurm, wait_until
from tests.support.prometheus_text import parse
from tests.support.remediation_cluster import Remediation, blueprint

NODE = "a4-a4-0001"
#: How long a Slurm command may take here: a stopped slurmctld keeps scontrol waiting until
#: the exporter's timeout ends it, which the test need not wait 20 s for.
SLURM_WAIT_S = 3
#: The rendered programs the exporter runs with: itself, the loop it reads the state of.
PROGRAMS = (*program_files("scripts", slurm_exporter), *remediation.programs("scripts"))


def scrape(cluster: LocalSlurm, state_file: str) -> dict:
    """One scrape by the rendered program, as a process in the Slurm root, reading the
    loop's state from ``state_file``."""
    program = cluster.root / "slurm_exporter.py"
    if not program.exists():
        for path in PROGRAMS:
            (cluster.root / Path(path).name).write_text(cluster.files[path])
        rendered = json.loads(cluster.files["scripts/slurm-exporter.json"])
        (cluster.root / "slurm-exporter.json").write_text(
            json.dumps({**rendered, "state_file": state_file, "timeout_s": SLURM_WAIT_S}))
    return parse(cluster.run("python3", str(program), "--config",
                             str(cluster.root / "slurm-exporter.json"), "--once"))


def loop_scrape(setup: Remediation) -> dict:
    """One scrape of the cluster the remediation loop runs on, with the loop's state."""
    return scrape(setup.cluster, json.loads(setup.config_path.read_text())["state_file"])


def nodes(families: dict, nodeset: str = "a4") -> dict[str, float]:
    """The nodeset's non-zero node counts by state."""
    return {dict(k)["state"]: v for k, v in
            families["clusterprint_slurm_nodes"].where(nodeset=nodeset).items() if v}


def test_the_figures_follow_the_cluster_and_fail_closed_when_slurmctld_stops(
        local_slurm, tmp_path):
    setup = Remediation.start(local_slurm, tmp_path, blueprint("drain"))
    try:
        setup.add_vm(NODE, keep_running=True)
        families = loop_scrape(setup)
        assert families["clusterprint_slurm_up"].value() == 1
        assert nodes(families) == {"idle": 1} and nodes(families, "a4spot") == {}
        assert families["clusterprint_slurm_gpus"].value(nodeset="a4") == 8
        # The health check drains the node; a job waits for it, another for a4spot's.
        setup.drain(NODE)
        cluster = setup.cluster
        for partition in ("a4", "a4spot"):
            cluster.run("sbatch", "--parsable", "-p", partition, "-N1", "--gres=gpu:2",
                        "-o", "/dev/null", "--wrap", "sleep 300")
        setup.pass_once()
        families = loop_scrape(setup)
        assert nodes(families) == {"drained": 1}
        jobs = families["clusterprint_slurm_jobs"]
        assert jobs.value(partition="a4", state="pending") == 1
        assert jobs.value(partition="a4spot", state="pending") == 1
        assert jobs.value(partition="a4", state="running") == 0
        actions = families["clusterprint_remediation_actions"]
        assert actions.value(nodeset="a4", action="drain") == 1
        assert families["clusterprint_remediation_protected"].value(nodeset="a4") == 0
        # Resumed, the node takes its job, alone (the partition is Exclusive=NODE): all
        # its GPUs are allocated.
        cluster.run("scontrol", "update", f"nodename={NODE}", "state=resume")
        wait_until(lambda: setup.node(NODE).busy, f"{NODE} running the job",
                   cluster.root / "slurmctld.log")
        families = loop_scrape(setup)
        assert nodes(families) == {"allocated": 1}
        assert families["clusterprint_slurm_jobs"].value(partition="a4", state="running") == 1
        assert families["clusterprint_slurm_gpus_allocated"].value(nodeset="a4") == 8
        # slurmctld stops: no figure of Slurm's, the loop's record stays.
        cluster.daemons[0].stop()
        families = loop_scrape(setup)
        assert families["clusterprint_slurm_up"].value() == 0
        assert {n for n in families if n.startswith("clusterprint_slurm_")} == {
            "clusterprint_slurm_up"}
        assert families["clusterprint_remediation_actions"].value(
            nodeset="a4", action="drain") == 1
    finally:
        setup.fake.stop()


def test_jobs_count_by_their_base_state_and_each_task_of_a_long_array(saving, tmp_path):
    setup = saving()
    # The job's elastic node gets its VM, which does not boot yet: slurmctld holds the job
    # CONFIGURING (the state squeue's text prints for it, not RUNNING) until it registers.
    setup.fake.on_create = lambda vm: None
    job = setup.submit("-N", "1")
    setup.wait(lambda: setup.job(job).get("JobState") == "CONFIGURING", "the job configuring")
    # A held array whose task expression is longer than squeue's 64 characters by default.
    tasks = [task for task in range(1, 400) if task % 7 in (1, 4)]
    setup.submit("--hold", f"--array={','.join(map(str, tasks))}")
    families = scrape(setup.cluster, str(tmp_path / "no-loop-state.json"))
    assert families["clusterprint_slurm_up"].value() == 1
    jobs = families["clusterprint_slurm_jobs"]
    assert (jobs.value(partition="debug", state="running"),
            jobs.value(partition="debug", state="pending")) == (1, len(tasks))
