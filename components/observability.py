"""Where training runs report and what watches the cluster: a Vertex AI TensorBoard, a Cloud
Monitoring dashboard, and alert policies on the Slurm exporter's metrics."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from clusterprint.contract import naming
from clusterprint.facts import ops_agent, slurm_metrics

#: Charts the dashboard may hold: title -> metric type. GPU metrics come from the Ops Agent
#: on GPU nodes, named from the receivers its configuration enables (ops_agent); the instance
#: metrics from Compute Engine itself, on every VM without an agent; the Slurm ones from the
#: controller's exporter, named from its metrics (slurm_metrics). A cluster's dashboard holds
#: those its nodes write (``dashboard_json``).
DASHBOARD_CHARTS = {
    "GPU utilization": ops_agent.metric("hostmetrics", "gpu/utilization"),
    "GPU memory used": ops_agent.metric("hostmetrics", "gpu/memory/bytes_used"),
    "GPU SM activity (DCGM)": ops_agent.metric("dcgm", "sm.utilization"),
    "GPU memory bandwidth (DCGM)": ops_agent.metric("dcgm", "memory.bandwidth_utilization"),
    "CPU utilization": "compute.googleapis.com/instance/cpu/utilization",
    "Network received": "compute.googleapis.com/instance/network/received_bytes_count",
    "Slurm nodes by nodeset and state": slurm_metrics.metric("clusterprint_slurm_nodes"),
    "Slurm jobs by partition, running and pending": slurm_metrics.metric(
        "clusterprint_slurm_jobs"),
    "GPUs allocated by Slurm": slurm_metrics.metric("clusterprint_slurm_gpus_allocated"),
    "GPUs in Slurm": slurm_metrics.metric("clusterprint_slurm_gpus"),
    "Remediation actions": slurm_metrics.metric("clusterprint_remediation_actions"),
    "Protected nodesets": slurm_metrics.metric("clusterprint_remediation_protected"),
}

#: What Compute Engine writes of every VM itself, agent or not.
COMPUTE_METRICS = "compute.googleapis.com/instance/"
#: A nodeset with more than this share of its Slurm nodes drained for DRAINED_FOR alerts:
#: one node in ten out of service is more than a single failure the remediation loop is
#: working through (a nodeset under ten nodes alerts at its first drained node that stays).
DRAINED_SHARE = 0.1
DRAINED_FOR = "600s"
#: The controller is down when its exporter has written nothing, or said slurmctld does not
#: answer, for this long (a reboot of the controller takes less).
DOWN_FOR = "300s"


def _selector(cluster: str, metric: str) -> str:
    """Which series of ``metric`` are the cluster's: its VMs by their label, the exporter's
    by the label its scrape adds."""
    if metric in slurm_metrics.METRIC_TYPES:
        return (f'resource.type="{slurm_metrics.RESOURCE_TYPE}" AND '
                f'metric.label."{slurm_metrics.CLUSTER_LABEL}"="{cluster}"')
    return (f'resource.type="gce_instance" AND '
            f'metadata.user_labels."{naming.CLUSTER_LABEL}"="{cluster}"')


def charts(written: Collection[str]) -> dict[str, str]:
    """The charts of a cluster whose Ops Agents write the metric types ``written``:
    Compute Engine's and those, none of a metric nothing in the cluster writes."""
    return {title: metric for title, metric in DASHBOARD_CHARTS.items()
            if metric in written or metric.startswith(COMPUTE_METRICS)}


