"""Software facts of the GPU families: packages, images and thresholds, each with its source.

Pure data (no pulumi): the node scripts, the proof jobs and the tests read it, so a new
version or threshold is one line here. Each part of the GPU node work keeps its own
section below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The kinds of GPU fabric a machine family's GPU NICs carry NCCL traffic over (FABRIC
#: below holds each one's software; machines.MachineFamily.networking names its kind).
GpuNetworking = Literal["none", "tcpx", "tcpxo", "rdma"]

# --- nccl proof job ---
# What `jobs/nccl-allreduce-<partition>.sbatch` runs: NVIDIA's nccl-tests built inside an
# NGC container (as the Cluster Toolkit's `examples/machine-learning/*/nccl-tests/` and
# Google's cluster-health-scanner `deploy/slurm/build-nccl-tests-*.sh` build it), run
# through pyxis on two nodes, its `# Avg bus bandwidth` held to the family's threshold. Each
# machine type's NcclProof is on its row of machines.MACHINE_FAMILIES.

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


@dataclass(frozen=True)
class FabricMounts:
    """What a container needs from the host to reach the fabric's NCCL plugin."""

    #: Host folders mounted at the same path; `${SLURM_JOB_ID}` expands in the job.
    mounts: tuple[str, ...]
    #: Put first on the container's LD_LIBRARY_PATH, as the toolkit's run scripts do.
    library_path: str | None


#: Per networking kind, from the toolkit's run-nccl-tests.sh of each family
#: (a3-megagpu-8g: /var/lib/tcpxo/lib64; a3-ultragpu-8g: /usr/local/gib). A3 High's
#: GPUDirect-TCPX is not installed (see TCPX below), so its job mounts nothing and measures
#: NCCL over TCP sockets: held to the family's threshold, it fails and says so.
FABRIC_MOUNTS: dict[GpuNetworking, FabricMounts] = {
    "tcpx": FabricMounts((), None),
    "tcpxo": FabricMounts(("/var/lib/tcpxo/lib64",), "/var/lib/tcpxo/lib64"),
    "rdma": FabricMounts(("/usr/local/gib",), "/usr/local/gib/lib64"),
    "none": FabricMounts((), None),
}

#: The job environment every GPU node carries (the fabric part writes it); the job mounts
#: its folder into the container and sources it there.
NCCL_ENV_FILE = "/etc/clusterprint/nccl-env.sh"


# --- fabric ---
# What makes each family's GPU NICs carry NCCL traffic (scripts/gpu_fabric.sh.j2) and the
# job environment /etc/clusterprint/nccl-env.sh, keyed by machines.MachineFamily.networking.

#: How a boot script tells that an image already carries a part: a command on PATH, a
#: kernel module built for the running kernel (modinfo), or an installed Debian package.
PresenceKind = Literal["command", "module", "package"]


@dataclass(frozen=True)
class AptSource:
    """An apt repository: a sources.list.d file NAME.list and the key that signs it.

    ``line`` is what follows ``deb [options]``; ``{os_id}`` (ubuntu), ``{codename}``
    (noble), ``{distro}`` (ubuntu2404) and ``{cuda_arch}`` (x86_64 or sbsa) are filled in
    on the VM from /etc/os-release and the CPU architecture.
    ``ar+https`` lines need apt-transport-artifact-registry (AR_TRANSPORT) first.
    With ``keyring``, ``key_url`` is a keyring package (.deb) that brings both the key and
    the sources.list.d entry: every part using the repository shares that one entry, since
    apt refuses one repository listed twice with different keys.
    """

    name: str
    key_url: str
    line: str
    keyring: bool = False


@dataclass(frozen=True)
class AptPart:
    """One part of a family's software, installed from ``source`` unless the image has it."""

    #: what the journal and failures call it
    what: str
    present: tuple[PresenceKind, str]
    #: ``package`` or ``package=version`` (pinned versions are also held)
    packages: tuple[str, ...]
    #: the repository added for it; None: the image's own apt sources (the Ubuntu archive)
    source: AptSource | None


@dataclass(frozen=True)
class DkmsModule:
    """A kernel module shipped as DKMS source in a .deb, built for the running kernel.

    The package's source does not build on kernels from 6.13 on (MODULE_IMPORT_NS takes a
    string there), so the boot extracts it, patches the call and builds it with dkms.
    """

    module: str
    package: str
    version: str
    source: AptSource


