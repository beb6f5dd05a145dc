"""Power saving on real slurmctld (26.05) with the rendered programs and a fake Compute API.

slurmctld runs the rendered ResumeProgram, SuspendProgram and ResumeFailProgram wrappers'
command lines (pointed at this copy of capacity.py and its config); the fake API starts a
real dynamic slurmd (``-b``: a VM that just booted) under a node's name when its VM is
created and stops it when the VM is deleted. Everything runs in a network namespace of its
own (tests/support/netns.py ``cluster_namespace``) and each elastic node's slurmd in one of
its own on that namespace's bridge, so several nodes run at once on one SlurmdPort, each at
its own address, as VMs do. The watch pass runs in the test process with the test's clock.
"""

from __future__ import annotations

import json
import os
import re

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text
from clusterprint.contract import naming
from clusterprint.node import capacity, common
from clusterprint.render import capacity as render_capacity
from tests.support.compute_fake import FakeCompute
from tests.support.local_slurm import Daemon, private_dir, wait_until
from tests.support.netns import CONTROLLER_ADDRESS, NodeNetworks
from tests.support.paths import BLUEPRINTS

PROJECT = "my-project"
NODESET = "cpu"
#: What the tests shorten: the suspend of an idle node, and the global SuspendTime (every
#: elastic node has its own; only INFINITE keeps a static node up).
FAST = {"SuspendTimeout": "5", "ResumeTimeout": "60", "SuspendTime": "5"}


def elastic_blueprint(count: int = 1, max_count: int = 4,
                      provisioning: str = "spot") -> Blueprint:
    """cpu-small with ``count`` static nodes and the rest up to ``max_count`` elastic, idle
    out after 10 s, provisioned as ``provisioning`` (a reservation one asks for power
    saving)."""
    text = (BLUEPRINTS / "cpu-small.yaml").read_text()
    text = re.sub(r"count: 2\n(\s+)max_count: 4\n", rf"count: {count}\n\1max_count: "
                  rf"{max_count}\n\1suspend_time_s: 10\n", text, count=1)
    extra = ("reservation: cpu-res\n      power_saving: true\n      "
             if provisioning == "reservation" else "")
    text = text.replace("provisioning: spot\n", f"{extra}provisioning: {provisioning}\n", 1)
    checked = check_text("cpu-small.yaml", text)
    assert checked.ok, [f.line_text() for f in checked.findings]
    assert [n.elastic for n in checked.blueprint.slurm.nodesets] == [max_count - count]
    return checked.blueprint


class PowerSaving:
    """slurmctld with the rendered power saving, the fake API, and one slurmd per VM."""

    def __init__(self, local_slurm, networks: NodeNetworks, blueprint: Blueprint) -> None:
        self.blueprint, self.networks = blueprint, networks
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
        self.program = cluster.root / "capacity.py"
        conf = cluster.conf.read_text()
        for step, path in render_capacity.PROGRAMS.items():
            wrapper = cluster.root / path.rsplit("/", 1)[1]
            wrapper.write_text(f"#!/bin/sh\nexec python3 {self.program} --config "
                               f"{self.config_path} {step} \"$1\"\n")
            wrapper.chmod(0o755)
            assert f"={path}\n" in conf
            conf = conf.replace(f"={path}\n", f"={wrapper}\n")
        for key, value in FAST.items():
            conf = re.sub(rf"^{key}=\S+$", f"{key}={value}", conf, flags=re.M)
            # A partition with elastic nodes has its own ResumeTimeout, too.
            conf = re.sub(rf"^(PartitionName=.*) {key}=\S+", rf"\1 {key}={value}", conf,
                          flags=re.M)
        conf = conf.replace("SlurmctldParameters=", "SlurmctldParameters=power_save_interval=1,"
                                                    "power_save_min_interval=0,")
        # A requeued job waits 120 s (Slurm's default) before its next try; 5 s here.
        conf = conf.replace("SchedulerParameters=", "SchedulerParameters=requeue_delay=5,")
        # The nodes reach the controller at its address on the bridge.
        assert "\nSlurmctldHost=localhost\n" in conf
        conf = conf.replace("\nSlurmctldHost=localhost\n",
                            f"\nSlurmctldHost=localhost({CONTROLLER_ADDRESS})\n")
        cluster.conf.write_text(conf)
        cluster.start_controller()
        self.node_conf = cluster.compute_node_conf(NODESET)
        self.run_program("declare")

    def run_program(self, *args: str) -> str:
        """The rendered program as a process, as the controller runs it."""
        return self.cluster.run("python3", str(self.program), "--config",
                                str(self.config_path), *args)

    def boot(self, vm: str) -> None:
        """The VM of ``vm`` boots, in a network namespace of its own: its slurmd registers
        (``-b``, a fresh boot)."""
        (self.cluster.root / f"spool-{vm}").mkdir(exist_ok=True)
        slurmd = Daemon([*self.networks.enter(vm), *self.cluster.command(
            "slurmd", "-D", "-Z", "-b", "-f", str(self.cluster.conf), "-N", vm,
            "--conf", self.node_conf)], self.cluster.root / f"slurmd-{vm}.log",
            self.cluster.env)
        self.cluster.daemons.append(slurmd)
        self.slurmd[vm] = slurmd

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

    def stop(self) -> None:
        for vm in list(self.slurmd):
            self.halt(vm)
        self.fake.stop()
