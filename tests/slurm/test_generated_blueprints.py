"""slurmctld boots the rendered configuration of any valid blueprint, not just ours."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clusterprint import rules
from clusterprint.model import Blueprint

MACHINE_TYPES = ["a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "n2-standard-4",
                 "c2-standard-60"]
MAX_TIMES = [None, "30", "1:00:00", "12:00:00", "7-00:00:00", "UNLIMITED"]
names = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)


@st.composite
def blueprints(draw) -> Blueprint:
    """A valid blueprint with several nodesets and partitions over them."""
    nodeset_names = draw(st.lists(names, min_size=2, max_size=4, unique=True))
    nodesets = []
    for name in nodeset_names:
        count = draw(st.integers(0, 64))
        nodesets.append({"name": name, "machine_type": draw(st.sampled_from(MACHINE_TYPES)),
                         "count": count, "max_count": draw(st.integers(max(count, 1), 256))})
    partitions = []
    for name in draw(st.lists(names, min_size=2, max_size=4, unique=True)):
        members = draw(st.lists(st.sampled_from(nodeset_names), min_size=1, unique=True))
        partitions.append({"name": f"p{name}", "nodesets": members,
                           "max_time": draw(st.sampled_from(MAX_TIMES))})
    marked = draw(st.none() | st.integers(0, len(partitions) - 1))
    if marked is not None:
        partitions[marked]["default"] = True
    blueprint = Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster",
        "name": f"c{draw(names)}", "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": nodesets, "partitions": partitions}})
    assume(not [f for f in rules.check(blueprint) if f.severity == "error"])
    return blueprint


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blueprint=blueprints())
def test_slurmctld_boots_rendered_config_of_generated_blueprints(blueprint, local_slurm):
    cluster = local_slurm(blueprint)
    try:
        check_booted(cluster, blueprint)
    finally:
        cluster.stop()  # one controller per example, not five at once


def check_booted(cluster, blueprint: Blueprint) -> None:
    """Every partition is up, the default one is marked, MaxNodeCount is the sum."""
    partitions = dict(line.split() for line in cluster.run("sinfo", "-h", "-o", "%R %a")
                      .splitlines())
    assert partitions == {p.name: "up" for p in blueprint.slurm.partitions}
    default = cluster.run("scontrol", "show", "partition", blueprint.slurm.default_partition.name)
    assert "Default=YES" in default
    config = cluster.run("scontrol", "show", "config")
    max_nodes = sum(n.upper_bound for n in blueprint.slurm.nodesets)
    assert f"MaxNodeCount            = {max_nodes}" in config
