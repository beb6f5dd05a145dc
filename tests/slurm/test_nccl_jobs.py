"""Every rendered NCCL proof job is a job real slurmctld 26.05 takes, as the job asks:
for the reference blueprints, hand-made mixed ones and ones drawn like
test_generated_blueprints.py draws them (names and time limits over their whole range).

slurmctld boots from the rendered configuration; the job's nodes register as dynamic nodes
with their nodeset's rendered --conf line. This machine has 2 CPUs and a GPU VM has many
more (an a3-megagpu-8g has 208), so each node also declares CPUs=16: enough for one task
per GPU, which is what the job asks. `sbatch --test-only` then says whether the job's
#SBATCH lines could run; a held submission shows how slurmctld read them.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings

from clusterprint.blueprint.validate import load_checked
from clusterprint.render.nccl_job import nccl_job_path, nccl_jobs
from tests.support.drawn_blueprints import blueprints
from tests.support.job_blueprints import GENERATED
from tests.support.local_slurm import NODE_CPUS, sbatch_test_only
from tests.support.paths import reference_blueprints

BLUEPRINTS = {**{p.stem: load_checked(str(p)) for p in reference_blueprints()}, **GENERATED}


@pytest.mark.parametrize("name", sorted(BLUEPRINTS))
def test_slurmctld_takes_every_job_of_the_blueprint(name, local_slurm):
    blueprint = BLUEPRINTS[name]
    if not nccl_jobs(blueprint):
        assert not any(n.gpus for n in blueprint.slurm.nodesets)
    check_jobs(local_slurm(blueprint), blueprint)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=blueprints())
def test_slurmctld_takes_the_jobs_of_generated_blueprints(drawn, local_slurm):
    blueprint, _ = drawn
    cluster = local_slurm(blueprint)
    try:
        check_jobs(cluster, blueprint)
    finally:
        cluster.stop()  # one controller per example, not all at once


def check_jobs(cluster, blueprint) -> None:
    """Each job's nodes register, then sbatch --test-only takes the job and a held
    submission shows every #SBATCH line as slurmctld read it."""
    registered: set[str] = set()
    for number, job in enumerate(nccl_jobs(blueprint)):
        # A node registered for an earlier job serves again (the k-th node of a nodeset), so
        # the nodes registered never outnumber MaxNodeCount, the sum of the upper bounds.
        # At least one node of every nodeset the job names: slurmctld refuses a constraint
        # on a feature no node has registered yet (docs/operations.md, "Not built yet").
        taken: dict[str, int] = {}
        for index in range(max(job.nodes, len(job.nodesets))):
            nodeset = job.nodesets[index % len(job.nodesets)]
            taken[nodeset] = taken.get(nodeset, -1) + 1
            name = f"{nodeset}-{taken[nodeset]}"
            if name not in registered:
                conf = cluster.compute_node_conf(nodeset)
                cluster.start_node(name, f"{conf} {NODE_CPUS}", job.gpus).stop()
                registered.add(name)
        script = cluster.root / f"job-{number}.sbatch"
        script.write_text(cluster.files[nccl_job_path(job.partition)])
        assert f"in partition {job.partition}" in sbatch_test_only(cluster, script)

        held = cluster.run("sbatch", "--hold", "--parsable", str(script)).strip()
        shown = cluster.run("scontrol", "show", "job", "-o", held)
        cluster.run("scancel", held)
        fields = dict(re.findall(r"(\w+)=(\S*)", shown))
        assert fields["JobName"] == f"nccl-allreduce-{job.partition}"
        assert fields["Partition"] == job.partition
        assert fields["NumNodes"] in (f"{job.nodes}", f"{job.nodes}-{job.nodes}")
        assert fields["NumTasks"] == str(job.nodes * job.gpus)
        assert fields["TresPerNode"] == f"gres/gpu:{job.gpus}"
        assert fields["Features"] == "|".join(job.nodesets)
        assert fields["OverSubscribe"] == "NO"  # --exclusive
        assert fields["MinMemoryNode"] == "0"
        hours, minutes, _ = fields["TimeLimit"].split(":")
        assert int(hours) * 60 + int(minutes) == job.minutes


def test_sbatch_nodes_overrides_the_jobs_two_nodes(local_slurm):
    blueprint = BLUEPRINTS["a3mega"]
    cluster = local_slurm(blueprint)
    for index in range(3):
        cluster.start_node(f"a3mega-{index}", f"{cluster.compute_node_conf('a3mega')} {NODE_CPUS}",
                           8).stop()
    script = cluster.root / "job.sbatch"
    script.write_text(cluster.files[nccl_job_path("a3mega")])
    assert "using 48 processors" in sbatch_test_only(cluster, script, "--nodes=3")
    held = cluster.run("sbatch", "--hold", "--parsable", "--nodes=3", str(script)).strip()
    shown = cluster.run("scontrol", "show", "job", "-o", held)
    cluster.run("scancel", held)
    assert re.search(r" NumNodes=3(-3)? NumCPUs=\S+ NumTasks=24 ", shown), shown
