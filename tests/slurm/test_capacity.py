"""Power saving on real slurmctld (26.05) with the rendered programs and a fake Compute API.

slurmctld runs the rendered ResumeProgram, SuspendProgram and ResumeFailProgram wrappers'
command lines (pointed at this copy of capacity.py and its config); the fake API starts a
real dynamic slurmd (``-b``: a VM that just booted) under a node's name when its VM is
created and stops it when the VM is deleted. The watch pass runs in the test process with
the test's clock. Dynamic nodes share SlurmdPort here, so one elastic node runs at a time:
these tests prove what happens to one node and its job; several nodes at once need one
network namespace per slurmd (README "Capacity": not yet proven here).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from clusterprint.blueprint.validate import check_text
from clusterprint.contract import naming
from clusterprint.node import capacity, common
from clusterprint.render import capacity as render_capacity
from tests.support.compute_fake import FakeCompute
from tests.support.local_slurm import Daemon, private_dir, wait_until
from tests.support.paths import BLUEPRINTS

PROJECT = "my-project"
NODESET = "cpu"
#: What the tests shorten: the suspend of an idle node, and the global SuspendTime (every
#: elastic node has its own; only INFINITE keeps a static node up).
FAST = {"SuspendTimeout": "5", "ResumeTimeout": "60", "SuspendTime": "5"}
STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/my-project/zones/us-central1-c' does not have enough "
            "resources available to fulfill the request.")


def elastic_blueprint():
    """cpu-small with one static node and two elastic ones that idle out after 10 s."""
    text = (BLUEPRINTS / "cpu-small.yaml").read_text()
    text = re.sub(r"count: 2\n(\s+)max_count: 4\n", r"count: 1\n\1max_count: 3\n"
                  r"\1suspend_time_s: 10\n", text, count=1)
    checked = check_text("cpu-small.yaml", text)
    assert checked.ok, [f.line_text() for f in checked.findings]
    assert [n.elastic for n in checked.blueprint.slurm.nodesets] == [2]
    return checked.blueprint


class PowerSaving:
    """slurmctld with the rendered power saving, the fake API, and one slurmd per VM."""

    def __init__(self, local_slurm) -> None:
        self.blueprint = elastic_blueprint()
        cluster = local_slurm(self.blueprint, start=False)
        self.cluster, self.now = cluster, 1_000_000.0
        base = naming.elastic_base_instance_name(self.blueprint.name, NODESET)
        self.group = f"{self.blueprint.name}-nodeset-{NODESET}-elastic-5e1f2a9"
        self.fake = FakeCompute(PROJECT, self.blueprint.zone, groups={self.group: (base, {})})
        with open("/proc/meminfo") as meminfo:
            memory_mib = int(re.search(r"MemTotal:\s+(\d+)", meminfo.read())[1]) // 1024
        self.fake.machine_types = {self.blueprint.slurm.nodesets[0].machine_type:
                                   (len(os.sched_getaffinity(0)), memory_mib)}
        self.fake.on_create = self.boot
        self.fake.on_delete = self.halt
        self.slurmd: dict[str, Daemon] = {}
        rendered = json.loads(cluster.files["scripts/capacity.json"])
        self.config_path = cluster.root / "capacity.json"
        # The programs run as SlurmUser, as on the controller: their state folder is its.
        state = private_dir(cluster.root, owner="slurm")
        self.config_path.write_text(json.dumps(
            {**rendered, "project": PROJECT, "state_file": str(state / "state.json"),
             "backoff_s": 60, **self.fake.config()}))
        for name in ("capacity.py", "common.py"):
            (cluster.root / name).write_text(cluster.files[f"scripts/{name}"])
        program = cluster.root / "capacity.py"
        conf = cluster.conf.read_text()
        for step, path in render_capacity.PROGRAMS.items():
            wrapper = cluster.root / path.rsplit("/", 1)[1]
            wrapper.write_text(f"#!/bin/sh\nexec python3 {program} --config "
                               f"{self.config_path} {step} \"$1\"\n")
            wrapper.chmod(0o755)
            assert f"={path}\n" in conf
            conf = conf.replace(f"={path}\n", f"={wrapper}\n")
        for key, value in FAST.items():
            conf = re.sub(rf"^{key}=\S+$", f"{key}={value}", conf, flags=re.M)
        conf = conf.replace("SlurmctldParameters=", "SlurmctldParameters=power_save_interval=1,"
                                                    "power_save_min_interval=0,")
        # A requeued job waits 120 s (Slurm's default) before its next try; 5 s here.
        conf = conf.replace("SchedulerParameters=", "SchedulerParameters=requeue_delay=5,")
        cluster.conf.write_text(conf)
        cluster.start_controller()
        self.node_conf = cluster.compute_node_conf(NODESET)
        self.run_program("declare")

    def run_program(self, *args: str) -> str:
        """The rendered program as a process, as the controller runs it."""
        return self.cluster.run("python3", str(self.cluster.root / "capacity.py"), "--config",
                                str(self.config_path), *args)

    def boot(self, vm: str) -> None:
        """The VM of ``vm`` boots: its slurmd registers (``-b``, a fresh boot)."""
        (self.cluster.root / f"spool-{vm}").mkdir(exist_ok=True)
        self.slurmd[vm] = self.cluster.daemon(
            f"slurmd-{vm}.log", "slurmd", "-D", "-Z", "-b", "-f", str(self.cluster.conf),
            "-N", vm, "--conf", self.node_conf)

    def halt(self, vm: str) -> None:
        if vm in self.slurmd:
            self.slurmd.pop(vm).stop()

    def watch(self) -> None:
        """One pass of the watch service, in this process, on the test's clock."""
        config = capacity.Config.load(str(self.config_path))
        compute = common.Compute(PROJECT, config.zone, config.api, config.token_url)
        capacity.Capacity(config, capacity.Slurm(lambda argv: self.cluster.run(*argv)),
                          compute, clock=lambda: self.now).watch()

    def node(self, name: str) -> dict[str, str]:
        return dict(re.findall(r"(\w+)=(\S*)", self.cluster.run("scontrol", "show", "node",
                                                                "-o", name)))

    def states(self, name: str) -> set[str]:
        return set(self.node(name).get("State", "").split("+"))

    def submit(self, *options: str) -> str:
        script = self.cluster.root / "job.sh"
        script.write_text("#!/bin/bash\nhostname\n")
        return self.cluster.run("sbatch", "--parsable", "-p", "debug", *options,
                                str(script)).strip()

    def job(self, job: str) -> dict[str, str]:
        return dict(re.findall(r"(\w+)=(\S*)", self.cluster.run("scontrol", "show", "job", job)))

    def wait(self, check, what: str, timeout: float = 90) -> None:
        wait_until(check, what, self.cluster.root / "slurmctld.log", timeout)


