"""pyxis's plugstack.conf as Slurm reads it: served to configless nodes, harmless without pyxis.

GPU clusters render a plugstack.conf naming pyxis ``optional``: slurmctld serves it to every
configless node, CPU nodes included, which do not carry the plugin. This machine has no
pyxis either, so its slurmd stands in for such a node: the file arrives in its conf-cache and
jobs still run. That srun on a node with pyxis then offers --container-image needs pyxis
built for the installed Slurm (the boot does it on GPU and login nodes).
"""

from __future__ import annotations

from pathlib import Path

from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import gpu_software
from tests.support.paths import blueprint_path


def test_configless_nodes_get_plugstack_conf_and_run_jobs_without_pyxis(local_slurm):
    assert not Path(gpu_software.PYXIS_PLUGIN).exists(), "this test needs a machine without pyxis"
    cluster = local_slurm(load_checked(blueprint_path("a4")), start=False)
    plugstack = cluster.files["plugstack.conf"]
    assert f"optional {gpu_software.PYXIS_PLUGIN}" in plugstack.splitlines()
    # slurmctld serves the files beside its slurm.conf, as the controller's script installs them.
    (cluster.root / "plugstack.conf").write_text(plugstack)
    cluster.start_controller()
    cluster.start_configless_node("a4-vm", "a4")
    assert (cluster.root / "spool-a4-vm" / "conf-cache" / "plugstack.conf").read_text() == plugstack
    out = cluster.run("srun", "-p", "a4", "-w", "a4-vm", "-N1", "bash", "-c",
                      'echo "$SLURMD_NODENAME ran"')
    assert out.split() == ["a4-vm", "ran"]
    batch = cluster.run("sbatch", "--parsable", "-p", "a4", "-w", "a4-vm", "--wrap", "true")
    assert batch.strip().isdigit()