@dataclass(frozen=True)
class InstallerImage:
    """A container that installs the family's NCCL plugin into a host folder."""

    image: str
    #: the host folder the plugin lands in, and the file that shows it is there
    target: str
    marker: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Rxdm:
    """The receive-datapath manager container a multi-node job needs on every node."""

    image: str
    args: tuple[str, ...]
    #: the log line that says it is ready, and how long the prolog waits for it (seconds)
    ready_line: str
    budget_s: int


@dataclass(frozen=True)
class UdevRule:
    """A udev rule file that binds the PCI devices of one vendor and device id; the boot
    writes ``text`` and triggers udev on the same ids."""

    path: str
    #: the PCI vendor and device ids, as sysfs writes them (``0x1ae0``)
    vendor: str
    device: str
    #: what the rule does with each matching device, after its match and ``TAG+="systemd"``
    actions: tuple[str, ...]

    @property
    def text(self) -> str:
        """The rule file: the match on the ids, then one action per continued line."""
        match = (f'ACTION=="add", SUBSYSTEM=="pci", ATTR{{vendor}}=="{self.vendor}", '
                 f'ATTR{{device}}=="{self.device}", TAG+="systemd"')
        return ", \\\n    ".join((match, *self.actions)) + "\n"


@dataclass(frozen=True)
class FabricSoftware:
    """What makes a family's GPU NICs carry NCCL traffic, and the job environment for it."""

    networking: GpuNetworking
    title: str
    apt: tuple[AptPart, ...]
    dmabuf: DkmsModule | None
    #: the udev rule of A3 Mega's /dev/aperture_devices
    udev_rule: UdevRule | None
    installer: InstallerImage | None
    rxdm: Rxdm | None
    #: the plugin's own environment script, sourced first by /etc/clusterprint/nccl-env.sh
    env_script: str
    #: lines added after it; ``{socket}`` and ``{gpu}`` are the comma-separated interface
    #: names found at boot (system gVNICs, GPU NICs)
    env: tuple[str, ...]
    #: what the boot warns about at every boot: a part clusterprint cannot install
    warning: str | None = None


#: Google's apt repositories (Artifact Registry transport, gIB, TCPXO), from Cluster Toolkit
#: v1.95.0 examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml
#: (install_nccl_gib.yml) and a3-megagpu-8g/a3mega-slurm-blueprint.yaml (install_dmabuf.yml).
AR_TRANSPORT = AptSource(
    "apt-transport-artifact-registry", "https://packages.cloud.google.com/apt/doc/apt-key.gpg",
    "https://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main")
AR_TRANSPORT_PACKAGE = "apt-transport-artifact-registry"
GIB_APT = AptSource("gpudirect-gib", "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
                    "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main")
TCPXO_APT = AptSource("gpudirect-tcpxo", "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
                      "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main")
#: NVIDIA's CUDA apt repository, which carries DCGM, libnccl2 and nvidia-container-toolkit;
#: {distro} is e.g. ubuntu2404, {cuda_arch} x86_64 or sbsa (arm64). Its signing key and
#: sources.list.d entry come in NVIDIA's keyring package (slurm-gcp nvidia_repository role,
#: the toolkit's install_cuda_and_dcgm.yml, docs.nvidia.com/datacenter/dcgm installation).
CUDA_REPOSITORY = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{cuda_arch}"
CUDA_KEYRING_PACKAGE = "cuda-keyring"
CUDA_KEYRING_DEB = "cuda-keyring_1.1-1_all.deb"
CUDA_APT = AptSource("cuda", f"{CUDA_REPOSITORY}/{CUDA_KEYRING_DEB}", f"{CUDA_REPOSITORY}/ /",
                     keyring=True)
#: Docker's own repository, what the toolkit's install_docker.yml gets through get.docker.com.
DOCKER_APT = AptSource("docker", "https://download.docker.com/linux/{os_id}/gpg",
                       "https://download.docker.com/linux/{os_id} {codename} stable")

DOCKER = AptPart("Docker", ("command", "docker"),
                 ("docker-ce", "docker-ce-cli", "containerd.io"), DOCKER_APT)
#: ``docker run --gpus`` (RxDM, the plugin installers) needs NVIDIA's runtime hook.
CONTAINER_TOOLKIT = AptPart("NVIDIA Container Toolkit",
                            ("command", "nvidia-container-runtime-hook"),
                            ("nvidia-container-toolkit",), CUDA_APT)

