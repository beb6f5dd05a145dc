"""slurm.conf, gres.conf and cgroup.conf say what the blueprint says, byte for byte."""

from __future__ import annotations

from clusterprint.model import Blueprint
from clusterprint.render import rendered_files
from clusterprint.render.slurm_config import render_gres_conf, render_slurm_conf
from clusterprint.validate import load_checked
from tests.paths import blueprint_path


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_rendering_is_the_same_bytes_every_time():
    first = rendered_files(load_checked(blueprint_path("a4")))
    assert rendered_files(load_checked(blueprint_path("a4"))) == first


def test_a4_slurm_conf_names_cluster_controller_nodesets_and_partitions():
    conf = lines(render_slurm_conf(load_checked(blueprint_path("a4"))))
    assert "ClusterName=a4" in conf
    assert "SlurmctldHost=a4-controller" in conf
    # One line: slurmctld reads only the last SlurmctldParameters.
    assert "SlurmctldParameters=enable_configless,reboot_from_controller" in conf
    assert "RebootProgram=/etc/slurm/clusterprint/reboot-vm" in conf
    assert "SelectType=select/cons_tres" in conf
    assert "GresTypes=gpu" in conf
    assert "MaxNodeCount=12" in conf  # a4: 4 static + a4spot: up to 8
    assert "ReturnToService=2" in conf
    assert [line for line in conf if line.startswith("NodeSet=")] == [
        "NodeSet=a4 Feature=a4", "NodeSet=a4spot Feature=a4spot"]
    assert [line for line in conf if line.startswith("PartitionName=")] == [
        "PartitionName=a4 Nodes=a4 Default=YES DefaultTime=UNLIMITED MaxTime=UNLIMITED State=UP",
        "PartitionName=a4spot Nodes=a4spot Default=NO DefaultTime=12:00:00 MaxTime=12:00:00 "
        "State=UP",
    ]


def test_first_partition_is_default_when_none_is_marked():
    blueprint = Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "two",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": "a", "machine_type": "n2-standard-4", "count": 1},
                               {"name": "b", "machine_type": "n2-standard-4", "count": 2,
                                "max_count": 5}],
                  "partitions": [{"name": "one", "nodesets": ["a", "b"]},
                                 {"name": "two", "nodesets": ["b"], "max_time": "30"}]}})
    conf = lines(render_slurm_conf(blueprint))
    assert "MaxNodeCount=6" in conf
    assert ("PartitionName=one Nodes=a,b Default=YES DefaultTime=UNLIMITED MaxTime=UNLIMITED "
            "State=UP") in conf
    assert "PartitionName=two Nodes=b Default=NO DefaultTime=30 MaxTime=30 State=UP" in conf


def test_gres_names_the_gpu_files_when_every_node_has_the_same_gpus():
    # Both a4 nodesets have 8 GPUs: the files bind GPUs to jobs without the gpu/nvml plugin.
    files = rendered_files(load_checked(blueprint_path("a4")))
    assert lines(files["gres.conf"]) == ["AutoDetect=nvml", "Name=gpu File=/dev/nvidia[0-7]"]
    assert "ConstrainDevices=yes" in lines(files["cgroup.conf"])


def cluster_of(*machine_types: str) -> Blueprint:
    """A blueprint with one nodeset per machine type."""
    nodesets = [{"name": f"n{i}", "machine_type": m, "count": 1}
                for i, m in enumerate(machine_types)]
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "mixed",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": nodesets,
                  "partitions": [{"name": "all", "nodesets": [n["name"] for n in nodesets]}]}})


def test_gres_names_no_files_a_cpu_node_lacks():
    # slurmd exits when a File= of gres.conf is missing, and gres.conf cannot aim at
    # dynamic nodes: CPU nodes beside GPU nodes rule the line out.
    for blueprint in (cluster_of("a4-highgpu-8g", "n2-standard-4"),
                      cluster_of("n2-standard-4")):
        assert lines(render_gres_conf(blueprint)) == ["AutoDetect=nvml"]


def test_a2_and_g2_nodes_declare_and_bind_their_gpus():
    # Before the catalog knew them these machines rendered as CPU nodes: no GRES at all.
    for machine_type, gpus, files in (("a2-megagpu-16g", 16, "/dev/nvidia[0-15]"),
                                      ("g2-standard-4", 1, "/dev/nvidia0")):
        blueprint = cluster_of(machine_type)
        assert "GresTypes=gpu" in lines(render_slurm_conf(blueprint))
        assert lines(render_gres_conf(blueprint))[-1] == f"Name=gpu File={files}"
        script = rendered_files(blueprint)["scripts/compute-n0.sh"]
        assert f"readonly NODE_CONF='Feature=n0 Gres=gpu:{gpus}'" in script
