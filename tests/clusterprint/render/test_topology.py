"""What Slurm is told of the network: topology.yaml, each partition's Topology=, the close-node
options of the staged jobs, and the topology programs among the rendered files.

A tree family's cluster gets the tree ``fabric``; A4X's also the NVLink blocks ``nvlink``; a
cluster with no nodeset in a topology (CPU nodes, G2, no GPU network) gets nothing at all,
and Slurm its default. tests/slurm/test_topology.py boots these files on real Slurm 26.05.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given, settings

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import machines
from clusterprint.facts.topology import FABRIC_TREE, NVLINK_DOMAINS, PHYSICAL_TOPOLOGY_KEY
from clusterprint.node import nccl_blocks, nvlink_blocks
from clusterprint.node import topology as place_program
from clusterprint.render import node_programs, node_scripts, rendered_files
from clusterprint.render.config_sync import slurm_config_value
from clusterprint.render.nccl_job import nccl_job_path
from clusterprint.render.recipes import recipe_path
from clusterprint.render.slurm_config import render_slurm_conf, render_slurm_configs
from clusterprint.render.topology import (
    BLOCKS_MAX,
    NCCL_BLOCKS_COMMAND,
    PLACE_PROGRAM,
    SWITCH_WAIT,
    plan_rows,
    segment_size,
)
from tests.support.drawn_blueprints import blueprints
from tests.support.job_blueprints import sbatch_options
from tests.support.paths import reference_blueprints
from tests.support.topology_blueprints import (
    a4x_cluster,
    cpu_only,
    g2_only,
    mixed_partition,
    reference_with,
    tree_and_blocks,
    without_gpu_network,
)

#: Every reference blueprint has a tree family but cpu-small; A3 High (8 GPUs) has none.
TREE_CLUSTERS = {
    **{p.stem: load_checked(str(p)) for p in reference_blueprints() if p.stem != "cpu-small"},
    "a3high": reference_with("a3mega", {"slurm.nodesets[0].machine_type": "a3-highgpu-8g"})}
A4X = a4x_cluster()
#: Clusters no nodeset of which has a place in the network Slurm could use.
NO_TOPOLOGY = {"cpu-small": cpu_only(), "g2": g2_only(), "a4-no-gpu-network": without_gpu_network(),
               "a4x-no-gpu-network": without_gpu_network("a4x")}
#: The tree, as topology.yaml declares it: its root switch only, the cluster's default.
TREE = {"topology": "fabric", "cluster_default": True, "tree": {"switches": [{"switch": "fabric"}]}}
#: Where a partition with nodes outside the tree (and its blocks) places its jobs.
FLAT = {"topology": "flat", "cluster_default": False, "flat": True}
#: The programs the topology adds to `clusterprint render --out`.
PROGRAMS = ("scripts/topology.py", "scripts/nvlink_blocks.py", "scripts/nccl_blocks.py")


def topology_yaml(blueprint: Blueprint) -> list[dict]:
    return yaml.safe_load(render_slurm_configs(blueprint)["topology.yaml"])


def nvlink_blocks_declared(blueprint: Blueprint) -> dict:
    (blocks,) = [t for t in topology_yaml(blueprint) if t["topology"] == "nvlink"]
    return blocks


def partition_topologies(blueprint: Blueprint) -> dict[str, str | None]:
    """Each partition's Topology= in slurm.conf (None where its line has none)."""
    found = {}
    for line in render_slurm_conf(blueprint).splitlines():
        if line.startswith("PartitionName="):
            name = line.split()[0].removeprefix("PartitionName=")
            match = re.search(r" Topology=(\S+) ", line)
            found[name] = match[1] if match else None
    return found


@pytest.mark.parametrize("name", sorted(TREE_CLUSTERS))
def test_a_tree_familys_cluster_declares_the_tree_by_its_root_and_no_blocks(name):
    # Each node creates its cluster, block and sub-block switches when it registers: no
    # size, no switch below the root, is declared.
    assert FABRIC_TREE in machines.gpu_family(
        TREE_CLUSTERS[name].slurm.nodesets[0].machine_type).topology
    assert topology_yaml(TREE_CLUSTERS[name]) == [TREE, FLAT]


