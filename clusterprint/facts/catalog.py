"""Cloud facts the rules and components depend on, as data in one place.

Every table here carries its source (see ``shared/reference/gcp-facts.md``): when the
cloud changes a limit, the change is one line here and every rule, component and
template follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GpuNetworking = Literal["none", "tcpx", "tcpxo", "rdma"]
Architecture = Literal["x86_64", "arm64"]

#: MTU limits of a VPC (cloud.google.com/vpc/docs/mtu).
MTU_MIN = 1300
MTU_MAX = 8896
#: The MTU a blueprint gets when it uses no GPU family with its own recommendation.
MTU_DEFAULT = 8896


@dataclass(frozen=True)
class MachineFamily:
    """What a GPU machine type needs from the network, the disks and Slurm.

    The components size NICs and GPU VPCs from it, the rules check MTU and managed
    support against it, and a nodeset's GRES comes from ``gpu`` (its type) and ``gpus``.
    """

    machine_type: str
    gpu: str
    gpus: int
    #: gVNIC NICs on the system VPC(s): 1 for A3 High/Mega, 2 for A3 Ultra and A4.
    system_nics: int
    #: NICs on GPU networks: one per GPU VPC (A3 Mega/High) or one per RoCE subnet.
    gpu_nics: int
    networking: GpuNetworking
    #: Google's MTU for the family's GPUDirect traffic; None where no GPU network needs one.
    recommended_mtu: int | None
    boot_disk_type: str
    #: Whether the managed Cluster Director API accepts this machine type.
    managed: bool
    #: The CPU architecture the boot image must match (A4X's Grace CPUs are arm64).
    arch: Architecture = "x86_64"


# Sources: cloud.google.com/compute/docs/gpus/gpu-network-bandwidth; Cluster Toolkit
# pkg/config/machine_mappings.json and examples/machine-learning/* Slurm blueprints.
GPU_MACHINES: dict[str, MachineFamily] = {
    m.machine_type: m
    for m in (
        MachineFamily("a3-highgpu-8g", "nvidia-h100-80gb", 8, 1, 4, "tcpx", 8244,
                      "pd-balanced", managed=False),
        MachineFamily("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, 1, 8, "tcpxo", 8244,
                      "pd-balanced", managed=True),
        MachineFamily("a3-ultragpu-8g", "nvidia-h200-141gb", 8, 2, 8, "rdma", 8896,
                      "hyperdisk-balanced", managed=True),
        MachineFamily("a4-highgpu-8g", "nvidia-b200", 8, 2, 8, "rdma", 8896,
                      "hyperdisk-balanced", managed=True),
    )
}

# Families without GPUDirect: one gVNIC, no GPU networks, no MTU of their own. A2 and G2
# reach at most 100 Gbps and A3 High below 8 GPUs has a single physical NIC
# (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth); GPU counts from Cluster
# Toolkit pkg/config/machine_mappings.json (accelerator_shorthand_map) and, for the G2
# shapes it leaves out (4, 8, 16, 32 vCPUs: 1 L4 each), the accelerator-optimized
# machines page (cloud.google.com/compute/docs/accelerator-optimized-machines#g2-vms).
GPU_MACHINES.update({
    m.machine_type: m
    for m in (
        *(MachineFamily(f"a2-highgpu-{n}g", "nvidia-tesla-a100", n, 1, 0, "none", None,
                        "pd-balanced", managed=False) for n in (1, 2, 4, 8)),
        MachineFamily("a2-megagpu-16g", "nvidia-tesla-a100", 16, 1, 0, "none", None,
                      "pd-balanced", managed=False),
        *(MachineFamily(f"a2-ultragpu-{n}g", "nvidia-a100-80gb", n, 1, 0, "none", None,
                        "pd-balanced", managed=False) for n in (1, 2, 4, 8)),
        *(MachineFamily(f"g2-standard-{vcpus}", "nvidia-l4", n, 1, 0, "none", None,
                        "pd-balanced", managed=False)
          for vcpus, n in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4),
                           (96, 8))),
        *(MachineFamily(f"a3-highgpu-{n}g", "nvidia-h100-80gb", n, 1, 0, "none", None,
                        "pd-balanced", managed=False) for n in (1, 2, 4)),
    )
})

# A3 Edge: 8 x H100 on GPUDirect-TCPX like A3 High, 1 gVNIC + 4 GPU NICs (gpu-network-
# bandwidth: "A3 Edge ... GPUDirect-TCPX"; SkyPilot's GCP provisioner gives a3-edgegpu-8g
# and a3-highgpu-8g the same five VPCs). A4X: 4 x GB200 with arm64 Grace CPUs, 2 Titanium
# gVNICs + 4 CX-7 MRDMA NICs on a RoCE VPC of 4 subnets, Hyperdisk boot, MTU 8896
# (gpu-network-bandwidth "A4X machine types"; Cluster Toolkit
# examples/machine-learning/a4x-highgpu-4g/a4xhigh-slurm-blueprint.yaml).
GPU_MACHINES.update({
    m.machine_type: m
    for m in (
        MachineFamily("a3-edgegpu-8g", "nvidia-h100-80gb", 8, 1, 4, "tcpx", 8244,
                      "pd-balanced", managed=False),
        MachineFamily("a4x-highgpu-4g", "nvidia-gb200", 4, 2, 4, "rdma", 8896,
                      "hyperdisk-balanced", managed=True, arch="arm64"),
    )
})

#: Slurm's GRES type of each accelerator: slurm.conf's ``Gres=gpu:<type>:<n>``, which users
#: ask for (``--gres=gpu:h100:8``). Slurm's gpu/nvml plugin names what it finds after NVML's
#: device name, lowercased with spaces as underscores, and takes the configured type that is
#: a substring of it (case-insensitive: SchedMD/slurm src/plugins/gpu/nvml/gpu_nvml.c,
#: gpu_common_underscorify_tolower; src/plugins/gres/gpu/gres_gpu.c, _find_type_in_gres_list,
#: 22.05 and 23.11). The NVML names, as ``nvidia-smi -L`` prints them, are from public samples
#: (none from a Google Cloud VM): "NVIDIA H100 80GB HBM3" (A3 High, Mega and Edge alike),
#: "NVIDIA H200", "NVIDIA B200", "NVIDIA GB200", "NVIDIA A100-SXM4-40GB",
#: "NVIDIA A100-SXM4-80GB", "NVIDIA L4".
GRES_TYPES: dict[str, str] = {
    "nvidia-h100-80gb": "h100",
    "nvidia-h100-mega-80gb": "h100",
    "nvidia-h200-141gb": "h200",
    "nvidia-b200": "b200",
    "nvidia-gb200": "gb200",
    "nvidia-tesla-a100": "a100",
    "nvidia-a100-80gb": "a100",
    "nvidia-l4": "l4",
}


#: Boot disk type for machine types outside GPU_MACHINES.
DEFAULT_BOOT_DISK_TYPE = "pd-balanced"


def gpu_family(machine_type: str) -> MachineFamily | None:
    """The GPU family of a machine type, or None for CPU-only machines."""
    return GPU_MACHINES.get(machine_type)


def gres_type(machine_type: str) -> str | None:
    """Slurm's GRES type of a machine type's GPUs (``h100``), or None for CPU machines."""
    family = gpu_family(machine_type)
    return GRES_TYPES[family.gpu] if family else None


def gpu_count(machine_type: str) -> int:
    """GPUs per VM: the count a nodeset declares in Slurm (``Gres=gpu:<type>:N``)."""
    family = gpu_family(machine_type)
    return family.gpus if family else 0


def recommended_mtu(machine_types: list[str]) -> int:
    """The MTU a blueprint defaults to: the lowest recommendation among its GPU families.

    The lowest wins because a VPC carries one MTU and a larger one than a family's
    recommendation fragments its GPUDirect traffic.
    """
    recommendations = [f.recommended_mtu for t in machine_types
                       if (f := gpu_family(t)) and f.recommended_mtu is not None]
    return min(recommendations, default=MTU_DEFAULT)


def boot_disk_type(machine_type: str) -> str:
    """Default boot disk type: A3 Ultra and A4 take only Hyperdisk."""
    family = gpu_family(machine_type)
    return family.boot_disk_type if family else DEFAULT_BOOT_DISK_TYPE


#: Machine types the reservation-bound provisioning model (dense and calendar-mode
#: reservations) is documented for (cloud.google.com/compute/docs/instances/
#: about-reservation-bound-vms: "A4X VMs, and A4, A3 Ultra, A3 Mega, or A3 High (8 GPUs)").
RESERVATION_BOUND_MACHINES = frozenset({"a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g",
                                        "a3-megagpu-8g", "a3-highgpu-8g"})

#: Machine types whose host Compute Engine takes a fault report for (instances.
#: reportHostAsFaulty), on reservation-bound VMs only (cloud.google.com/ai-hypercomputer/
#: docs/manage/report-faulty-host: "A4X Max, A4X, A4, or A3 Ultra", the "reservation-bound
#: provisioning model"; A4X Max is not catalogued here).
HOST_FAULT_REPORT_MACHINES = frozenset({"a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g"})

#: CPU machine series and the shapes (the word after the series) each offers, so a
#: misspelt machine type is caught before `pulumi up` (Cluster Toolkit
#: pkg/config/machine_mappings.json ``cpu_machine_families``; shapes and the series it
#: lists not from cloud.google.com/compute/docs/general-purpose-machines,
#: .../compute-optimized-machines, .../memory-optimized-machines,
#: .../storage-optimized-machines). ``custom`` stands for custom machine types such as
#: ``n2-custom-8-32768``.
CPU_MACHINE_SERIES: dict[str, tuple[str, ...]] = {
    "e2": ("standard", "highmem", "highcpu", "custom", "micro", "small", "medium"),
    "f1": ("micro",),
    "g1": ("small",),
    "n1": ("standard", "highmem", "highcpu", "custom", "megamem", "ultramem"),
    "n2": ("standard", "highmem", "highcpu", "custom"),
    "n2d": ("standard", "highmem", "highcpu", "custom"),
    "n4": ("standard", "highmem", "highcpu", "custom"),
    "c2": ("standard",),
    "c2d": ("standard", "highmem", "highcpu"),
    "c3": ("standard", "highmem", "highcpu"),
    "c3d": ("standard", "highmem", "highcpu"),
    "c4": ("standard", "highmem", "highcpu"),
    "c4a": ("standard", "highmem", "highcpu"),
    "c4d": ("standard", "highmem", "highcpu"),
    "t2a": ("standard",),
    "t2d": ("standard",),
    "h3": ("standard",),
    "m1": ("megamem", "ultramem"),
    "m2": ("megamem", "ultramem", "hypermem"),
    "m3": ("megamem", "ultramem"),
    "z3": ("highmem",),
}


def cpu_machine_known(machine_type: str) -> bool:
    """True when the type's series and shape are a CPU machine the catalog lists.

    ``custom-CPUS-MEM`` without a series is an N1 custom machine type.
    """
    return machine_type.startswith("custom-") or cpu_shape(machine_type) is not None


#: The least memory per vCPU, in MiB, of each predefined CPU shape over the series above:
#: N1 is the leanest in all three (Compute Engine machineTypes: n1-standard-2 7680 MB,
#: n1-highmem-2 13312 MB, n1-highcpu-2 1843 MB for 2 vCPUs; N2, E2, C2, C3, C4 and the
#: others give 3.75-4, 6.5-8 and 1-2 GB per vCPU). slurm.conf's DefMemPerCPU of a CPU
#: partition comes from it; other shapes (custom, shared-core, mega/ultramem) set none.
MIB_PER_VCPU_AT_LEAST: dict[str, int] = {"standard": 3840, "highmem": 6656, "highcpu": 921}


def cpu_shape(machine_type: str) -> str | None:
    """The shape word of a known CPU machine type (``standard`` of n2-standard-4), else None."""
    series, _, rest = machine_type.partition("-")
    shape = rest.partition("-")[0]
    return shape if shape in CPU_MACHINE_SERIES.get(series, ()) else None


def machine_known(machine_type: str) -> bool:
    """True for a GPU machine type of the catalog or a CPU series and shape it lists."""
    return gpu_family(machine_type) is not None or cpu_machine_known(machine_type)


@dataclass(frozen=True)
class CapacityBand:
    """A contiguous range of allowed capacities in GiB and the step within it."""

    minimum: int
    maximum: int
    step: int

    def allows(self, capacity: int) -> bool:
        """True when ``capacity`` lies in the band on one of its steps."""
        in_range = self.minimum <= capacity <= self.maximum
        return in_range and (capacity - self.minimum) % self.step == 0

    def nearest(self, capacity: int) -> list[int]:
        """The allowed values just below and above ``capacity`` inside the band."""
        if capacity <= self.minimum:
            return [self.minimum]
        if capacity >= self.maximum:
            return [self.maximum - (self.maximum - self.minimum) % self.step]
        below = self.minimum + (capacity - self.minimum) // self.step * self.step
        return [below] if below == capacity else [below, below + self.step]


TIB = 1024

FilestoreTier = Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL", "ENTERPRISE",
                        "HIGH_SCALE_SSD"]

# cloud.google.com/filestore/docs/service-tiers (63.9 TiB is 65,433 GiB; BASIC grows by 1 GiB).
FILESTORE_TIERS: dict[str, tuple[CapacityBand, ...]] = {
    "BASIC_HDD": (CapacityBand(1 * TIB, 65433, 1),),
    "BASIC_SSD": (CapacityBand(2560, 65433, 1),),
    "ZONAL": (CapacityBand(1 * TIB, 9984, 256), CapacityBand(10 * TIB, 100 * TIB, 2560)),
    "REGIONAL": (CapacityBand(1 * TIB, 9984, 256), CapacityBand(10 * TIB, 100 * TIB, 2560)),
    "ENTERPRISE": (CapacityBand(1 * TIB, 10 * TIB, 256),),
    "HIGH_SCALE_SSD": (CapacityBand(10 * TIB, 100 * TIB, 2560),),
}

#: Filestore tiers whose instance lives in a region rather than a zone.
FILESTORE_REGIONAL_TIERS = frozenset({"REGIONAL", "ENTERPRISE"})
#: Filestore tiers that refuse NFS v4.1.
FILESTORE_BASIC_TIERS = frozenset({"BASIC_HDD", "BASIC_SSD"})


#: The block (prefix length) a Filestore instance takes from the private service access
#: range, per tier: /29 for the basic tiers, /24 for High Scale, /26 for Enterprise
#: (Filestore API NetworkConfig.reservedIpRange), /26 for zonal and regional as for
#: Enterprise (cloud.google.com/filestore/docs/network-ip-requirements).
FILESTORE_PSA_PREFIX: dict[str, int] = {
    "BASIC_HDD": 29, "BASIC_SSD": 29, "ZONAL": 26, "REGIONAL": 26, "ENTERPRISE": 26,
    "HIGH_SCALE_SSD": 24,
}


@dataclass(frozen=True)
class LustreTier:
    """One Managed Lustre performance tier: throughput per TiB and its capacity steps.

    Capacities step by ``step`` up to ``threshold``; past it they are multiples of
    ``step_above`` (the maximum is one: 20,016,000 = 139 x 144,000 for tier 500).
    """

    throughput: int
    minimum: int
    step: int
    threshold: int | None
    step_above: int | None
    maximum: int

    def bands(self) -> tuple[CapacityBand, ...]:
        """The tier's allowed capacities as bands."""
        if self.threshold is None or self.step_above is None:
            return (CapacityBand(self.minimum, self.maximum, self.step),)
        first_above = -(-(self.threshold + 1) // self.step_above) * self.step_above
        return (CapacityBand(self.minimum, self.threshold, self.step),
                CapacityBand(first_above, self.maximum, self.step_above))


# cloud.google.com/managed-lustre/docs/performance-tiers and .../increase-capacity.
LUSTRE_TIERS: dict[int, LustreTier] = {
    t.throughput: t
    for t in (
        LustreTier(1000, 9_000, 9_000, 1_530_000, 72_000, 10_008_000),
        LustreTier(500, 18_000, 18_000, 3_060_000, 144_000, 20_016_000),
        LustreTier(250, 36_000, 36_000, 6_120_000, 288_000, 40_032_000),
        LustreTier(125, 72_000, 72_000, None, None, 12_240_000),
    )
}


#: The block each Managed Lustre instance takes from the private service access range: a
#: contiguous /23 (cloud.google.com/managed-lustre/docs/vpc, "Allocate an IP range": each
#: instance needs a CIDR block of prefix length 23 or shorter; an older version said /24).
LUSTRE_PSA_PREFIX = 23


#: Where each recipe's model, configuration and numbers come from.
_BRIDGE = "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/"
_NEMO_RL = "NVIDIA-NeMo/RL examples/configs/"
_GPU_RECIPES = "AI-Hypercomputer/gpu-recipes training/a3ultra/"

RecipeMethod = Literal["pretrain", "sft", "rl"]


@dataclass(frozen=True)
class Recipe:
    """A training job clusterprint renders and stages onto the login node.

    Pretraining and SFT run a Megatron-Bridge recipe function (``config``) through its
    ``scripts/training/run_recipe.py``; RL runs a NeMo-RL GRPO configuration (``config``,
    a path in its repository) with Ray inside the allocation.
    """

    name: str
    description: str
    #: GPUs per node the recipe is written for (its tensor parallelism stays in a node).
    min_gpus_per_node: int
    method: RecipeMethod
    #: GPUs the model needs in all, as its public configuration runs it: fewer do not fit.
    gpus: int
    config: str
    source: str
    #: The Hugging Face checkpoint SFT imports and RL starts from; None for pretraining.
    hf_model: str | None = None
    #: Tensor and pipeline parallelism of the public configuration, capped to the GPUs.
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    #: Training steps, and steps between checkpoints (each one resumable).
    steps: int = 1000
    save_interval: int = 100


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("llama3-8b-pretrain", "Llama 3 8B pretraining (Megatron-Bridge, mock data)", 8,
               "pretrain", 8, "llama3_8b_pretrain_config",
               _BRIDGE + "llama/llama3.py; " + _GPU_RECIPES + "llama3_8b/megatron-bridge-slurm"),
        Recipe("llama3-70b-pretrain", "Llama 3 70B pretraining (Megatron-Bridge, mock data)", 8,
               "pretrain", 32, "llama3_70b_pretrain_config",
               _BRIDGE + "llama/h100/llama3.py llama3_70b_pretrain_32gpu_h100_bf16_config; "
               + _GPU_RECIPES + "llama3_70b/megatron-bridge-slurm (32 GPUs)",
               tensor_parallel=4, pipeline_parallel=4),
        Recipe("gemma-2b-sft", "Gemma 2 2B supervised fine-tuning (Megatron-Bridge)", 1,
               "sft", 1, "gemma2_2b_sft_config",
               _BRIDGE + "gemma/h100/gemma2.py gemma2_2b_sft_1gpu_h100_bf16_config",
               hf_model="google/gemma-2-2b"),
        # Megatron-Bridge has no Gemma 7B recipe: the Gemma 2 9B one (4 GPUs) on the imported
        # Gemma 7B checkpoint (models/gemma/gemma_bridge.py converts it).
        Recipe("gemma-7b-sft", "Gemma 7B supervised fine-tuning (Megatron-Bridge)", 1,
               "sft", 4, "gemma2_9b_sft_config",
               _BRIDGE + "gemma/h100/gemma2.py gemma2_9b_sft_4gpu_h100_bf16_config",
               hf_model="google/gemma-7b", tensor_parallel=4),
        Recipe("gemma3-1b-sft", "Gemma 3 1B supervised fine-tuning (Megatron-Bridge)", 1,
               "sft", 1, "gemma3_1b_sft_config",
               _BRIDGE + "gemma/h100/gemma3.py gemma3_1b_sft_1gpu_h100_bf16_config",
               hf_model="google/gemma-3-1b-pt"),
        # NeMo-RL's 1B GRPO configuration on Gemma 2 2B (it has no Gemma 2 configuration).
        Recipe("gemma-2b-rl", "Gemma 2 2B GRPO (NeMo-RL)", 8, "rl", 8,
               "examples/configs/grpo_math_1B.yaml", _NEMO_RL + "grpo_math_1B.yaml",
               hf_model="google/gemma-2-2b-it", save_interval=10, steps=500),
        Recipe("gemma3-1b-rl", "Gemma 3 1B GRPO (NeMo-RL)", 8, "rl", 8,
               "examples/configs/recipes/llm/grpo-gemma3-1b-it-1n8g-fsdp2tp1.yaml",
               _NEMO_RL + "recipes/llm/grpo-gemma3-1b-it-1n8g-fsdp2tp1.yaml",
               hf_model="google/gemma-3-1b-it", save_interval=10, steps=500),
        Recipe("gemma3-27b-rl", "Gemma 3 27B GRPO (NeMo-RL)", 8, "rl", 64,
               "examples/configs/recipes/llm/grpo-gemma3-27b-it-8n8g-fsdp2tp8-actckpt-long.yaml",
               _NEMO_RL + "recipes/llm/grpo-gemma3-27b-it-8n8g-fsdp2tp8-actckpt-long.yaml",
               hf_model="google/gemma-3-27b-it", save_interval=10, steps=500),
    )
}

