"""Default boot images: what a VM boots when the blueprint names no image.

Both defaults are Ubuntu 22.04 so every role installs the same Slurm and munge
packages from the same archive; GPU machines take Canonical's accelerator build with
the NVIDIA driver and RDMA stack already in it, the image the Cluster Toolkit's
A3 Mega, A3 Ultra and A4 Slurm blueprints build on
(``examples/machine-learning/*/...-slurm-blueprint.yaml``, ``source_image_family``).
"""

from __future__ import annotations

from clusterprint import catalog
from clusterprint.model import Image

GPU_IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
             "ubuntu-accelerator-2204-amd64-with-nvidia-570")
CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"


def boot_image(machine_type: str, image: Image | None = None) -> str:
    """The image family path a VM of ``machine_type`` boots: the blueprint's, else a default."""
    if image is not None:
        return f"projects/{image.project}/global/images/family/{image.family}"
    return GPU_IMAGE if catalog.gpu_family(machine_type) else CPU_IMAGE
