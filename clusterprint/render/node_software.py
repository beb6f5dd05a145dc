"""What software each node role needs, so its script installs only that and only when missing.

The default images are plain Ubuntu 24.04 (``components/images.py``): the Slurm packages come
from the Ubuntu archive (23.11 in noble), Cloud Storage FUSE, the gcloud CLI and the Managed
Lustre client from Google's apt repositories. A custom image that already has a command
installs nothing for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.blueprint.model import Blueprint

#: (command, package): the command whose presence shows the Debian/Ubuntu package is there.
Packages = tuple[tuple[str, str], ...]

SLURM_LOGIN: Packages = (("scontrol", "slurm-client"), ("munged", "munge"))
SLURM_CONTROLLER: Packages = (("slurmctld", "slurmctld"), ("slurmrestd", "slurmrestd"),
                               *SLURM_LOGIN)
SLURM_COMPUTE: Packages = (("slurmd", "slurmd"), *SLURM_LOGIN)
NFS_CLIENT = ("mount.nfs", "nfs-common")
#: Accounting: slurmdbd, and the client the controller checks and sets up the database with.
ACCOUNTING: Packages = (("slurmdbd", "slurmdbd"), ("mariadb", "mariadb-client"))
#: The database itself, where no Cloud SQL instance holds it.
MARIADB_SERVER = ("mariadbd", "mariadb-server")


@dataclass(frozen=True)
class Software:
    """One role's needs: archive packages by command, and the extras from Google or Slurm."""

    #: (command, package) pairs installed from the image's own apt sources
    archive: Packages
    #: Cloud Storage FUSE, for bucket mounts
    gcsfuse: bool
    #: the Managed Lustre client (kernel modules and mount.lustre)
    lustre: bool


def _archive(blueprint: Blueprint, slurm: Packages) -> Packages:
    nfs = (NFS_CLIENT,) if blueprint.storage.home.uses_filestore else ()
    return slurm + nfs


def controller_software(blueprint: Blueprint) -> Software:
    """The controller mounts only /home: Lustre only when /home is Lustre, never buckets.
    With accounting on it runs slurmdbd, and MariaDB unless Cloud SQL holds the database."""
    accounting = blueprint.slurm.accounting
    extra: Packages = ()
    if accounting.enabled:
        extra = ACCOUNTING if accounting.cloud_sql else (*ACCOUNTING, MARIADB_SERVER)
    return Software(archive=_archive(blueprint, SLURM_CONTROLLER + extra), gcsfuse=False,
                    lustre=not blueprint.storage.home.uses_filestore)


def login_software(blueprint: Blueprint) -> Software:
    """A login node carries the client commands and every shared file system, no slurmd."""
    return Software(archive=_archive(blueprint, SLURM_LOGIN),
                    gcsfuse=bool(blueprint.storage.buckets),
                    lustre=bool(blueprint.storage.lustre))


def compute_software(blueprint: Blueprint) -> Software:
    """A compute node runs slurmd and mounts every shared file system."""
    return Software(archive=_archive(blueprint, SLURM_COMPUTE),
                    gcsfuse=bool(blueprint.storage.buckets),
                    lustre=bool(blueprint.storage.lustre))