#: Labels one resource may carry, its own and clusterprint's together
#: (cloud.google.com/compute/docs/labeling-resources#requirements).
MAX_LABELS = 64

#: IAP TCP forwarding's source range: the only SSH source a new cluster allows.
IAP_RANGE = "35.235.240.0/20"

#: Blueprint keys the managed API (gcp.hypercomputecluster.Cluster) cannot express,
#: as key paths with ``[]`` for "every item of the list".
MANAGED_UNSUPPORTED_KEYS = (
    "network.mtu",
    "network.subnet_cidr",
    "network.gpu_networks",
    "network.nat",
    "network.ssh_source_ranges",
    "network.peerings",
    "network.private_service_access",
    "network.gpu_subnets_cidr",
    "slurm.controller",
    "slurm.nodesets[].placement",
    "slurm.nodesets[].image",
    "slurm.partitions[].max_time",
    "slurm.health_checks",
    "recipes",
)

#: Filestore tiers the managed API can create (pulumi-gcp 10.2 hypercomputecluster
#: ``ClusterStorageResourceConfigNewFilestoreArgs.tier``).
MANAGED_FILESTORE_TIERS = ("ZONAL", "REGIONAL")

#: The managed API's cluster_id: lowercase letters and digits, at most 10.
MANAGED_CLUSTER_ID_PATTERN = r"^[a-z][a-z0-9]{0,9}$"

