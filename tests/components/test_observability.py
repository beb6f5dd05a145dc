"""Observability on its own."""

from __future__ import annotations

import json
import re

from clusterprint.components.observability import Observability, cluster_alerts, dashboard_json
from clusterprint.facts import ops_agent, slurm_metrics
from clusterprint.node import slurm_exporter

TENSORBOARD = "gcp:vertex/aiTensorboard:AiTensorboard"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"


def observability(cloud, **flags) -> None:
    cloud.run(lambda: Observability("obs", cluster="c1", project="p-roject",
                                    region="us-central1", **flags).tensorboard)


def test_nothing_unless_asked(cloud):
    observability(cloud)
    assert not cloud.of_type(TENSORBOARD) and not cloud.of_type(DASHBOARD)


def test_tensorboard_and_dashboard_when_asked(cloud):
    observability(cloud, tensorboard=True, dashboard=True)
    assert cloud.one(TENSORBOARD).inputs["region"] == "us-central1"
    assert cloud.one(DASHBOARD).inputs["dashboardJson"] == dashboard_json("c1")


def test_the_dashboard_charts_only_this_clusters_vms_and_slurm():
    dashboard = json.loads(dashboard_json("c1"))
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


def written_metrics() -> set[str]:
    """What the cluster's agents write: the Slurm exporter's (through the controller's
    receiver) and the GPU receivers' metric types."""
    return set(slurm_metrics.receiver("c1").metrics) | {
        m for r in ops_agent.GPU_METRICS_RECEIVERS for m in r.metrics}


def test_every_alert_names_only_metrics_the_exporter_writes():
    for alert in cluster_alerts("c1"):
        named = promql_metrics(alert.query)
        assert named and named <= set(slurm_exporter.METRICS), (alert.role, named)
        assert {slurm_metrics.metric(n) for n in named} <= written_metrics()


def test_every_dashboard_tile_names_a_metric_something_in_the_cluster_writes():
    for tile in json.loads(dashboard_json("c1"))["mosaicLayout"]["tiles"]:
        query = tile["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]
        (metric,) = re.findall(r'metric\.type="([^"]+)"', query["timeSeriesFilter"]["filter"])
        # Compute Engine writes its instance metrics itself, on every VM.
        assert metric in written_metrics() or metric.startswith(
            "compute.googleapis.com/instance/"), (tile["widget"]["title"], metric)


def test_the_metric_reader_finds_what_a_query_names():
    assert promql_metrics('sum by (nodeset) (a_b{x="y z"}) / max(c) or absent(d{e="f"})'
                          ) == {"a_b", "c", "d"}
