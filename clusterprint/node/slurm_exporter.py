"""The controller's Slurm exporter: Slurm's nodes and jobs and the remediation loop's record,
as Prometheus metrics on 127.0.0.1, for the Ops Agent's Prometheus receiver.

Why this shape: the Prometheus text format is what the Ops Agent scrapes natively (its
``prometheus`` receiver writes each metric to Cloud Monitoring as
``prometheus.googleapis.com/NAME/KIND``), so no credential and no Monitoring client is in
this program; a standard-library program is proven here against real slurmctld, as every
node program is; the third-party Go exporters cannot be built offline, and know neither
clusterprint's nodesets nor the remediation loop. (Slurm 26.05's own metrics/openmetrics
plugin serves slurmctld's figures on slurmctld's port, per partition, not per nodeset, and
nothing of the loop.)

Each scrape asks Slurm anew (``scontrol show nodes --json``, ``sinfo`` for the partitions,
``squeue --json``): no figure is older than the scrape. The partitions are Slurm's, not the
config's: a new partition reaches the running controller through its Slurm files alone
(config-sync), and this program needs no restart for it. Fail closed: when any command
fails, hangs or answers something this program cannot read, the scrape says
``clusterprint_slurm_up 0`` and carries no node, job or GPU figure at all, never zeros that
read as an idle cluster. The remediation figures come
from the loop's state file (remediate.py), not from Slurm; a state file that cannot be read
reports every nodeset protected, as the loop then treats them, and no action count.

Standard library only (it runs on the controller's python3, 3.10 or newer), with
remediate.py and common.py beside it.
"""

from __future__ import annotations

import argparse
import http.server
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

if __package__:
    from clusterprint.node import common, remediate
else:
    import common
    import remediate

#: Seconds each Slurm command may take (all of COMMANDS within the receiver's scrape timeout): a
#: slurmctld that does not answer holds scontrol far longer (MessageTimeout, then retries).
COMMAND_TIMEOUT_S = 15
#: What a scrape's answer is: the Prometheus text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The job states counted per partition: a job's base state (among its state flags in
#: squeue's JSON) -> the label it gets.
JOB_STATES = {"RUNNING": "running", "PENDING": "pending"}
#: What the Slurm commands run with beside the environment: a pending job array's task
#: expression whole (squeue cuts it at 64 characters, ``...``, by default: squeue(1),
#: SLURM_BITSTR_LEN).
SLURM_ENV = {"SLURM_BITSTR_LEN": "0"}
#: Where one node counts, first match wins: each a predicate over its state flags, so a
#: nodeset's counts add up to its nodes. ``drained`` holds draining nodes too (jobs still
#: end on them, nothing new starts); ``powered_down``: an elastic node without its VM.
NODE_STATES: tuple[tuple[str, Callable[[frozenset[str]], bool]], ...] = (
    ("down", lambda s: "DOWN" in s),
    ("drained", lambda s: "DRAIN" in s),
    ("powered_down", lambda s: "POWERED_DOWN" in s),
    ("allocated", lambda s: "ALLOCATED" in s),
    ("mixed", lambda s: "MIXED" in s),
    ("idle", lambda s: "IDLE" in s and not s & {"POWERING_UP", "POWERING_DOWN"}),
    ("other", lambda s: True),
)


@dataclass(frozen=True)
class Metric:
    """One metric family: its Prometheus type and what it says (``# HELP``)."""

    kind: str
    help: str
    labels: tuple[str, ...] = ()


#: Every metric this program writes, by name: the one list of them (clusterprint/facts/
#: slurm_metrics.py names their Cloud Monitoring types from it). The counter has no
#: ``_total``: the Ops Agent writes a counter NAME as ``prometheus.googleapis.com/NAME/counter``
#: (its integration test TestPrometheusMetricsWithJSONExporter), and a suffix the agent's
#: translation may or may not trim would leave its type in doubt.
METRICS = {
    "clusterprint_slurm_up": Metric(
        "gauge", "1 when slurmctld answered this scrape (the figures below are Slurm's), "
                 "0 when it did not (no Slurm figure is given)"),
    "clusterprint_slurm_nodes": Metric(
        "gauge", "Slurm nodes of the nodeset in each state", ("nodeset", "state")),
    "clusterprint_slurm_jobs": Metric(
        "gauge", "Jobs (array tasks each) running and pending in the partition",
        ("partition", "state")),
    "clusterprint_slurm_gpus": Metric(
        "gauge", "GPUs the nodeset's Slurm nodes have (their gres)", ("nodeset",)),
    "clusterprint_slurm_gpus_allocated": Metric(
        "gauge", "GPUs of the nodeset allocated to jobs", ("nodeset",)),
    "clusterprint_remediation_protected": Metric(
        "gauge", "1 while the remediation loop leaves the nodeset alone (protected mode or "
                 "an unreadable state file), else 0", ("nodeset",)),
    "clusterprint_remediation_actions": Metric(
        "counter", "Actions the remediation loop decided on the nodeset's nodes, by kind",
        ("nodeset", "action")),
}