# The managed API's machine types, regions and Lustre range. Sources:
# docs.cloud.google.com/cluster-director/docs/compute ("CPU-based machines"): "Cluster
# Director supports the N2 machine series ... For login nodes, you can only use N2 standard
# machine types with 32 or fewer vCPUs. Otherwise, you can use any N2 machine type." The
# sizes are Compute Engine's predefined N2 shapes: standard and highmem 2 to 128 vCPUs,
# highcpu 2 to 96. The stored copy of that page breaks off inside its N2 standard table
# (after n2-standard-96) and before its GPU section, so the GPU types the API runs are the
# GPU_MACHINES marked ``managed`` (A3 Mega, A3 Ultra, A4, and A4X once catalogued) and the
# highcpu ceiling of 96 could not be read there. Custom N2 shapes are not allowed: the page
# lists predefined types only.
_N2_VCPUS = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
_N2_HIGHCPU_MAX_VCPUS = 96
#: N2 types the managed API runs as compute nodes.
MANAGED_N2_MACHINES: tuple[str, ...] = tuple(
    f"n2-{kind}-{vcpus}" for kind in ("standard", "highmem", "highcpu") for vcpus in _N2_VCPUS
    if kind != "highcpu" or vcpus <= _N2_HIGHCPU_MAX_VCPUS)