# A3 Mega: GPUDirect-TCPXO. Sources: Cluster Toolkit v1.95.0 a3mega-slurm-blueprint.yaml
# (install_dmabuf.yml: dmabuf-import-helper 1.1 patched for kernel 6.17; aperture_devices.yml:
# the udev rule) and nccl-tests/run-nccl-tests.sh (the environment); slurm-gcp 6.12
# tools/prologs-epilogs/receive-data-path-manager-mega (images, RxDM arguments, the ready
# line, 60 tries 2 s apart).
TCPXO = FabricSoftware(
    networking="tcpxo",
    title="GPUDirect-TCPXO",
    apt=(DOCKER, CONTAINER_TOOLKIT),
    dmabuf=DkmsModule("import-helper", "dmabuf-import-helper", "1.1", TCPXO_APT),
    udev_rule=UdevRule(
        "/etc/udev/rules.d/00-a3-megagpu.rules", vendor="0x1ae0", device="0x0084",
        actions=('RUN+="/usr/bin/mkdir --mode=0755 -p /dev/aperture_devices"',
                 'RUN+="/usr/bin/systemd-mount --type=none --options=bind --collect '
                 '%S/%p /dev/aperture_devices/%k"',
                 'RUN+="/usr/bin/bash -c \'/usr/bin/chmod 0666 '
                 '/dev/aperture_devices/%k/resource*\'"')),
    installer=InstallerImage(
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17",
        "/var/lib/tcpxo/lib64", "nccl-env-profile.sh", ("install", "--install-nccl")),
    rxdm=Rxdm("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23",
              ("--num_hops=2", "--num_nics=8", "--uid=", "--alsologtostderr"),
              "Buffer manager initialization complete", 120),
    env_script='NCCL_LIB_DIR=/var/lib/tcpxo/lib64 source /var/lib/tcpxo/lib64/nccl-env-profile.sh',
    env=("export NCCL_FASTRAK_CTRL_DEV={socket}",
         "export NCCL_FASTRAK_IFNAME={gpu}",
         "export NCCL_SOCKET_IFNAME={socket}",
         "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices",
         'export LD_LIBRARY_PATH="/var/lib/tcpxo/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'),
)

# A3 Ultra, A4, A4X: RDMA over RoCE with Google's gIB NCCL plugin. Sources: Cluster Toolkit
# v1.95.0 a3ultra-slurm-blueprint.yaml and a4high-slurm-blueprint.yaml (nccl_gib_version
# 1.1.0, libnccl_version 2.27.5-1+cuda12.9, ibverbs-utils, /etc/profile.d/nccl-gib.sh) and
# a3-ultragpu-8g/nccl-tests/run-nccl-tests.sh (NCCL_NET=gIB, the two gVNICs as sockets).
LIBNCCL_VERSION = "2.27.5-1+cuda12.9"
NCCL_GIB_VERSION = "1.1.0"
RDMA = FabricSoftware(
    networking="rdma",
    title="RDMA (gIB)",
    apt=(AptPart("NCCL", ("package", "libnccl2"),
                 (f"libnccl2={LIBNCCL_VERSION}", f"libnccl-dev={LIBNCCL_VERSION}"), CUDA_APT),
         AptPart("the gIB NCCL plugin", ("package", "nccl-gib"),
                 (f"nccl-gib={NCCL_GIB_VERSION}",), GIB_APT),
         AptPart("rdma-core tools", ("command", "ibv_devinfo"),
                 ("ibverbs-utils", "rdma-core"), None)),
    dmabuf=None,
    udev_rule=None,
    installer=None,
    rxdm=None,
    env_script="source /usr/local/gib/scripts/set_nccl_env.sh",
    env=("export NCCL_NET=gIB",
         "export NCCL_SOCKET_IFNAME={socket}",
         'export LD_LIBRARY_PATH="/usr/local/gib/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'),
)

