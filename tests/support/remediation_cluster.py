"""A rendered cluster on real slurmctld with the remediation loop and a fake Compute API.

The loop runs in the test process one pass at a time, on the rendered config, with the
test's clock; the RebootProgram is the rendered wrapper's command line, run by slurmctld
itself. Node names are VM names (``a4-a4-0001``): the fake group lists them.

Started inside ``cluster_namespace()`` (tests/support/netns.py) with its ``NodeNetworks``,
each node's slurmd runs in a network namespace of its own, so several run at once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text
from clusterprint.node import common, remediate
from clusterprint.render import remediation
from tests.support.compute_fake import FakeCompute
from tests.support.local_slurm import Daemon, LocalSlurm, wait_until
from tests.support.netns import CONTROLLER_ADDRESS, NodeNetworks
from tests.support.paths import BLUEPRINTS

NODESET = "a4"
GROUP = "a4-nodeset-a4-group-5e1f2a9"
PROJECT, ZONE = "my-project", "us-central1-b"


def blueprint(on_failure: str, share: float = 0.1, reservation_bound: bool = False,
              ) -> Blueprint:
    """The a4 reference with the health checks' remediation set."""
    text = (BLUEPRINTS / "a4.yaml").read_text()
    text = text.replace("  partitions:\n", f"  health_checks:\n    on_failure: {on_failure}\n"
                        f"    max_remediation_share: {share}\n  partitions:\n", 1)
    if reservation_bound:
        text = text.replace("      provisioning: reservation\n",
                            "      provisioning: reservation\n      reservation_bound: true\n")
    checked = check_text("a4.yaml", text)
    assert checked.ok, [f.line_text() for f in checked.findings]
    return checked.blueprint


