"""Where slurmctld 26.05 stops keeping what it is given, the rules refuse it first.

Each case renders a blueprint the model builds but the rules refuse, and shows what
the real slurmctld does with it: exits, or keeps another value than the one written.
The values just inside each bound boot (see test_generated_blueprints.py).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clusterprint.blueprint import rules
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.slurm import limit_minutes
from clusterprint.blueprint.slurm_time import MAX_MINUTES, format_minutes


def blueprint(max_time: str | None = None, nodesets: tuple[str, ...] = ("cpu",),
              interval_s: int = 300) -> Blueprint:
    """One CPU nodeset and one partition ``debug`` over ``nodesets``."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "demo",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": "cpu", "machine_type": "n2-standard-4", "count": 1}],
                  "partitions": [{"name": "debug", "nodesets": list(nodesets),
                                  **({"max_time": max_time} if max_time else {})}],
                  "health_checks": {"interval_s": interval_s}}})


def refused_by(bp: Blueprint) -> set[str]:
    """The ids of the rules that refuse ``bp``."""
    return {f.rule for f in rules.check(bp) if f.severity == "error"}


@pytest.mark.parametrize("max_time", [f"{MAX_MINUTES + 1}", format_minutes(MAX_MINUTES + 1),
                                      "24855-03:13:09"])
def test_one_minute_past_the_bound_stops_slurmctld(max_time, local_slurm):
    bp = blueprint(max_time)
    assert refused_by(bp) == {"slurm.time-limit"}
    log = local_slurm(bp, start=False).refused_controller()
    assert f'Bad value "{max_time}" for MaxTime' in log


@pytest.mark.parametrize(("max_time", "kept"), [
    ("4294967296", "00:00:00"),   # 2**32: sscanf keeps the low 32 bits, 0
    ("4294967294", "UNLIMITED"),  # sscanf keeps -2; -120 s rounds to -1, which is INFINITE
    ("71582788", "00:00:00"),     # x 60 wraps the int to -16 s, which rounds to 0 minutes
    ("0", "00:00:00"),            # 0 is kept as 0 minutes, not as no limit
])
def test_slurmctld_keeps_another_limit_than_the_one_written(max_time, kept, local_slurm):
    bp = blueprint(max_time)
    assert refused_by(bp) == {"slurm.time-limit"}
    shown = local_slurm(bp).partitions()["debug"]
    assert (shown["MaxTime"], shown["DefaultTime"]) == (kept, kept)


def test_a_nodeset_listed_twice_stops_slurmctld(local_slurm):
    bp = blueprint(nodesets=("cpu", "cpu"))
    assert refused_by(bp) == {"names.partition-nodesets"}
    cluster = local_slurm(bp, start=False)
    assert "Nodes=cpu,cpu" in cluster.files["slurm.conf"]
    cluster.refused_controller()


def with_health_check_interval(cluster, seconds: int):
    """The cluster's slurm.conf plus the HealthCheckInterval line interval_s becomes."""
    cluster.conf.write_text(cluster.conf.read_text() + f"HealthCheckInterval={seconds}\n")
    return cluster


def test_the_largest_health_check_interval_is_read_as_written(local_slurm):
    largest = blueprint(interval_s=65535).slurm.health_checks.interval_s
    cluster = with_health_check_interval(local_slurm(blueprint(), start=False), largest)
    cluster.start_controller()
    config = cluster.run("scontrol", "show", "config")
    assert f"HealthCheckInterval     = {largest} sec" in config


def test_one_second_more_stops_slurmctld_and_the_model_refuses_it(local_slurm):
    with pytest.raises(ValidationError, match="less than or equal to 65535"):
        blueprint(interval_s=65536)
    cluster = with_health_check_interval(local_slurm(blueprint(), start=False), 65536)
    assert "HealthCheckInterval value (65536) is greater than 65535" in (
        cluster.refused_controller())


def with_default_time(max_time: str, default_time: str) -> Blueprint:
    """``blueprint(max_time)`` whose partition also sets ``default_time``."""
    bp = blueprint(max_time)
    partition = bp.slurm.partitions[0].model_copy(update={"default_time": default_time})
    return bp.model_copy(update={"slurm": bp.slurm.model_copy(update={"partitions": [partition]})})


@pytest.mark.parametrize(("max_time", "default_time", "shown"), [
    ("7-00:00:00", "4:00:00", "04:00:00"), ("1", "0:01", "00:01:00"),
    (format_minutes(MAX_MINUTES), f"{MAX_MINUTES}", format_minutes(MAX_MINUTES))])
def test_a_default_time_within_max_time_is_kept_beside_it(max_time, default_time, shown,
                                                          local_slurm):
    bp = with_default_time(max_time, default_time)
    assert refused_by(bp) == set()
    fields = local_slurm(bp).partitions()["debug"]
    assert fields["DefaultTime"] == shown
    assert fields["MaxTime"] == format_minutes(int(limit_minutes(max_time)))


def test_a_default_time_past_max_time_is_dropped_and_the_rule_refuses_it(local_slurm):
    bp = with_default_time("4:00:00", "4:01:00")
    assert refused_by(bp) == {"slurm.time-limit"}
    assert local_slurm(bp).partitions()["debug"]["DefaultTime"] == "NONE"
