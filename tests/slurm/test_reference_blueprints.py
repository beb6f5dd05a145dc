"""Each reference blueprint's rendered Slurm files run real jobs on real Slurm 26.05."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import machines
from tests.support.paths import reference_blueprints

BLUEPRINTS = reference_blueprints()


@pytest.mark.parametrize("path", BLUEPRINTS, ids=lambda p: p.stem)
def test_reference_blueprint_runs_jobs_on_every_nodeset(path, local_slurm):
    blueprint = load_checked(str(path))
    cluster = local_slurm(blueprint)

    partitions = dict(line.split() for line in cluster.run("sinfo", "-h", "-o", "%R %a")
                      .splitlines())
    assert partitions == {p.name: "up" for p in blueprint.slurm.partitions}
    assert cluster.dropped_settings() == {}
    assert cluster.dropped_partition_settings() == {}
    for partition, fields in cluster.partitions().items():
        members = fields["NodeSets"].split(",")
        gpus = any(n.gpus for n in blueprint.slurm.nodesets if n.name in members)
        assert fields["Exclusive"] == ("NODE" if gpus else "NO"), partition

    for nodeset in blueprint.slurm.nodesets:
        node = f"{nodeset.name}-test"
        expected = sorted(p.name for p in blueprint.slurm.partitions
                          if nodeset.name in p.nodesets)
        gres_type = machines.gres_type(nodeset.machine_type)
        slurmd = cluster.start_node(node, cluster.compute_node_conf(nodeset.name), nodeset.gpus)

        shown = cluster.run("scontrol", "show", "node", node)
        assert f"AvailableFeatures={nodeset.name}" in shown
        assert f"Partitions={','.join(expected)}" in shown
        gres = f"gpu:{gres_type}:{nodeset.gpus}" if nodeset.gpus else "(null)"
        assert f"Gres={gres}" in shown

        gpus = [f"--gres={gres}"] if nodeset.gpus else []
        out = cluster.run("srun", "-p", expected[0], "-w", node, *gpus, "-N1", "bash", "-c",
                          'echo "$SLURM_JOB_PARTITION ${CUDA_VISIBLE_DEVICES:-none}"')
        devices = ",".join(map(str, range(nodeset.gpus))) or "none"
        assert out.split() == [expected[0], devices]

        script = cluster.root / f"job-{nodeset.name}.sh"
        script.write_text("#!/bin/bash\necho trained on $SLURMD_NODENAME\n")
        output = cluster.root / f"job-{nodeset.name}.out"
        job = cluster.run("sbatch", "--parsable", "--wait", "-p", expected[0], "-w", node,
                          *gpus, "-o", str(output), str(script)).strip()
        assert "JobState=COMPLETED" in cluster.run("scontrol", "show", "job", job)
        assert output.read_text() == f"trained on {node}\n"

        slurmd.stop()
