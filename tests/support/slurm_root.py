"""The root file system the real-daemon tests run every Slurm daemon and command from.

This machine (Debian 12) packages Slurm 22.05; the nodes run 26.05. ``make test`` builds a
Debian unstable root with its Slurm 26.05 and munge (tests/support/build_slurm_root.sh, kept
in .cache/slurm-rootfs/ until its recipe changes), and each process runs chrooted into it
(tests/support/enter_slurm_root.sh): slurmd execs slurmstepd at its compiled-in path, so
only a root of its own puts 26.05's there. The mounts each process needs are made in a mount
namespace of its own (``unshare --mount``), so parallel workers share nothing mounted, and
nothing stays mounted once a process and its children are gone. MariaDB stays this
machine's: slurmdbd reaches it over TCP.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

from tests.support.paths import ROOT

#: The cache folder the Makefile's ``slurm-root`` builds into (gitignored).
CACHE = ROOT / ".cache" / "slurm-rootfs"
#: The root itself.
SLURM_ROOT = CACHE / "root"
BUILD = Path(__file__).with_name("build_slurm_root.sh")
ENTER = Path(__file__).with_name("enter_slurm_root.sh")
#: The unprivileged user of the root who submits jobs (build_slurm_root.sh adds it): Slurm
#: 26.05 refuses jobs of ``nobody``.
USER = "trainer"
#: PATH inside the root: its own folders, never this machine's venv (a job's python3 is the
#: root's, as a node's is the image's).
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def entered(argv: list[str] | tuple[str, ...], munge_socket: Path | None = None,
            gpus: Path | None = None) -> list[str]:
    """``argv`` as a command line that runs it from the root, in a mount namespace of its
    own; ``munge_socket`` is its /run/munge/munge.socket.2 and ``gpus`` a folder of fake GPUs
    (``LocalSlurm.fake_gpus``) it sees as a GPU node's driver shows them."""
    return ["unshare", "--mount", "--propagation", "private", "/bin/sh", str(ENTER),
            str(SLURM_ROOT), str(ROOT), str(munge_socket or ""), str(gpus or ""), *argv]


def missing() -> str | None:
    """What to do when the root is not built; None when it is."""
    # A link into the root's own /etc/alternatives: followed from here it may lead nowhere.
    if os.path.lexists(SLURM_ROOT / "usr" / "sbin" / "slurmctld"):
        return None
    return f"no Slurm root in {SLURM_ROOT}: `make slurm-root` builds it (root, mmdebstrap)"


@functools.cache
def slurm_version() -> str:
    """The root's Slurm release, as ``slurmctld -V`` prints it (``slurm-wlm 26.05.5``)."""
    out = subprocess.run(["chroot", str(SLURM_ROOT), "slurmctld", "-V"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    match = re.fullmatch(r"slurm(?:-wlm)? (\d+\.\d+\.\d+)\S*\n", out)
    assert match, f"slurmctld -V: {out!r}"
    return match[1]