def test_an_a4x_cluster_adds_one_empty_nvlink_block_per_node_its_nodesets_may_hold():
    # a4: 4 static nodes, a4spot: up to 8, each of which may be the only one of its domain.
    assert topology_yaml(A4X) == [TREE, {
        "topology": "nvlink", "cluster_default": False,
        "block": {"block_sizes": [NVLINK_DOMAINS.block_nodes],
                  "blocks": [{"block": f"nvl{i}"} for i in range(1, 13)]}}, FLAT]
    assert NVLINK_DOMAINS.block_nodes == 18


def test_only_the_a4x_nodesets_count_for_the_blocks_and_a_resize_adds_blocks():
    # a4spot (A4X, up to 8) beside a4 (A4, in the tree only).
    assert [b["block"] for b in nvlink_blocks_declared(tree_and_blocks())["block"]["blocks"]] == [
        f"nvl{i}" for i in range(1, 9)]
    grown = a4x_cluster({"slurm.nodesets[1].max_count": 20})
    assert len(nvlink_blocks_declared(grown)["block"]["blocks"]) == 4 + 20


def test_the_blocks_stop_at_the_cap_however_large_the_nodesets():
    largest = a4x_cluster({"slurm.nodesets[1].max_count": 16384})
    blocks = nvlink_blocks_declared(largest)["block"]["blocks"]
    assert len(blocks) == BLOCKS_MAX == 4096
    assert (blocks[0], blocks[-1]) == ({"block": "nvl1"}, {"block": "nvl4096"})


@pytest.mark.parametrize("name", sorted(NO_TOPOLOGY))
def test_a_cluster_with_no_nodeset_in_a_topology_gets_none_of_it(name):
    blueprint = NO_TOPOLOGY[name]
    files = rendered_files(blueprint)
    assert "topology.yaml" not in files
    assert "Topology=" not in files["slurm.conf"]
    assert [p for p in PROGRAMS if p in files] == []
    for nodeset in blueprint.slurm.nodesets:
        assert "place_in_topology" not in files[f"scripts/compute-{nodeset.name}.sh"]
    assert "nvlink_blocks" not in files["scripts/controller.sh"]
    assert "nccl-blocks" not in files["scripts/login.sh"]
    for role in ("controller", "login"):
        assert "topology.yaml" not in json.loads(slurm_config_value(files, role))
    for path, text in files.items():
        if path.startswith(("jobs/", "recipes/")):
            assert not {"switches", "segment"} & set(sbatch_options(text)), path


PARTITIONS = [
    pytest.param(TREE_CLUSTERS["a4"], {"a4": "fabric", "a4spot": "fabric"}, id="a4"),
    pytest.param(A4X, {"a4": "nvlink", "a4spot": "nvlink"}, id="a4x"),
    # A4X nodes are in the tree too: a partition over A4 and A4X nodes is placed by it.
    pytest.param(tree_and_blocks(), {"a4": "fabric", "a4spot": "nvlink", "both": "fabric"},
                 id="tree-and-blocks"),
    # A CPU node is in neither: it could take part in no job of several nodes there.
    pytest.param(mixed_partition(), {"a4": "fabric", "a4spot": "fabric", "mixed": "flat"},
                 id="mixed"),
    pytest.param(reference_with("a4", {"slurm.nodesets[1].machine_type": "g2-standard-8"}),
                 {"a4": "fabric", "a4spot": "flat"}, id="g2-beside-a4"),
    pytest.param(cpu_only(), {"debug": None}, id="cpu-small"),
]


@pytest.mark.parametrize(("blueprint", "expected"), PARTITIONS)
def test_each_partition_names_the_topology_all_its_nodesets_are_in(blueprint, expected):
    assert partition_topologies(blueprint) == expected


def partition_kinds(blueprint: Blueprint, nodesets: list[str]) -> list[set[str]]:
    """The kinds of topology each named nodeset's family has (the facts, not the renderer)."""
    by_name = {n.name: n for n in blueprint.slurm.nodesets}
    families = [machines.gpu_family(by_name[n].machine_type) for n in nodesets]
    return [{t.kind for t in family.topology} if family else set() for family in families]


