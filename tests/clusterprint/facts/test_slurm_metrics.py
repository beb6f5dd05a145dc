"""The Slurm exporter's receiver and metric types: what the Ops Agent's own format takes,
pointed at where the rendered exporter listens, one type per metric the exporter writes."""

from __future__ import annotations

import io
import json
import re

from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import slurm_metrics
from clusterprint.node import common, slurm_exporter
from clusterprint.render import rendered_files
from tests.support.paths import blueprint_path
from tests.support.prometheus_duration import seconds
from tests.support.prometheus_text import parse


def test_the_receiver_is_the_agents_prometheus_format_scraping_the_rendered_exporter():
    files = rendered_files(load_checked(blueprint_path("a4")))
    exporter = json.loads(files["scripts/slurm-exporter.json"])
    receiver = slurm_metrics.receiver("a4")
    settings = {"type": receiver.type, **dict(receiver.settings)}
    # confgenerator/prometheus.go: type prometheus, a Prometheus config of scrape_configs;
    # neither honor_labels nor a relabelled location, namespace or cluster.
    assert settings["type"] == "prometheus" and set(settings) == {"type", "config"}
    (scrape,) = settings["config"]["scrape_configs"]
    assert not {"honor_labels", "relabel_configs", "metric_relabel_configs"} & set(scrape)
    assert seconds(scrape["scrape_interval"]) >= 10
    # The whole scrape (every Slurm command, each up to its timeout) fits the receiver's
    # timeout, which Prometheus wants no longer than the interval.
    timeout, interval = (seconds(scrape[key]) for key in ("scrape_timeout", "scrape_interval"))
    assert timeout > len(slurm_exporter.COMMANDS) * slurm_exporter.COMMAND_TIMEOUT_S
    assert timeout <= interval
    (static,) = scrape["static_configs"]
    assert static["targets"] == [f"{exporter['address']}:{exporter['port']}"]
    assert exporter["address"] == "127.0.0.1"
    assert static["labels"] == {"clusterprint_cluster": "a4"}
    assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", slurm_metrics.CLUSTER_LABEL)


def test_one_monitoring_type_per_metric_the_exporter_serves():
    config = slurm_exporter.Config(["a4"], "/nonexistent/state.json", 0)
    nodes = json.dumps({"nodes": [{"name": "n", "state": ["IDLE"], "active_features": ["a4"],
                                   "gres": "gpu:8", "gres_used": "gpu:0"}]})
    served = parse(slurm_exporter.Exporter(
        config, lambda argv: {"scontrol": nodes, "sinfo": "a4\n", "squeue": '{"jobs": []}'}[
            argv[0]],
        common.Log("test", io.StringIO())).scrape())
    assert set(served) == set(slurm_exporter.METRICS)
    assert set(slurm_metrics.METRIC_TYPES) == {
        f"prometheus.googleapis.com/{name}/{family.type}" for name, family in served.items()}
    assert set(slurm_metrics.receiver("a4").metrics) == set(slurm_metrics.METRIC_TYPES)
