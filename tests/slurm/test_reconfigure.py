"""A changed blueprint reaches a running cluster: real slurmctld and a configless slurmd.

The cluster boots from the rendered files; then the blueprint changes and the new files
reach the controller the way a VM gets them: the value the component writes to metadata
``clusterprint-slurm-config``, served by a fake metadata server that waits for changes,
read by clusterprint-config-sync running as its service does. As in every test here, the
served slurm.conf differs from the rendered one only in its local lines (host, ports,
paths, auth, process tracking: tests/support/local_slurm.py LOCAL_KEYS).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.contract import node_metadata
from clusterprint.node import config_sync as sync
from clusterprint.render import node_scripts
from clusterprint.render.config_sync import slurm_config_value
from tests.support.local_slurm import LOCAL_KEYS, Daemon, LocalSlurm, localize, wait_until
from tests.support.metadata_fake import FakeMetadata
from tests.support.node_log import messages
from tests.support.paths import STDLIB_ONLY, reference_blueprints
from tests.support.slurm_root import entered, slurm_version

KEY = node_metadata.SLURM_CONFIG


def blueprint(max_count: int, partitions: tuple[str, ...]) -> Blueprint:
    """One CPU nodeset growing to ``max_count`` nodes, and ``partitions`` over it."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "demo",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": "cpu", "machine_type": "n2-standard-4", "count": 1,
                                "max_count": max_count}],
                  "partitions": [{"name": p, "nodesets": ["cpu"]} for p in partitions]}})


def served_value(cluster: LocalSlurm, changed: Blueprint) -> str:
    """What the component writes to the controller's metadata for ``changed``, with its
    slurm.conf's local lines as this cluster has them."""
    written = json.loads(node_scripts(changed).slurm_config["controller"])
    lines = [line.split("=", 1) for line in cluster.conf.read_text().splitlines()
             if re.match(r"^\w+=", line)]
    # In the order this cluster's slurm.conf has them, so the same blueprint serves the
    # very bytes installed; a local key the rendered file has and this one not is dropped.
    local: dict[str, str | None] = {key: value for key, value in lines if key in LOCAL_KEYS}
    local |= {key: None for key in LOCAL_KEYS if key not in local}
    served = {**written, "slurm.conf": localize(written["slurm.conf"], local)}
    rendered_lines = set(written["slurm.conf"].splitlines())
    assert {line.split("=", 1)[0] for line in served["slurm.conf"].splitlines()
            if line not in rendered_lines} <= set(LOCAL_KEYS)
    return slurm_config_value(served, "controller")


