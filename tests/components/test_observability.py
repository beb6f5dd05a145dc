"""Observability on its own, and every metric it names against what the rendered nodes'
Ops Agent configurations write."""

from __future__ import annotations

import functools
import json
import re

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.components.observability import (
    COMPUTE_METRICS,
    DASHBOARD_CHARTS,
    Observability,
    cluster_alerts,
    dashboard_json,
)
from clusterprint.facts import ops_agent, slurm_metrics
from clusterprint.node import slurm_exporter
from clusterprint.render import ops_agent as render_ops_agent
from clusterprint.render import rendered_files
from tests.support.ops_agent_config import written_config
from tests.support.paths import reference_blueprints

TENSORBOARD = "gcp:vertex/aiTensorboard:AiTensorboard"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"


def observability(cloud, **flags) -> None:
    cloud.run(lambda: Observability("obs", cluster="c1", project="p-roject",
                                    region="us-central1", **flags).tensorboard)


def test_nothing_unless_asked(cloud):
    observability(cloud)
    assert not cloud.of_type(TENSORBOARD) and not cloud.of_type(DASHBOARD)


def test_tensorboard_and_dashboard_when_asked(cloud):
    observability(cloud, tensorboard=True, dashboard=True, metrics=ALL_CHARTED)
    assert cloud.one(TENSORBOARD).inputs["region"] == "us-central1"
    assert cloud.one(DASHBOARD).inputs["dashboardJson"] == dashboard_json("c1", ALL_CHARTED)


#: Every metric a chart may name: a cluster that writes them all gets every chart.
ALL_CHARTED = frozenset(DASHBOARD_CHARTS.values())


def test_the_dashboard_charts_only_this_clusters_vms_and_slurm():
    dashboard = json.loads(dashboard_json("c1", ALL_CHARTED))
    tiles = dashboard["mosaicLayout"]["tiles"]
    assert tiles and dashboard["displayName"] == "clusterprint c1"
    selectors = {'metadata.user_labels."clusterprint-cluster"="c1"',
                 'metric.label."clusterprint_cluster"="c1"'}
    for tile in tiles:
        query = tile["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]
        assert [s for s in selectors if s in query["timeSeriesFilter"]["filter"]]
    titles = {tile["widget"]["title"] for tile in tiles}
    assert {"GPU utilization", "Slurm nodes by nodeset and state"} <= titles


# --- Alerts ------------------------------------------------------------------------------

POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"


def test_the_alert_policies_exist_without_any_channel(cloud):
    observability(cloud, alerts=True)
    policies = cloud.of_type(POLICY)
    assert sorted(p.name for p in policies) == ["obs-alert-controller", "obs-alert-drained",
                                                "obs-alert-protected"]
    assert not cloud.of_type(CHANNEL)
    for policy in policies:
        assert not policy.inputs.get("notificationChannels")
        (condition,) = policy.inputs["conditions"]
        promql = condition["conditionPrometheusQueryLanguage"]
        # Created before the controller boots: no metric written yet must not refuse them.
        assert promql["disableMetricValidation"] is True
        assert 'clusterprint_cluster="c1"' in promql["query"]
        assert all(p.parent == "obs" for p in policies)


def test_each_alert_email_is_one_channel_every_policy_notifies(cloud):
    observability(cloud, alerts=True, alert_emails=["oncall@example.com", "b@example.org",
                                                    "oncall@example.com"])
    channels = cloud.of_type(CHANNEL)
    assert sorted(c.name for c in channels) == ["obs-email-b@example.org",
                                                "obs-email-oncall@example.com"]
    assert {c.inputs["labels"]["email_address"] for c in channels} == {
        "oncall@example.com", "b@example.org"}
    assert all(c.inputs["type"] == "email" for c in channels)
    for policy in cloud.of_type(POLICY):
        assert sorted(policy.inputs["notificationChannels"]) == [
            "projects/p-roject/notificationChannels/obs-email-b@example.org",
            "projects/p-roject/notificationChannels/obs-email-oncall@example.com"]


def test_no_policy_where_the_cluster_runs_no_exporter(cloud):
    observability(cloud, alert_emails=["oncall@example.com"])
    assert not cloud.of_type(POLICY) and not cloud.of_type(CHANNEL)


# --- Every metric named is one something in the cluster writes ---------------------------

#: PromQL's words the alerts use: everything else outside quotes and braces is a metric.
PROMQL_WORDS = {"max", "sum", "by", "absent", "or"}


def promql_metrics(query: str) -> set[str]:
    """The metric names a PromQL query selects."""
    bare = re.sub(r"\{[^}]*\}|\bby\s*\([^)]*\)", " ", query)
    return {word for word in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare)
            if word not in PROMQL_WORDS}