def dashboard_json(cluster: str, written: Collection[str]) -> str:
    """A dashboard of the cluster's VMs and of its Slurm, charting what Compute Engine and
    its Ops Agents write (``written``, clusterprint/render/ops_agent.py
    ``metrics_written``): counters charted per minute."""
    tiles = [
        {"xPos": (i % 2) * 6, "yPos": (i // 2) * 4, "width": 6, "height": 4,
         "widget": {"title": title, "xyChart": {"dataSets": [{
             "plotType": "LINE",
             "timeSeriesQuery": {"timeSeriesFilter": {
                 "filter": f'metric.type="{metric}" AND {_selector(cluster, metric)}',
                 "aggregation": {"alignmentPeriod": "60s", "perSeriesAligner": (
                     "ALIGN_DELTA" if metric.endswith("/counter") else "ALIGN_MEAN")}}}}]}}}
        for i, (title, metric) in enumerate(charts(written).items())]
    return json.dumps({"displayName": f"clusterprint {cluster}",
                       "mosaicLayout": {"columns": 12, "tiles": tiles}}, sort_keys=True)


@dataclass(frozen=True)
class Alert:
    """One alert policy: a PromQL condition over the exporter's metrics (Cloud Monitoring
    reads ``prometheus.googleapis.com/NAME/KIND`` as NAME), held for ``duration``."""

    role: str
    title: str
    severity: str
    query: str
    duration: str
    documentation: str


def cluster_alerts(cluster: str) -> list[Alert]:
    """The cluster's alert policies. PromQL, not a metric filter, for two reasons: a ratio of
    two series (drained of all) is one expression; and a condition may name a metric no one
    has written yet (``disable_metric_validation``): the policies are created before the
    controller boots, and the Monitoring API refuses a filter on a metric type it has not seen."""
    match = f'{slurm_metrics.CLUSTER_LABEL}="{cluster}"'
    return [
        Alert("alert-protected", f"clusterprint {cluster}: remediation stopped", "ERROR",
              f"max by (nodeset) (clusterprint_remediation_protected{{{match}}}) > 0", "0s",
              "The remediation loop on the controller stopped acting on a nodeset (it logged "
              "an ALERT: failed remediations in a row, or its state file is unreadable). Read "
              "`journalctl -u clusterprint-remediate` on the controller, fix the cause, then "
              "`clusterprint-remediate --reset NODESET`."),
        Alert("alert-drained", f"clusterprint {cluster}: nodes drained", "WARNING",
              f'sum by (nodeset) (clusterprint_slurm_nodes{{{match},state="drained"}}) / '
              f"sum by (nodeset) (clusterprint_slurm_nodes{{{match}}}) > {DRAINED_SHARE:g}",
              DRAINED_FOR,
              f"More than {DRAINED_SHARE:.0%} of a nodeset's Slurm nodes are drained for "
              f"{DRAINED_FOR}. `sinfo -R` on the login node lists why (a `cp:` reason is the "
              "health check's)."),
        Alert("alert-controller", f"clusterprint {cluster}: controller down", "CRITICAL",
              f"absent(clusterprint_slurm_up{{{match}}}) or "
              f"max(clusterprint_slurm_up{{{match}}}) < 1", DOWN_FOR,
              "The controller's Slurm exporter has sent nothing, or slurmctld has not answered "
              f"it, for {DOWN_FOR}: no job starts. Check the controller VM and "
              "`systemctl status slurmctld` on it."),
    ]


class Observability(pulumi.ComponentResource):
    """A TensorBoard instance for training runs, a dashboard of the cluster's VMs and Slurm,
    and alert policies with an email channel per address.

    ``alerts``: the policies of ``cluster_alerts``, for a cluster whose controller runs the Slurm
    exporter (TrainingCluster: always, as the issue asks them present without a channel;
    a managed cluster's controller is the service's, without the exporter: none).
    ``metrics``: the metric types the cluster's own Ops Agents write, which the dashboard
    charts beside Compute Engine's (a managed cluster's nodes run none of clusterprint's
    configurations: none).
    """

    def __init__(self, name: str, *, cluster: str, project: str, region: str,
                 tensorboard: bool = False, dashboard: bool = False, alerts: bool = False,
                 alert_emails: Sequence[str] = (), metrics: Collection[str] = (),
                 labels: Mapping[str, str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        #: projects/P/locations/R/tensorboards/ID, for `--tensorboard` of training jobs.
        self.tensorboard: pulumi.Output[str] | None = None
        if tensorboard:
            self.tensorboard = gcp.vertex.AiTensorboard(
                f"{name}-tensorboard", project=project, region=region, display_name=cluster,
                labels=dict(labels or {}), opts=child).id
        self.dashboard: pulumi.Output[str] | None = None
        if dashboard:
            self.dashboard = gcp.monitoring.Dashboard(
                f"{name}-dashboard", project=project,
                dashboard_json=dashboard_json(cluster, metrics), opts=child).id
        #: One email channel per address (named by it: a shifted list replaces nothing).
        self.channels = [gcp.monitoring.NotificationChannel(
            naming.alert_email_channel(name, address), project=project, type="email",
            display_name=f"clusterprint {cluster}: {address}",
            labels={"email_address": address}, user_labels=dict(labels or {}), opts=child)
            for address in dict.fromkeys(alert_emails if alerts else ())]
        self.alert_policies = [gcp.monitoring.AlertPolicy(
            naming.child(name, alert.role), project=project, display_name=alert.title,
            combiner="OR", severity=alert.severity, user_labels=dict(labels or {}),
            conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                display_name=alert.title,
                condition_prometheus_query_language=(
                    gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                        query=alert.query, duration=alert.duration, evaluation_interval="60s",
                        disable_metric_validation=True)))],
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                content=alert.documentation, mime_type="text/markdown"),
            notification_channels=[c.name for c in self.channels], opts=child)
            for alert in (cluster_alerts(cluster) if alerts else [])]
        #: The exports a cluster adds to its own: only what was asked for.
        self.exports = {key: value for key, value in
                        (("tensorboard", self.tensorboard), ("dashboard", self.dashboard))
                        if value is not None}
        self.register_outputs(self.exports)
