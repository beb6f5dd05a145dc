"""The real-Slurm fixtures: one munged and one MariaDB per session (per xdist worker), and
the local clusters each test starts, stopped after it. The daemons themselves are in
tests/support/local_slurm.py; they run from the Slurm root (tests/support/slurm_root.py),
whose release the run's summary names (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from tests.support import slurm_root
from tests.support.local_slurm import LocalMariaDB, LocalSlurm, start_munged
from tests.support.netns import cluster_namespace
from tests.support.power_saving import PowerSaving, elastic_blueprint


@pytest.fixture(scope="session")
def mariadb() -> Iterator[LocalMariaDB]:
    """One MariaDB for every accounting cluster of the session."""
    missing = [b for b in ("mariadbd", "mariadb-install-db") if shutil.which(b) is None]
    assert not missing, f"install MariaDB (make system-packages): missing {missing}"
    database = LocalMariaDB()
    yield database
    database.stop()


@pytest.fixture(scope="session")
def munge_socket() -> Iterator[Path]:
    """One munged with a temp key and socket for every local cluster of the session."""
    assert not slurm_root.missing(), slurm_root.missing()
    assert os.geteuid() == 0, "slurmd runs jobs as their user: the Slurm tests need root"
    munged, sock = start_munged()
    yield sock
    munged.stop()
    shutil.rmtree(sock.parent, ignore_errors=True)


@pytest.fixture
def local_slurm(munge_socket: Path) -> Iterator[Callable[..., LocalSlurm]]:
    """Starts local clusters from blueprints; stops all of them after the test.

    ``local_slurm(blueprint, start=False)`` only prepares one, for a test that expects
    slurmctld to refuse it (``refused_controller``).
    """
    clusters: list[LocalSlurm] = []

    def make(blueprint: Blueprint, start: bool = True) -> LocalSlurm:
        cluster = LocalSlurm(blueprint, munge_socket)
        clusters.append(cluster)
        if start:
            cluster.start_controller()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def accounting_slurm(munge_socket: Path, mariadb: LocalMariaDB
                     ) -> Iterator[Callable[..., LocalSlurm]]:
    """Local clusters with accounting as the controller runs it: slurmdbd on the rendered
    slurmdbd.conf against a real MariaDB, the cluster registered before slurmctld starts
    (slurmctld refuses a first start without its database). Stopped after the test.
    ``accounting_slurm(blueprint, start=False)`` only prepares one."""
    clusters: list[LocalSlurm] = []

    def make(blueprint: Blueprint, start: bool = True) -> LocalSlurm:
        cluster = LocalSlurm(blueprint, munge_socket, mariadb)
        clusters.append(cluster)
        if not start:
            return cluster
        cluster.start_dbd()
        cluster.run("sacctmgr", "-i", "add", "cluster", blueprint.name)
        cluster.start_controller()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def saving(local_slurm):
    """``saving(count=1, max_count=4)``: a started cluster with power saving (the power
    saving and Slurm exporter tests)."""
    made = []
    with cluster_namespace() as networks:
        def make(**sizes: int) -> PowerSaving:
            made.append(PowerSaving(local_slurm, networks, elastic_blueprint(**sizes)))
            return made[-1]

        yield make
        for setup in made:
            setup.stop()
