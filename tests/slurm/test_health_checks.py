"""The node health check under real Slurm 26.05: it drains the node it fails on.

Each node is its own machine here: slurmd runs in its own UTS and network namespace (its
own hostname, its own primary NIC on a veth pair with a default route to this machine,
where slurmctld listens), so two dynamic nodes run side by side on SlurmdPort. The GPU
tools are the recorded fakes (tests/support/healthcheck_fakes.py); `ip` and `scontrol` are real.
The rendered HealthCheckProgram wrapper, prolog and epilog change only in their paths, and
slurm.conf only in the controller's address (and, where a job is requeued, cred_expire).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.render import healthcheck
from tests.support.healthcheck_fakes import PROGRAM, calls, scenario, stub_bin
from tests.support.local_slurm import Daemon, LocalSlurm, localize, wait_until

#: What a node needs of this machine's commands; the GPU tools are fakes.
FAKED = ("nvidia-smi", "dcgmi", "journalctl")
#: The second byte of each cluster's addresses (10.T.I.x), and its link names: one per
#: cluster of this session, from the process id so that parallel sessions differ.
TAGS = itertools.count(100 + os.getpid() % 100)
#: The first command of every GPU check: how a test counts the runs on a node.
GPU_QUERY = ("nvidia-smi --query-gpu=index,name,pci.bus_id,ecc.errors.uncorrected.volatile.total "
             "--format=csv,noheader,nounits")



def blueprint(interval_s: int, gpu: str = "quick") -> Blueprint:
    """One A3 Mega nodeset (8 H100) with the ``gpu`` checks every ``interval_s``."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "demo",
        "region": "us-central1", "zone": "us-central1-a",
        "storage": {"home": {"filestore": {}}},
        "slurm": {"nodesets": [{"name": "gpu", "machine_type": "a3-megagpu-8g", "count": 2}],
                  "partitions": [{"name": "gpu", "nodesets": ["gpu"]}],
                  "health_checks": {"gpu": gpu, "interval_s": interval_s}}})


