"""What the benchmarks that boot Slurm share: munged for the runs, local clusters stopped
after each run, and the medians they print."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterprint.node import common, remediate
from tests.support.local_slurm import LocalSlurm, start_munged


def arguments(description: str, pass_only: str) -> argparse.Namespace:
    """``--runs N`` and ``--pass-only`` (``pass_only``: what is left)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pass-only", action="store_true", help=pass_only)
    return parser.parse_args()


@contextmanager
def local_clusters(sock: Path) -> Iterator[Callable[..., LocalSlurm]]:
    """A ``local_slurm`` factory (as the Slurm tests' fixture) whose clusters are stopped
    when the block ends."""
    clusters: list[LocalSlurm] = []

    def make(blueprint, start: bool = True) -> LocalSlurm:
        clusters.append(LocalSlurm(blueprint, sock))
        if start:
            clusters[-1].start_controller()
        return clusters[-1]

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()


def medians(runs: int, measures: list[Callable[[Path], dict[str, float]]]) -> None:
    """Each measure ``runs`` times with one munged; the median and max of each figure."""
    daemon, sock = start_munged()
    results: dict[str, list[float]] = {}
    try:
        for _ in range(runs):
            for measure in measures:
                for what, seconds in measure(sock).items():
                    results.setdefault(what, []).append(seconds)
    finally:
        daemon.stop()
        shutil.rmtree(sock.parent, ignore_errors=True)
    for what, seconds in results.items():
        print(f"{what}: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s "
              f"over {len(seconds)} runs")


def remediation_pass_seconds(config: remediate.Config, slurm: remediate.Slurm) -> float:
    """The wall time of one remediation pass over ``config``'s API, its log discarded."""
    compute = common.Compute("p", "z", config.api, config.token_url)
    with open(os.devnull, "w") as quiet:
        loop = remediate.Remediator(config, slurm, compute, log=common.Log("remediate", quiet))
        start = time.perf_counter()
        loop.run_once()
        return time.perf_counter() - start
