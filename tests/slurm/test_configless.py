"""Compute nodes as production starts them: configless slurmd, its files from slurmctld.

The other Slurm tests hand slurmd a local ``-f slurm.conf``; a VM has none. Its compute
script starts ``slurmd --conf-server`` (configless), which works only while slurm.conf
sets ``SlurmctldParameters=enable_configless``; these nodes get nothing else.
"""

from __future__ import annotations

import re

from clusterprint.blueprint.validate import check_text
from tests.support.paths import BLUEPRINTS

#: a4 with a partition over both its nodesets (reserved and spot), as a user may add.
A4_ALL = (BLUEPRINTS / "a4.yaml").read_text().replace(
    "  partitions:\n", "  partitions:\n    - name: gpus\n      nodesets: [a4, a4spot]\n", 1)


def test_configless_nodes_of_two_nodesets_run_jobs_in_the_partition_over_both(local_slurm):
    checked = check_text("a4-all.yaml", A4_ALL)
    assert checked.ok, [f.line_text() for f in checked.findings]
    blueprint = checked.blueprint
    cluster = local_slurm(blueprint, start=False)
    assert [line for line in cluster.files["slurm.conf"].splitlines()
            if line.startswith("SlurmctldParameters=")] == [
        "SlurmctldParameters=enable_configless,reboot_from_controller,idle_on_node_suspend"]
    # Both nodesets have 8 B200s, which gpu/nvidia finds on each node (fake ones here).
    assert {n.gpus for n in blueprint.slurm.nodesets} == {8}
    cluster.start_controller()

    names = []
    for nodeset in blueprint.slurm.nodesets:
        node = f"{nodeset.name}-vm"
        names.append(node)
        slurmd = cluster.start_configless_node(node, nodeset.name)
        cache = cluster.root / f"spool-{node}" / "conf-cache"
        for name in ("slurm.conf", "gres.conf", "cgroup.conf"):
            assert (cache / name).read_text() == (cluster.root / name).read_text(), name

        shown = cluster.run("scontrol", "show", "node", node)
        assert f"AvailableFeatures={nodeset.name}" in shown
        partitions = re.search(r"Partitions=(\S+)", shown)[1].split(",")
        assert sorted(partitions) == sorted([nodeset.name, "gpus"])
        assert "Gres=gpu:b200:8" in shown
        out = cluster.run("srun", "-p", "gpus", "-w", node, "--gres=gpu:b200:8", "-N1", "bash",
                          "-c",
                          'echo "$SLURM_JOB_PARTITION $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"')
        assert out.split() == ["gpus", node, "0,1,2,3,4,5,6,7"]
        slurmd.stop()

    partition = cluster.partitions()["gpus"]
    assert partition["TotalNodes"] == "2"
    assert sorted(partition["Nodes"].split(",")) == sorted(names)
