"""Benchmark: one remediation pass over 1,000 drained nodes, and from a failed health check
to the remediation action on real slurmctld.

First, one pass of the loop (decide, then apply) over 1,000 drained nodes of one nodeset
against the local Compute fake, for two hourly shares: its wall time, and the Compute API
calls and scontrol commands it made. The calls grow with the actions the share allows
(a host report or a reset is one call per VM), never with the drained nodes: listing a
group is a call per 500 VMs, and one recreateInstances names every VM of a group.

Then it boots the a4 reference on this machine's Slurm 22.05 (as tests/slurm/test_remediation.py
does: munged, slurmctld, one dynamic slurmd, the fake Compute API), drains a node with a
``cp:`` reason as the health check does, runs one loop pass and times:

- reboot: drain -> the RebootProgram's reset reaches the API (through ``scontrol reboot``
  and slurmctld), and -> the node idle again (slurmd restarted with ``-b``);
- replace: drain -> the group's recreateInstances reaches the API.

The loop runs a pass every ``interval_s`` (60 s) on the controller, so a real node waits
up to that much more before the pass that acts; the numbers below are what the loop, Slurm
and the API calls add on top. This part needs root, munged and Slurm (as the Slurm tests);
``--pass-only`` leaves it out.
Run from the repository root: python tests/benchmarks/bench_remediation.py [--runs N].
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clusterprint.render import remediation  # noqa: E402
from tests.support import bench_runs  # noqa: E402
from tests.support.compute_fake import FakeCompute  # noqa: E402
from tests.support.local_slurm import wait_until  # noqa: E402
from tests.support.remediation_cluster import Remediation, blueprint  # noqa: E402
from tests.support.remediation_fakes import ECC, FakeSlurm, config_for, node_line  # noqa: E402

NODE = "a4-a4-0001"
DRAINED = 1000
#: What the drained nodes are and what their nodeset does with them.
CASES = {"replace": ("replace", False, "IDLE+DRAIN+DYNAMIC_NORM"),
         "replace, host reports": ("replace", True, "IDLE+DRAIN+DYNAMIC_NORM"),
         "reboot, DOWN nodes": ("reboot", False, "DOWN+DYNAMIC_NORM*")}


def one_pass(case: str, share: float) -> dict[str, float]:
    """One pass over DRAINED drained nodes: seconds, Compute calls, scontrol commands."""
    on_failure, report, state = CASES[case]
    names = [f"a4-a4-{i:04d}" for i in range(1, DRAINED + 1)]
    fake = FakeCompute("p", "z", groups={"c-nodeset-a4-group-1": (
        "c-a4", dict.fromkeys(names, "RUNNING"))})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = config_for(on_failure, share=share, nodes=DRAINED, report=report,
                                state=Path(tmp) / "state.json", api=fake.config())
            slurm = FakeSlurm([node_line(n, state=state, reason="" if "DOWN" in state else ECC)
                               for n in names])
            seconds = bench_runs.remediation_pass_seconds(config, slurm)
        return {"allowed": config.per_hour(config.nodesets["a4"]), "seconds": seconds,
                "calls": len(fake.calls), "scontrol": len(slurm.changes())}
    finally:
        fake.stop()


def pass_table() -> None:
    print(f"one pass over {DRAINED} drained nodes of one nodeset, local Compute fake:")
    print(f"{'case':24} {'share':>6} {'allowed':>8} {'wall s':>7} {'API calls':>10} "
          f"{'scontrol':>9}")
    for case in CASES:
        for share in (0.01, 0.1):
            row = one_pass(case, share)
            print(f"{case:24} {share:>6} {row['allowed']:>8} {row['seconds']:>7.2f} "
                  f"{row['calls']:>10} {row['scontrol']:>9}")


def first_call(times: dict[str, float], verb: str, since: float) -> float:
    """Seconds from ``since`` to the first call of ``verb`` at the fake API."""
    wait_until(lambda: verb in times, f"a {verb} call", timeout=60)
    return times[verb] - since


def one_run(sock: Path, on_failure: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, bench_runs.local_clusters(sock) as local_slurm:
        setup = Remediation.start(local_slurm, Path(tmp), blueprint(on_failure, share=1.0))
        try:
            setup.add_vm(NODE, keep_running=True)
            times: dict[str, float] = {}

            def reset(vm: str) -> None:
                times.setdefault("reset", time.perf_counter())
                setup.restart_slurmd(vm, "-b")

            setup.fake.on_reset = reset
            setup.fake.on_recreate = (
                lambda vm: times.setdefault("recreateInstances", time.perf_counter()))
            start = time.perf_counter()
            setup.drain(NODE)
            setup.pass_once()
            if on_failure == "replace":
                return {"drain -> recreateInstances": first_call(times, "recreateInstances",
                                                                  start)}
            action = first_call(times, "reset", start)
            setup.wait_for(NODE, lambda n: not n.drained and not n.rebooting
                           and "IDLE" in n.state, "back in service", timeout=120)
            return {"drain -> reset by RebootProgram": action,
                    "drain -> node back in service": time.perf_counter() - start}
        finally:
            setup.fake.stop()


def main() -> int:
    args = bench_runs.arguments(__doc__.splitlines()[0],
                                "only the pass over 1,000 nodes (no Slurm needed)")
    pass_table()
    if args.pass_only:
        return 0
    bench_runs.medians(args.runs, [lambda sock, f=on_failure: one_run(sock, f)
                        for on_failure in ("reboot", "replace")])
    print(f"plus up to interval_s = {remediation.INTERVAL_S} s before the pass that acts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
