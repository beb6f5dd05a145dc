"""Whole-process time of `clusterprint validate blueprints/a3mega.yaml`.

A benchmark, not a test: it prints every run and the median, and exits 1 when the
median misses the target, so `make bench` fails loudly on a slow start. Startup is
what a user waits for, so it also lists the slowest imports and refuses any Pulumi
import (validate must stay offline-fast; commands import their heavy modules lazily).

Usage: python tests/benchmarks/bench_cli.py [--runs N] [--target SECONDS]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLUEPRINT = "blueprints/a3mega.yaml"
#: Module roots validate must never import.
FORBIDDEN = ("pulumi", "pulumi_gcp", "grpc")


def command() -> list[str]:
    """The venv's console script when installed next to this Python, else ``-m``."""
    script = Path(sys.executable).with_name("clusterprint")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "clusterprint.cli"]


def timed_run(argv: list[str]) -> float:
    """Seconds one validate process takes, start to exit; it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"validate failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return elapsed


def slow_imports(count: int = 5) -> tuple[list[tuple[int, str]], list[str]]:
    """The slowest top-level imports (cumulative microseconds) and any forbidden ones."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "clusterprint.cli",
                             "validate", "-q", BLUEPRINT], cwd=ROOT, capture_output=True,
                            text=True)
    rows = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$", result.stderr, re.M)
    top = sorted(((int(us), name) for us, indent, name in rows if len(indent) == 1),
                 reverse=True)
    forbidden = sorted({name for _, _, name in rows if name.split(".")[0] in FORBIDDEN})
    return top[:count], forbidden


def main() -> int:
    """Run the benchmark and say whether the target holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs after one warm-up")
    parser.add_argument("--target", type=float, default=0.5, help="median limit in seconds")
    args = parser.parse_args()

    argv = [*command(), "validate", BLUEPRINT]
    print(f"$ {' '.join(argv)}  (cwd {ROOT})")
    timed_run(argv)  # warm-up: bytecode caches and the page cache
    times = [timed_run(argv) for _ in range(args.runs)]
    median = statistics.median(times)
    print("runs (s):", " ".join(f"{t:.3f}" for t in times))
    print(f"median {median:.3f} s, min {min(times):.3f} s, max {max(times):.3f} s; "
          f"target < {args.target:.2f} s")

    top, forbidden = slow_imports()
    print("slowest imports (cumulative):",
          ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in top))
    if forbidden:
        print(f"FAIL: validate imports {', '.join(forbidden)}")
        return 1
    if median >= args.target:
        print(f"FAIL: median {median:.3f} s is not under {args.target:.2f} s")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
