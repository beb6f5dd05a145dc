"""What slurm.conf promises a training job, shown on real Slurm 26.05 daemons.

Locked memory comes from the node, not the submitting shell; a failing prolog (RxDM not
ready, stood in by a script that exits 1) drains its node and sends the job back to the
queue unheld, to start on a healthy node (held without nohold_on_prolog_fail); a node
whose prolog.d is empty drains (so every compute node installs a no-op 00-clusterprint);
every prolog runs, the last name first. A job that asks
for nothing gets memory it can run in; srun speaks PMI-2 by default.
"""

from __future__ import annotations

import re
import resource
import subprocess

from clusterprint.blueprint.validate import load_checked
from tests.support.local_slurm import CRED_EXPIRE_S, job_fields, wait_until
from tests.support.paths import blueprint_path

#: 8 MiB, systemd's default locked-memory limit (DefaultLimitMEMLOCK), in KiB as ulimit -l.
SHELL_MEMLOCK_KIB = 8192


def memlock_limits() -> tuple[str, str, int]:
    """The node's locked-memory limit for prlimit (bytes) and as ``ulimit -l`` prints it
    (KiB), and a lower limit for the shell (KiB).

    The node gets the most this machine allows: unlimited where the tests run as root with
    CAP_SYS_RESOURCE, as on a VM; a container without it caps every process at its hard
    limit, and the shell then gets less than that, so the two still differ.
    """
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if hard == resource.RLIM_INFINITY:
        return "unlimited", "unlimited", SHELL_MEMLOCK_KIB
    return str(hard), str(hard // 1024), hard // 1024 // 128


def test_jobs_keep_the_nodes_unlimited_locked_memory_not_the_submitting_shells(local_slurm):
    node_bytes, node_limit, shell_limit = memlock_limits()
    cluster = local_slurm(load_checked(blueprint_path("a4")))
    cluster.start_node("a4-vm", cluster.compute_node_conf("a4"), 8,
                       launcher=("prlimit", f"--memlock={node_bytes}:{node_bytes}"))

    def limited_shell(command: str) -> list[str]:
        return cluster.run("bash", "-c", f"ulimit -l {shell_limit} && {command}").split()

    srun = "srun -p a4 -w a4-vm -N1 bash -c 'ulimit -l'"
    assert limited_shell("ulimit -l") == [str(shell_limit)]
    assert limited_shell(srun) == [node_limit]
    output = cluster.root / "memlock.out"
    limited_shell(f"sbatch --wait -p a4 -w a4-vm -o {output} --wrap 'ulimit -l'")
    assert output.read_text().split() == [node_limit]

    # Without PropagateResourceLimitsExcept=MEMLOCK the shell's limit would reach the job.
    assert limited_shell(srun.replace("srun ", "srun --propagate=MEMLOCK ")) == [
        str(shell_limit)]


def test_a_failing_prolog_drains_its_node_and_the_job_runs_unheld_on_a_healthy_one(
        local_slurm):
    cluster = local_slurm(load_checked(blueprint_path("a3mega")), start=False)
    cluster.conf.write_text(re.sub(r"^(AuthInfo=.*)$", rf"\1,cred_expire={CRED_EXPIRE_S}",
                                   cluster.conf.read_text(), flags=re.MULTILINE))
    cluster.start_controller()
    cluster.add_script("prolog", "10-rxdm", '[ "$SLURMD_NODENAME" != a3mega-bad ] || '
                       '{ echo "RxDM not ready after 120 s" >&2; exit 1; }')
    node_conf = cluster.compute_node_conf("a3mega")
    bad = cluster.start_node("a3mega-bad", node_conf, 8)
    output = cluster.root / "job.out"
    job = cluster.run("sbatch", "--parsable", "-p", "a3mega", "-N1", "-o", str(output),
                      "--wrap", "echo ran on $SLURMD_NODENAME").strip()

    wait_until(lambda: "DRAIN" in cluster.run("scontrol", "show", "node", "a3mega-bad"),
               "the node draining", bad.log)
    shown = cluster.run("scontrol", "show", "node", "a3mega-bad")
    assert "Reason=Prolog error" in shown
    assert "RxDM not ready after 120 s" in bad.log.read_text()
    wait_until(lambda: (job_fields(cluster, job)["Restarts"], job_fields(cluster, job)
                        ["JobState"]) == ("1", "PENDING"), "the job requeued and pending")
    fields = job_fields(cluster, job)
    # Held jobs show Reason=JobHeldAdmin and Priority=0; this one waits out cred_expire.
    assert (fields["Reason"], fields["Priority"] != "0") == ("BeginTime", True), fields
    bad.stop()

    cluster.start_node("a3mega-good", node_conf, 8)
    wait_until(lambda: job_fields(cluster, job)["JobState"] == "COMPLETED", "the job running",
               timeout=CRED_EXPIRE_S + 60)
    assert output.read_text() == "ran on a3mega-good\n"


def test_without_nohold_on_prolog_fail_the_requeued_job_would_be_held(local_slurm):
    cluster = local_slurm(load_checked(blueprint_path("a3mega")), start=False)
    cluster.conf.write_text(cluster.conf.read_text().replace(",nohold_on_prolog_fail\n", "\n"))
    cluster.start_controller()
    cluster.add_script("prolog", "10-rxdm", "exit 1")
    cluster.start_node("a3mega-bad", cluster.compute_node_conf("a3mega"), 8)
    job = cluster.run("sbatch", "--parsable", "-p", "a3mega", "-N1", "-o", "/dev/null",
                      "--wrap", "true").strip()
    # The requeued job passes through COMPLETING (its epilog) before it is pending again.
    wait_until(lambda: (job_fields(cluster, job)["Restarts"], job_fields(cluster, job)
                        ["JobState"]) == ("1", "PENDING"), "the job requeued and pending")
    fields = job_fields(cluster, job)
    assert (fields["JobState"], fields["Reason"], fields["Priority"]) == (
        "PENDING", "launch_failed_requeued_held", "0")


def test_a_node_whose_prolog_folder_is_empty_drains_on_its_first_job(local_slurm):
    # Why every compute node installs a no-op 00-clusterprint in both folders: Slurm's glob
    # of an empty folder is an error ("Unable to create list of paths").
    cluster = local_slurm(load_checked(blueprint_path("a3mega")))
    for script in cluster.scripts("prolog").iterdir():
        script.unlink()
    node = cluster.start_node("a3mega-vm", cluster.compute_node_conf("a3mega"), 8)
    done = subprocess.run(cluster.command("srun", "-w", "a3mega-vm", "hostname"), env=cluster.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Prolog failure" in done.stderr
    assert "Reason=Prolog error" in cluster.run("scontrol", "show", "node", "a3mega-vm")
    assert "prolog: Unable to create list of paths" in node.log.read_text()


def test_every_prolog_and_epilog_file_runs_in_reverse_name_order(local_slurm):
    # prep_script_slurmd.c (22.05 and 23.11) pushes each glob match onto the head of its
    # list, so the last name runs first: 20-second, then the node's 10-rxdm, then 05-first.
    cluster = local_slurm(load_checked(blueprint_path("a3mega")))
    trace = cluster.root / "trace"
    for kind in ("prolog", "epilog"):
        for name in ("20-second", "10-rxdm", "05-first"):
            cluster.add_script(kind, name, f'echo "{kind} {name} $SLURM_JOB_ID" >> {trace}')
    cluster.start_node("a3mega-vm", cluster.compute_node_conf("a3mega"), 8)
    job = cluster.run("sbatch", "--parsable", "--wait", "-w", "a3mega-vm", "-o", "/dev/null",
                      "--wrap", "true").strip()
    wait_until(lambda: trace.exists() and len(trace.read_text().splitlines()) == 6,
               "the epilogs running")
    assert trace.read_text().splitlines() == [
        f"{kind} {name} {job}" for kind in ("prolog", "epilog")
        for name in ("20-second", "10-rxdm", "05-first")]
    config = cluster.config()
    assert (config["PrologFlags"], config["PrologEpilogTimeout"]) == ("Alloc,Contain", "600")


def test_jobs_that_ask_for_no_memory_get_a_share_of_a_cpu_node_or_a_whole_gpu_node(
        local_slurm):
    cluster = local_slurm(load_checked(blueprint_path("cpu-small")))
    cluster.start_node("cpu-vm", cluster.compute_node_conf("cpu"), 0)
    job = cluster.run("sbatch", "--parsable", "--wait", "-w", "cpu-vm", "-n1", "-o",
                      "/dev/null", "--wrap", "hostname").strip()
    # sbatch --wait returns as the job ends; its epilog may still run (COMPLETING).
    wait_until(lambda: job_fields(cluster, job)["JobState"] == "COMPLETED", "the job completed")
    fields = job_fields(cluster, job)
    assert fields["MinMemoryCPU"] == "3456M"
    assert fields["Exclusive"] == "NO"  # a share of the node

    gpus = local_slurm(load_checked(blueprint_path("a4")))
    gpus.start_node("a4-vm", gpus.compute_node_conf("a4"), 8)
    real_memory = re.search(r"RealMemory=(\d+)", gpus.run("scontrol", "show", "node", "a4-vm"))
    job = gpus.run("sbatch", "--parsable", "--wait", "-p", "a4", "-n1", "-o", "/dev/null",
                   "--wrap", "hostname").strip()
    # sbatch --wait returns as the job ends; its epilog may still run (COMPLETING).
    wait_until(lambda: job_fields(gpus, job)["JobState"] == "COMPLETED", "the job completed")
    fields = job_fields(gpus, job)
    assert fields["Exclusive"] == "NODE"  # the whole node
    assert f"mem={real_memory[1]}M" in fields["AllocTRES"].split(",")


def test_srun_gives_tasks_pmi2_without_asking(local_slurm):
    cluster = local_slurm(load_checked(blueprint_path("cpu-small")))
    cluster.start_node("cpu-vm", cluster.compute_node_conf("cpu"), 0)
    out = cluster.run("srun", "-w", "cpu-vm", "-n2", "bash", "-c",
                      'echo "$SLURM_MPI_TYPE ${PMI_FD:+fd} $PMI_RANK $PMI_SIZE"')
    assert sorted(out.splitlines()) == ["pmi2 fd 0 2", "pmi2 fd 1 2"]
