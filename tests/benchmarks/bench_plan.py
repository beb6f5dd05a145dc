"""Benchmark: `clusterprint plan --json` must stay fast and flat in the node count.

Times the whole process (interpreter start, imports, validation, the mocked stack),
as a user or CI job pays it, for blueprints/a3mega.yaml and for the same blueprint
with its nodeset raised to 2,000 nodes, one instance group's limit. Up to that a
nodeset is one template and one instance group whatever its size, so the large one
must plan the same number of resources in about the same time.

Targets: median < 3 s; large / reference < 1.2; identical resource counts.
Run from anywhere: python tests/benchmarks/bench_plan.py [--runs N]. Exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLUEPRINT = ROOT / "blueprints" / "a3mega.yaml"
TARGET_SECONDS = 3.0
TARGET_RATIO = 1.2
LARGE_COUNT = 2000


def time_plan(path: Path, runs: int) -> tuple[float, int]:
    """Median wall time of `clusterprint plan PATH --json` and its resource count."""
    times, counts = [], set()
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "clusterprint.cli", "plan", str(path),
                               "--json"], cwd=ROOT, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"plan {path} failed ({done.returncode}):\n{done.stderr}")
        counts.add(len(json.loads(done.stdout)["resources"]))
    if len(counts) != 1:
        sys.exit(f"plan {path} gave different resource counts across runs: {sorted(counts)}")
    return statistics.median(times), counts.pop()


def large_blueprint(directory: Path) -> Path:
    """The reference blueprint with its first nodeset at LARGE_COUNT nodes, as JSON."""
    from clusterprint.blueprint.loader import load_document

    data = load_document(str(BLUEPRINT)).data
    nodeset = data["slurm"]["nodesets"][0]
    nodeset["count"] = nodeset["max_count"] = LARGE_COUNT
    path = directory / "a3mega-4096.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def main() -> int:
    """Run both timings, print them, and return 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per blueprint (median)")
    runs = parser.parse_args().runs
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        large = large_blueprint(Path(tmp))
        base_time, base_count = time_plan(BLUEPRINT, runs)
        large_time, large_count = time_plan(large, runs)
    ratio = large_time / base_time
    print(f"a3mega.yaml            : {base_time:.2f} s median of {runs}, "
          f"{base_count} resources (target < {TARGET_SECONDS} s)")
    print(f"a3mega x{LARGE_COUNT} nodes    : {large_time:.2f} s median of {runs}, "
          f"{large_count} resources")
    print(f"ratio large/reference  : {ratio:.2f} (target < {TARGET_RATIO}, same count)")
    missed = [name for name, ok in (("time", base_time < TARGET_SECONDS),
                                    ("ratio", ratio < TARGET_RATIO),
                                    ("resource count", large_count == base_count)) if not ok]
    if missed:
        print(f"MISSED: {', '.join(missed)}")
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
