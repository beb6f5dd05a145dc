"""Software facts of the GPU families: packages, images and thresholds, each with its source.

Pure data (no pulumi): the node scripts, the proof jobs and the tests read it, so a new
version or threshold is one line here. Each part of the GPU node work keeps its own
section below.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.catalog import GpuNetworking

# --- nccl proof job ---
# What `jobs/nccl-allreduce-<partition>.sbatch` runs: NVIDIA's nccl-tests built inside an
# NGC container (as the Cluster Toolkit's `examples/machine-learning/*/nccl-tests/` and
# Google's cluster-health-scanner `deploy/slurm/build-nccl-tests-*.sh` build it), run
# through pyxis on two nodes, its `# Avg bus bandwidth` held to the family's threshold.

#: The nccl-tests release the job builds (github.com/NVIDIA/nccl-tests tags); the toolkit's
#: and the health scanner's scripts clone the default branch, which moves under a cluster.
NCCL_TESTS_REPOSITORY = "https://github.com/NVIDIA/nccl-tests.git"
NCCL_TESTS_VERSION = "v2.19.6"

#: all_reduce_perf's message sizes: the 2G-8G range (factor 2) the health scanner measures
#: its thresholds over (deploy/helm/health_checks/nccl_healthcheck/*.yaml START_MESSAGE_SIZE,
#: END_MESSAGE_SIZE). "Avg bus bandwidth" averages every size, so a wider range that starts
#: small reads far lower (the toolkit's GKE samples of 1K-8G read 120 GB/s on A3 Ultra).
NCCL_MESSAGE_SIZES = ("2G", "8G")


@dataclass(frozen=True)
class NcclProof:
    """How one GPU machine type proves its fabric: the container and the bandwidth it owes."""

    #: The NGC image the job builds and runs nccl-tests in, as pyxis names it (`#` after the
    #: registry).
    image: str
    image_source: str
    #: The lowest passing `# Avg bus bandwidth` in GB/s across two nodes; None where no
    #: public source gives one (the job then prints the bandwidth and passes).
    threshold_gbps: int | None
    threshold_source: str | None


_CHS = "GoogleCloudPlatform/cluster-health-scanner deploy/helm/health_checks/nccl_healthcheck/"
_CTK = "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/"
#: gpu-recipes' Slurm recipes that import the NeMo 25.11 image (ORIG_IMAGE) for pyxis: the
#: toolkit's PyTorch tags carry CUDA 12.6 or older, and Blackwell (B200, GB200) needs 12.8.
_RECIPES = "AI-Hypercomputer/gpu-recipes training/{}/megatron-bridge-slurm/nemo2511/{}/recipe/" \
           "sbatch_script.sh"

#: Per machine type. The thresholds are the health scanner's BANDWIDTH_THRESHOLD for a
#: 2-node all_gather_perf; nccl-tests' bus bandwidth is corrected to be comparable across
#: collectives (nccl-tests doc/PERFORMANCE.md, "Bus bandwidth"), so the job holds
#: all_reduce_perf to the same numbers.
NCCL_PROOFS: dict[str, NcclProof] = {
    "a3-highgpu-8g": NcclProof("nvcr.io#nvidia/pytorch:23.10-py3",
                               _CTK + "a3-highgpu-8g/nccl-tests/import_pytorch_container.sh",
                               60, _CHS + "a3.yaml"),
    # A3 Edge is A3 High's TCPX fabric; the health scanner has no check for it.
    "a3-edgegpu-8g": NcclProof("nvcr.io#nvidia/pytorch:23.10-py3",
                               _CTK + "a3-highgpu-8g/nccl-tests/import_pytorch_container.sh",
                               None, None),
    "a3-megagpu-8g": NcclProof("nvcr.io#nvidia/pytorch:24.04-py3",
                               _CTK + "a3-megagpu-8g/nccl-tests/import_pytorch_container.sh",
                               150, _CHS + "a3plus.yaml"),
    "a3-ultragpu-8g": NcclProof("nvcr.io#nvidia/pytorch:24.09-py3",
                                _CTK + "a3-ultragpu-8g/nccl-tests/import_pytorch_container.sh",
                                250, _CHS + "a3ultra.yaml"),
    "a4-highgpu-8g": NcclProof(
        "nvcr.io#nvidia/nemo:25.11",
        _RECIPES.format("a4/qwen3_235b_a22b", "128gpus-bf16-seq4096-gbs4096"),
        250, _CHS + "a4.yaml"),
    "a4x-highgpu-4g": NcclProof(
        "nvcr.io#nvidia/nemo:25.11",
        _RECIPES.format("a4x/llama3_8b", "8gpus-fp8cs-seq8192-gbs128"),
        160, _CHS + "a4x.yaml"),
}

#: Machine types without GPU networks (A2, G2, A3 High below 8 GPUs) and clusters built with
#: `gpu_networks: none`: NCCL over the VM's own NIC, with no threshold. The image is
#: clusterprint's choice: the toolkit's newest nccl-tests image (CUDA 12.6: A100, L4, H100).
NCCL_PROOF_WITHOUT_FABRIC = NcclProof(
    "nvcr.io#nvidia/pytorch:24.09-py3",
    _CTK + "a3-ultragpu-8g/nccl-tests/import_pytorch_container.sh", None, None)


@dataclass(frozen=True)
class FabricMounts:
    """What a container needs from the host to reach the fabric's NCCL plugin."""

    #: Host folders mounted at the same path; `${SLURM_JOB_ID}` expands in the job.
    mounts: tuple[str, ...]
    #: Put first on the container's LD_LIBRARY_PATH, as the toolkit's run scripts do.
    library_path: str | None


#: Per networking kind, from the toolkit's run-nccl-tests.sh of each family
#: (a3-highgpu-8g: /var/lib/tcpx/lib64 and the RxDM socket folder /run/tcpx-$SLURM_JOB_ID;
#: a3-megagpu-8g: /var/lib/tcpxo/lib64; a3-ultragpu-8g: /usr/local/gib).
FABRIC_MOUNTS: dict[GpuNetworking, FabricMounts] = {
    "tcpx": FabricMounts(("/var/lib/tcpx/lib64", "/run/tcpx-${SLURM_JOB_ID}"),
                         "/var/lib/tcpx/lib64"),
    "tcpxo": FabricMounts(("/var/lib/tcpxo/lib64",), "/var/lib/tcpxo/lib64"),
    "rdma": FabricMounts(("/usr/local/gib",), "/usr/local/gib/lib64"),
    "none": FabricMounts((), None),
}

#: The job environment every GPU node carries (the fabric part writes it); the job mounts
#: its folder into the container and sources it there.
NCCL_ENV_FILE = "/etc/clusterprint/nccl-env.sh"