@settings(max_examples=30, deadline=None)
@given(drawn=blueprints())
def test_drawn_clusters_place_a_partition_by_the_tree_only_when_all_its_nodes_are_in_it(drawn):
    blueprint, _ = drawn
    tree = any(partition_kinds(blueprint, [n.name for n in blueprint.slurm.nodesets]))
    expected = {p.name: None if not tree else
                "fabric" if all("tree" in k for k in partition_kinds(blueprint, p.nodesets))
                else "flat" for p in blueprint.slurm.partitions}
    assert partition_topologies(blueprint) == expected
    assert ("topology.yaml" in render_slurm_configs(blueprint)) is tree


def staged_jobs(blueprint: Blueprint) -> dict[str, dict[str, str]]:
    """The #SBATCH options of every NCCL proof and recipe, by rendered path."""
    return {path: sbatch_options(text) for path, text in rendered_files(blueprint).items()
            if path.startswith(("jobs/", "recipes/"))}


def close_options(options: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in options.items() if k in ("switches", "segment")}


@pytest.mark.parametrize("name", sorted(TREE_CLUSTERS))
def test_on_a_tree_every_job_of_several_nodes_asks_for_one_sub_block_for_five_minutes(name):
    jobs = staged_jobs(TREE_CLUSTERS[name])
    assert any(path.startswith("jobs/") for path in jobs)
    for path, options in jobs.items():
        wanted = {"switches": f"1@{SWITCH_WAIT}"} if int(options["nodes"]) > 1 else {}
        assert close_options(options) == wanted, path
    assert SWITCH_WAIT == "5:00"  # Slurm's max_switch_wait: 300 s


def test_the_reference_recipes_ask_for_one_sub_block_only_where_they_span_nodes():
    jobs = staged_jobs(TREE_CLUSTERS["a3ultra"])
    assert close_options(jobs[recipe_path("llama3-70b-pretrain")]) == {"switches": "1@5:00"}
    assert jobs[recipe_path("llama3-70b-pretrain")]["nodes"] == "8"
    assert close_options(jobs[recipe_path("gemma-7b-sft")]) == {}  # one node
    assert close_options(staged_jobs(TREE_CLUSTERS["a3mega"])[
        recipe_path("llama3-8b-pretrain")]) == {"switches": "1@5:00"}


def test_on_nvlink_blocks_every_job_asks_for_segments_inside_one_domain():
    jobs = staged_jobs(A4X)
    assert {path: close_options(options) for path, options in jobs.items()} == {
        nccl_job_path("a4"): {"segment": "2"}, nccl_job_path("a4spot"): {"segment": "2"},
        recipe_path("gemma-7b-sft"): {"segment": "4"},
        recipe_path("gemma-2b-sft"): {"segment": "8"}}


def test_a_job_of_a4_and_a4x_nodes_together_asks_the_tree_which_holds_them_all():
    # --segment works on blocks only: asked of the tree, Slurm would refuse the job.
    jobs = staged_jobs(tree_and_blocks())
    assert close_options(jobs[nccl_job_path("both")]) == {"switches": "1@5:00"}
    assert close_options(jobs[nccl_job_path("a4spot")]) == {"segment": "2"}


def test_a_job_of_a_flat_partition_asks_for_no_place():
    jobs = staged_jobs(mixed_partition())
    assert close_options(jobs[nccl_job_path("mixed")]) == {}
    assert close_options(jobs[nccl_job_path("a4spot")]) == {"switches": "1@5:00"}


@pytest.mark.parametrize(("nodes", "segment"), [
    (2, 2), (17, 17), (18, 18), (32, 16), (36, 18), (54, 18), (40, 10),
    # A prime count above a domain: Slurm refuses a segment that does not divide the job.
    (19, 1)])
def test_the_segment_is_the_largest_divisor_of_the_job_within_one_domain(nodes, segment):
    assert segment_size(nodes, NVLINK_DOMAINS.block_nodes) == segment


def test_a_recipe_larger_than_a_domain_gets_the_largest_segment_that_divides_it():
    big = a4x_cluster({"slurm.nodesets[1].max_count": 40, "recipes": [
        {"name": "gemma-2b-sft", "partition": "a4spot", "nodes": 32}]})
    assert close_options(staged_jobs(big)[recipe_path("gemma-2b-sft")]) == {"segment": "16"}


