"""slurm.conf, gres.conf and cgroup.conf say what the blueprint says, byte for byte."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.render import node_scripts, rendered_files
from clusterprint.render.slurm_config import render_slurm_conf
from tests.support.paths import blueprint_path


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
    assert ("SlurmctldParameters=enable_configless,reboot_from_controller,idle_on_node_suspend"
            in conf)
    assert "RebootProgram=/etc/slurm/clusterprint/reboot-vm" in conf
    assert "SelectType=select/cons_tres" in conf
    assert "GresTypes=gpu" in conf
    assert "MaxNodeCount=12" in conf  # a4: 4 static + a4spot: up to 8
    assert "ReturnToService=2" in conf
    assert [line for line in conf if line.startswith("NodeSet=")] == [
        "NodeSet=a4 Feature=a4", "NodeSet=a4spot Feature=a4spot"]
    assert [line for line in conf if line.startswith("PartitionName=")] == [
        "PartitionName=a4 Nodes=a4 Default=YES DefaultTime=UNLIMITED MaxTime=UNLIMITED "
        "Exclusive=NODE Topology=fabric State=UP",
        # a4spot's elastic B200 nodes bring up a GPU network as they boot: 900 s.
        "PartitionName=a4spot Nodes=a4spot Default=NO DefaultTime=12:00:00 MaxTime=12:00:00 "
        "Exclusive=NODE Topology=fabric ResumeTimeout=900 State=UP",
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
    # b's three elastic CPU nodes: both its partitions wait 300 s for one to register.
    assert ("PartitionName=one Nodes=a,b Default=YES DefaultTime=UNLIMITED MaxTime=UNLIMITED "
            "DefMemPerCPU=3456 ResumeTimeout=300 State=UP") in conf
    assert ("PartitionName=two Nodes=b Default=NO DefaultTime=30 MaxTime=30 DefMemPerCPU=3456 "
            "ResumeTimeout=300 State=UP") in conf


def cluster_of(*machine_types: str) -> Blueprint:
    """A blueprint with one nodeset per machine type."""
    return one_partition(*({"machine_type": m} for m in machine_types))


def one_partition(*nodesets: dict, **defaults: object) -> Blueprint:
    """One partition over these nodesets (``n0``, ``n1``..., each ``count`` 1 and
    ``defaults`` unless given)."""
    nodesets = [{"name": f"n{i}", "count": 1, **defaults, **n} for i, n in enumerate(nodesets)]
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "mixed",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": nodesets,
                  "partitions": [{"name": "all", "nodesets": [n["name"] for n in nodesets]}]}})


def test_one_gres_conf_serves_every_cluster_shape():
    # gpu/nvidia finds each node's own GPUs, so no File= line ties gres.conf to one GPU count: a
    # CPU nodeset beside GPU ones, or 4 and 8 GPUs, get the same file as a uniform cluster.
    for blueprint in (load_checked(blueprint_path("a3mega")),
                      cluster_of("a4-highgpu-8g", "n2-standard-4"),
                      cluster_of("a3-highgpu-4g", "a3-highgpu-8g"),
                      cluster_of("n2-standard-4")):
        files = rendered_files(blueprint)
        assert lines(files["gres.conf"]) == ["AutoDetect=nvidia"], blueprint.name
        assert "ConstrainDevices=yes" in lines(files["cgroup.conf"])


def test_elastic_nodes_name_their_gpus_because_slurm_creates_no_autodetected_node():
    # a4spot: count 2, max_count 8 on spot: six elastic nodes with fixed names.
    files = rendered_files(load_checked(blueprint_path("a4")))
    assert lines(files["gres.conf"]) == [
        "AutoDetect=nvidia",
        "NodeName=a4-a4spot-e[00001-00006] AutoDetect=off Name=gpu Type=b200 "
        "File=/dev/nvidia[0-7]"]
    cpu = rendered_files(load_checked(blueprint_path("cpu-small")))
    assert lines(cpu["gres.conf"])[1:] == ["NodeName=cpu-small-cpu-e[00001-00002] AutoDetect=off"]


def node_conf(script: str) -> str:
    """The --conf line a rendered compute script registers its node with."""
    (line,) = [line for line in script.splitlines() if line.startswith("readonly NODE_CONF=")]
    return line.removeprefix("readonly NODE_CONF=")


def test_gpu_nodes_declare_their_gpus_typed_after_the_nvml_device_name():
    # The type is what users ask for (--gres=gpu:h100:2) and a substring of the name NVML
    # gives the device (nvidia_h100_80gb_hbm3), which is how gpu/nvml matches it.
    for machine_type, declared in (
            ("a3-megagpu-8g", "gpu:h100:8"), ("a3-highgpu-4g", "gpu:h100:4"),
            ("a3-ultragpu-8g", "gpu:h200:8"), ("a4-highgpu-8g", "gpu:b200:8"),
            ("a4x-highgpu-4g", "gpu:gb200:4"), ("a2-megagpu-16g", "gpu:a100:16"),
            ("a2-ultragpu-1g", "gpu:a100:1"), ("g2-standard-4", "gpu:l4:1")):
        blueprint = cluster_of(machine_type, "n2-standard-4")
        assert "GresTypes=gpu" in lines(render_slurm_conf(blueprint))
        files = rendered_files(blueprint)
        assert node_conf(files["scripts/compute-n0.sh"]) == f"'Feature=n0 Gres={declared}'"
        assert node_conf(files["scripts/compute-n1.sh"]) == "Feature=n1"


#: The lines a training cluster's jobs need from slurm.conf, GPU or not.
TRAINING_LINES = [
    "PrologFlags=Alloc,Contain", "PrologEpilogTimeout=600", "BatchStartTimeout=600",
    "SchedulerParameters=bf_continue,salloc_wait_nodes,nohold_on_prolog_fail",
    "LaunchParameters=use_interactive_step", "PropagateResourceLimitsExcept=MEMLOCK",
    "MpiDefault=pmi2"]


def test_every_cluster_gets_the_prolog_scheduling_and_limit_lines():
    for name in ("a3mega", "a4", "cpu-small"):
        conf = lines(render_slurm_conf(load_checked(blueprint_path(name))))
        assert [line for line in TRAINING_LINES if line not in conf] == [], name


PROLOG_LINES = ["Prolog=/etc/slurm/prolog.d/*", "Epilog=/etc/slurm/epilog.d/*"]


def prolog_lines(blueprint: Blueprint) -> list[str]:
    return [line for line in lines(render_slurm_conf(blueprint))
            if line.startswith(("Prolog=", "Epilog="))]


def test_every_cluster_runs_the_prolog_folders_which_every_compute_node_fills():
    # Slurm fails the prolog of a node whose folder holds no file (tests/slurm/
    # test_training_conf.py), so every compute script installs a no-op 00-clusterprint.
    for name in ("a3mega", "a3ultra", "a4", "cpu-small"):
        blueprint = load_checked(blueprint_path(name))
        assert prolog_lines(blueprint) == PROLOG_LINES, name
        for nodeset in blueprint.slurm.nodesets:
            script = node_scripts(blueprint).compute[nodeset.name]
            for folder in ("prolog.d", "epilog.d"):
                assert f"install_text /etc/slurm/{folder}/00-clusterprint 0755" in script


def partition_lines(blueprint: Blueprint) -> list[str]:
    return [line for line in lines(render_slurm_conf(blueprint))
            if line.startswith("PartitionName=")]


def test_cpu_partitions_share_nodes_and_gpu_partitions_give_whole_nodes():
    # cpu-small: n2-standard-4 shares its nodes; the leanest standard shape (N1, 3.75 GB per
    # vCPU) less what the kernel keeps is 3456 MiB per CPU.
    (cpu,) = partition_lines(load_checked(blueprint_path("cpu-small")))
    assert cpu == ("PartitionName=debug Nodes=cpu Default=YES DefaultTime=1:00:00 "
                   "MaxTime=1:00:00 DefMemPerCPU=3456 ResumeTimeout=300 State=UP")
    assert "Exclusive" not in render_slurm_conf(load_checked(blueprint_path("cpu-small")))
    (gpu,) = partition_lines(load_checked(blueprint_path("a3mega")))
    assert gpu.endswith(" Exclusive=NODE Topology=fabric State=UP") and "DefMem" not in gpu


def elastic_cluster(*nodesets: dict) -> Blueprint:
    """One partition over these nodesets, each ``count`` 1, ``max_count`` 3 unless given."""
    return one_partition(*nodesets, max_count=3)


@pytest.mark.parametrize(("nodesets", "timeout"), [
    # A CPU node boots in the toolkit's default 300 s; a GPU one without a GPU network 600 s;
    # one that brings a GPU network up (A3, A4, A4X) 900 s.
    ([{"machine_type": "n2-standard-4"}], 300),
    ([{"machine_type": "a2-highgpu-1g"}], 600),
    ([{"machine_type": "a3-megagpu-8g", "provisioning": "spot"}], 900),
    # The longest of a partition's nodesets.
    ([{"machine_type": "n2-standard-4"}, {"machine_type": "a4-highgpu-8g"}], 900),
    # Flex-start capacity comes when Dynamic Workload Scheduler finds it: Slurm's longest.
    ([{"machine_type": "a3-ultragpu-8g", "provisioning": "flex-start"}], 65533),
    # A reservation's nodes above count are elastic only when asked.
    ([{"machine_type": "a4-highgpu-8g", "provisioning": "reservation", "reservation": "r",
       "power_saving": True}], 900),
], ids=["cpu", "gpu", "gpu-network", "longest", "flex-start", "reservation"])
def test_a_partition_with_elastic_nodes_waits_as_long_as_its_slowest_node_boots(nodesets,
                                                                                timeout):
    (line,) = partition_lines(elastic_cluster(*nodesets))
    assert f" ResumeTimeout={timeout} " in line


@pytest.mark.parametrize("nodeset", [
    {"machine_type": "a4-highgpu-8g", "provisioning": "reservation", "reservation": "r"},
    {"machine_type": "n2-standard-4", "power_saving": False},
    {"machine_type": "n2-standard-4", "max_count": 1}], ids=["reservation", "off", "static"])
def test_a_partition_without_elastic_nodes_keeps_the_global_resume_timeout(nodeset):
    # The global one (1800 s) bounds a reboot and a replacement by the remediation loop.
    blueprint = elastic_cluster(nodeset)
    assert not blueprint.slurm.nodesets[0].elastic
    (line,) = partition_lines(blueprint)
    assert "ResumeTimeout" not in line
    assert "ResumeTimeout=1800" in lines(render_slurm_conf(blueprint))


def test_mixed_partition_is_exclusive_and_an_unknown_shape_sets_no_memory_default():
    # A partition over GPU and CPU nodes gives whole nodes (and no topology: the CPU nodes
    # are in none); custom and shared-core shapes have no memory in the catalog, so their
    # jobs get their nodes' whole memory.
    assert partition_lines(cluster_of("a4-highgpu-8g", "n2-highmem-8")) == [
        "PartitionName=all Nodes=n0,n1 Default=YES DefaultTime=UNLIMITED MaxTime=UNLIMITED "
        "Exclusive=NODE Topology=flat State=UP"]
    for machine_type in ("n2-custom-8-32768", "e2-medium"):
        assert "DefMem" not in partition_lines(cluster_of(machine_type))[0]
    # The partition's default is what its leanest nodeset gives: highcpu beside highmem.
    assert "DefMemPerCPU=828 " in partition_lines(cluster_of("n2-highmem-8", "c2d-highcpu-4"))[0]


def test_default_time_is_its_own_line_when_set():
    blueprint = cluster_of("n2-standard-4")
    partition = blueprint.slurm.partitions[0].model_copy(
        update={"max_time": "7-00:00:00", "default_time": "4:00:00"})
    blueprint = blueprint.model_copy(update={"slurm": blueprint.slurm.model_copy(
        update={"partitions": [partition]})})
    assert "DefaultTime=4:00:00 MaxTime=7-00:00:00 " in partition_lines(blueprint)[0]