@pytest.fixture
def saving(local_slurm):
    made = []

    def make() -> PowerSaving:
        made.append(PowerSaving(local_slurm))
        return made[-1]

    yield make
    for setup in made:
        for vm in list(setup.slurmd):
            setup.halt(vm)
        setup.fake.stop()


E1, E2 = "cpu-small-cpu-e00001", "cpu-small-cpu-e00002"


def test_elastic_nodes_are_declared_powered_down_once(saving):
    setup = saving()
    for name in (E1, E2):
        assert {"IDLE", "CLOUD", "POWERED_DOWN"} <= setup.states(name), setup.node(name)
        assert setup.node(name)["ActiveFeatures"] == NODESET
    setup.run_program("declare")  # again, as on the controller's next boot: nothing new
    assert setup.fake.verbs("createInstances") == []


def test_a_job_resumes_an_elastic_node_runs_and_the_idle_node_loses_its_vm(saving):
    setup = saving()
    job = setup.submit("-w", E1)
    setup.wait(lambda: setup.job(job).get("JobState") == "COMPLETED", "job on a resumed node")
    (call,) = setup.fake.verbs("createInstances")
    assert call.body == {"instances": [{"name": E1}]}
    assert setup.job(job)["NodeList"] == E1
    # Idle for its SuspendTime (10 s): powered down, its VM deleted, its slurmd gone.
    setup.wait(lambda: "POWERED_DOWN" in setup.states(E1), "idle node powered down")
    assert [c.body["instances"] for c in setup.fake.verbs("deleteInstances")] == [[E1]]
    assert setup.fake.groups[setup.group][1] == {} and E1 not in setup.slurmd
    assert E2 not in setup.fake.groups[setup.group][1]


def test_a_stockout_powers_the_node_down_with_the_reason_then_it_runs_after_back_off(saving):
    setup = saving()
    setup.fake.create_errors = STOCKOUT
    job = setup.submit("-w", E1)
    setup.wait(lambda: setup.fake.verbs("createInstances"), "the create")
    setup.watch()
    reason = f"cp:capacity: stockout: {STOCKOUT[0]}: {STOCKOUT[1]}"
    assert [c.body["instances"] for c in setup.fake.verbs("deleteInstances")] == [[E1]]
    setup.wait(lambda: f"Reason={reason}" in setup.cluster.run("scontrol", "show", "node", E1),
               "the node's reason")
    # The job is requeued and waits; the node stays out of service with its reason.
    setup.wait(lambda: setup.job(job).get("JobState") == "PENDING", "the job requeued")
    setup.wait(lambda: "POWERED_DOWN" in setup.states(E1), "the node powered down")
    setup.watch()
    setup.wait(lambda: "DOWN" in setup.states(E1), "the node held down")
    shown = setup.cluster.run("sinfo", "-h", "-R", "-o", "%E|%N")
    assert f"{reason[:60]}" in shown and E1 in shown
    assert setup.job(job).get("JobState") == "PENDING"
    # Capacity returns; after the back-off the node is back and the job runs on it.
    setup.fake.create_errors = None
    setup.now += 61
    setup.watch()
    setup.wait(lambda: setup.job(job).get("JobState") == "COMPLETED", "job after back-off",
               timeout=180)
    assert setup.job(job)["NodeList"] == E1


def test_a_static_node_is_never_powered_down(saving):
    setup = saving()
    static = "cpu-small-cpu-a1b2"
    setup.slurmd[static] = setup.cluster.start_node(static, setup.node_conf, 0)
    time.sleep(15)  # three times the global SuspendTime
    assert "POWER" not in setup.node(static)["State"], setup.node(static)
    assert setup.fake.verbs("deleteInstances") == []