class Remediation:
    """slurmctld, dynamic nodes of nodeset a4, the fake API and the loop, on one clock."""

    def __init__(self, cluster: LocalSlurm, fake: FakeCompute, state_dir: Path,
                 networks: NodeNetworks | None = None) -> None:
        self.cluster, self.fake, self.now = cluster, fake, 1_000_000.0
        self.networks = networks
        rendered = json.loads(cluster.files["scripts/remediate.json"])
        # Only where it runs changes: the state file, the API's and the token's address.
        self.config_path = cluster.root / "remediate.json"
        self.config_path.write_text(json.dumps(
            {**rendered, "state_file": str(state_dir / "state.json"), **fake.config()}))
        self.config_path.chmod(0o644)
        self.node_conf = cluster.compute_node_conf(NODESET)
        self.slurmd: dict[str, Daemon] = {}

    @classmethod
    def start(cls, local_slurm, tmp_path: Path, blueprint: Blueprint,
              networks: NodeNetworks | None = None) -> Remediation:
        """``networks``: the test runs inside ``cluster_namespace()``; each slurmd gets a
        namespace of its own and reaches slurmctld at the bridge's address."""
        cluster = local_slurm(blueprint, start=False)
        groups = {f"{blueprint.name}-nodeset-{n.name}-group-5e1f2a9": (
            f"{blueprint.name}-{n.name}", {}) for n in blueprint.slurm.nodesets}
        assert GROUP in groups
        fake = FakeCompute(PROJECT, ZONE, groups=groups)
        setup = cls(cluster, fake, tmp_path, networks)
        # The rendered program with the rendered common.py beside it, as on the controller.
        for name in ("remediate.py", "host_events.py", "scale_down.py", "common.py"):
            (cluster.root / name).write_text(cluster.files[f"scripts/{name}"])
            (cluster.root / name).chmod(0o755)
        program = cluster.root / "remediate.py"
        # The rendered RebootProgram wrapper, pointing at this copy of program and config.
        wrapper = cluster.root / "reboot-vm"
        wrapper.write_text(f'#!/bin/sh\nexec python3 {program} --config {setup.config_path} '
                           '--reboot "$@"\n')
        wrapper.chmod(0o755)
        conf = cluster.conf.read_text()
        line = f"RebootProgram={remediation.REBOOT_PROGRAM}"
        assert line in conf.splitlines()
        conf = conf.replace(line, f"RebootProgram={wrapper}")
        if networks is not None:
            assert "\nSlurmctldHost=localhost\n" in conf
            conf = conf.replace("\nSlurmctldHost=localhost\n",
                                f"\nSlurmctldHost=localhost({CONTROLLER_ADDRESS})\n")
        cluster.conf.write_text(conf)
        cluster.start_controller()
        return setup

    def loop(self) -> remediate.Remediator:
        """A fresh loop (as after a restart) on the state file, with this clock."""
        config = remediate.Config.load(str(self.config_path))
        slurm = remediate.Slurm(lambda argv: self.cluster.run(*argv))
        compute = common.Compute(config.project, config.zone, config.api, config.token_url,
                                    config.http_timeout_s)
        # One boot: the test's clock is the boot's monotonic clock and the wall clock.
        return remediate.Remediator(config, slurm, compute,
                                    clock=lambda: remediate.Reading(self.now, self.now, "test"))

    def pass_once(self) -> None:
        self.loop().run_once()

    def add_vm(self, name: str, keep_running: bool = False) -> None:
        """A VM of the group whose slurmd registered; stopped unless ``keep_running``
        (dynamic nodes share SlurmdPort: one slurmd runs at a time), always running in a
        namespace of its own (``networks``)."""
        self.fake.groups[GROUP][1][name] = "RUNNING"
        if self.networks is not None:
            self.slurmd[name] = self.start_in_namespace(name)
            return
        self.slurmd[name] = self.cluster.start_node(name, self.node_conf, 8)
        if not keep_running:
            self.slurmd[name].stop()

    def start_in_namespace(self, name: str) -> Daemon:
        """The node's slurmd in its own network namespace (as on its own VM), until idle."""
        cluster = self.cluster
        (cluster.root / f"spool-{name}").mkdir(exist_ok=True)
        node_conf = cluster.placed(self.node_conf)
        slurmd = Daemon([*self.networks.enter(name), *cluster.command(
            "slurmd", "-D", "-Z", "-f", str(cluster.conf), "-N", name, "--conf", node_conf,
            gpus=cluster.fake_gpus(8, node_conf))], cluster.root / f"slurmd-{name}.log",
            cluster.env)
        cluster.daemons.append(slurmd)
        wait_until(lambda: slurmd.running() and cluster.node_state(name) == "idle",
                   f"node {name} registering idle", slurmd.log)
        return slurmd

    def halt(self, name: str) -> None:
        """The VM is gone: its slurmd stops."""
        if name in self.slurmd:
            self.slurmd.pop(name).stop()

    def restart_slurmd(self, name: str, *flags: str) -> None:
        """The node's slurmd again, as on a rebooted or recreated VM (``-b``: report a
        reboot, which a process restart cannot show through the boot time)."""
        if name in self.slurmd:
            self.slurmd[name].stop()
        time.sleep(1.1)  # SlurmdStartTime has whole seconds
        self.slurmd[name] = self.cluster.daemon(
            f"slurmd-{name}-again.log", "slurmd", "-D", "-Z", *flags, "-f",
            str(self.cluster.conf), "-N", name, "--conf", self.node_conf,
            gpus=self.cluster.fake_gpus(8, self.node_conf))

    def drain(self, name: str, reason: str = "cp:gpu-ecc: 3 uncorrected errors on GPU 5") -> None:
        """What the health check does to a failing node."""
        self.cluster.run("scontrol", "update", f"nodename={name}", "state=drain",
                         f"reason={reason}")

    def node(self, name: str) -> common.SlurmNode | None:
        return next((n for n in remediate.Slurm(lambda a: self.cluster.run(*a)).nodes()
                     if n.name == name), None)

    def state(self) -> dict:
        return json.loads((Path(json.loads(self.config_path.read_text())["state_file"])
                           ).read_text())

    def wait_for(self, name: str, check, what: str, timeout: float = 60) -> None:
        wait_until(lambda: (node := self.node(name)) is not None and check(node),
                   f"{name}: {what}", self.cluster.root / "slurmctld.log", timeout)

    def run_program(self, *args: str) -> str:
        """The rendered program as a process, as the controller's command runs it: the
        image's python3 (the Slurm root's), on this config; its output."""
        return self.cluster.run("python3", str(self.cluster.root / "remediate.py"), "--config",
                                str(self.config_path), *args)
