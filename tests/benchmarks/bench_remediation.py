"""Benchmark: from a failed health check to the remediation action, on real slurmctld.

Boots the a4 reference on this machine's Slurm 22.05 (as tests/slurm/test_remediation.py
does: munged, slurmctld, one dynamic slurmd, the fake Compute API), drains a node with a
``cp:`` reason as the health check does, runs one loop pass and times:

- reboot: drain -> the RebootProgram's reset reaches the API (through ``scontrol reboot``
  and slurmctld), and -> the node idle again (slurmd restarted with ``-b``);
- replace: drain -> the group's recreateInstances reaches the API.

The loop runs a pass every ``interval_s`` (60 s) on the controller, so a real node waits
up to that much more before the pass that acts; the numbers below are what the loop, Slurm
and the API calls add on top. Needs root, munged and Slurm (as the Slurm tests).
Run from the repository root: python tests/benchmarks/bench_remediation.py [--runs N].
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clusterprint.render import remediation  # noqa: E402
from tests.support.local_slurm import LocalSlurm, start_munged, wait_until  # noqa: E402
from tests.support.remediation_cluster import Remediation, blueprint  # noqa: E402

NODE = "a4-a4-0001"


def first_call(times: dict[str, float], verb: str, since: float) -> float:
    """Seconds from ``since`` to the first call of ``verb`` at the fake API."""
    wait_until(lambda: verb in times, f"a {verb} call", timeout=60)
    return times[verb] - since


def one_run(sock: Path, on_failure: str) -> dict[str, float]:
    clusters: list[LocalSlurm] = []

    def local_slurm(bp, start: bool = True) -> LocalSlurm:
        clusters.append(LocalSlurm(bp, sock))
        return clusters[-1]

    with tempfile.TemporaryDirectory() as tmp:
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
            for cluster in clusters:
                cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    daemon, sock = start_munged()
    try:
        results: dict[str, list[float]] = {}
        for _ in range(args.runs):
            for on_failure in ("reboot", "replace"):
                for what, seconds in one_run(sock, on_failure).items():
                    results.setdefault(what, []).append(seconds)
    finally:
        daemon.stop()
        shutil.rmtree(sock.parent, ignore_errors=True)
    for what, seconds in results.items():
        print(f"{what}: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s "
              f"over {len(seconds)} runs")
    print(f"plus up to interval_s = {remediation.INTERVAL_S} s before the pass that acts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