#: The only login node types the managed API runs: N2 standard with at most 32 vCPUs.
MANAGED_LOGIN_MACHINES: tuple[str, ...] = tuple(
    f"n2-standard-{vcpus}" for vcpus in _N2_VCPUS if vcpus <= 32)


def managed_machine_types() -> tuple[str, ...]:
    """Compute node types the managed API runs: its GPU families, then N2.

    Read from GPU_MACHINES at call time, so a GPU family catalogued with ``managed=True``
    is allowed without a second list to keep in step.
    """
    return (*(m for m, f in GPU_MACHINES.items() if f.managed), *MANAGED_N2_MACHINES)


#: Regions the managed API runs in, from docs.cloud.google.com/cluster-director/docs/locations:
#: its Americas, Europe and Asia Pacific tables, and the newer copy of the page
#: (locations.md.txt) that adds us-west2 and us-west3 and names Middle East regions. Both
#: stored copies break off inside their Asia Pacific table after asia-southeast1, so Asia
#: Pacific and Middle East regions beyond it are missing here: unverified, not excluded
#: by a source.
MANAGED_REGIONS: tuple[str, ...] = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2",
    "us-west3", "us-west4",
    "europe-north1", "europe-west1", "europe-west4",
    "asia-southeast1",
)

#: Managed Lustre capacity the managed API creates, in GiB: "Allowed values are between
#: 18000 and 7632000" (pulumi-gcp 10.2 ClusterStorageResourceConfigNewLustreArgs.capacity_gb;
#: magic-modules mmv1/products/hypercomputecluster/Cluster.yaml; the v1 API's
#: NewLustreConfig.capacity_gb). Narrower than LUSTRE_TIERS' own ranges at both ends.
MANAGED_LUSTRE_CAPACITY_GIB = CapacityBand(18_000, 7_632_000, 1)