RENDERED_PROGRAMS = [
    pytest.param(TREE_CLUSTERS["a4"], ["scripts/topology.py", "scripts/nccl_blocks.py"],
                 id="a4"),
    pytest.param(A4X, list(PROGRAMS), id="a4x"),
    pytest.param(tree_and_blocks(), list(PROGRAMS), id="tree-and-blocks"),
    pytest.param(mixed_partition(), ["scripts/topology.py", "scripts/nccl_blocks.py"],
                 id="mixed"),
    pytest.param(cpu_only(), [], id="cpu-small"),
]


@pytest.mark.parametrize(("blueprint", "programs"), RENDERED_PROGRAMS)
def test_render_writes_each_topology_program_only_where_it_runs(blueprint, programs):
    files = rendered_files(blueprint)
    assert [p for p in PROGRAMS if p in files] == programs
    modules = {"scripts/topology.py": place_program, "scripts/nvlink_blocks.py": nvlink_blocks,
               "scripts/nccl_blocks.py": nccl_blocks}
    for path in programs:  # the very file its tests run, as the nodes get it
        assert files[path] == node_programs.module_text(modules[path]), path


def test_every_node_of_the_tree_reads_its_place_at_boot_and_no_other_node_does():
    files = rendered_files(mixed_partition())
    for nodeset in ("a4", "a4spot"):
        script = files[f"scripts/compute-{nodeset}.sh"]
        assert f"instance_metadata attributes/{PHYSICAL_TOPOLOGY_KEY} >" in script
        assert f"TOPOLOGY=$(python3 {PLACE_PROGRAM} --tree fabric " in script
        assert "\nstep place_in_topology\nstep start_slurmd\n" in script
    assert "place_in_topology" not in files["scripts/compute-cpu.sh"]
    # A4X nodes join the tree at boot; the controller puts them in their blocks.
    for nodeset in ("a4", "a4spot"):
        assert "\nstep place_in_topology\n" in rendered_files(A4X)[f"scripts/compute-{nodeset}.sh"]


def test_the_nvlink_blocks_service_runs_on_the_controller_for_the_a4x_nodesets_only():
    unit_line = ("ExecStart=/usr/bin/python3 /etc/slurm/clusterprint/nvlink_blocks.py "
                 "--tree fabric --block nvlink --nodesets {}\n")
    assert unit_line.format("a4,a4spot") in rendered_files(A4X)["scripts/controller.sh"]
    controller = rendered_files(tree_and_blocks())["scripts/controller.sh"]
    assert unit_line.format("a4spot") in controller
    # After slurmctld is up: the service asks it where the nodes are.
    assert "\nstep start_slurmctld\nstep start_nvlink_blocks\n" in controller
    assert "nvlink_blocks" not in rendered_files(TREE_CLUSTERS["a4"])["scripts/controller.sh"]


def test_the_login_node_gets_the_per_block_proof_where_a_partition_is_placed():
    for blueprint in (TREE_CLUSTERS["a4"], A4X):
        login = rendered_files(blueprint)["scripts/login.sh"]
        assert f"/usr/local/lib/clusterprint/nccl_blocks.py {NCCL_BLOCKS_COMMAND}\n" in login


@pytest.mark.parametrize("blueprint", [TREE_CLUSTERS["a4"], A4X], ids=["a4", "a4x"])
def test_topology_yaml_reaches_the_controller_and_login_nodes_with_the_other_slurm_files(
        blueprint):
    files = rendered_files(blueprint)
    values = node_scripts(blueprint).slurm_config
    for role in ("controller", "login"):
        assert json.loads(values[role])["topology.yaml"] == files["topology.yaml"], role
    # Compute nodes are configless: slurmctld serves them its copy; no script holds one.
    for path, text in files.items():
        if path.endswith(".sh"):
            assert "cluster_default:" not in text, path


def test_the_plan_says_why_a_nodeset_has_no_topology_without_its_gpu_network():
    assert plan_rows(without_gpu_network()) == [
        {"nodeset": n, "topologies": [], "blockNodes": None, "knownAtBoot": None,
         "why": "the cluster builds no GPU network"} for n in ("a4", "a4spot")]
    assert [(r["topologies"], r["blockNodes"]) for r in plan_rows(A4X)] == [
        (["fabric", "nvlink"], 18)] * 2
    assert plan_rows(cpu_only()) == []
