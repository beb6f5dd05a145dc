"""Where training runs report: a Vertex AI TensorBoard and a Cloud Monitoring dashboard."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from clusterprint.contract import naming
from clusterprint.facts import ops_agent

#: Charts on the dashboard: title -> metric type. GPU metrics come from the Ops Agent on GPU
#: nodes, named from the receivers its configuration enables (ops_agent); the instance
#: metrics from Compute Engine itself, on every VM without an agent.
DASHBOARD_CHARTS = {
    "GPU utilization": ops_agent.metric("hostmetrics", "gpu/utilization"),
    "GPU memory used": ops_agent.metric("hostmetrics", "gpu/memory/bytes_used"),
    "GPU SM activity (DCGM)": ops_agent.metric("dcgm", "sm.utilization"),
    "GPU memory bandwidth (DCGM)": ops_agent.metric("dcgm", "memory.bandwidth_utilization"),
    "CPU utilization": "compute.googleapis.com/instance/cpu/utilization",
    "Network received": "compute.googleapis.com/instance/network/received_bytes_count",
}


def dashboard_json(cluster: str) -> str:
    """A dashboard of the cluster's VMs, selected by their ``clusterprint-cluster`` label."""
    selector = (f'resource.type="gce_instance" AND '
                f'metadata.user_labels."{naming.CLUSTER_LABEL}"="{cluster}"')
    tiles = [
        {"xPos": (i % 2) * 6, "yPos": (i // 2) * 4, "width": 6, "height": 4,
         "widget": {"title": title, "xyChart": {"dataSets": [{
             "plotType": "LINE",
             "timeSeriesQuery": {"timeSeriesFilter": {
                 "filter": f'metric.type="{metric}" AND {selector}',
                 "aggregation": {"alignmentPeriod": "60s",
                                 "perSeriesAligner": "ALIGN_MEAN"}}}}]}}}
        for i, (title, metric) in enumerate(DASHBOARD_CHARTS.items())]
    return json.dumps({"displayName": f"clusterprint {cluster}",
                       "mosaicLayout": {"columns": 12, "tiles": tiles}}, sort_keys=True)


class Observability(pulumi.ComponentResource):
    """A TensorBoard instance for training runs and a dashboard of the cluster's VMs."""

    def __init__(self, name: str, *, cluster: str, project: str, region: str,
                 tensorboard: bool = False, dashboard: bool = False,
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
                f"{name}-dashboard", project=project, dashboard_json=dashboard_json(cluster),
                opts=child).id
        #: The exports a cluster adds to its own: only what was asked for.
        self.exports = {key: value for key, value in
                        (("tensorboard", self.tensorboard), ("dashboard", self.dashboard))
                        if value is not None}
        self.register_outputs(self.exports)