#: Login nodes a managed cluster needs: the v1 API's SlurmLoginNodes.count is "Required",
#: and a proto3 int64 of 0 reads as unset (google-cloud-hypercomputecluster v1 types).
MANAGED_MIN_LOGIN_NODES = 1


#: Local SSD disks (375 GiB each) that Compute Engine attaches to every VM of a machine type
#: on its own: "A4X, A4, A3, and A2 Ultra machine series ... every machine type comes with
#: Local SSD storage" (cloud.google.com/compute/docs/disks/add-local-ssd); A3 High and Mega
#: 6,000 GiB, A3 Ultra, A4 and A4X 12,000 GiB (shared/reference/gpu-nodes.md, Cluster Toolkit
#: blueprints' /mnt/localssd RAID0). GPU nodes make one RAID0 of them at /mnt/localssd;
#: machine types not listed have none.
BUNDLED_LOCAL_SSDS: dict[str, int] = {
    "a3-highgpu-8g": 16, "a3-megagpu-8g": 16, "a3-edgegpu-8g": 16,
    "a3-ultragpu-8g": 32, "a4-highgpu-8g": 32, "a4x-highgpu-4g": 32,
    **{f"a3-highgpu-{n}g": 2 * n for n in (1, 2, 4)},
    **{f"a2-ultragpu-{n}g": n for n in (1, 2, 4, 8)},
}


