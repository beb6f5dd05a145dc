"""Google's Ops Agent: where it comes from, where it reads its configuration, and what its
metrics receivers write, so that the images, the boot scripts and the dashboard agree.

Sources: GoogleCloudPlatform/ops-agent at commit 588c4b9 (2026-08-05): systemd/
google-cloud-ops-agent.service (the unit, its ExecStartPre validating config.yaml with the
engine), builds/systemd.sh (the /opt/google-cloud-ops-agent prefix), confgenerator/
built-in-config-linux.yaml (what runs without a configuration), and integration_test/
third_party_apps_test/applications/{nvml,dcgm}/ (the GPU receivers and their metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The agent from Google's apt repository, as its installer
#: (dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh) configures it:
#: ``deb https://packages.cloud.google.com/apt google-cloud-ops-agent-CODENAME-all main``.
PACKAGE = "google-cloud-ops-agent"
REPOSITORY = "https://packages.cloud.google.com/apt google-cloud-ops-agent-{codename}-all main"
KEY = "https://packages.cloud.google.com/apt/doc/apt-key.gpg"
#: The unit that validates the configuration and starts the logging and metrics subagents
#: (PartOf it: a restart of this one restarts them).
UNIT = "google-cloud-ops-agent"
CONFIG = "/etc/google-cloud-ops-agent/config.yaml"
#: What the unit's ExecStartPre runs on CONFIG before any subagent starts: the package's
#: own program, so a boot that finds it missing knows the image lacks the agent.
ENGINE = "/opt/google-cloud-ops-agent/libexec/google_cloud_ops_agent_engine"


@dataclass(frozen=True)
class MetricsReceiver:
    """An Ops Agent metrics receiver and the metric types it writes, so that the dashboard
    charts only what the rendered configuration collects."""

    #: the receiver's id in config.yaml and its pipeline's
    name: str
    #: the receiver's ``type``
    type: str
    #: the receiver's settings beyond ``type``
    settings: tuple[tuple[str, object], ...]
    #: metric types it writes (ops-agent integration_test .../metadata.yaml expected_metrics)
    metrics: tuple[str, ...]


#: hostmetrics writes the NVML GPU metrics on a VM with NVIDIA's driver (ops-agent
#: applications/nvml: "The built-in Ops Agent already includes the nvml receiver in the
#: default pipeline"); the dcgm receiver, version 2, the DCGM ones, from nv-hostengine on
#: localhost:5555 (applications/dcgm/enable and metadata.yaml; agent 2.38.0 or newer).
GPU_METRICS_RECEIVERS = (
    MetricsReceiver("hostmetrics", "hostmetrics", (("collection_interval", "60s"),), (
        "agent.googleapis.com/gpu/utilization",
        "agent.googleapis.com/gpu/memory/bytes_used",
        "agent.googleapis.com/gpu/processes/utilization",
        "agent.googleapis.com/gpu/processes/max_bytes_used",
    )),
    MetricsReceiver("dcgm", "dcgm", (("collection_interval", "60s"), ("receiver_version", 2)), (
        "workload.googleapis.com/gpu.dcgm.utilization",
        "workload.googleapis.com/gpu.dcgm.sm.utilization",
        "workload.googleapis.com/gpu.dcgm.pipe.utilization",
        "workload.googleapis.com/gpu.dcgm.memory.bytes_used",
        "workload.googleapis.com/gpu.dcgm.memory.bandwidth_utilization",
        "workload.googleapis.com/gpu.dcgm.pcie.io",
        "workload.googleapis.com/gpu.dcgm.nvlink.io",
        "workload.googleapis.com/gpu.dcgm.energy_consumption",
        "workload.googleapis.com/gpu.dcgm.temperature",
        "workload.googleapis.com/gpu.dcgm.clock.frequency",
        "workload.googleapis.com/gpu.dcgm.clock.throttle_duration.time",
        "workload.googleapis.com/gpu.dcgm.ecc_errors",
    )),
)

#: The metrics receivers each kind of node configures beyond the agent's built-in
#: hostmetrics (CPU, memory, disk, network of every VM): a receiver a role gains (a
#: Prometheus scrape on the controller) is one more entry of its tuple.
ROLE_METRICS_RECEIVERS: dict[str, tuple[MetricsReceiver, ...]] = {
    "controller": (),
    "login": (),
    "compute": (),
    "gpu": GPU_METRICS_RECEIVERS,
}
#: Every receiver some node configures, each once: what a chart may name.
METRICS_RECEIVERS = tuple(dict.fromkeys(
    r for receivers in ROLE_METRICS_RECEIVERS.values() for r in receivers))


def metric(receiver: str, name: str) -> str:
    """The metric type ``name`` ends with among those receiver ``receiver`` writes: what a
    chart names, so that it can only name a metric the nodes' configuration collects."""
    found = [m for r in METRICS_RECEIVERS if r.name == receiver
             for m in r.metrics if m.endswith("/" + name) or m.endswith("." + name)]
    if len(found) != 1:
        raise KeyError(f"receiver {receiver} writes no metric {name}")
    return found[0]


def metrics_collected(config: dict, known: tuple[MetricsReceiver, ...] = METRICS_RECEIVERS
                      ) -> frozenset[str]:
    """The metric types an Ops Agent configuration (config.yaml, parsed) writes: those of
    each receiver of ``known`` (a cluster's Slurm receiver beside the roles' ones, say) that a
    pipeline uses with that receiver's settings."""
    metrics = config.get("metrics", {})
    receivers = metrics.get("receivers", {})
    used = {name for pipeline in metrics.get("service", {}).get("pipelines", {}).values()
            for name in pipeline.get("receivers", [])}
    return frozenset(
        metric for r in known if r.name in used
        and receivers.get(r.name) == {"type": r.type, **dict(r.settings)}
        for metric in r.metrics)
