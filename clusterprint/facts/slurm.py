"""The Slurm release the images build: SchedMD's source at tag slurm-26-05-3-1
(github.com/SchedMD/slurm, read 2026-12), pinned by that tag's commit.

The real-daemon tests run the same release series (tests/slurm/test_release.py).
"""

SLURM_VERSION = "26.05.3"
SLURM_COMMIT = "56fe867884038ba2074bd414075b60c2fb1d68bb"