class Nodes:
    """Dynamic nodes of one cluster, each in its own namespaces, with its own fixtures."""

    def __init__(self, cluster: LocalSlurm, tag: str) -> None:
        self.cluster = cluster
        self.tag = tag
        self.namespaces: list[str] = []
        self.bin = stub_bin(cluster.root / "bin", FAKED)
        self.local = cluster.root / "healthcheck"
        self.local.mkdir()
        # The controller's address as the nodes reach it: the first node's gateway.
        self.controller = self.gateway(1)

    def network(self, index: int) -> None:
        """Node ``index``'s namespace and its veth pair: 10.T.I.2 inside, 10.T.I.1 here."""
        namespace, host, peer = self.names(index)
        for argv in (["ip", "netns", "add", namespace],
                     ["ip", "link", "add", host, "type", "veth", "peer", "name", peer,
                      "netns", namespace],
                     ["ip", "addr", "add", f"{self.gateway(index)}/24", "dev", host],
                     ["ip", "link", "set", host, "up"],
                     ["ip", "netns", "exec", namespace, "sh", "-c",
                      f"ip link set lo up && ip addr add 10.{self.tag}.{index}.2/24 dev {peer}"
                      f" && ip link set {peer} up && ip route add default via "
                      f"{self.gateway(index)}"]):
            subprocess.run(argv, check=True, capture_output=True)
            if argv[:3] == ["ip", "netns", "add"]:
                self.namespaces.append(namespace)

    def names(self, index: int) -> tuple[str, str, str]:
        """The namespace, host-side and node-side link names of node ``index``."""
        return f"cphc{self.tag}n{index}", f"cph{self.tag}h{index}", f"cph{self.tag}p{index}"

    def gateway(self, index: int) -> str:
        return f"10.{self.tag}.{index}.1"

    def localize(self, *scripts: str) -> None:
        """slurm.conf with the controller at an address the namespaces reach and the health
        check's wrapper in this test's folder; with ``scripts`` ("prolog", "epilog") the
        rendered prolog or epilog, localized, in place of the stand-in in the node's
        prolog.d or epilog.d (tests/support/local_slurm.py)."""
        conf = self.cluster.conf
        text = localize(conf.read_text(), {
            "SlurmctldHost": f"localhost({self.controller})",
            "HealthCheckProgram": str(self.wrapper("interval", healthcheck.HEALTH_CHECK_PROGRAM)),
        })
        for mode in scripts:
            rendered = getattr(healthcheck, mode.upper())
            stand_in = self.cluster.scripts(mode) / Path(rendered).name
            assert stand_in.exists(), f"slurm.conf runs no {rendered}"
            self.wrapper(mode, rendered).replace(stand_in)
        if scripts:
            # A requeued job waits cred_expire (120 s by default) before it may start again;
            # a shorter one keeps the test short and changes nothing else.
            text = re.sub(r"^(AuthInfo=.*)$", r"\1,cred_expire=10", text, flags=re.MULTILINE)
        conf.write_text(text)

    def wrapper(self, mode: str, rendered_path: str) -> Path:
        """The rendered wrapper of ``mode`` with its paths in this folder: each node (its
        hostname) reads its own config, and its own fixtures through the fakes."""
        script = self.cluster.files["scripts/compute-gpu.sh"]
        text = re.search(rf"install_text {re.escape(rendered_path)} 0755 <<'CLUSTERPRINT_EOF'"
                         r"\n(.*?)CLUSTERPRINT_EOF", script, re.DOTALL)[1]
        text = text.replace(f"exec python3 {healthcheck.PROGRAM} --config {healthcheck.CONFIG}",
                            f'export PATH={self.bin}:"$PATH" SLURM_CONF={self.cluster.conf} '
                            f'HEALTHCHECK_FIXTURES={self.local}/"$(hostname)"\n'
                            f'exec python3 {PROGRAM} --config {self.local}/"$(hostname)".json')
        path = self.local / f"{mode}-{Path(rendered_path).name}"
        path.write_text(text)
        path.chmod(0o755)
        return path

    def start(self, name: str, index: int, *faults: str) -> Daemon:
        """Node ``name`` in namespaces of its own, its GPUs recorded with ``faults``."""
        config = json.loads(self.cluster.files["scripts/healthcheck-gpu.json"])
        config.update(mounts=[], state_file=str(self.local / f"{name}.state"))
        (self.local / f"{name}.json").write_text(json.dumps(config))
        scenario(self.local / name, "h100", *faults)
        namespace = self.names(index)[0]
        setup = 'hostname "$0" && exec "$@"'
        (self.cluster.root / f"spool-{name}").mkdir()
        node_conf = self.cluster.compute_node_conf("gpu")
        # nsenter enters only the network namespace: `ip netns exec` would also remount
        # /sys, hiding the cgroup file system slurmd needs.
        slurmd = Daemon(["nsenter", f"--net=/run/netns/{namespace}", "unshare", "--uts",
                         "sh", "-c", setup, name, *self.cluster.command(
                             "slurmd", "-D", "-Z", "-f", str(self.cluster.conf), "-N", name,
                             "--conf", node_conf, gpus=self.cluster.fake_gpus(8, node_conf))],
                        self.cluster.root / f"slurmd-{name}.log", self.cluster.env)
        self.cluster.daemons.append(slurmd)
        wait_until(lambda: slurmd.running() and self.cluster.node_state(name) != "",
                   f"node {name} registering", slurmd.log)
        return slurmd

    def node(self, name: str) -> dict[str, str]:
        """The node as `scontrol show node` shows it: its fields by name."""
        shown = self.cluster.run("scontrol", "show", "node", name, "-o")
        fields = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", shown.strip()))
        return fields

    def stop(self) -> None:
        """Each veth pair, then each namespace: the pair is deleted at once, where the
        kernel tears a namespace's own links down later."""
        for index, namespace in enumerate(self.namespaces, start=1):
            subprocess.run(["ip", "link", "del", self.names(index)[1]], capture_output=True)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.fixture
def nodes(local_slurm):
    """A cluster (not started) of the ``blueprint`` and its namespaced nodes."""
    made: list[Nodes] = []

    def make(bp: Blueprint, count: int = 2) -> Nodes:
        cluster = local_slurm(bp, start=False)
        made.append(Nodes(cluster, str(next(TAGS))))
        for index in range(1, count + 1):
            made[-1].network(index)
        return made[-1]

    yield make
    for each in made:  # even where a node's network could not be made
        each.cluster.stop()
        each.stop()