@dataclass(frozen=True)
class Config(remediate.Record):
    """The exporter's config (``/etc/slurm/clusterprint/slurm-exporter.json``): the
    cluster's nodesets, so that each gets its figures, zeros included, before any node
    registers (a node's nodeset is a feature, which Slurm does not tell from others)."""

    nodesets: list[str]
    state_file: str
    port: int
    address: str = "127.0.0.1"
    timeout_s: float = COMMAND_TIMEOUT_S

    @classmethod
    def load(cls, path: str) -> Config:
        try:
            with open(path, "rb") as config:
                data = config.read()
        except OSError as exc:
            raise common.BadJSON(f"{path}: {exc.strerror or exc}") from None
        return cls.from_json(common.load_json(data, path), path)


@dataclass(frozen=True)
class Sample:
    """One line of the exposition: a metric, its labels, its value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


class SlurmUnreadable(Exception):
    """Slurm did not answer, or answered what proves nothing."""


# --- Reading Slurm ----------------------------------------------------------------------------

def node_state(flags: Iterable[str]) -> str:
    """Where a node with these state flags counts (NODE_STATES)."""
    flags = frozenset(flags)
    return next(name for name, holds in NODE_STATES if holds(flags))


def gpu_count(gres: str) -> int:
    """The GPUs in a node's gres or gres_used (``gpu:b200:8(S:0)``, ``gpu:b200:2(IDX:0-1)``,
    ``gpu:4``), every GPU entry added; SlurmUnreadable on a GPU entry without a count."""
    total = 0
    for entry in filter(None, gres.split(",")):
        parts = entry.split("(", 1)[0].split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) < 2 or not parts[-1].isdigit():
            raise SlurmUnreadable(f"a GPU gres without a count: {common.clip(entry, 60)}")
        total += int(parts[-1])
    return total


#: The nodes, their states, features and GPUs (Slurm 26.05's data_parser JSON).
SCONTROL = ["scontrol", "show", "nodes", "--json"]


def _text(node: dict, key: str) -> str:
    try:
        return common.expect(node.get(key, ""), str, key)
    except common.BadJSON as exc:
        raise SlurmUnreadable(f"scontrol show nodes --json: {exc}") from None


def slurm_records(answer: str, what: str, key: str) -> list:
    """The records under ``key`` of a Slurm command's data_parser JSON ``answer``;
    SlurmUnreadable when it is no such answer or says errors."""
    try:
        data = common.expect(common.load_json(answer, what), dict, what)
        if data.get("errors"):
            raise SlurmUnreadable(f"{what}: {common.clip(data['errors'], 120)}")
        return common.expect(data.get(key), list, f"{what}: {key}")
    except common.BadJSON as exc:
        raise SlurmUnreadable(str(exc)) from None


def state_flags(flags: object, what: str) -> list[str]:
    """A record's state, the list of Slurm's state flags (the base state among them);
    SlurmUnreadable when it has none."""
    if not isinstance(flags, list) or not flags or not all(isinstance(f, str) for f in flags):
        raise SlurmUnreadable(f"{what} without a state")
    return flags


def node_samples(answer: str, nodesets: list[str]) -> list[Sample]:
    """Node counts per nodeset and state and GPUs per nodeset, from ``scontrol show nodes
    --json``. A node belongs to the nodeset its features name (slurm.conf's
    ``NodeSet=NAME Feature=NAME``); nodes of none are not counted."""
    what = " ".join(SCONTROL)
    nodes = slurm_records(answer, what, "nodes")
    counts = {(n, s): 0 for n in nodesets for s, _ in NODE_STATES}
    gpus = {n: [0, 0] for n in nodesets}
    try:
        for node in nodes:
            node = common.expect(node, dict, f"{what}: a node")
            features = common.expect(node.get("active_features", node.get("features", [])),
                                     list, f"{what}: features")
            flags = state_flags(node.get("state"), f"{what}: a node")
            nodeset = next((f for f in features if f in gpus), None)
            if nodeset is None:
                continue
            counts[(nodeset, node_state(flags))] += 1
            gpus[nodeset][0] += gpu_count(_text(node, "gres"))
            gpus[nodeset][1] += gpu_count(_text(node, "gres_used"))
    except common.BadJSON as exc:
        raise SlurmUnreadable(str(exc)) from None
    return ([Sample("clusterprint_slurm_nodes", (("nodeset", n), ("state", s)), v)
             for (n, s), v in counts.items()]
            + [Sample("clusterprint_slurm_gpus", (("nodeset", n),), v[0])
               for n, v in gpus.items()]
            + [Sample("clusterprint_slurm_gpus_allocated", (("nodeset", n),), v[1])
               for n, v in gpus.items()])


#: sinfo's answer: the name of each partition, hidden ones too (a line per group of nodes).
SINFO = ["sinfo", "--noheader", "--all", "--format=%R"]
#: squeue's answer: every job of every partition, hidden ones too, in Slurm 26.05's
#: data_parser JSON: its state as the base state among its flags, its partitions (a job
#: pending in several lists them comma-separated and counts in each), and for a pending job
#: array the tasks it still holds. Not squeue's text: ``%T`` prints a flag in place of the
#: state (CONFIGURING for a job running on nodes that are powering up) and ``--states=RUNNING``
#: selects only a job without any flag (SchedMD/slurm src/squeue/print.c ``_filter_job``), so
#: either drops the jobs of every elastic node that is booting.
SQUEUE = ["squeue", "--all", "--json"]
#: Every command a scrape runs, in order: it stops at the first that fails.
COMMANDS = (SCONTROL, SINFO, SQUEUE)


def _partition_name(text: str) -> bool:
    """Whether ``text`` can be a partition's name (never empty, never a word of a message)."""
    return bool(text) and not {" ", "|", ","} & set(text)