class ConfigSync:
    """clusterprint-config-sync as its unit runs it, against the fake metadata server; the
    cluster's folder is its /etc/slurm. ``systemctl restart slurmctld`` is a request the
    test serves as systemd would: SIGTERM to a running slurmctld (it saves its state), then
    a new one from the files as they are, started by the test so that it is stopped with
    the cluster. Nothing restarts a slurmctld that stops by itself (Debian's unit has no
    Restart=): only the program's restart does."""

    def __init__(self, cluster: LocalSlurm, metadata: FakeMetadata, log: Path) -> None:
        self.cluster, self.log = cluster, log
        self.restarted = threading.Event()
        self.request = log.with_name(log.name + ".restart")
        watcher = threading.Thread(target=self._serve_restarts, daemon=True)
        self.out = log.open("w")
        # As on the controller: the image's python3 (the root's), the standard library only.
        self.process = subprocess.Popen(cluster.command(
            *STDLIB_ONLY, sync.__file__, "--role", "controller",
            "--dir", str(cluster.root), "--metadata-url", metadata.url, "--wait-s", "2",
            "--restart-command",
            f"sh -c 'touch {self.request}; while [ -e {self.request} ]; do sleep 0.2; done'"),
            env=cluster.env, stdout=self.out, stderr=subprocess.STDOUT)
        watcher.start()

    def slurmctld(self) -> Daemon:
        """The slurmctld running now."""
        (ctld,) = [d for d in self.cluster.daemons if "slurmctld" in d.process.args
                   and d.running()]
        return ctld

    def _serve_restarts(self) -> None:
        while self.process.poll() is None:
            if self.request.exists():
                for daemon in self.cluster.daemons:
                    if "slurmctld" in daemon.process.args:
                        daemon.stop()
                count = sum("slurmctld" in d.process.args for d in self.cluster.daemons)
                self.cluster.daemon(f"slurmctld-{count}.log", "slurmctld", "-D", "-f",
                                    str(self.cluster.conf))
                self.request.unlink()
                self.restarted.set()
            time.sleep(0.2)

    def said(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.out.close()


@pytest.fixture
def metadata(fake_metadata: FakeMetadata) -> FakeMetadata:
    """The VM's metadata server."""
    return fake_metadata


@pytest.fixture
def config_sync(metadata, tmp_path):
    """Starts the program for a running cluster; stops it after the test."""
    started: list[ConfigSync] = []

    def start(cluster: LocalSlurm) -> ConfigSync:
        started.append(ConfigSync(cluster, metadata, tmp_path / f"config-sync-{len(started)}"))
        return started[-1]

    yield start
    for program in started:
        program.stop()


@pytest.mark.parametrize("path", reference_blueprints(), ids=lambda p: p.stem)
def test_every_reference_blueprints_files_pass_the_check_on_a_fresh_node(path, tmp_path):
    # The nodes' Slurm (26.05's scontrol -V, from the Slurm root) parses what clusterprint
    # renders: the check never refuses it.
    commands = dataclasses.replace(sync.DEFAULT_COMMANDS,
                                   parse=entered(sync.DEFAULT_COMMANDS.parse),
                                   version=entered(sync.DEFAULT_COMMANDS.version))
    values = node_scripts(load_checked(str(path))).slurm_config
    for role, text in values.items():
        changed, before = sync.Node(tmp_path / role, role, commands).install(text)
        assert before == {} and [Path(p).name for p in changed] == [
            name for name in sync.KNOWN_FILES if name in json.loads(text)]


def booted(local_slurm, metadata, config_sync, max_count: int):
    """A running cluster of one ``debug`` partition with a configless node, the program
    following its metadata (which holds what it was booted with)."""
    cluster = local_slurm(blueprint(max_count, ("debug",)), start=False)
    # Every file the controller installs from metadata, gres.conf too, as its boot does.
    (cluster.root / "gres.conf").write_text(cluster.files["gres.conf"])
    cluster.start_controller()
    slurmd = cluster.start_configless_node("demo-cpu-0001", "cpu")
    metadata.set(KEY, served_value(cluster, cluster.blueprint))
    program = config_sync(cluster)
    wait_until(lambda: len(metadata.waits()) >= 2, "the program waiting for a change")
    # The value it was booted with is unchanged: nothing was rewritten or reconfigured.
    assert "wrote" not in program.said() and "reconfigure" not in program.said()
    return cluster, slurmd, program


def node_names(cluster: LocalSlurm) -> set[str]:
    """Every node slurmctld holds, FUTURE ones (which sinfo leaves out) too."""
    shown = cluster.run("scontrol", "--future", "show", "nodes", "-o")
    return set(re.findall(r"^NodeName=(\S+)", shown, re.MULTILINE))


def partition_nodes(cluster: LocalSlurm, partition: str) -> list[str]:
    return cluster.run("sinfo", "-h", "-p", partition, "-N", "-o", "%N").split()


def test_a_new_partition_reaches_slurmctld_and_its_node_without_a_restart(
        local_slurm, metadata, config_sync):
    cluster, slurmd, program = booted(local_slurm, metadata, config_sync, max_count=4)
    ctld = program.slurmctld()
    assert "extra" not in cluster.partitions()

    metadata.set(KEY, served_value(cluster, blueprint(4, ("debug", "extra"))))
    wait_until(lambda: "extra" in cluster.run("sinfo", "-h", "-o", "%P"),
               "the new partition in sinfo", program.log)
    assert partition_nodes(cluster, "extra") == ["demo-cpu-0001"]
    # Neither daemon restarted: the same processes run, and the node runs a job there.
    assert ctld.running() and slurmd.running() and program.slurmctld() is ctld
    assert cluster.run("srun", "-p", "extra", "-N1", "printenv", "SLURMD_NODENAME",
                       "SLURM_JOB_PARTITION").split() == ["demo-cpu-0001", "extra"]
    # reconfigure pushed the new files to the configless node.
    cache = cluster.root / "spool-demo-cpu-0001" / "conf-cache" / "slurm.conf"
    wait_until(lambda: "PartitionName=extra" in cache.read_text(), "the node's new files")
    said = program.said()
    assert "scontrol reconfigure: slurmctld and the configless nodes read the new files" in said
    assert "restart" not in said


def test_a_larger_max_count_reaches_slurmctld_which_keeps_its_jobs_and_nodes(
        local_slurm, metadata, config_sync):
    cluster, slurmd, program = booted(local_slurm, metadata, config_sync, max_count=2)
    job = cluster.run("sbatch", "--parsable", "-p", "debug", "-o", "/dev/null", "--wrap",
                      "sleep 120").strip()
    wait_until(lambda: cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
               "the job running")
    # The node table holds MaxNodeCount nodes: a third one does not fit.
    cluster.run("scontrol", "create", "NodeName=spare-1", "State=FUTURE", "Feature=cpu")
    assert "node table is full" in cluster.run_failing(
        "scontrol", "create", "NodeName=spare-2", "State=FUTURE", "Feature=cpu")
    assert node_names(cluster) == {"demo-cpu-0001", "spare-1"}

    metadata.set(KEY, served_value(cluster, blueprint(5, ("debug", "extra"))))
    wait_until(lambda: cluster.config()["MaxNodeCount"] == "5", "the new MaxNodeCount",
               program.log)
    assert "extra" in cluster.partitions()
    # Slurm 26.05 applies it in a reconfigure (a new slurmctld reads the whole file and takes
    # over): nothing restarted, the job runs on, the configless node is still registered.
    said = program.said()
    assert "scontrol reconfigure: slurmctld and the configless nodes read the new files" in said
    assert "restart" not in said and not program.restarted.is_set()
    assert cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"
    assert slurmd.running() and "demo-cpu-0001" in partition_nodes(cluster, "extra")
    for name in ("spare-2", "spare-3", "spare-4"):
        cluster.run("scontrol", "create", f"NodeName={name}", "State=FUTURE", "Feature=cpu")
    assert node_names(cluster) == {"demo-cpu-0001", "spare-1", "spare-2", "spare-3", "spare-4"}


def test_why_a_new_max_count_needs_no_restart_on_26_05_plain_reconfigure_applies_it(
        local_slurm):
    # Slurm 22.05's slurmctld stopped on this reconfigure ("MaxNodeCount has changed ...
    # slurmctld must be restarted"); config-sync's restart_keys from 23.11 leave it out.
    cluster = local_slurm(blueprint(2, ("debug",)))
    (ctld,) = cluster.daemons
    grown = json.loads(served_value(cluster, blueprint(5, ("debug",))))["slurm.conf"]
    cluster.conf.write_text(grown)
    cluster.run("scontrol", "reconfigure")
    wait_until(lambda: cluster.config()["MaxNodeCount"] == "5", "the new MaxNodeCount",
               ctld.log)
    assert ctld.running()
    assert "MaxNodeCount" not in sync.restart_keys(sync.slurm_version(slurm_version()))


def test_a_partition_of_an_unknown_nodeset_stops_slurmctld_and_is_undone(
        local_slurm, metadata, config_sync):
    # scontrol -V parses this slurm.conf; slurmctld (22.05 and 26.05) stops on it in a
    # reconfigure.
    cluster, slurmd, program = booted(local_slurm, metadata, config_sync, max_count=4)
    before = cluster.conf.read_text()
    ctld = program.slurmctld()
    served = json.loads(served_value(cluster, cluster.blueprint))
    served["slurm.conf"] += "PartitionName=bad Nodes=nosuchset State=UP\n"
    metadata.set(KEY, slurm_config_value(served, "controller"))
    wait_until(lambda: "slurmctld did not take the new files" in program.said(),
               "the program undoing the change", program.log)
    assert "fatal: Invalid node names in partition bad" in ctld.log.read_text()
    assert not ctld.running() and cluster.conf.read_text() == before
    wait_until(cluster.answers, "slurmctld answering again", program.log)
    assert program.restarted.is_set() and "bad" not in cluster.partitions()
    # A slurmctld that stops on a fatal error saves no state on the way down: a dynamic node
    # registered since its last save is unknown to the new one until its slurmd registers
    # again (seen on 22.05.8; the node's slurmd itself runs on).
    assert slurmd.running() and cluster.partitions()["debug"]["State"] == "UP"
    (line,) = [entry for entry in messages(program.said()) if "did not take" in entry]
    assert line.endswith("the old ones are back; slurmctld had stopped and was restarted with "
                         "them")


def test_why_cgroup_conf_is_checked_slurmctld_stops_on_a_bad_one(local_slurm):
    # slurmctld reads cgroup.conf on a reconfigure: a line Slurm cannot parse stops it. The
    # program refuses that line before it is written.
    cluster = local_slurm(blueprint(2, ("debug",)))
    (ctld,) = cluster.daemons
    bad = "ConstrainCores=yes ConstrainDevices=yes\n"
    with pytest.raises(sync.InvalidConfig, match="cgroup.conf line 1: ConstrainCores= takes"):
        sync.check_cgroup(bad, sync.slurm_version(slurm_version()))
    (cluster.root / "cgroup.conf").write_text(bad)
    subprocess.run(cluster.command("scontrol", "reconfigure"), env=cluster.env,
                   capture_output=True, timeout=60)
    wait_until(lambda: not ctld.running(), "slurmctld stopping", ctld.log)
    assert "fatal: Could not open/read/parse cgroup.conf" in ctld.log.read_text()
