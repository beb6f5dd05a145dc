"""Benchmark: power saving's watch pass and the remediation pass at 4,000 VMs, and from
submit to job start on resume on real slurmctld.

First, one pass of each controller loop over a nodeset of 4,000 VMs, split over two
instance groups of 2,000 (catalog.GROUP_VMS_MAX), against the local Compute fake:

- the capacity watch with every elastic VM being created, half of them failing with a
  stockout (its costliest pass: every group read, half the nodes backed off);
- the remediation loop over 4,000 healthy nodes (its pass every minute).

It prints each pass's wall time and its Compute calls by verb. The goal is one listing per
group per pass: a listing is one ``listManagedInstances`` request per page of 500 VMs, so
a group of 2,000 costs 4 requests, and a nodeset one ``instanceGroupManagers`` list to find
its groups.

Then it boots cpu-small with power saving (count 1, max_count 4) on this machine's Slurm
(as tests/slurm/test_capacity.py does: munged, slurmctld, the fake Compute API starting one
dynamic slurmd per created VM, each in a network namespace of its own) and times, for a job
of one node and one of three: submit -> the createInstances call -> the job running. The
fake's VM "boots" at once (its slurmd starts); a real GPU VM adds its boot, minutes (README
"Capacity"). Most of what remains is Slurm's: it marks a resumed job's nodes ready in a
periodic pass every 30 s (slurmctld.log: "job_time_limit: Configuration for JobId=N
complete"), so a job starts up to 30 s after its last node registered. This part needs
root, munged and Slurm (as the Slurm tests); ``--pass-only`` leaves it out. Run from the
repository root: python tests/benchmarks/bench_capacity.py [--runs N] [--pass-only].
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clusterprint.facts import catalog  # noqa: E402
from clusterprint.node import capacity, common  # noqa: E402
from tests.support import bench_runs  # noqa: E402
from tests.support.compute_fake import FakeCompute  # noqa: E402
from tests.support.local_slurm import wait_until  # noqa: E402
from tests.support.netns import cluster_namespace  # noqa: E402
from tests.support.power_saving import PowerSaving, elastic_blueprint  # noqa: E402
from tests.support.remediation_fakes import FakeSlurm, config_for, node_line  # noqa: E402

VMS = 4000
STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone does not have enough resources.")


def split(names: list[str], base: str) -> dict[str, tuple[str, dict[str, str]]]:
    """The fake's groups of ``names``, GROUP_VMS_MAX each, as the nodeset's groups are."""
    size = catalog.GROUP_VMS_MAX
    return {f"c-nodeset-a4-group{'' if i == 0 else f'-{i + 1}'}": (
        base, dict.fromkeys(names[start:start + size], "RUNNING"))
        for i, start in enumerate(range(0, len(names), size))}


def counted(fake: FakeCompute) -> str:
    verbs = collections.Counter(call.verb.split("?")[0] for call in fake.calls)
    return ", ".join(f"{verb} {count}" for verb, count in sorted(verbs.items()))


def watch_pass() -> tuple[float, str, int]:
    """One capacity watch pass with VMS elastic VMs being created, half failing."""
    nodeset = capacity.Nodeset(
        name="a4", base_instance_name="c-a4-e", prefix="c-a4-e", count=VMS, digits=5,
        machine_type="a4-highgpu-8g", features="a4", gres="gpu:b200:8", topology="",
        suspend_time_s=300)
    names = nodeset.names()
    fake = FakeCompute("p", "z", groups=split(names, nodeset.base_instance_name))
    for _, vms in fake.groups.values():
        for vm in list(vms)[::2]:
            vms[vm] = ""
            fake.failed[vm] = STOCKOUT
    lines = [node_line(n, state="IDLE+CLOUD+POWERING_UP", reason="", feature="a4")
             for n in names]
    slurm = FakeSlurm(lines)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = capacity.Config(zone="z", project="p", state_file=f"{tmp}/state.json",
                                     nodesets={"a4": nodeset}, **fake.config())
            capacity.State(creating=dict.fromkeys(names, 1.0)).save(config.state_file)
            compute = common.Compute("p", "z", config.api, config.token_url)
            with open(os.devnull, "w") as quiet:
                loop = capacity.Capacity(capacity.Config(**{**config.__dict__}),
                                         capacity.Slurm(slurm._run), compute,
                                         log=common.Log("capacity", quiet))
                start = time.perf_counter()
                loop.watch()
                seconds = time.perf_counter() - start
            backing_off = len(capacity.State.load(config.state_file).backoff)
        return seconds, counted(fake), backing_off
    finally:
        fake.stop()


def remediation_pass() -> tuple[float, str]:
    """One remediation pass over VMS healthy nodes of one nodeset in two groups."""
    names = [f"c-a4-{i:04x}" for i in range(VMS)]
    fake = FakeCompute("p", "z", groups=split(names, "c-a4"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = config_for("replace", share=0.1, nodes=VMS, report=False,
                                state=Path(tmp) / "state.json", api=fake.config())
            config = replace(config, nodesets={"a4": replace(
                config.nodesets["a4"], base_instance_name="c-a4")})
            slurm = FakeSlurm([node_line(n, state="IDLE+DYNAMIC_NORM", reason="")
                               for n in names])
            seconds = bench_runs.remediation_pass_seconds(config, slurm)
        return seconds, counted(fake)
    finally:
        fake.stop()


def pass_table() -> None:
    groups = -(-VMS // catalog.GROUP_VMS_MAX)
    print(f"one pass over {VMS} VMs of one nodeset in {groups} groups, local Compute fake:")
    seconds, calls, backing_off = watch_pass()
    print(f"  capacity watch (all being created, half stocked out): {seconds:.2f} s; "
          f"{calls}; {backing_off} nodes backing off")
    seconds, calls = remediation_pass()
    print(f"  remediation (all healthy): {seconds:.2f} s; {calls}")


def one_run(sock: Path, nodes: int) -> dict[str, float]:
    """Submit a job of ``nodes`` elastic nodes: seconds to its create call and to running."""
    with cluster_namespace() as networks, bench_runs.local_clusters(sock) as local_slurm:
        setup = PowerSaving(local_slurm, networks, elastic_blueprint(count=1, max_count=4))
        try:
            created: list[float] = []
            boot = setup.fake.on_create
            setup.fake.on_create = lambda vm: (created.append(time.perf_counter()), boot(vm))
            start = time.perf_counter()
            job = setup.submit("-N", str(nodes))
            wait_until(lambda: setup.job(job).get("JobState") in ("RUNNING", "COMPLETED"),
                       "the job running", timeout=180)
            running = time.perf_counter() - start
            return {f"{nodes} node(s): submit -> createInstances": created[0] - start,
                    f"{nodes} node(s): submit -> job running": running}
        finally:
            setup.stop()


def main() -> int:
    args = bench_runs.arguments(__doc__.splitlines()[0],
                                "only the passes over 4,000 VMs (no Slurm needed)")
    pass_table()
    if args.pass_only:
        return 0
    bench_runs.medians(args.runs, [lambda sock, n=nodes: one_run(sock, n) for nodes in (1, 3)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
