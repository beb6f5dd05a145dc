"""The Ops Agent's configuration on each node role: the journal of that role's units to
Cloud Logging, labelled with the cluster and the role, and the metrics receivers the role
adds to the agent's built-in host metrics.

The format is the agent's own (GoogleCloudPlatform/ops-agent at commit 588c4b9, 2026-08-05):
confgenerator/config.go (``logging``: ``receivers``, ``processors``, ``service.pipelines``
of ``receivers`` and ``processors``; ``metrics`` alike; unknown keys refused, yaml.Strict),
confgenerator/logging_receivers.go (``systemd_journald`` takes no option but ``type``; the
journal's fields land in ``jsonPayload``, PRIORITY as the severity), confgenerator/
logging_processors.go (``exclude_logs``: ``match_any``, a list of Logging query language
conditions, confgenerator/filter/internal/filter.bnf), confgenerator/
logging_modify_fields.go (``modify_fields``: ``fields`` by field path, here
``labels."KEY"`` with a ``static_value``) and confgenerator/confmerger.go (the user's
``default_pipeline`` replaces the built-in one's receivers: ``[]`` turns off the built-in
syslog files, which would ship every journal line a second time, unlabelled).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.facts import ops_agent, slurm_metrics
from clusterprint.facts.ops_agent import MetricsReceiver
from clusterprint.node import common

#: The unit Google's guest agent runs the startup script in (google_metadata_script_runner):
#: every line the boot writes to the journal carries it, as does the runner's own.
BOOT_UNIT = "google-startup-scripts.service"
#: The ids of what the configuration adds, in its receivers, processors and pipelines.
RECEIVER = "clusterprint_journal"
UNITS_FILTER = "clusterprint_units"
LABELLER = "clusterprint_labels"
PIPELINE = "clusterprint"
#: The labels every entry carries in Cloud Logging (``labels.cluster="NAME"`` in a query).
CLUSTER_LABEL, ROLE_LABEL, NODESET_LABEL = "cluster", "role", "nodeset"
#: A unit or journal tag as a condition quotes it: nothing that could end its string.
JOURNAL_NAME = re.compile(r"^[A-Za-z0-9@._-]+$")


def kept_entries(units: Sequence[str], tags: Sequence[str]) -> str:
    """The ``exclude_logs`` condition that drops every journal entry but those of ``units``
    (``_SYSTEMD_UNIT``) and of the journal tags ``tags`` (``SYSLOG_IDENTIFIER``: the boot's
    lines, also when the script is run by hand outside its unit)."""
    terms = [f'jsonPayload.{field} = "{name}"'
             for field, names in (("_SYSTEMD_UNIT", units), ("SYSLOG_IDENTIFIER", tags))
             for name in names]
    refused = [name for name in (*units, *tags) if not JOURNAL_NAME.match(name)]
    if refused or not terms:
        raise ValueError(f"not units or journal tags to keep: {refused or 'none'}")
    return f"NOT ({' OR '.join(terms)})"


def config(labels: Mapping[str, str], units: Sequence[str], tags: Sequence[str],
           metrics: Sequence[MetricsReceiver] = ()) -> str:
    """config.yaml: the journal entries of ``units`` and ``tags`` with ``labels``, in a
    pipeline of their own, the built-in syslog pipeline off; each of ``metrics`` in a
    pipeline of its own (hostmetrics in the agent's default_pipeline, which it replaces)."""
    logging = {
        "receivers": {RECEIVER: {"type": "systemd_journald"}},
        "processors": {
            UNITS_FILTER: {"type": "exclude_logs", "match_any": [kept_entries(units, tags)]},
            LABELLER: {"type": "modify_fields", "fields": {
                f'labels."{key}"': {"static_value": value} for key, value in labels.items()}},
        },
        "service": {"pipelines": {
            "default_pipeline": {"receivers": []},
            PIPELINE: {"receivers": [RECEIVER], "processors": [UNITS_FILTER, LABELLER]},
        }},
    }
    document: dict[str, object] = {"logging": logging}
    if metrics:
        document["metrics"] = {
            "receivers": {r.name: {"type": r.type, **dict(r.settings)} for r in metrics},
            "service": {"pipelines": {
                ("default_pipeline" if r.type == "hostmetrics" else r.name): {
                    "receivers": [r.name]} for r in metrics}}}
    # JSON is YAML: the agent reads it as it is, and no YAML writer is needed on this side.
    return ("# Ops Agent configuration: rendered by clusterprint; do not edit.\n"
            + json.dumps(document, indent=2, sort_keys=True) + "\n")


def script_context(blueprint: Blueprint, role: str, units: Sequence[str], boot_tag: str,
                   nodeset: Nodeset | None = None, programs: Sequence[str] = (),
                   metrics: Sequence[MetricsReceiver] = ()) -> dict[str, object]:
    """What scripts/ops_agent.sh.j2 writes and starts on a node of ``role`` (controller,
    login, compute: then of ``nodeset``) whose own units are ``units``, besides the boot's
    (journal tag ``boot_tag``) and those of the node ``programs`` a daemon runs outside any
    unit of their own (their tags, clusterprint/node/common.py ``journal_tag``): the
    configuration, labelled with the cluster's name (its pattern allows letters, digits and
    hyphens only), the role and the nodeset; ``metrics`` are receivers of this cluster's own
    beside the role's (the controller's Slurm exporter's)."""
    labels = {CLUSTER_LABEL: blueprint.name, ROLE_LABEL: role}
    if nodeset is not None:
        labels[NODESET_LABEL] = nodeset.name
    tags = (boot_tag, *(common.journal_tag(program) for program in programs))
    text = config(labels, (*units, BOOT_UNIT), tags, (*role_receivers(role, nodeset), *metrics))
    return {"config_path": ops_agent.CONFIG, "config": text, "unit": ops_agent.UNIT,
            "engine": ops_agent.ENGINE}


def role_receivers(role: str, nodeset: Nodeset | None = None) -> tuple[MetricsReceiver, ...]:
    """The metrics receivers a node of ``role`` (compute: of ``nodeset``) configures for its
    kind: a GPU nodeset's are the GPU receivers."""
    kind = "gpu" if nodeset is not None and nodeset.gpus else role
    return ops_agent.ROLE_METRICS_RECEIVERS[kind]


def metrics_written(blueprint: Blueprint) -> frozenset[str]:
    """The metric types the cluster's own Ops Agent configurations write (each nodeset's
    receivers, the controller's Slurm exporter's): what its dashboard may chart beside
    Compute Engine's instance metrics, so that a CPU cluster gets no GPU tile."""
    receivers = (slurm_metrics.receiver(blueprint.name), *role_receivers("controller"),
                 *role_receivers("login"),
                 *(r for n in blueprint.slurm.nodesets for r in role_receivers("compute", n)))
    return frozenset(m for r in receivers for m in r.metrics)
