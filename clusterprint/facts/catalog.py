"""Cloud facts the rules and components depend on: network and label limits, storage tiers,
recipes and the managed API's bounds, as data in one place.

Every table here carries its source (see ``shared/reference/gcp-facts.md``): when the
cloud changes a limit, the change is one line here and every rule, component and
template follows. Machine types are in ``machines.py``, their zones in ``zones.py`` and
prices in ``prices.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The regional quota metric each persistent disk type's GB count against (Compute Engine
#: v1 Quota.metric: SSD_TOTAL_GB, DISKS_TOTAL_GB for standard disks; Cluster Toolkit
#: pkg/validators/quota.go at 1047080, addDetailedDiskMetrics: pd-balanced counts as SSD,
#: HYPERDISK_BALANCED_TOTAL_GB for hyperdisk-balanced).
DISK_QUOTA_METRICS: dict[str, str] = {
    "pd-standard": "DISKS_TOTAL_GB", "pd-balanced": "SSD_TOTAL_GB", "pd-ssd": "SSD_TOTAL_GB",
    "hyperdisk-balanced": "HYPERDISK_BALANCED_TOTAL_GB",
}

#: MTU limits of a VPC (cloud.google.com/vpc/docs/mtu).
MTU_MIN = 1300
MTU_MAX = 8896
#: The MTU a blueprint gets when it uses no GPU family with its own recommendation.
MTU_DEFAULT = 8896

#: VMs one zonal managed instance group holds with ``listManagedInstancesResults:
#: PAGINATED`` (Google's sample "Increase a managed instance group's (MIG's) size limit",
#: read 2026-12-02: "from 1,000 VMs (default) to 2,000 VMs"; without pagination the limit
#: is 1,000, "Basic scenarios for creating MIGs", Limitations). A larger nodeset is split
#: over several groups of this size.
GROUP_VMS_MAX = 2000
#: VMs one call that names instances (createInstances, deleteInstances,
#: recreateInstances) may list ("When updating a MIG, you can specify up to 1,000 VMs in a
#: single request", the same Limitations).
GROUP_REQUEST_VMS_MAX = 1000
#: The longest a flex-start (Dynamic Workload Scheduler) VM may run, the API's maximum of 7
#: days (gcp-facts: flex-start max run duration 600 to 604800 s): each resize request asks
#: for it, and Slurm, not the API, ends jobs.
FLEX_START_MAX_RUN_S = 604_800


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

# cloud.google.com/filestore/docs/service-tiers (63.9 TiB is 65,433 GiB; BASIC grows by 1 GiB).
FILESTORE_TIERS: dict[str, tuple[CapacityBand, ...]] = {
    "BASIC_HDD": (CapacityBand(1 * TIB, 65433, 1),),
    "BASIC_SSD": (CapacityBand(2560, 65433, 1),),
    "ZONAL": (CapacityBand(1 * TIB, 9984, 256), CapacityBand(10 * TIB, 100 * TIB, 2560)),
    "REGIONAL": (CapacityBand(1 * TIB, 9984, 256), CapacityBand(10 * TIB, 100 * TIB, 2560)),
    "ENTERPRISE": (CapacityBand(1 * TIB, 10 * TIB, 256),),
    "HIGH_SCALE_SSD": (CapacityBand(10 * TIB, 100 * TIB, 2560),),
}
#: A Filestore tier's name, as the model accepts it: the tiers above, in their order.
FilestoreTier = Literal[tuple(FILESTORE_TIERS)]

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
#: A Managed Lustre performance tier, as the model accepts it: the tiers above, lowest first.
LustreThroughput = Literal[tuple(sorted(LUSTRE_TIERS))]


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
#: A recipe's name, as the model accepts it: the recipes above, in their order.
RecipeName = Literal[tuple(RECIPES)]

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
# rows of machines.MACHINE_FAMILIES marked ``managed`` (A3 Mega, A3 Ultra, A4, A4X) and the
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