def bundled_local_ssds(machine_type: str) -> int:
    """The local SSD disks a VM of ``machine_type`` comes with (0 for most CPU types)."""
    return BUNDLED_LOCAL_SSDS.get(machine_type, 0)


def _zones(spec: str) -> tuple[str, ...]:
    """``"us-central1:abc europe-west4:b"`` as its zones: us-central1-a, -b, -c, europe-west4-b."""
    return tuple(f"{region}-{letter}" for part in spec.split()
                 for region, letters in [part.split(":")] for letter in letters)


#: Where the zone table below comes from, and when it was read. Google's own "GPU regions
#: and zones" page (cloud.google.com/compute/docs/gpus/gpu-regions-zones) could not be read
#: here; this is SkyPilot's catalog of Compute Engine machine types per zone, generated from
#: the Compute Engine API (machineTypes.aggregatedList): skypilot-org/skypilot-catalog
#: catalogs/v8/gcp/vms.csv at commit 006059e0f18acb1341e22a27751e9f80df6ba92f
#: (https://github.com/skypilot-org/skypilot-catalog/blob/006059e0f18acb1341e22a27751e9f80df6ba92f/catalogs/v8/gcp/vms.csv),
#: read 2026-12-01. Its reference blueprints' zones agree (a3mega us-central1-a, a3ultra
#: europe-west1-b, a4 us-central1-b). Not in that copy, so not offered: A4X and G2 (G2's
#: rows were not read). AI zones such as us-south1-ai1b are left out: a blueprint's zone
#: is a region plus one letter.
MACHINE_ZONES_SOURCE = ("skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv at 006059e0, "
                        "from the Compute Engine API; read 2026-12-01")

_A2_HIGH_ZONES = _zones("asia-northeast1:ac asia-northeast3:ab asia-southeast1:abc "
                        "europe-west4:ab me-west1:ac us-central1:abcf us-east1:b us-west1:b "
                        "us-west3:b us-west4:b")
_A2_ULTRA_ZONES = _zones("asia-southeast1:c europe-west4:a us-central1:ac us-east4:c "
                         "us-east5:ab")
# a3-highgpu-8g is in every zone of its smaller shapes but europe-west8-c.
_A3_HIGH_8G_ZONES = _zones(
    "asia-east1:c asia-northeast1:b asia-south1:c asia-south2:b asia-southeast1:bc "
    "australia-southeast1:c europe-north1:c europe-west1:bc europe-west3:c europe-west4:bc "
    "europe-west9:c us-central1:abc us-east4:abc us-east5:a us-west1:ab us-west4:a")
_A3_HIGH_ZONES = tuple(sorted((*_A3_HIGH_8G_ZONES, "europe-west8-c")))