BLUEPRINTS = [path.stem for path in reference_blueprints()]


@functools.cache
def reference(name: str) -> Blueprint:
    """Reference blueprint ``name``, checked."""
    return load_checked(str(next(p for p in reference_blueprints() if p.stem == name)))


@functools.cache
def written_metrics(name: str) -> frozenset[str]:
    """What reference blueprint ``name``'s nodes write: the metric types of every receiver
    a pipeline of a rendered boot script's Ops Agent configuration runs (the controller's
    Slurm receiver of this cluster, the roles' receivers)."""
    known = (*ops_agent.METRICS_RECEIVERS, slurm_metrics.receiver(reference(name).name))
    return frozenset(m for path, text in rendered_files(reference(name)).items()
                     if path.startswith("scripts/") and path.endswith(".sh")
                     for m in ops_agent.metrics_collected(written_config(text), known))


def charted(name: str) -> list[str]:
    """The metric type of each tile of reference blueprint ``name``'s dashboard, as its
    TrainingCluster plans it."""
    blueprint = reference(name)
    dashboard = json.loads(dashboard_json(blueprint.name,
                                          render_ops_agent.metrics_written(blueprint)))
    return [re.findall(r'metric\.type="([^"]+)"', tile["widget"]["xyChart"]["dataSets"][0][
        "timeSeriesQuery"]["timeSeriesFilter"]["filter"])[0]
        for tile in dashboard["mosaicLayout"]["tiles"]]


@pytest.mark.parametrize("name", BLUEPRINTS)
def test_what_the_dashboard_is_told_the_cluster_writes_is_what_its_nodes_configure(name):
    assert render_ops_agent.metrics_written(reference(name)) == written_metrics(name)


@pytest.mark.parametrize("name", BLUEPRINTS)
def test_every_alert_names_only_metrics_the_controller_of_every_cluster_writes(name):
    for alert in cluster_alerts(reference(name).name):
        named = promql_metrics(alert.query)
        assert named and named <= set(slurm_exporter.METRICS), (alert.role, named)
        assert {slurm_metrics.metric(n) for n in named} <= written_metrics(name)


@pytest.mark.parametrize("name", BLUEPRINTS)
def test_every_dashboard_tile_names_a_metric_something_in_the_cluster_writes(name):
    # Compute Engine writes its instance metrics itself, on every VM.
    assert [m for m in charted(name)
            if m not in written_metrics(name) and not m.startswith(COMPUTE_METRICS)] == []


def test_a_cpu_cluster_gets_no_gpu_tile_and_a_gpu_cluster_every_one():
    gpu = {m for m in DASHBOARD_CHARTS.values()
           if m.startswith(("agent.googleapis.com/gpu/", "workload.googleapis.com/gpu."))}
    assert gpu
    assert not gpu & set(charted("cpu-small"))
    assert gpu <= set(charted("a4"))


def test_a_cluster_without_clusterprints_agents_gets_only_compute_engines_tiles():
    # A managed cluster: its nodes are the service's, with no exporter nor GPU receiver.
    tiles = json.loads(dashboard_json("m1", ()))["mosaicLayout"]["tiles"]
    assert tiles and all(COMPUTE_METRICS in json.dumps(tile) for tile in tiles)


def test_the_metric_reader_finds_what_a_query_names():
    assert promql_metrics('sum by (nodeset) (a_b{x="y z"}) / max(c) or absent(d{e="f"})'
                          ) == {"a_b", "c", "d"}