def partition_names(answer: str) -> list[str]:
    """The partitions SINFO lists; SlurmUnreadable when it lists none (a cluster has one)."""
    names = list(dict.fromkeys(line.strip() for line in answer.splitlines() if line.strip()))
    if not names or not all(map(_partition_name, names)):
        raise SlurmUnreadable(f"sinfo: no partition names: {common.clip(answer, 80)}")
    return names


#: One item of a job array's task expression: a task, a range, a range with a stride.
ARRAY_ITEM = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


def array_tasks(expression: str) -> int:
    """The tasks a job's record stands for: 1, or for a pending job array's record those of
    its ``array_task_string`` (``1,5,9-11``, ``1-400:3``, ``%5`` after it the tasks that may
    run at once); SlurmUnreadable on any other text (a cut one, ``...``)."""
    if not expression:
        return 1
    total = 0
    for item in expression.split("%", 1)[0].split(","):
        found = ARRAY_ITEM.fullmatch(item)
        first, last, step = (int(found[1]), int(found[2] or found[1]), int(found[3] or 1)
                             ) if found else (1, 0, 1)
        if last < first or step < 1:
            raise SlurmUnreadable(f"squeue: not a job array's tasks: {common.clip(item, 40)}")
        total += (last - first) // step + 1
    return total


def _job(job: object) -> tuple[str | None, list[str], int]:
    """One job record's counted state (None: neither running nor pending), partitions and
    tasks; SlurmUnreadable when it lacks any of them."""
    what = f"{' '.join(SQUEUE)}: a job"
    try:
        job = common.expect(job, dict, what)
        partitions = common.expect(job.get("partition"), str, f"{what}'s partition").split(",")
        tasks = common.expect(job.get("array_task_string", ""), str, f"{what}'s array tasks")
    except common.BadJSON as exc:
        raise SlurmUnreadable(str(exc)) from None
    flags = state_flags(job.get("job_state"), what)
    if not all(map(_partition_name, partitions)):
        raise SlurmUnreadable(f"{what} without a partition: {common.clip(job['partition'], 60)}")
    state = next((JOB_STATES[f] for f in flags if f in JOB_STATES), None)
    return state, partitions, array_tasks(tasks)


def job_samples(answer: str, partitions: list[str]) -> list[Sample]:
    """Jobs (array tasks each) running and pending per partition, by their base state, from
    SQUEUE's answer; SlurmUnreadable on an answer of another shape."""
    jobs = slurm_records(answer, " ".join(SQUEUE), "jobs")
    counts = {(p, s): 0 for p in partitions for s in JOB_STATES.values()}
    for state, listed, tasks in map(_job, jobs):
        for partition in listed:
            if (partition, state) in counts:
                counts[(partition, state)] += tasks
    return [Sample("clusterprint_slurm_jobs", (("partition", p), ("state", s)), v)
            for (p, s), v in counts.items()]