# A3 High and A3 Edge: GPUDirect-TCPX. The Cluster Toolkit's a3high-slurm-blueprint.yaml
# (v1.95.0) builds its image on Canonical's TCPX kernel (linux-gcp-tcpx), from a private
# PPA it logs into with credentials given to A3 High customers, and slurm-gcp's
# receive-data-path-manager runs RxDM v2 only on that kernel. Neither can come from a public
# repository, so these nodes get no GPUDirect part: their NCCL uses TCP sockets on the
# system gVNIC, as the toolkit's run-nccl-tests.sh does for one-node jobs, and the boot
# says so.
TCPX = FabricSoftware(
    networking="tcpx",
    title="GPUDirect-TCPX",
    apt=(), dmabuf=None, udev_rule=None, installer=None, rxdm=None,
    env_script="unset NCCL_NET",
    env=("export NCCL_SOCKET_IFNAME={socket}",),
    warning="GPUDirect-TCPX needs Canonical's TCPX kernel (linux-gcp-tcpx, from a private PPA) "
            "and its receive-datapath manager, which clusterprint does not install: NCCL on "
            "this node uses TCP sockets (NCCL_SOCKET_IFNAME); boot an image built as the "
            "Cluster Toolkit's a3high blueprint builds it for GPUDirect-TCPX",
)

#: The fabric software by machines.MachineFamily.networking.
FABRIC: dict[GpuNetworking, FabricSoftware] = {f.networking: f for f in (TCPXO, TCPX, RDMA)}
# --- node software ---
# What every GPU node gets whatever its fabric: DCGM (the Ops Agent's GPU metrics read it:
# clusterprint/facts/ops_agent.py), enroot and pyxis, pinned NVIDIA and kernel packages.
# Sources: Cluster Toolkit v1.95
# examples/machine-learning/a4-highgpu-8g/a4high-slurm-blueprint.yaml (the image's
# install_cuda_and_dcgm.yml, hold-nvidia-packages.yml, enable_dcgm.yml, fix_enroot_env.sh,
# enroot.conf, 99-unlimited.conf, 20auto-upgrades); slurm-gcp 6.13 ansible/roles (pyxis,
# nvidia_repository, group_vars/os_ubuntu.yml).
#: DCGM 4 comes per CUDA major of the driver (``nvidia-smi``'s "CUDA Version"): the toolkit's
#: R580 images (CUDA 13) install datacenter-gpu-manager-4-cuda13; R570 and older drivers
#: report CUDA 12. NVIDIA's instructions install it with --install-recommends, which brings
#: datacenter-gpu-manager-4-proprietary (the profiling module the DCGM metrics need).
DCGM_PACKAGE = "datacenter-gpu-manager-4-cuda{cuda_major}"
DCGM_CUDA_MAJORS = (12, 13)

#: Packages held at their installed version, so that no apt run (unattended or a user's)
#: moves the driver's user space away from its kernel module ("Driver/library version
#: mismatch") or the kernel away from its DKMS and Lustre modules. NVIDIA: the toolkit's
#: hold-nvidia-packages.yml and install_cuda_and_dcgm.yml; kernel: slurm-gcp
#: group_vars/os_ubuntu.yml kernel_packages (its allow_kernel_upgrades: false).
HELD_PACKAGE_PATTERNS = (
    "libnvidia-cfg1-*-server", "libnvidia-compute-*-server", "libnvidia-nscq-*",
    "nvidia-compute-utils-*-server", "nvidia-fabricmanager-*", "nvidia-utils-*-server",
    "nvidia-imex-*", "datacenter-gpu-manager-4-*",
    "linux-modules-nvidia-*-server-open-gcp", "linux-image-gcp", "linux-headers-gcp",
    "linux-gcp", "linux-image-[0-9]*", "linux-modules-[0-9]*", "linux-headers-[0-9]*",
)

#: enroot, NVIDIA's unprivileged container runtime that pyxis drives: the release .debs
#: (github.com/NVIDIA/enroot doc/installation.md, "Standard flavor"; +caps lets users import
#: images). slurm-gcp builds an untagged commit instead; the release packages are NVIDIA's
#: documented way.
ENROOT_VERSION = "4.1.2"
ENROOT_RELEASES = "https://github.com/NVIDIA/enroot/releases/download/v{version}"
ENROOT_DEBS = ("enroot_{version}-1_{arch}.deb", "enroot+caps_{version}-1_{arch}.deb")

