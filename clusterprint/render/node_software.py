"""What software an image holds and each node role needs, as named parts.

An image install script (``images/NAME.sh``) installs every part of its kind once, on a
builder VM, and lists them in ``/etc/clusterprint/image.json``; a boot script checks that
the image holds the parts its role needs and installs nothing, unless the blueprint allows
installing at boot (``image.install_at_boot``), where it runs the same install steps for
what is missing. Parts hold nothing cluster-specific (two clusters with other names,
storage or partitions need the same parts), so the images are shared.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from pathlib import Path

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.facts import gpu_software
from clusterprint.node import tensorboard_upload
from clusterprint.render.gpu_fabric import family_fabric

#: Every part an image may hold, in the order an install script installs them.
PARTS = ("base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "lustre", "gcsfuse",
         "mariadb", "tensorboard", "pyxis", "gpu", "fabric")
#: The parts of the image of nodes without GPUs (the controller, login nodes, CPU nodesets):
#: one image for the three roles, each starting only its own daemons.
CPU_PARTS = ("base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "lustre", "gcsfuse",
             "mariadb", "tensorboard", "pyxis")
#: The parts of a GPU family's image; ``fabric`` only where the family has fabric software.
GPU_PARTS = ("base", "gcloud", "ops_agent", "munge", "slurm", "nfs", "lustre", "gcsfuse",
             "pyxis", "gpu")

#: What every role needs: the boot's tools, gcloud for its secrets, the Ops Agent that sends
#: its journal to Cloud Logging, munge and Slurm.
ROLE_PARTS = frozenset({"base", "gcloud", "ops_agent", "munge", "slurm"})
#: Ubuntu packages of the base part: what every boot script runs (curl, python3 for the node
#: programs, nftables for the metadata guard, mdadm for local SSDs) and the munge daemon.
BASE_PACKAGES = ("ca-certificates", "curl", "git", "python3", "python3-venv", "nftables",
                 "mdadm", "jq")
MUNGE_PACKAGES = ("munge", "libmunge-dev")
NFS_PACKAGES = ("nfs-common",)
#: The database of accounting where no Cloud SQL instance holds it, and its client, which the
#: controller checks and sets up the database with.
MARIADB_PACKAGES = ("mariadb-server", "mariadb-client")
#: Google's TensorBoard uploader (tb-gcp-uploader), pinned: 2.7.0 declares the
#: ``tensorboard`` extra and the console script (its wheel's METADATA and entry_points.txt).
TENSORBOARD_UPLOADER_PACKAGE = "google-cloud-aiplatform[tensorboard]==2.7.0"
#: The uploader's venv, where clusterprint-tensorboard-upload runs it from.
TENSORBOARD_VENV = str(Path(tensorboard_upload.UPLOADER).parent.parent)


def _ordered(parts: AbstractSet[str]) -> tuple[str, ...]:
    return tuple(p for p in PARTS if p in parts)


def _storage(blueprint: Blueprint, *, home_only: bool) -> set[str]:
    home = blueprint.storage.home
    parts = {"nfs"} if home.uses_filestore else {"lustre"}
    if not home_only:
        parts |= {"lustre"} if blueprint.storage.lustre else set()
        parts |= {"gcsfuse"} if blueprint.storage.buckets else set()
    return parts


def controller_parts(blueprint: Blueprint) -> tuple[str, ...]:
    """The controller mounts only /home, and runs MariaDB for accounting without Cloud SQL."""
    accounting = blueprint.slurm.accounting
    database = {"mariadb"} if accounting.enabled and not accounting.cloud_sql else set()
    return _ordered(ROLE_PARTS | database | _storage(blueprint, home_only=True))


def login_parts(blueprint: Blueprint, *, pyxis: bool) -> tuple[str, ...]:
    """A login node carries the client commands, every shared file system, pyxis where the
    cluster runs containers, and the TensorBoard uploader where the blueprint has one."""
    extra = {"pyxis"} if pyxis else set()
    extra |= {"tensorboard"} if blueprint.observability.tensorboard else set()
    return _ordered(ROLE_PARTS | extra | _storage(blueprint, home_only=False))


def compute_parts(blueprint: Blueprint, nodeset: Nodeset) -> tuple[str, ...]:
    """A compute node runs slurmd and mounts every shared file system; a GPU node also needs
    the GPU stack and pyxis, and its fabric software where the cluster builds the network."""
    gpu = {"gpu", "pyxis"} if nodeset.gpus else set()
    family = family_fabric(blueprint, nodeset)
    gpu |= {"fabric"} if family and installs(gpu_software.FABRIC[family.networking]) else set()
    return _ordered(ROLE_PARTS | gpu | _storage(blueprint, home_only=False))


def installs(software: gpu_software.FabricSoftware) -> bool:
    """Whether a family's fabric has software to install (GPUDirect-TCPX has none)."""
    return bool(software.apt or software.dmabuf or software.installer or software.rxdm
                or software.udev_rule)