# --- The remediation loop's record ------------------------------------------------------------

def remediation_samples(config: Config) -> list[Sample]:
    """Protected nodesets and the loop's action counts, from its state file (none yet: no
    action, none protected). An unreadable file: every nodeset protected, no counts."""
    try:
        state = remediate.State.load(config.state_file)
    except remediate.BadState:
        return [Sample("clusterprint_remediation_protected", (("nodeset", n),), 1)
                for n in config.nodesets]
    samples = [Sample("clusterprint_remediation_protected", (("nodeset", n),),
                      1 if n in state.protected else 0) for n in config.nodesets]
    for nodeset in config.nodesets:
        counts = state.counts.get(nodeset, {})
        samples += [Sample("clusterprint_remediation_actions",
                           (("nodeset", nodeset), ("action", a)), counts.get(a, 0))
                    for a in remediate.COUNTED]
    return samples


# --- The exposition ---------------------------------------------------------------------------

def _escaped(value: str) -> str:
    """A label value as the text format quotes it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(samples: list[Sample]) -> str:
    """The samples in the text format: each metric's HELP and TYPE, then its lines."""
    lines = []
    for name, metric in METRICS.items():
        mine = [s for s in samples if s.name == name]
        if not mine:
            continue
        lines += [f"# HELP {name} {metric.help}", f"# TYPE {name} {metric.kind}"]
        for sample in mine:
            labels = ",".join(f'{k}="{_escaped(v)}"' for k, v in sample.labels)
            lines.append(f"{name}{{{labels}}} {sample.value:g}" if labels
                         else f"{name} {sample.value:g}")
    return "\n".join(lines) + "\n"


@dataclass
class Exporter:
    """One scrape's figures; the Slurm commands are injected (``run``: argv -> stdout,
    raising common.CommandFailed)."""

    config: Config
    run: Callable[[list[str]], str] | None = None
    log: common.Log = field(default_factory=lambda: common.Log("slurm-exporter"))

    def __post_init__(self) -> None:
        if self.run is None:
            self.run = lambda argv: common.output(argv, self.config.timeout_s,
                                                  {**os.environ, **SLURM_ENV})
        self._lock = threading.Lock()
        self._said = ""

    def slurm_samples(self) -> list[Sample]:
        """Slurm's figures with ``clusterprint_slurm_up 1``, or only ``... 0`` (logged once
        per cause, not every scrape)."""
        try:
            samples = node_samples(self.run(SCONTROL), self.config.nodesets)
            samples += job_samples(self.run(SQUEUE), partition_names(self.run(SINFO)))
        except (common.CommandFailed, SlurmUnreadable) as exc:
            if str(exc) != self._said:
                self.log(f"Slurm gave no figures: {exc}", "WARNING")
                self._said = str(exc)
            return [Sample("clusterprint_slurm_up", (), 0)]
        if self._said:
            self.log("Slurm answers again")
            self._said = ""
        return [Sample("clusterprint_slurm_up", (), 1), *samples]

    def scrape(self) -> str:
        """The whole exposition of one scrape; scrapes take turns."""
        with self._lock:
            return exposition(self.slurm_samples() + remediation_samples(self.config))


def handler(exporter: Exporter) -> type[http.server.BaseHTTPRequestHandler]:
    """GET /metrics answers a scrape; anything else is 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = exporter.scrape().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # one line per scrape would flood the journal

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve /metrics on the config's address and port; ``--once``: one scrape on stdout."""
    parser = argparse.ArgumentParser(prog="clusterprint-slurm-exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--once", action="store_true", help="print one scrape and exit")
    args = parser.parse_args(argv)
    log = common.Log("slurm-exporter")
    try:
        config = Config.load(args.config)
    except common.BadJSON as exc:
        log(f"cannot start: {exc}", "ERROR")
        return 2
    exporter = Exporter(config, log=log)
    if args.once:
        sys.stdout.write(exporter.scrape())
        return 0
    try:
        server = http.server.ThreadingHTTPServer((config.address, config.port), handler(exporter))
    except OSError as exc:
        log(f"cannot listen on {config.address}:{config.port}: {exc.strerror or exc}", "ERROR")
        return 1
    log(f"serving /metrics on {config.address}:{config.port}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