#: pyxis, the SPANK plugin behind ``srun --container-image``: built on each VM from its
#: release source against the installed Slurm's spank.h, because Slurm refuses
#: a plugin built for another release (pyxis README); `make install` puts it here
#: (slurm-gcp ansible/roles/pyxis builds v0.19.0 the same way; v0.24.0 is the latest tag).
PYXIS_VERSION = "0.24.0"
PYXIS_SOURCE = "https://github.com/NVIDIA/pyxis/archive/refs/tags/v{version}.tar.gz"
PYXIS_PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"
#: What building pyxis needs: a compiler and make (Ubuntu packages), and the spank.h of the
#: Slurm it is built against, which the image's Slurm build installs (--prefix=/usr).
PYXIS_BUILD_PACKAGES = ("gcc", "make")
PYXIS_HEADERS = "/usr/include/slurm/spank.h"


def plugstack_conf() -> str:
    """The plugstack.conf of a cluster with GPU nodes: pyxis, ``optional`` because configless
    slurmd serves the controller's file to every node and CPU nodes do not carry the plugin."""
    return ("# plugstack.conf: rendered by clusterprint; do not edit.\n"
            "# pyxis adds srun --container-image; only GPU and login nodes carry it.\n"
            f"optional {PYXIS_PLUGIN}\n")


#: Where enroot keeps what it unpacks and pulls: the local SSD, per user (the toolkit's
#: enroot.conf in its A3 Ultra and A4 blueprints).
LOCAL_SSD_MOUNT = "/mnt/localssd"
ENROOT_PATHS = (("ENROOT_RUNTIME_PATH", "enroot/runtime"), ("ENROOT_CACHE_PATH", "enroot/cache"),
                ("ENROOT_DATA_PATH", "enroot/data"), ("ENROOT_TEMP_PATH", "enroot"))


def enroot_conf() -> str:
    """/etc/enroot/enroot.conf: enroot's caches and container roots on the local SSD."""
    lines = [f"{key} {LOCAL_SSD_MOUNT}/${{UID}}/{path}" for key, path in ENROOT_PATHS]
    return "\n".join(["# enroot.conf: rendered by clusterprint; do not edit.",
                      "ENROOT_CONFIG_PATH ${HOME}/.enroot", *lines]) + "\n"


#: Ubuntu 24.04 forbids unprivileged user namespaces to unconfined programs, which enroot
#: needs (the toolkit's fix_enroot_env.sh writes 0 to the same key).
APPARMOR_USERNS_SYSCTL = "kernel.apparmor_restrict_unprivileged_userns"

#: Limits for jobs: NCCL and GPUDirect pin memory, and systemd's default locked-memory limit
#: is 8 MiB (the toolkit's 99-unlimited.conf "duplicates the ulimits of the HPC VM Image").
JOB_LIMITS = (("memlock", "unlimited"), ("nofile", "1048576"))

# --- recipes ---
# What `recipes/<name>.sbatch` runs per machine family: the NeMo image the public Slurm
# recipe of the family pins, and how it starts the ranks. Megatron-Bridge runs inside it
# from the image's own /opt/Megatron-Bridge; NeMo-RL runs from its own image. A family's
# RecipeSoftware is on its row of machines.MACHINE_FAMILIES.

RecipeLaunchForm = Literal["torchrun", "srun"]


@dataclass(frozen=True)
class RecipeSoftware:
    """One machine type's training container and launch form, with their source."""

    image: str
    #: torchrun: one task per node starting one rank per GPU (gpu-recipes A3 Ultra);
    #: srun: one task per GPU, ranks from Slurm (gpu-recipes A4, with PMIx; pmi2 here, since
    #: Debian's and Ubuntu's Slurm lack the PMIx plugin library).
    launch: RecipeLaunchForm
    source: str


#: Families with no public Slurm recipe (A3 Mega, A3 High, A2, G2, A4X): clusterprint's
#: choice, the newest pinned NeMo image (nemo2511) launched as on A3 Ultra.
RECIPE_SOFTWARE_DEFAULT = RecipeSoftware(
    "nvcr.io#nvidia/nemo:25.11", "torchrun",
    "clusterprint's choice: AI-Hypercomputer/gpu-recipes training/a3ultra/")

#: NeMo-RL's release image (docs/guides: nvcr.io/nvidia/nemo-rl:v0.7.0); its code is in
#: /opt/nemo-rl, where ray.sub's COMMAND runs `uv run examples/run_grpo.py`.
NEMO_RL_IMAGE = "nvcr.io#nvidia/nemo-rl:v0.7.0"
NEMO_RL_DIR = "/opt/nemo-rl"
MEGATRON_BRIDGE_DIR = "/opt/Megatron-Bridge"
