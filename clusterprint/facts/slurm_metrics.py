"""Where the Slurm exporter's metrics land: its port, the Ops Agent receiver that scrapes it,
and the Cloud Monitoring metric type of each metric it writes.

The metric names are the exporter's own (clusterprint/node/slurm_exporter.py METRICS, the
program that writes them); what Google decides is here. Sources, read 2026-12-03 from
GoogleCloudPlatform/ops-agent at 588c4b9:
- the receiver: confgenerator/prometheus.go (``type: prometheus``, a Prometheus
  ``config`` with ``scrape_configs``; a scrape_interval under 10s is raised to 10s) and
  confgenerator/testdata/goldens/metrics-receiver_prometheus/input.yaml (job_name,
  scrape_interval, static_configs targets);
- the metric types: dev-docs/otel-exporter-types.md (the agent's GMP exporter writes
  ``prometheus.googleapis.com/{metric_name}/{metric_kind}`` on a ``prometheus_target``
  resource) and integration_test/ops_agent_test/main_test.go
  TestPrometheusMetricsWithJSONExporter (a gauge as ``.../NAME/gauge``, a counter as
  ``.../NAME/counter``);
- the labels: confgenerator/resourcedetector/gce_detector.go PrometheusStyleMetadata (on
  Compute Engine the resource's ``cluster`` is ``__gce__`` and ``namespace`` the VM's id and
  name), so a static label of the scrape, ``clusterprint_cluster``, says which cluster a
  series is of (the receiver rejects relabelling ``cluster``).
"""

from __future__ import annotations

from clusterprint.facts.ops_agent import MetricsReceiver
from clusterprint.node import slurm_exporter

#: Where the exporter listens, on the controller's loopback only (the agent scrapes it
#: there): a port no other program of the controller takes (slurmctld 6817, slurmdbd 6819,
#: slurmrestd 6820, the agent's own 20201-20202).
PORT = 9341
ADDRESS = "127.0.0.1"
#: The scrape: every minute, as the GPU receivers collect; a scrape may take as long as
#: the exporter's three Slurm commands together.
SCRAPE_INTERVAL = "60s"
SCRAPE_TIMEOUT = "50s"
JOB_NAME = "clusterprint-slurm"
#: The receiver's id in the controller's config.yaml.
RECEIVER = "slurm"
#: The metric label that names the cluster (Cloud Monitoring selects a cluster's series by it).
CLUSTER_LABEL = "clusterprint_cluster"
#: The monitored resource every Prometheus metric of the agent is written on.
RESOURCE_TYPE = "prometheus_target"
#: The Prometheus type of a metric -> the last part of its Cloud Monitoring type.
KINDS = {"gauge": "gauge", "counter": "counter"}


def metric(name: str) -> str:
    """The Cloud Monitoring type of one of the exporter's metrics: what a chart or alert
    names, so that it can only name one the exporter writes (KeyError otherwise)."""
    return f"prometheus.googleapis.com/{name}/{KINDS[slurm_exporter.METRICS[name].kind]}"


#: Every metric type the receiver yields.
METRIC_TYPES = tuple(metric(name) for name in slurm_exporter.METRICS)


def receiver(cluster: str) -> MetricsReceiver:
    """The controller's receiver of cluster ``cluster`` (a blueprint name, pattern-limited),
    as an Ops Agent metrics receiver of its own pipeline (clusterprint/render/ops_agent.py):
    ``settings`` beside ``type`` is what goes under ``metrics.receivers.slurm``."""
    return MetricsReceiver(RECEIVER, "prometheus", (("config", {"scrape_configs": [{
        "job_name": JOB_NAME, "scrape_interval": SCRAPE_INTERVAL,
        "scrape_timeout": SCRAPE_TIMEOUT, "metrics_path": "/metrics",
        "static_configs": [{"targets": [f"{ADDRESS}:{PORT}"],
                            "labels": {CLUSTER_LABEL: cluster}}]}]}),), METRIC_TYPES)
