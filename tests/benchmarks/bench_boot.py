"""Benchmark: the boot script's wall time in the boot sandbox on a built image, beside the
install-at-boot path, and the package installs and downloads a boot on a built image makes.

Each role of the a3mega reference blueprint (controller, login, its A3 Mega compute node)
and cpu-small's CPU compute node boots a fresh VM of tests/support/boot_sandbox.py, several
times, each a first boot (keys made, disks formatted, files written): the median is shown.

- built image: the VM's image holds every part (its manifest lists them), and every stub
  that would install a package or download anything (apt-get, dpkg -i, pip, curl of
  anything but the metadata server, git, docker pull) fails: the boot must succeed with
  none. Goal: zero installs and downloads, and under 60 s of script time for a compute node.
- install at boot: the VM's image has none of the parts and the nodeset's image says
  install_at_boot: true (the controller and login nodes boot only the built image, so
  they have no such path). The stubs answer at once (apt, git, make, Slurm's configure,
  DKMS, Docker), so this measures the script's own overhead on that path, not the
  minutes of downloads and of Slurm's build that a real VM spends there.

What the sandbox's numbers prove: that a boot on a built image runs no install step and
reaches no package repository or download site, and how much time the script itself takes
(its bash, its Python helpers, the stubs' bookkeeping and bash's trace). What they do not:
there are no real mounts (Filestore, Lustre and buckets answer at once), no real daemons
start (systemctl is a stub: slurmd, munge, MariaDB and DCGM are not waited for), no
metadata server, Secret Manager or NIC is slow, and the first database set-up is a stub.
Only a VM shows those; the script time is the floor under them. The empty-script line is
the sandbox's own cost (a mount namespace, its bind mounts and overlays) in every number.

Needs root (mount namespaces), as the sandbox tests do.
Usage: python tests/benchmarks/bench_boot.py [--runs N] [--target SECONDS]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from clusterprint.blueprint.validate import load_checked  # noqa: E402
from clusterprint.render import rendered_files  # noqa: E402
from tests.support.boot_sandbox import Node, installing_at_boot, ready  # noqa: E402
from tests.support.paths import blueprint_path  # noqa: E402

#: (blueprint, script): the roles timed; the compute ones also on the install-at-boot path.
ROLES = [("a3mega", "controller"), ("a3mega", "login"), ("a3mega", "compute-a3mega"),
         ("cpu-small", "compute-cpu")]


def boot_once(files: dict[str, str], name: str, script: str, built: bool) -> tuple[float, int]:
    """Seconds one first boot takes, and the installs and downloads it made; it must pass."""
    with tempfile.TemporaryDirectory() as folder:
        node = ready(Node(Path(folder), built=built), name)
        if built:
            node.forbid_installs()
        if script in ("controller", "login"):
            node.serve_slurm_config(files, script)
        start = time.perf_counter()
        done = node.boot(files[f"scripts/{script}.sh"])
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{name} {script}: exit {done.returncode}\n{node.journal()[-3000:]}")
        return elapsed, len(node.installs())


def empty_script(runs: int) -> float:
    """The median of the sandbox's own cost: an empty script run as a boot is."""
    seconds = []
    with tempfile.TemporaryDirectory() as folder:
        node = Node(Path(folder))
        for _ in range(runs):
            start = time.perf_counter()
            node.run("#!/bin/bash\nexit 0\n")
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def measured(files: dict[str, str], name: str, script: str, built: bool,
             runs: int) -> tuple[float, int]:
    """The median seconds of ``runs`` first boots, and the most installs one made."""
    results = [boot_once(files, name, script, built) for _ in range(runs)]
    return statistics.median(s for s, _ in results), max(n for _, n in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="boots per role (median)")
    parser.add_argument("--target", type=float, default=60.0,
                        help="a compute node's slowest median on a built image, seconds")
    args = parser.parse_args()
    built = {name: rendered_files(load_checked(blueprint_path(name)))
             for name in {name for name, _ in ROLES}}
    at_boot = {name: rendered_files(installing_at_boot(name)) for name in built}
    print(f"boot script wall time in the sandbox, median of {args.runs} first boots "
          f"(empty script: {empty_script(args.runs):.2f} s)")
    print(f"{'role':26} {'built image s':>14} {'fetches':>8} {'install at boot s':>18} "
          f"{'fetches':>8}   (fetches: package installs and downloads)")
    missed = []
    for name, script in ROLES:
        seconds, installs = measured(built[name], name, script, True, args.runs)
        row = f"{name + ' ' + script:26} {seconds:>14.2f} {installs:>8}"
        if script.startswith("compute-"):
            slow, fetched = measured(at_boot[name], name, script, False, args.runs)
            row += f" {slow:>18.2f} {fetched:>8}"
            if seconds > args.target:
                missed.append(f"{name} {script}: {seconds:.2f} s > {args.target} s")
        else:
            row += f" {'(built image only)':>18}"
        if installs:
            missed.append(f"{name} {script}: {installs} installs or downloads on a built image")
        print(row)
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    print(f"all targets met: zero installs and downloads on a built image, compute nodes under "
          f"{args.target:.0f} s of script time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
