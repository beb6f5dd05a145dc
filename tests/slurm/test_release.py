"""The real-daemon tests run the Slurm release series the images build.

What the tests prove of Slurm holds for the nodes only while both are one series: the root
they run Slurm from (tests/support/slurm_root.py, Debian unstable's package) may be a later
maintenance release than the images' pinned source, never another major or minor.
"""

from __future__ import annotations

from clusterprint.facts.slurm import SLURM_VERSION
from tests.support.slurm_root import slurm_version


def series(version: str) -> tuple[int, int]:
    """(major, minor) of ``26.05.3``: the release series."""
    major, minor, _ = version.split(".")
    return int(major), int(minor)


def test_the_tests_slurm_is_the_series_the_images_build():
    assert series(slurm_version()) == series(SLURM_VERSION), (
        f"the tests run Slurm {slurm_version()}, the images build {SLURM_VERSION}: "
        "change tests/support/build_slurm_root.sh or clusterprint/facts/slurm.py")
