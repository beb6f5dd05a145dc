"""Machine types: one row per GPU machine type, holding all that is known about it.

Each row of MACHINE_FAMILIES is the only place its type string is written: the network,
disks, Slurm GRES, the health check's NVLink check, the NCCL proof and recipe images, the
zones, the price, the wizard's family name and the reservation features all read it from
there, so adding a family is adding its rows. The CPU series and the lookups both kinds
share (is a type known, where does it exist, what does it cost) follow the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clusterprint.facts import catalog, prices
from clusterprint.facts.gpu_software import (
    RECIPE_SOFTWARE_DEFAULT,
    GpuNetworking,
    NcclProof,
    RecipeSoftware,
)
from clusterprint.facts.topology import FABRIC_TREE, NVLINK_DOMAINS, NetworkTopology
from clusterprint.facts.zones import CPU_SERIES_ZONES, zones

Architecture = Literal["x86_64", "arm64"]


@dataclass(frozen=True, kw_only=True)
class MachineFamily:
    """What a GPU machine type needs from the network, the disks, Slurm and the software,
    and what the cost estimate, the zone check and the wizard know of it.

    The components size NICs and GPU VPCs from it, the rules check MTU, zones and managed
    support against it, and a nodeset's GRES comes from ``gres`` and ``gpus``.
    """

    machine_type: str
    #: The family as Google's pages name it (the wizard groups its offers by it).
    family: str
    #: Compute Engine's accelerator type.
    gpu: str
    #: Slurm's GRES type of the accelerator: slurm.conf's ``Gres=gpu:<type>:<n>``, which users
    #: ask for (``--gres=gpu:h100:8``). Slurm's gpu/nvidia plugin (gpu/nvml likewise) names
    #: what it finds after the driver's model name, lowercased with spaces as underscores, and
    #: takes the configured type that is a substring of it (case-insensitive: SchedMD/slurm
    #: src/plugins/gpu/nvidia/gpu_nvidia.c at slurm-26-05-3-1 and gpu/nvml/gpu_nvml.c,
    #: gpu_common_underscorify_tolower; src/plugins/gres/gpu/gres_gpu.c,
    #: _find_type_in_gres_list, 22.05 and 23.11). The model names, as ``nvidia-smi -L`` prints
    #: them, are from public samples (none from a Google Cloud VM): "NVIDIA H100 80GB HBM3"
    #: (A3 High, Mega and Edge alike), "NVIDIA H200", "NVIDIA B200", "NVIDIA GB200",
    #: "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA L4".
    gres: str
    gpus: int
    #: Whether its GPUs are SXM parts with NVLink between all of them, so the health check
    #: reads their NVLink error counters (the L4 of G2 has none and lists no counters).
    nvlink: bool
    #: gVNIC NICs on the system VPC(s): 1 for A3 High/Mega, 2 for A3 Ultra and A4.
    system_nics: int = 1
    #: NICs on GPU networks: one per GPU VPC (A3 Mega/High) or one per RoCE subnet.
    gpu_nics: int = 0
    networking: GpuNetworking = "none"
    #: Google's MTU for the family's GPUDirect traffic; None where no GPU network needs one.
    recommended_mtu: int | None = None
    boot_disk_type: str = "pd-balanced"
    #: Whether the managed Cluster Director API accepts this machine type.
    managed: bool = False
    #: The CPU architecture the boot image must match (A4X's Grace CPUs are arm64).
    arch: Architecture = "x86_64"
    #: Local SSD disks (375 GiB each) Compute Engine attaches to every VM of the type on its
    #: own; GPU nodes make one RAID0 of them at /mnt/localssd.
    local_ssds: int = 0
    #: Whether the reservation-bound provisioning model (dense and calendar-mode
    #: reservations) is documented for it.
    reservation_bound: bool = False
    #: Whether Compute Engine takes a fault report for its host (instances.
    #: reportHostAsFaulty), on reservation-bound VMs only.
    host_fault_report: bool = False
    #: The zones it exists in (source: zones.MACHINE_ZONES_SOURCE); () where not known, and
    #: the wizard does not offer it.
    zones: tuple[str, ...] = ()
    #: Its list price in prices.PRICE_REGION, or why there is none on record.
    price: prices.MachinePrice | str
    #: Its list prices in other regions, where a source gives them: a node in a blueprint of
    #: one of these regions is priced there, not in prices.PRICE_REGION.
    regional_prices: tuple[tuple[str, prices.MachinePrice], ...] = ()
    #: How its NCCL proof job runs; None: as on a machine type without GPU networks
    #: (NCCL_PROOF_WITHOUT_FABRIC).
    nccl_proof: NcclProof | None = None
    #: The training container and launch form of its public Slurm recipe; None: there is
    #: none, and its recipes run as RECIPE_SOFTWARE_DEFAULT says.
    recipe_software: RecipeSoftware | None = None
    #: The Slurm topologies its nodes join from where Compute Engine placed them (the first
    #: a tree); () where Google publishes no physical topology for it (facts/topology.py).
    topology: tuple[NetworkTopology, ...] = ()
    #: Compute Engine's regional quota metric of its GPUs, which ``clusterprint preflight``
    #: checks (spot and flex-start VMs: see preemptible_quota).
    gpu_quota: str
    #: Its regional vCPU quota metric; None where the GPU quota alone limits the family.
    cpu_quota: str | None = None

    @property
    def resume_timeout_s(self) -> int:
        """How long Slurm waits for an elastic node of this family to register after its VM
        is asked for (its partitions' ResumeTimeout): GPU_FABRIC_RESUME_TIMEOUT_S where the
        boot brings up a GPU network, else GPU_RESUME_TIMEOUT_S."""
        if self.networking != "none":
            return GPU_FABRIC_RESUME_TIMEOUT_S
        return GPU_RESUME_TIMEOUT_S


#: Seconds from a resume to a registered node, by kind of machine, as the Cluster Toolkit
#: sets ResumeTimeout (GoogleCloudPlatform/cluster-toolkit, read 2026-12-03): 300 for any
#: partition by default (community/modules/compute/schedmd-slurm-gcp-v6-partition/main.tf),
#: 600 for the A2 GPU partitions of examples/hpc-enterprise-slurm.yaml ("the following
#: allow for longer boot time which is useful for large GPU nodes"), 900 for A3 High in
#: examples/machine-learning/a3-highgpu-8g/a3high-slurm-blueprint.yaml. clusterprint gives
#: every family whose boot brings up a GPU network (A3, A4, A4X) A3 High's 900: theirs is the
#: same kind of boot, and no source gives one of its own.
CPU_RESUME_TIMEOUT_S = 300
GPU_RESUME_TIMEOUT_S = 600
GPU_FABRIC_RESUME_TIMEOUT_S = 900


_CHS = "GoogleCloudPlatform/cluster-health-scanner deploy/helm/health_checks/nccl_healthcheck/"
_CTK = "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/"
#: gpu-recipes' Slurm recipes that import the NeMo 25.11 image (ORIG_IMAGE) for pyxis: the
#: toolkit's PyTorch tags carry CUDA 12.6 or older, and Blackwell (B200, GB200) needs 12.8.
_RECIPES = "AI-Hypercomputer/gpu-recipes training/{}/megatron-bridge-slurm/nemo2511/{}/recipe/" \
           "sbatch_script.sh"
_GR = "AI-Hypercomputer/gpu-recipes training/"
#: Why A4X and A3 Edge have no price (searched 2026-12-04): pricing.yml's newest stored copy
#: (dac3128) lists neither, nor does the GPU list-price dataset (it stops at the H200); the
#: Cloud Billing SKU feed of prices.A4_ON_DEMAND (2026-07-07) has 657 GPU SKU names, all of
#: them H100, H200 or B200 (no GB200: A4X has no public SKU), and per-GPU SKUs alone are not a
#: VM's price where vCPUs, memory and Local SSD bill beside them (A3 Edge); the stored copies of
#: Google's pricing pages keep their prose, not their tables.
_NO_PRICE_SOURCE = "no source read gives a price for the whole VM"

# a3-highgpu-8g is in every zone of its smaller shapes but europe-west8-c.
_A3_HIGH_8G_ZONES = zones(
    "asia-east1:c asia-northeast1:b asia-south1:c asia-south2:b asia-southeast1:bc "
    "australia-southeast1:c europe-north1:c europe-west1:bc europe-west3:c europe-west4:bc "
    "europe-west9:c us-central1:abc us-east4:abc us-east5:a us-west1:ab us-west4:a")

#: Every GPU machine type, newest family first (the order the wizard offers them in).
#: Sources, for every row unless its comment says otherwise:
#: - network, GPUs, MTU, disks: cloud.google.com/compute/docs/gpus/gpu-network-bandwidth;
#:   Cluster Toolkit pkg/config/machine_mappings.json and examples/machine-learning/* Slurm
#:   blueprints. Families without GPUDirect (A2, G2, A3 High below 8 GPUs, which has a single
#:   physical NIC) get one gVNIC, no GPU networks and no MTU of their own; G2's shapes the
#:   toolkit leaves out (4, 8, 16, 32 vCPUs: 1 L4 each) are from cloud.google.com/compute/
#:   docs/accelerator-optimized-machines#g2-vms.
#: - local SSDs: "A4X, A4, A3, and A2 Ultra machine series ... every machine type comes with
#:   Local SSD storage" (cloud.google.com/compute/docs/disks/add-local-ssd); A3 High and Mega
#:   6,000 GiB, A3 Ultra, A4 and A4X 12,000 GiB (shared/reference/gpu-nodes.md, Cluster
#:   Toolkit blueprints' /mnt/localssd RAID0).
#: - reservation-bound: cloud.google.com/compute/docs/instances/about-reservation-bound-vms
#:   ("A4X VMs, and A4, A3 Ultra, A3 Mega, or A3 High (8 GPUs)"); host fault reports:
#:   cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host ("A4X Max, A4X, A4, or
#:   A3 Ultra", the "reservation-bound provisioning model"; A4X Max is not catalogued here).
#: - managed: the GPU types the managed API runs (catalog's managed section says why they
#:   could not be read from its page).
#: - NCCL proofs: the thresholds are the health scanner's BANDWIDTH_THRESHOLD for a 2-node
#:   all_gather_perf; nccl-tests' bus bandwidth is corrected to be comparable across
#:   collectives (nccl-tests doc/PERFORMANCE.md, "Bus bandwidth"), so the job holds
#:   all_reduce_perf to the same numbers.
#: - zones: zones.MACHINE_ZONES_SOURCE; prices: prices.CYCLENERD_PRICING unless the row
#:   names another source.
#: - topology: the families Google's "View VM topology" page lists (facts/topology.py).
#: - quota metrics: the names of Compute Engine v1's Quota.metric enum (cloud.google.com/
#:   java/docs/reference/google-cloud-compute/latest/com.google.cloud.compute.v1.Quota.Metric:
#:   A2_CPUS, NVIDIA_A100_GPUS, NVIDIA_A100_80GB_GPUS, NVIDIA_H100_GPUS, NVIDIA_L4_GPUS;
#:   NVIDIA_H100_MEGA_GPUS, NVIDIA_H200_GPUS, NVIDIA_B200_GPUS and NVIDIA_GB200_GPUS as
#:   `gcloud compute regions describe` lists them). Which families take a vCPU quota is the
#:   Cluster Toolkit's quota validator's (pkg/validators/quota.go at 1047080, addCPUMetrics:
#:   A3 and G2 take none; A2 takes A2_CPUS); A4 and A4X, like A3, only GPU quota.
MACHINE_FAMILIES: tuple[MachineFamily, ...] = (
    # A4X: 4 x GB200 with arm64 Grace CPUs, 2 Titanium gVNICs + 4 CX-7 MRDMA NICs on a RoCE
    # VPC of 4 subnets, Hyperdisk boot, MTU 8896 (gpu-network-bandwidth "A4X machine types";
    # Cluster Toolkit examples/machine-learning/a4x-highgpu-4g/a4xhigh-slurm-blueprint.yaml).
    MachineFamily(
        gpu_quota="NVIDIA_GB200_GPUS",
        machine_type="a4x-highgpu-4g", family="A4X", gpu="nvidia-gb200", gres="gb200", gpus=4,
        nvlink=True, system_nics=2, gpu_nics=4, networking="rdma", recommended_mtu=8896,
        boot_disk_type="hyperdisk-balanced", managed=True, arch="arm64", local_ssds=32,
        reservation_bound=True, host_fault_report=True,
        topology=(FABRIC_TREE, NVLINK_DOMAINS),
        price=f"{_NO_PRICE_SOURCE}: GB200 has no SKU in the Cloud Billing feed read "
              "(2026-07-07) and pricing.yml does not list A4X",
        nccl_proof=NcclProof("nvcr.io#nvidia/nemo:25.11",
                             _RECIPES.format("a4x/llama3_8b", "8gpus-fp8cs-seq8192-gbs128"),
                             160, _CHS + "a4x.yaml")),
    MachineFamily(
        gpu_quota="NVIDIA_B200_GPUS",
        machine_type="a4-highgpu-8g", family="A4", gpu="nvidia-b200", gres="b200", gpus=8,
        nvlink=True, system_nics=2, gpu_nics=8, networking="rdma", recommended_mtu=8896,
        boot_disk_type="hyperdisk-balanced", managed=True, local_ssds=32,
        reservation_bound=True, host_fault_report=True, topology=(FABRIC_TREE,),
        zones=zones("asia-northeast1:b asia-southeast1:b europe-north1:b europe-west4:b "
                    "us-central1:b us-east1:b us-east4:b us-south1:b us-west2:c us-west3:bc"),
        # A4 bills 8 slices of "A4 Nvidia B200 (1 gpu slice)" and nothing else: on demand
        # 8 x $16.11 (prices.A4_ON_DEMAND, the SKU of 2026-07-07), spot 8 x $4.9542
        # (prices.A4_SPOT). Google sells A4 through reservations, spot and flex-start, not on
        # demand: a reserved node is estimated at the on-demand SKU, as every reservation is.
        price=prices.MachinePrice(128.88, 39.6336, prices.A4_ON_DEMAND,
                                  spot_source=prices.A4_SPOT),
        nccl_proof=NcclProof(
            "nvcr.io#nvidia/nemo:25.11",
            _RECIPES.format("a4/qwen3_235b_a22b", "128gpus-bf16-seq4096-gbs4096"),
            250, _CHS + "a4.yaml"),
        recipe_software=RecipeSoftware(
            "nvcr.io#nvidia/nemo:25.09", "srun",
            _GR + "a4/llama3_70b/megatron-bridge-slurm/nemo2509/64gpus-fp8cs-seq8192-gbs2048/"
            "recipe/submit.slurm")),
    MachineFamily(
        gpu_quota="NVIDIA_H200_GPUS",
        machine_type="a3-ultragpu-8g", family="A3 Ultra", gpu="nvidia-h200-141gb", gres="h200",
        gpus=8, nvlink=True, system_nics=2, gpu_nics=8, networking="rdma",
        recommended_mtu=8896, boot_disk_type="hyperdisk-balanced", managed=True, local_ssds=32,
        reservation_bound=True, host_fault_report=True, topology=(FABRIC_TREE,),
        zones=zones("asia-south1:b asia-south2:c europe-west1:b europe-west4:a us-central1:b "
                    "us-east4:b us-east5:a us-south1:b us-west1:c"),
        # prices.GPU_LIST_PRICES, per H200 x 8 (on-demand, spot): us-central1 10.4365, 6.2607;
        # us-east4 10.4365, 5.6357; us-west1 10.4365, 6.2607; europe-west1 11.4934, 6.8944;
        # asia-south1 12.5245, 6.7805 (europe-west4 has no on-demand price: left out).
        price=prices.MachinePrice(83.492, 50.0856, prices.GPU_LIST_PRICES),
        regional_prices=tuple(
            (region, prices.MachinePrice(od, spot, prices.GPU_LIST_PRICES))
            for region, od, spot in (("us-east4", 83.492, 45.0856),
                                     ("us-west1", 83.492, 50.0856),
                                     ("europe-west1", 91.9472, 55.1552),
                                     ("asia-south1", 100.196, 54.244))),
        nccl_proof=NcclProof("nvcr.io#nvidia/pytorch:24.09-py3",
                             _CTK + "a3-ultragpu-8g/nccl-tests/import_pytorch_container.sh",
                             250, _CHS + "a3ultra.yaml"),
        recipe_software=RecipeSoftware(
            "nvcr.io#nvidia/nemo:25.11", "torchrun",
            _GR + "a3ultra/llama3_8b/megatron-bridge-slurm/nemo2511/16gpus-fp8cs-seq8192-gbs128/"
            "recipe/launch_script.sh")),
    MachineFamily(
        gpu_quota="NVIDIA_H100_MEGA_GPUS",
        machine_type="a3-megagpu-8g", family="A3 Mega", gpu="nvidia-h100-mega-80gb",
        gres="h100", gpus=8, nvlink=True, gpu_nics=8, networking="tcpxo",
        recommended_mtu=8244, managed=True, local_ssds=16, reservation_bound=True,
        topology=(FABRIC_TREE,),
        zones=zones("asia-east1:c asia-northeast1:b asia-southeast1:bc australia-southeast1:c "
                    "europe-north1:c europe-west1:bc europe-west3:c europe-west4:bc "
                    "us-central1:abc us-east4:abc us-east5:a us-west1:ab us-west4:a"),
        # The 2026-07-07 SKU feed (prices.A4_ON_DEMAND) has A3 Mega's GPU SKU only ("Nvidia
        # H100 80GB Plus GPU running in Americas", $10.3443 per GPU-hour), not the vCPUs,
        # memory and Local SSD a VM bills beside it: not a VM price.
        price="pricing.yml (prices.CYCLENERD_PRICING_A3_MEGA) prices A3 Mega only in the "
              "regions of its regional rows, not in us-central1, and the Cloud Billing feed "
              "read has its GPU SKU alone, not a whole-VM price",
        # prices.CYCLENERD_PRICING_A3_MEGA: a3-megagpu-8g hour, hour_spot, rounded.
        regional_prices=tuple(
            (region, prices.MachinePrice(hour, spot, prices.CYCLENERD_PRICING_A3_MEGA))
            for region, hour, spot in (
                ("us-east4", 92.9376, 28.1338), ("us-east5", 94.0666, 42.6086),
                ("us-west4", 104.5842, 27.6784), ("europe-west1", 102.1946, 48.6008),
                ("europe-west3", 109.6019, 63.7178), ("europe-west4", 118.2368, 56.0241),
                ("asia-northeast1", 119.2764, 33.5883),
                ("asia-southeast1", 119.9746, 71.3616),
                ("australia-southeast1", 116.1555, 45.6506))),
        nccl_proof=NcclProof("nvcr.io#nvidia/pytorch:24.04-py3",
                             _CTK + "a3-megagpu-8g/nccl-tests/import_pytorch_container.sh",
                             150, _CHS + "a3plus.yaml")),
    MachineFamily(
        gpu_quota="NVIDIA_H100_GPUS",
        machine_type="a3-highgpu-8g", family="A3 High", gpu="nvidia-h100-80gb", gres="h100",
        gpus=8, nvlink=True, gpu_nics=4, networking="tcpx", recommended_mtu=8244,
        local_ssds=16, reservation_bound=True, topology=(FABRIC_TREE,),
        zones=_A3_HIGH_8G_ZONES,
        price=prices.cyclenerd(88.49, 50.6095),
        nccl_proof=NcclProof("nvcr.io#nvidia/pytorch:23.10-py3",
                             _CTK + "a3-highgpu-8g/nccl-tests/import_pytorch_container.sh",
                             60, _CHS + "a3.yaml")),
    *(MachineFamily(
        gpu_quota="NVIDIA_H100_GPUS",
        machine_type=f"a3-highgpu-{n}g", family="A3 High", gpu="nvidia-h100-80gb",
        gres="h100", gpus=n, nvlink=True, local_ssds=2 * n,
        zones=tuple(sorted((*_A3_HIGH_8G_ZONES, "europe-west8-c"))),
        price=prices.cyclenerd(*price))
      for n, price in ((1, (11.0612, 6.3262)), (2, (22.1225, 12.6524)),
                       (4, (44.245, 25.3048)))),
    # A3 Edge: 8 x H100 on GPUDirect-TCPX like A3 High, 1 gVNIC + 4 GPU NICs (gpu-network-
    # bandwidth: "A3 Edge ... GPUDirect-TCPX"; SkyPilot's GCP provisioner gives
    # a3-edgegpu-8g and a3-highgpu-8g the same five VPCs).
    MachineFamily(
        gpu_quota="NVIDIA_H100_GPUS",
        machine_type="a3-edgegpu-8g", family="A3 Edge", gpu="nvidia-h100-80gb", gres="h100",
        gpus=8, nvlink=True, gpu_nics=4, networking="tcpx", recommended_mtu=8244,
        local_ssds=16,
        zones=zones("asia-northeast1:b asia-northeast3:ac asia-south1:c asia-southeast1:bc "
                    "europe-west2:b europe-west3:ac europe-west4:bc europe-west9:c "
                    "northamerica-northeast2:c us-central1:abc us-east4:abc us-east5:a "
                    "us-west1:ab us-west4:a"),
        price=f"{_NO_PRICE_SOURCE}: pricing.yml and the GPU list-price dataset do not list "
              "A3 Edge",
        # A3 Edge is A3 High's TCPX fabric; the health scanner has no check for it.
        nccl_proof=NcclProof("nvcr.io#nvidia/pytorch:23.10-py3",
                             _CTK + "a3-highgpu-8g/nccl-tests/import_pytorch_container.sh",
                             None, None)),
    *(MachineFamily(
        gpu_quota="NVIDIA_A100_80GB_GPUS", cpu_quota="A2_CPUS",
        machine_type=f"a2-ultragpu-{n}g", family="A2 Ultra", gpu="nvidia-a100-80gb",
        gres="a100", gpus=n, nvlink=True, local_ssds=n,
        zones=zones("asia-southeast1:c europe-west4:a us-central1:ac us-east4:c us-east5:ab"),
        price=prices.cyclenerd(*price))
      for n, price in ((1, (5.0688, 2.7595)), (2, (10.1376, 5.5191)),
                       (4, (20.2752, 11.0382)), (8, (40.5504, 22.0764)))),
    *(MachineFamily(
        gpu_quota="NVIDIA_A100_GPUS", cpu_quota="A2_CPUS",
        machine_type=f"a2-highgpu-{n}g", family="A2", gpu="nvidia-tesla-a100", gres="a100",
        gpus=n, nvlink=True,
        zones=zones("asia-northeast1:ac asia-northeast3:ab asia-southeast1:abc "
                    "europe-west4:ab me-west1:ac us-central1:abcf us-east1:b us-west1:b "
                    "us-west3:b us-west4:b"),
        price=prices.cyclenerd(*price))
      for n, price in ((1, (3.6734, 1.928)), (2, (7.3468, 3.856)), (4, (14.6935, 7.7121)),
                       (8, (29.3871, 15.4242)))),
    MachineFamily(
        gpu_quota="NVIDIA_A100_GPUS", cpu_quota="A2_CPUS",
        machine_type="a2-megagpu-16g", family="A2", gpu="nvidia-tesla-a100", gres="a100",
        gpus=16, nvlink=True,
        zones=zones("asia-southeast1:ac europe-west4:ab us-central1:abcf"),
        price=prices.cyclenerd(55.7395, 29.2557)),
    # G2: 1 to 8 L4 by vCPUs; not in the zone source's copy, so not offered.
    *(MachineFamily(
        gpu_quota="NVIDIA_L4_GPUS",
        machine_type=f"g2-standard-{vcpus}", family="G2", gpu="nvidia-l4", gres="l4", gpus=n,
        nvlink=False, price=prices.cyclenerd(*price))
      for vcpus, n, price in ((4, 1, (0.7068, 0.3973)), (8, 1, (0.8536, 0.4799)),
                              (12, 1, (1.0004, 0.5624)), (16, 1, (1.1472, 0.6449)),
                              (24, 2, (2.0008, 1.1248)), (32, 1, (1.7344, 0.9751)),
                              (48, 4, (4.0017, 2.2496)), (96, 8, (8.0033, 4.4993)))),
)

#: The rows by machine type.
GPU_MACHINES: dict[str, MachineFamily] = {f.machine_type: f for f in MACHINE_FAMILIES}

#: Machine types without GPU networks (A2, G2, A3 High below 8 GPUs) and clusters built with
#: `gpu_networks: none`: NCCL over the VM's own NIC, with no threshold. The image is
#: clusterprint's choice: the toolkit's newest nccl-tests image (CUDA 12.6: A100, L4, H100).
NCCL_PROOF_WITHOUT_FABRIC = NcclProof(
    "nvcr.io#nvidia/pytorch:24.09-py3",
    _CTK + "a3-ultragpu-8g/nccl-tests/import_pytorch_container.sh", None, None)


def gpu_family(machine_type: str) -> MachineFamily | None:
    """The GPU family of a machine type, or None for CPU-only machines."""
    return GPU_MACHINES.get(machine_type)


def resume_timeout_s(machine_type: str) -> int:
    """Slurm's ResumeTimeout for an elastic node of ``machine_type`` (MachineFamily.
    resume_timeout_s; CPU_RESUME_TIMEOUT_S for CPU machines)."""
    family = gpu_family(machine_type)
    return family.resume_timeout_s if family else CPU_RESUME_TIMEOUT_S


def gres_type(machine_type: str) -> str | None:
    """Slurm's GRES type of a machine type's GPUs (``h100``), or None for CPU machines."""
    family = gpu_family(machine_type)
    return family.gres if family else None


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
    return min(recommendations, default=catalog.MTU_DEFAULT)


#: Boot disk type for machine types outside GPU_MACHINES.
DEFAULT_BOOT_DISK_TYPE = "pd-balanced"


def boot_disk_type(machine_type: str) -> str:
    """Default boot disk type: A3 Ultra and A4 take only Hyperdisk."""
    family = gpu_family(machine_type)
    return family.boot_disk_type if family else DEFAULT_BOOT_DISK_TYPE


def bundled_local_ssds(machine_type: str) -> int:
    """The local SSD disks a VM of ``machine_type`` comes with (0 for most CPU types)."""
    family = gpu_family(machine_type)
    return family.local_ssds if family else 0


#: Machine types the reservation-bound provisioning model is documented for.
RESERVATION_BOUND_MACHINES = frozenset(f.machine_type for f in MACHINE_FAMILIES
                                       if f.reservation_bound)
#: Machine types whose host Compute Engine takes a fault report for.
HOST_FAULT_REPORT_MACHINES = frozenset(f.machine_type for f in MACHINE_FAMILIES
                                       if f.host_fault_report)


def nccl_proof(machine_type: str, networking: GpuNetworking) -> NcclProof:
    """How the NCCL job proves the fabric a node of ``machine_type`` really gets."""
    family = gpu_family(machine_type)
    own = family.nccl_proof if family and networking != "none" else None
    return own or NCCL_PROOF_WITHOUT_FABRIC


def recipe_software(machine_type: str) -> RecipeSoftware:
    """What a recipe runs in, and how it starts its ranks, on a node of ``machine_type``."""
    family = gpu_family(machine_type)
    return (family.recipe_software if family else None) or RECIPE_SOFTWARE_DEFAULT


def managed_machine_types() -> tuple[str, ...]:
    """Compute node types the managed API runs: its GPU families by name, then N2.

    Read from GPU_MACHINES at call time, so a GPU family catalogued with ``managed=True``
    is allowed without a second list to keep in step.
    """
    return (*sorted(m for m, f in GPU_MACHINES.items() if f.managed),
            *catalog.MANAGED_N2_MACHINES)


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


#: Shared-core shapes: the name has no vCPU count (e2-micro, f1-micro, g1-small).
SHARED_CORE_SHAPES = frozenset({"micro", "small", "medium"})
#: What may follow a predefined type's vCPU count: C3's and C4's local SSD and bare metal
#: variants (c3-standard-88-lssd, c3-highcpu-192-metal), Z3's SSD sizes (z3-highmem-88-
#: highlssd; Compute docs general-purpose and storage-optimized machine pages).
CPU_TYPE_SUFFIXES = frozenset({"lssd", "metal", "highlssd", "standardlssd"})
_CUSTOM = re.compile(r"^[0-9]+-[0-9]+(?:-ext)?$")


def cpu_machine_known(machine_type: str) -> bool:
    """True when the type is a CPU machine of a series and shape the catalog lists, in
    that shape's form: ``SERIES-SHAPE-VCPUS[-SUFFIX]``, ``SERIES-custom-VCPUS-MIB[-ext]``,
    or a shared-core ``SERIES-SHAPE``. ``custom-CPUS-MEM`` without a series is an N1 custom
    machine type. The vCPU count itself is not checked against the series' sizes (no
    stored source lists them all): an unknown one fails at `pulumi up`, and preflight
    asks the zone for it first."""
    if machine_type.startswith("custom-"):
        return bool(_CUSTOM.match(machine_type.removeprefix("custom-")))
    shape = cpu_shape(machine_type)
    if shape is None:
        return False
    rest = machine_type.split("-", 2)[2] if machine_type.count("-") >= 2 else ""
    if shape in SHARED_CORE_SHAPES:
        return not rest
    if shape == "custom":
        return bool(_CUSTOM.match(rest))
    count, _, suffix = rest.partition("-")
    return count.isdigit() and int(count) > 0 and (not suffix or suffix in CPU_TYPE_SUFFIXES)


#: CPU series whose vCPUs count against the regional quota CPUS, not a SERIES_CPUS one of
#: their own (Cluster Toolkit pkg/validators/quota.go at 1047080, addCPUMetrics; the Quota
#: .metric enum, as cited at MACHINE_FAMILIES, lists N2_CPUS, C2_CPUS, C3_CPUS and the
#: other SERIES_CPUS names).
SHARED_CPU_QUOTA_SERIES = frozenset({"n1", "e2", "f1", "g1"})
#: Spot and flex-start VMs count against the preemptible quota where the region grants
#: one (its limit above 0), else against the regular one: "Spot VMs ... consume preemptible
#: quota if available; otherwise standard quota" (cloud.google.com/compute/resource-usage,
#: "Preemptible quotas", vCPUs and GPUs alike). Flex-start VMs likewise, as GKE's flex-start
#: page says of its nodes (kubernetes-engine/docs/concepts/dws: preemptible quota); no stored
#: source says it of Compute Engine's own, and the fallback to the regular quota keeps a
#: wrong guess from refusing a project that has it. One preemptible vCPU quota for all series.
PREEMPTIBLE_CPU_QUOTA = "PREEMPTIBLE_CPUS"
#: The project's quota on GPUs of every kind in every region together, beside each region's
#: per-model one: a new project's is 0, and every GPU VM outside a reservation counts against
#: it, spot ones too (Cluster Toolkit's quota validator, pkg/validators/quota.go at 1047080,
#: addGPUMetrics; it is read from ``projects.get``, not from a region).
PROJECT_GPU_QUOTA = "GPUS_ALL_REGIONS"
#: The project's quota on vCPUs in every region together, beside each region's per-series
#: ones; read from ``projects.get`` like PROJECT_GPU_QUOTA. Its name is the Compute v1 Quota
#: .metric enum's (cloud.google.com/dotnet/docs/reference/Google.Cloud.Compute.V1/latest/
#: Google.Cloud.Compute.V1.Quota.Types.Metric: CpusAllRegions, on the wire CPUS_ALL_REGIONS).
#: It counts the vCPUs the regional vCPU metrics count, spot ones too, so a family the GPU
#: quota alone limits counts in neither. (The Cluster Toolkit's validator, pkg/validators/
#: quota.go at 48eb8d0, reads only GPUS_ALL_REGIONS of the project.)
PROJECT_CPU_QUOTA = "CPUS_ALL_REGIONS"
#: The quotas of the project rather than of a region.
PROJECT_QUOTAS = frozenset({PROJECT_GPU_QUOTA, PROJECT_CPU_QUOTA})


def quota_metrics(machine_type: str) -> tuple[str | None, str | None]:
    """The regional vCPU and GPU quota metrics a regular VM of ``machine_type`` counts
    against (None where it takes none)."""
    family = gpu_family(machine_type)
    if family is not None:
        return family.cpu_quota, family.gpu_quota
    series = "n1" if machine_type.startswith("custom-") else machine_type.split("-")[0]
    return ("CPUS" if series in SHARED_CPU_QUOTA_SERIES else f"{series.upper()}_CPUS"), None


def preemptible_quota(metric: str) -> str:
    """The preemptible quota a spot or flex-start VM uses first instead of ``metric``."""
    return PREEMPTIBLE_CPU_QUOTA if metric.endswith("CPUS") else f"PREEMPTIBLE_{metric}"


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


def machine_zones(machine_type: str) -> tuple[str, ...]:
    """The zones where ``machine_type`` exists, or () where the catalog does not know them:
    a GPU type's from its row, a CPU type's from its series."""
    family = gpu_family(machine_type)
    if family:
        return family.zones
    return CPU_SERIES_ZONES.get(machine_type.split("-")[0], ())


#: Every machine type's price on record: the GPU rows' and the CPU types'.
MACHINE_PRICES: dict[str, prices.MachinePrice] = {
    **{f.machine_type: f.price for f in MACHINE_FAMILIES
       if isinstance(f.price, prices.MachinePrice)},
    **prices.CPU_MACHINE_PRICES,
}
#: GPU machine types that no stored source prices in PRICE_REGION, with the reason.
UNPRICED_MACHINES: dict[str, str] = {
    f.machine_type: f.price for f in MACHINE_FAMILIES if isinstance(f.price, str)}


def machine_price(machine_type: str, region: str) -> tuple[prices.MachinePrice, str] | None:
    """The price a node of ``machine_type`` in ``region`` is estimated at, and the region that
    price is in: its row for ``region`` where there is one, else its PRICE_REGION price (None
    where neither exists)."""
    family = GPU_MACHINES.get(machine_type)
    regional = dict(family.regional_prices) if family else {}
    if region in regional:
        return regional[region], region
    price = MACHINE_PRICES.get(machine_type)
    return (price, prices.PRICE_REGION) if price else None
