"""Wall time of the node health check against the recorded fakes, per mode.

A benchmark, not a test: it prints every run and the median of each mode, and exits 1
when a median misses its target, since what matters is that each run ends well inside
Slurm's limits (HealthCheckProgram is killed after 60 s). The fakes answer at once, so
this measures the program itself: its start, its parallel checks and its parsing.

Usage: python tests/benchmarks/bench_healthcheck.py [--runs N] [--target SECONDS]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.healthcheck_fakes import (  # noqa: E402
    node_config,
    run_program,
    scenario,
    stub_bin,
    write_config,
)

#: (mode, extra arguments, environment): what Slurm and an operator run.
MODES = [("interval", [], {}), ("all", [], {}), ("prolog", [], {}),
         ("epilog", [], {"SLURM_JOB_EXIT_CODE2": "1:0"})]


def timed(config: Path, fixtures: Path, bin_dir: Path, mode: str, env: dict) -> float:
    """Seconds one healthy run takes, start to exit; it must pass."""
    start = time.perf_counter()
    done = run_program(config, fixtures, bin_dir, "--no-drain", "--mode", mode, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{mode}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--target", type=float, default=2.0,
                        help="the slowest median allowed, seconds (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        fixtures = scenario(root / "fixtures", "h100")
        bin_dir = stub_bin(root / "bin")
        # A tmpfs mount stands in for /home: the probe writes and removes a file there.
        config = write_config(root, node_config(root, "h100", mounts=["/dev/shm"]))
        slow = []
        for mode, _, env in MODES:
            runs = [timed(config, fixtures, bin_dir, mode, env) for _ in range(args.runs)]
            median = statistics.median(runs)
            print(f"{mode:9} median {median:.3f}s  runs " +
                  " ".join(f"{run:.3f}" for run in runs))
            if median > args.target:
                slow.append(mode)
    if slow:
        print(f"slower than {args.target}s: {', '.join(slow)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
