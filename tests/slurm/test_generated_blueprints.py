"""slurmctld boots the rendered configuration of any valid blueprint, not just ours.

Names are drawn over their whole model pattern, the longest included; time limits over
the whole range the rules accept, both bounds included, in every form Slurm reads, and a
default_time within each. slurmctld must keep each partition's limits exactly as the
blueprint means them, and every other rendered line as written.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings

from clusterprint.blueprint import rules
from clusterprint.blueprint.model import (
    Blueprint,
)
from clusterprint.blueprint.slurm_time import (
    MAX_MINUTES,
    format_minutes,
)
from tests.support.drawn_blueprints import blueprint_of, blueprints

LONGEST = {"name": "n" * 15 + "1", "machine_type": "n2-standard-4", "count": 1}
#: Both bounds of max_time and default_time on partitions of the longest names, over the
#: longest nodeset names.
AT_THE_BOUNDS = (
    blueprint_of("c" * 19 + "9", [LONGEST, {**LONGEST, "name": "m" * 15 + "2"}], [
        {"name": "p" * 30 + "1", "nodesets": ["n" * 15 + "1", "m" * 15 + "2"],
         "max_time": f"{MAX_MINUTES}", "default_time": "1"},
        {"name": "q" * 30 + "2", "nodesets": ["m" * 15 + "2"],
         "max_time": format_minutes(MAX_MINUTES), "default_time": f"{MAX_MINUTES}"},
        {"name": "r-1", "nodesets": ["n" * 15 + "1"], "max_time": "1", "default": True,
         "default_time": "0:01"},
        {"name": "s", "nodesets": ["n" * 15 + "1"], "max_time": "0:01"}]),
    {"p" * 30 + "1": ("24855-03:13:00", "00:01:00"),
     "q" * 30 + "2": ("24855-03:13:00", "24855-03:13:00"), "r-1": ("00:01:00", "00:01:00"),
     "s": ("00:01:00", "00:01:00")})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=blueprints())
@example(drawn=AT_THE_BOUNDS)
def test_slurmctld_boots_rendered_config_of_generated_blueprints(drawn, local_slurm):
    blueprint, shown = drawn
    cluster = local_slurm(blueprint)
    try:
        check_booted(cluster, blueprint, shown)
    finally:
        cluster.stop()  # one controller per example, not all at once


def test_the_bounds_example_is_valid():
    blueprint, _ = AT_THE_BOUNDS
    assert not [f for f in rules.check(blueprint) if f.severity == "error"]


def check_booted(cluster, blueprint: Blueprint, limits: dict[str, tuple[str, str]]) -> None:
    """Every partition is up with its limits, the default one is marked, MaxNodeCount is the
    sum, and every other rendered setting is kept as written."""
    shown = cluster.partitions()
    assert set(shown) == {p.name for p in blueprint.slurm.partitions}
    default = blueprint.slurm.default_partition.name
    for name, fields in shown.items():
        assert fields["State"] == "UP"
        assert (fields["MaxTime"], fields["DefaultTime"]) == limits[name]
        assert fields["Default"] == ("YES" if name == default else "NO")
    max_nodes = sum(n.upper_bound for n in blueprint.slurm.nodesets)
    assert cluster.config()["MaxNodeCount"] == str(max_nodes)
    assert cluster.dropped_settings() == {}
    assert cluster.dropped_partition_settings() == {}