def test_a_failing_node_is_drained_with_its_reason_and_a_healthy_one_stays_idle(nodes):
    interval = 5
    cluster = nodes(blueprint(interval))
    cluster.localize()
    cluster.cluster.start_controller()
    cluster.start("hc-good", 1)
    cluster.start("hc-ecc", 2, "ecc")
    reason = "cp:gpu-ecc: 3 uncorrected errors on GPU 5"
    wait_until(lambda: cluster.node("hc-ecc").get("Reason", "").startswith(reason),
               "the failing node drained with its reason", timeout=4 * interval + 30)
    assert "DRAIN" in cluster.node("hc-ecc")["State"]
    # The healthy node was checked as often and is still idle, with no reason.
    wait_until(lambda: calls(cluster.local / "hc-good").count(GPU_QUERY) >= 2,
               "the healthy node checked twice", timeout=4 * interval + 30)
    assert cluster.cluster.node_state("hc-good") == "idle"
    assert "Reason" not in cluster.node("hc-good")
    # The interval run is the cheap one: no DCGM diagnostic between jobs.
    assert not [c for c in calls(cluster.local / "hc-good") if c.startswith("dcgmi")]


def job(cluster: LocalSlurm, job_id: str) -> dict[str, str]:
    """The job as `scontrol show job` shows it: its fields by name."""
    shown = cluster.run("scontrol", "show", "job", job_id, "-o")
    return dict(re.findall(r"(\w+)=(\S*)", shown))


def test_a_failed_prolog_drains_the_node_and_requeues_the_job_unheld_to_another(nodes):
    cluster = nodes(blueprint(3600))
    cluster.localize("prolog")
    cluster.cluster.start_controller()
    # hc-bad passes the checks between jobs but fails DCGM level 1 before one.
    cluster.start("hc-bad", 1, "dcgm-fail")
    assert cluster.cluster.node_state("hc-bad") == "idle"
    out = cluster.cluster.root / "job.out"
    job_id = cluster.cluster.run("sbatch", "--parsable", "-p", "gpu", "-N1", "-o", str(out),
                                 "--wrap", "hostname").strip()
    wait_until(lambda: "DRAIN" in cluster.node("hc-bad")["State"], "hc-bad drained",
               timeout=60)
    assert cluster.node("hc-bad")["Reason"].startswith("cp:gpu-dcgm: diag -r 1 software failed")
    wait_until(lambda: job(cluster.cluster, job_id)["JobState"] == "PENDING",
               "the job requeued", timeout=60)
    pending = job(cluster.cluster, job_id)
    assert pending["Restarts"] == "1"
    assert not pending["Reason"].startswith("JobHeld") and pending["Priority"] != "0"
    cluster.start("hc-good", 2)
    wait_until(lambda: job(cluster.cluster, job_id)["JobState"] == "COMPLETED",
               "the requeued job completed", timeout=240)
    assert job(cluster.cluster, job_id)["NodeList"] == "hc-good"
    assert out.read_text() == "hc-good\n"
    assert "dcgmi diag -r 1 -j" in calls(cluster.local / "hc-good")


def test_the_epilog_of_a_failed_job_runs_dcgm_level_2_and_drains(nodes):
    cluster = nodes(blueprint(3600, gpu="thorough"), count=1)
    cluster.localize("prolog", "epilog")
    cluster.cluster.start_controller()
    cluster.start("hc-mem", 1, "dcgm-r2-memory")
    ran = cluster.cluster.run("sbatch", "--parsable", "-p", "gpu", "-N1", "-o", "/dev/null",
                              "--wrap", "true").strip()
    wait_until(lambda: job(cluster.cluster, ran)["JobState"] == "COMPLETED", "a good job")
    assert not [c for c in calls(cluster.local / "hc-mem") if "-r 2" in c]
    assert cluster.cluster.node_state("hc-mem") == "idle"
    failed = cluster.cluster.run("sbatch", "--parsable", "-p", "gpu", "-N1", "-o", "/dev/null",
                                 "--wrap", "exit 3").strip()
    wait_until(lambda: "DRAIN" in cluster.node("hc-mem")["State"], "hc-mem drained", timeout=60)
    assert job(cluster.cluster, failed)["ExitCode"] == "3:0"
    assert cluster.node("hc-mem")["Reason"].startswith(
        "cp:gpu-dcgm: diag -r 2 memory failed on GPU 5")
