"""Default boot images: what a VM boots when the blueprint names no image.

Both defaults are Ubuntu 24.04 (noble), whose archive has Slurm 23.11 (``slurmd``,
``slurmctld``, ``slurm-client`` 23.11.4, packages.ubuntu.com/noble/slurmd): the node
scripts need 22.05 or newer (``slurmd -Z`` dynamic nodes, configless ``--conf``), and
Ubuntu 22.04's archive has only 21.08. The images carry no Slurm: each node's script
installs what its role lacks (``clusterprint/render/templates/README.md``).

GPU machines take Canonical's accelerator build with the NVIDIA driver already in it,
family ``ubuntu-accelerator-2404-amd64-with-nvidia-580`` of project
``ubuntu-os-accelerator-images`` (R580 is NVIDIA's long-term branch; Canonical publishes
its images as ``ubuntu-accelerator-2404-amd64-with-nvidia-580-v<date>``, while Google's
guest tests list the ``-570`` family among images not rebuilt since April 2026). The rest
boot ``ubuntu-2404-lts-amd64`` of ``ubuntu-os-cloud``, Canonical's family for noble on x86.
A4X's Grace CPUs are arm64: it boots the same build for arm64,
``ubuntu-accelerator-2404-arm64-with-nvidia-580`` (the Cluster Toolkit's A4X blueprint,
examples/machine-learning/a4x-highgpu-4g, builds on its ``-v20260522`` image).
"""

from __future__ import annotations

from clusterprint.blueprint.model import Image
from clusterprint.facts import machines

GPU_IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
             "ubuntu-accelerator-2404-amd64-with-nvidia-580")
GPU_ARM64_IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
                   "ubuntu-accelerator-2404-arm64-with-nvidia-580")
CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"


def boot_image(machine_type: str, image: Image | None = None) -> str:
    """The image family path a VM of ``machine_type`` boots: the blueprint's, else a default."""
    if image is not None:
        return f"projects/{image.project}/global/images/family/{image.family}"
    family = machines.gpu_family(machine_type)
    if family is None:
        return CPU_IMAGE
    return GPU_ARM64_IMAGE if family.arch == "arm64" else GPU_IMAGE
