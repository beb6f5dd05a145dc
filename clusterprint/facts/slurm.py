"""The Slurm every node runs: one release, built in the images from SchedMD's source.

The release is pinned by SchedMD's git tag and the commit it names, which the image build
checks out and verifies (``git rev-parse HEAD``), so a moved tag cannot change what a built
image holds. Source: SchedMD/slurm, tag ``slurm-26-05-3-1`` -> commit
``56fe867884038ba2074bd414075b60c2fb1d68bb`` (read from the repository, 2026-12-02; the tag
is the newest 26.05 release in the stored copy). slurm-gcp 6.13.0 builds 26.05.2
(``ansible/roles/slurm/defaults/main.yml``); Debian unstable packages 26.05.5, which the
real-daemon tests run (same release series, held together by tests/slurm/test_release.py).
"""

from __future__ import annotations

SLURM_VERSION = "26.05.3"
SLURM_TAG = "slurm-26-05-3-1"
SLURM_COMMIT = "56fe867884038ba2074bd414075b60c2fb1d68bb"
SLURM_REPOSITORY = "https://github.com/SchedMD/slurm.git"


def release_series(version: str) -> str:
    """``26.05`` of ``26.05.3`` (or of ``slurm-wlm 26.05.5``, as ``slurmctld -V`` prints it)."""
    number = version.split()[-1]
    return ".".join(number.split(".")[:2])


#: The longest ResumeTimeout Slurm takes short of INFINITE (slurm.conf.5 of 26.05: "The
#: maximum value is either 65533 or INFINITE"). A flex-start node's partition gets it: its
#: VM comes when Dynamic Workload Scheduler finds capacity, which may take hours. (The Cluster
#: Toolkit's v6 partition module writes 65535 for flex-start, above that maximum.)
RESUME_TIMEOUT_MAX_S = 65533