#: Zones where each machine type exists: GPU types by name, CPU types by series (every
#: shape of N2 and C2 is in its series' zones). Source and date: MACHINE_ZONES_SOURCE.
MACHINE_ZONES: dict[str, tuple[str, ...]] = {
    **{f"a2-highgpu-{n}g": _A2_HIGH_ZONES for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": _zones("asia-southeast1:ac europe-west4:ab us-central1:abcf"),
    **{f"a2-ultragpu-{n}g": _A2_ULTRA_ZONES for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": _A3_HIGH_ZONES for n in (1, 2, 4)},
    "a3-highgpu-8g": _A3_HIGH_8G_ZONES,
    "a3-edgegpu-8g": _zones(
        "asia-northeast1:b asia-northeast3:ac asia-south1:c asia-southeast1:bc europe-west2:b "
        "europe-west3:ac europe-west4:bc europe-west9:c northamerica-northeast2:c "
        "us-central1:abc us-east4:abc us-east5:a us-west1:ab us-west4:a"),
    "a3-megagpu-8g": _zones(
        "asia-east1:c asia-northeast1:b asia-southeast1:bc australia-southeast1:c "
        "europe-north1:c europe-west1:bc europe-west3:c europe-west4:bc us-central1:abc "
        "us-east4:abc us-east5:a us-west1:ab us-west4:a"),
    "a3-ultragpu-8g": _zones(
        "asia-south1:b asia-south2:c europe-west1:b europe-west4:a us-central1:b us-east4:b "
        "us-east5:a us-south1:b us-west1:c"),
    "a4-highgpu-8g": _zones(
        "asia-northeast1:b asia-southeast1:b europe-north1:b europe-west4:b us-central1:b "
        "us-east1:b us-east4:b us-south1:b us-west2:c us-west3:bc"),
    "c2": _zones(
        "asia-east1:abc asia-east2:abc asia-northeast1:abc asia-northeast2:abc "
        "asia-northeast3:abc asia-south1:abc asia-south2:abc asia-southeast1:abc "
        "australia-southeast1:abc europe-north1:abc europe-west1:bcd europe-west2:abc "
        "europe-west3:abc europe-west4:abc europe-west6:abc me-central2:abc me-west1:abc "
        "northamerica-northeast1:abc southamerica-east1:abc southamerica-west1:abc "
        "us-central1:abcf us-east1:bcd us-east4:abc us-east5:abc us-west1:abc us-west2:abc "
        "us-west3:abc us-west4:abc"),
    "n2": _zones(
        "africa-south1:abc asia-east1:abc asia-east2:abc asia-northeast1:abc "
        "asia-northeast2:abc asia-northeast3:abc asia-south1:abc asia-south2:abc "
        "asia-southeast1:abc asia-southeast2:abc australia-southeast1:abc "
        "australia-southeast2:abc europe-central2:abc europe-north1:abc "
        "europe-southwest1:abc europe-west1:bcd europe-west10:abc europe-west12:abc "
        "europe-west2:abc europe-west3:abc europe-west4:abc europe-west6:abc "
        "europe-west8:abc europe-west9:abc me-central1:abc me-central2:abc me-west1:abc "
        "northamerica-northeast1:abc northamerica-northeast2:abc southamerica-east1:abc "
        "southamerica-west1:abc us-central1:abcf us-east1:bcd us-east4:abc us-east5:abc "
        "us-south1:abc us-west1:abc us-west2:abc us-west3:abc us-west4:abc"),
}


def machine_zones(machine_type: str) -> tuple[str, ...]:
    """The zones where ``machine_type`` exists, or () where the catalog does not know them."""
    return MACHINE_ZONES.get(machine_type) or MACHINE_ZONES.get(machine_type.split("-")[0], ())


# =========================================================================================
# List prices for the cost estimate of `clusterprint plan`. Kept apart from the cloud facts
# above: prices change from week to week, limits rarely. Every row names its source and the
# day it was read; a machine type, disk or storage tier without a price is listed in an
# UNPRICED table with the reason, so the estimate says "no price on record" instead of
# counting it as free.
# =========================================================================================

#: The one region the estimate prices in: list prices differ by region.
PRICE_REGION = "us-central1"
#: Hours in the month the estimate multiplies by (Google's pricing pages use 730).
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class PriceSource:
    """Where a price was read, and when."""

    url: str
    #: The day the price was read (ISO date).
    read: str
    note: str


#: Cyclenerd/google-cloud-pricing-cost-calculator's pricing.yml, which its CI generates each
#: week from Google's Cloud Billing Catalog API (the SKUs behind cloud.google.com/compute/
#: vm-instance-pricing): per machine type, region, on-demand ``hour`` and ``hour_spot``,
#: GPUs and bundled Local SSD included. Google's own pricing pages load their tables in the
#: browser, so no stored copy of them holds a us-central1 number.
CYCLENERD_PRICING = PriceSource(
    "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
    "fd66b26ff84fee5cdd94f341ea89206e76c06b99/pricing.yml",
    "2026-12-01", "generated 2026-07-30 from the Cloud Billing Catalog API")
#: A dataset of GPU list prices from the Cloud Billing Catalog API (snapshot 2026-10-13), per
#: GPU as a share of the instance price: the instance price is 8 times it.
GPU_LIST_PRICES = PriceSource(
    "https://huggingface.co/datasets/tanod/cloud-gpu-list-prices", "2026-12-01",
    "snapshot 2026-10-13 from the Cloud Billing Catalog API, per GPU; x 8 per VM")
#: Every source a price row may name.
PRICE_SOURCES = (CYCLENERD_PRICING, GPU_LIST_PRICES)


@dataclass(frozen=True)
class MachinePrice:
    """A machine type's list price per VM-hour in PRICE_REGION, USD (rounded to 4 places)."""

    on_demand: float
    #: Spot prices move (at most once a day); None where the source gives none.
    spot: float | None
    source: PriceSource


# us-central1 rows of CYCLENERD_PRICING: (hour, hour_spot).
_CYCLENERD_MACHINES: dict[str, tuple[float, float]] = {
    "a3-highgpu-8g": (88.49, 50.6095),
    "a2-highgpu-1g": (3.6734, 1.928),
    "a2-highgpu-2g": (7.3468, 3.856),
    "a2-highgpu-4g": (14.6935, 7.7121),
    "a2-highgpu-8g": (29.3871, 15.4242),
    "a2-megagpu-16g": (55.7395, 29.2557),
    "a2-ultragpu-1g": (5.0688, 2.7595),
    "a2-ultragpu-2g": (10.1376, 5.5191),
    "a2-ultragpu-4g": (20.2752, 11.0382),
    "a2-ultragpu-8g": (40.5504, 22.0764),
    "g2-standard-4": (0.7068, 0.3973),
    "g2-standard-8": (0.8536, 0.4799),
    "g2-standard-12": (1.0004, 0.5624),
    "g2-standard-16": (1.1472, 0.6449),
    "g2-standard-24": (2.0008, 1.1248),
    "g2-standard-32": (1.7344, 0.9751),
    "g2-standard-48": (4.0017, 2.2496),
    "g2-standard-96": (8.0033, 4.4993),
    "a3-highgpu-1g": (11.0612, 6.3262),
    "a3-highgpu-2g": (22.1225, 12.6524),
    "a3-highgpu-4g": (44.245, 25.3048),
    "n2-standard-2": (0.0971, 0.0461),
    "n2-standard-4": (0.1942, 0.0921),
    "n2-standard-8": (0.3885, 0.1842),
    "n2-standard-16": (0.7769, 0.3685),
    "n2-standard-32": (1.5539, 0.737),
    "n2-standard-48": (2.3308, 1.1054),
    "n2-standard-64": (3.1078, 1.4739),
    "n2-standard-80": (3.8847, 1.8424),
    "n2-standard-96": (4.6617, 2.2109),
    "n2-standard-128": (6.2156, 2.9478),
    "n2-highmem-2": (0.131, 0.0621),
    "n2-highmem-4": (0.262, 0.1243),
    "n2-highmem-8": (0.5241, 0.2486),
    "n2-highmem-16": (1.0481, 0.4971),
    "n2-highmem-32": (2.0962, 0.9942),
    "n2-highmem-48": (3.1443, 1.4914),
    "n2-highmem-64": (4.1924, 1.9885),
    "n2-highmem-80": (5.2406, 2.4856),
    "n2-highmem-96": (6.2887, 2.9827),
    "n2-highmem-128": (7.707, 3.6554),
    "n2-highcpu-2": (0.0717, 0.034),
    "n2-highcpu-4": (0.1434, 0.068),
    "n2-highcpu-8": (0.2868, 0.136),
    "n2-highcpu-16": (0.5736, 0.272),
    "n2-highcpu-32": (1.1471, 0.544),
    "n2-highcpu-48": (1.7207, 0.816),
    "n2-highcpu-64": (2.2943, 1.088),
    "n2-highcpu-80": (2.8678, 1.36),
    "n2-highcpu-96": (3.4414, 1.632),
    "c2-standard-8": (0.4176, 0.1994),
    "e2-standard-2": (0.067, 0.0402),
}

MACHINE_PRICES: dict[str, MachinePrice] = {
    **{t: MachinePrice(hour, spot, CYCLENERD_PRICING)
       for t, (hour, spot) in _CYCLENERD_MACHINES.items()},
    # GPU_LIST_PRICES, us-central1: 10.4365 on-demand and 6.2607 spot per H200.
    "a3-ultragpu-8g": MachinePrice(83.492, 50.0856, GPU_LIST_PRICES),
}

#: Machine types the catalog offers that no stored source prices in PRICE_REGION.
UNPRICED_MACHINES: dict[str, str] = {
    "a3-megagpu-8g": "the source prices A3 Mega in us-east4, us-east5, us-west4 and Europe "
                     "and Asia regions, not in us-central1",
    "a3-edgegpu-8g": "no stored source lists A3 Edge",
    "a4-highgpu-8g": "no stored source lists A4 (Google's pricing page loads its table in "
                     "the browser)",
    "a4x-highgpu-4g": "no stored source lists A4X (Google's pricing page loads its table in "
                      "the browser)",
}


@dataclass(frozen=True)
class StoragePrice:
    """A storage price per provisioned GiB-month in PRICE_REGION, USD."""

    per_gib_month: float
    source: PriceSource


#: Persistent disk list prices per GiB-month (CYCLENERD_PRICING compute.storage balanced,
#: ssd and hdd in us-central1): what a nodeset's boot disks cost.
DISK_PRICES: dict[str, StoragePrice] = {
    "pd-balanced": StoragePrice(0.10, CYCLENERD_PRICING),
    "pd-ssd": StoragePrice(0.17, CYCLENERD_PRICING),
    "pd-standard": StoragePrice(0.04, CYCLENERD_PRICING),
}
#: Disk types without a price on record.
UNPRICED_DISKS: dict[str, str] = {
    "hyperdisk-balanced": "billed per GiB and per provisioned IOPS and throughput; no stored "
                          "source prices it",
}

#: Filestore list prices per GiB-month by tier, and Managed Lustre's by performance tier:
#: none on record yet (see the UNPRICED tables below for why).
FILESTORE_PRICES: dict[str, StoragePrice] = {}
LUSTRE_PRICES: dict[int, StoragePrice] = {}

_STORAGE_PAGE = ("{} pricing page ({}) loads its price table in the browser: no stored copy "
                 "holds a us-central1 number")
#: Filestore tiers without a price on record.
UNPRICED_FILESTORE_TIERS: dict[str, str] = {
    tier: _STORAGE_PAGE.format("Filestore's", "cloud.google.com/filestore/pricing")
    for tier in FILESTORE_TIERS if tier not in FILESTORE_PRICES
}
#: Managed Lustre performance tiers without a price on record.
UNPRICED_LUSTRE_TIERS: dict[int, str] = {
    tier: _STORAGE_PAGE.format("Managed Lustre's", "cloud.google.com/managed-lustre/pricing")
    for tier in LUSTRE_TIERS if tier not in LUSTRE_PRICES
}
