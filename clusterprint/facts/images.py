"""The base images clusterprint builds its node images from, and the builder VMs.

Every base is a dated image name, never a family: a family moves when its publisher adds an
image, and a node image must come from the same bytes whenever it is built. Bumping a base
is one line here, and a new base is a new content name for every image built on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.facts.machines import Architecture


@dataclass(frozen=True)
class BaseImage:
    """A public image, by its exact name, and where that name was read."""

    project: str
    name: str
    #: The family it belongs to (what a floating default would have booted).
    family: str
    #: The CUDA major version its NVIDIA driver supports (None: no driver), which picks
    #: DCGM's package at build time: a builder VM has no GPU to ask.
    cuda_major: int | None
    source: str

    @property
    def path(self) -> str:
        """The image's path as an instance's boot disk names it."""
        return f"projects/{self.project}/global/images/{self.name}"


_CTK = "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/"
#: R580 drivers support CUDA 13.0 (NVIDIA's CUDA toolkit release notes, table 3: CUDA 13.0
#: GA needs driver >= 580.65.06).
_R580_CUDA = 13

#: The base of the image of nodes without GPUs (controller, login, CPU nodesets): Canonical's
#: Ubuntu 24.04 of 2026-05-17 (family ubuntu-2404-lts-amd64; the name as e2b-dev/infra
#: pins it, iac/provider-gcp/nomad-cluster-disk-image/variables.pkr.hcl).
CPU_BASE = BaseImage("ubuntu-os-cloud", "ubuntu-2404-noble-amd64-v20260517",
                     "ubuntu-2404-lts-amd64", None,
                     "e2b-dev/infra iac/provider-gcp/nomad-cluster-disk-image/variables.pkr.hcl")
#: GPU bases: Canonical's accelerator build with NVIDIA's R580 driver, the dated images the
#: Cluster Toolkit's A3 Mega, A3 Ultra, A4 and A4X Slurm blueprints build on (commit 1047080).
GPU_BASES: dict[Architecture, BaseImage] = {
    "x86_64": BaseImage("ubuntu-os-accelerator-images",
                        "ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522",
                        "ubuntu-accelerator-2404-amd64-with-nvidia-580", _R580_CUDA,
                        _CTK + "(the A3 Ultra Slurm blueprint)"),
    "arm64": BaseImage("ubuntu-os-accelerator-images",
                       "ubuntu-accelerator-2404-arm64-with-nvidia-580-v20260522",
                       "ubuntu-accelerator-2404-arm64-with-nvidia-580", _R580_CUDA,
                       _CTK + "(the A4X Slurm blueprint)"),
}

#: The builder VM per architecture, as the toolkit builds its images
#: (``image_build_machine_type``: n2-standard-16 in its A3 Ultra Slurm blueprint,
#: c4a-highcpu-16 for arm64 in its A4X one).
BUILDER_MACHINE_TYPES: dict[Architecture, str] = {"x86_64": "n2-standard-16",
                                                  "arm64": "c4a-highcpu-16"}
#: The builder's boot disk, which becomes the image (the toolkit's ``disk_size_gb``: 100).
BUILDER_DISK_GB = 100
#: Its disk type: C4A takes Hyperdisk only (the toolkit's a4xhigh-slurm-blueprint.yaml sets
#: ``image_build_disk_type: hyperdisk-balanced``); N2 takes Persistent Disk.
BUILDER_DISK_TYPES: dict[Architecture, str] = {"x86_64": "pd-balanced",
                                               "arm64": "hyperdisk-balanced"}
#: Every image clusterprint builds is in a family of this prefix and its kind.
FAMILY_PREFIX = "clusterprint-"
