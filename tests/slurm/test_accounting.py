"""Job accounting as the controller runs it, on real daemons: MariaDB, slurmdbd, slurmctld.

The rendered slurmdbd.conf and slurm.conf (host, port, path and auth lines made local)
boot against a real MariaDB; the cluster is registered with ``sacctmgr -i add cluster``
before slurmctld's first start, as the controller script does. A GPU job's record shows
its GPUs; records made while slurmdbd is down reach the database once it is back; and
slurmctld restarted on the same state folder (the state disk of a replaced controller)
keeps its queue and its job id counter. And why the controller starts slurmdbd and
registers the cluster first: slurmctld's first start waits for them (26.05; 22.05 refused to
start), answering nothing until then.
"""

from __future__ import annotations

import re

from clusterprint.blueprint.validate import load_checked
from tests.support.local_slurm import wait_until
from tests.support.paths import blueprint_path

GPU_NODE = "a3mega-vm"


def gpu_cluster(accounting_slurm):
    """The a3mega reference blueprint with one GPU node (8 fake GPUs) up."""
    cluster = accounting_slurm(load_checked(blueprint_path("a3mega")))
    nodeset = cluster.blueprint.slurm.nodesets[0]
    cluster.start_node(GPU_NODE, cluster.compute_node_conf(nodeset.name), nodeset.gpus)
    return cluster


def sacct(cluster, job: str) -> dict[str, str]:
    """The job's own record (not its steps) as sacct prints it from the database."""
    out = cluster.run("sacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,State,AllocTRES")
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {"JobID": rows[0][0], "State": rows[0][1], "AllocTRES": rows[0][2]} if rows else {}


def submit(cluster, *argv: str) -> str:
    """sbatch's job id; the job's output goes nowhere (not into the test's folder)."""
    return re.search(r"(\d+)", cluster.run("sbatch", "--parsable", "-o", "/dev/null", *argv))[1]


def finished(cluster, job: str) -> bool:
    """True once slurmctld no longer lists the job as pending or running."""
    return cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() in ("", "COMPLETED")


def test_the_cluster_registers_and_sacct_shows_a_gpu_job_completed_with_its_gpus(
        accounting_slurm):
    cluster = gpu_cluster(accounting_slurm)
    clusters = cluster.run("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster")
    assert clusters.split() == ["a3mega"]
    job = submit(cluster, "-N1", "--gres=gpu:8", "--wrap", "true")
    wait_until(lambda: sacct(cluster, job).get("State") == "COMPLETED", f"job {job} recorded")
    assert "gres/gpu=8" in sacct(cluster, job)["AllocTRES"].split(",")


def test_jobs_run_while_slurmdbd_is_down_and_their_records_arrive_when_it_is_back(
        accounting_slurm):
    cluster = gpu_cluster(accounting_slurm)
    dbd = next(d for d in cluster.daemons if d.log.name == "slurmdbd.log")
    dbd.stop()
    jobs = [submit(cluster, "-N1", "--gres=gpu:8", "--wrap", "true") for _ in range(3)]
    for job in jobs:
        wait_until(lambda job=job: finished(cluster, job), f"job {job} running without slurmdbd")
    cluster.start_dbd()
    for job in jobs:
        wait_until(lambda job=job: sacct(cluster, job).get("State") == "COMPLETED",
                   f"job {job} recorded after slurmdbd came back", timeout=60)


def test_slurmctld_restarted_on_its_state_keeps_a_pending_job_and_the_job_id_counter(
        accounting_slurm):
    cluster = gpu_cluster(accounting_slurm)
    done = submit(cluster, "-N1", "--wrap", "true")
    wait_until(lambda: finished(cluster, done), f"job {done} done")
    held = submit(cluster, "-H", "-N1", "--wrap", "true")
    ctld = next(d for d in cluster.daemons if d.log.name == "slurmctld.log")
    ctld.stop()
    cluster.start_controller()
    assert cluster.run("squeue", "-h", "-j", held, "-o", "%T").split() == ["PENDING"]
    assert int(submit(cluster, "-H", "-N1", "--wrap", "true")) > int(held)


def test_slurmctld_keeps_the_accounting_settings_as_rendered(accounting_slurm):
    cluster = gpu_cluster(accounting_slurm)
    config = cluster.config()
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert "gres/gpu" in config["AccountingStorageTRES"].split(",")
    assert cluster.dropped_settings() == {}


def test_a_first_slurmctld_start_waits_for_slurmdbd(accounting_slurm):
    cluster = accounting_slurm(load_checked(blueprint_path("cpu-small")), start=False)
    ctld = cluster.daemon("slurmctld.log", "slurmctld", "-D", "-f", str(cluster.conf))
    wait_until(lambda: "Retrying initial connection to slurmdbd" in ctld.log.read_text(),
               "slurmctld waiting for slurmdbd", ctld.log)
    assert ctld.running() and not cluster.answers()
    cluster.start_dbd()
    cluster.run("sacctmgr", "-i", "add", "cluster", cluster.blueprint.name)
    wait_until(cluster.answers, "slurmctld answering once slurmdbd does", ctld.log)
