"""What the scripts of GPU nodes (and, for pyxis, login nodes) render in from gpu_software.

The node scripts decide at boot what an image already has; everything they install or write
(URLs, versions, file texts) is fixed here at render time, from one table each.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.facts import gpu_software, machines

#: Debian's architecture name and NVIDIA's CUDA repository folder per CPU architecture.
DEB_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
CUDA_ARCH = {"x86_64": "x86_64", "arm64": "sbsa"}


@dataclass(frozen=True)
class Download:
    """A file the boot fetches: its name, where it comes from, and who publishes it."""

    name: str
    url: str


@dataclass(frozen=True)
class Pyxis:
    """pyxis's source and build needs, for GPU and login nodes alike."""

    version: str
    source: Download
    plugin: str
    build_packages: tuple[str, ...]
    headers: str


@dataclass(frozen=True)
class GpuNode:
    """The software every GPU node of a nodeset gets, whatever its fabric."""

    local_ssds: int
    local_ssd_mount: str
    cuda_arch: str
    cuda_repository: str
    cuda_keyring: Download
    cuda_keyring_package: str
    dcgm_package: str
    dcgm_cuda_majors: tuple[int, ...]
    enroot_version: str
    enroot_debs: tuple[Download, ...]
    enroot_conf: str
    limits: str
    apparmor_sysctl: str
    held_patterns: tuple[str, ...]
    pyxis: Pyxis


def pyxis() -> Pyxis:
    """pyxis as gpu_software pins it."""
    version = gpu_software.PYXIS_VERSION
    return Pyxis(version=version,
                 source=Download(f"pyxis-{version}.tar.gz",
                                 gpu_software.PYXIS_SOURCE.format(version=version)),
                 plugin=gpu_software.PYXIS_PLUGIN,
                 build_packages=gpu_software.PYXIS_BUILD_PACKAGES,
                 headers=gpu_software.PYXIS_HEADERS)


def gpu_node(machine_type: str) -> GpuNode:
    """The GPU node software of a nodeset of ``machine_type`` (a GPU machine type)."""
    family = machines.gpu_family(machine_type)
    arch = family.arch if family else "x86_64"
    version = gpu_software.ENROOT_VERSION
    releases = gpu_software.ENROOT_RELEASES.format(version=version)
    debs = tuple(Download(name, f"{releases}/{name}") for name in (
        deb.format(version=version, arch=DEB_ARCH[arch]) for deb in gpu_software.ENROOT_DEBS))
    repository = (gpu_software.CUDA_REPOSITORY.replace("{cuda_arch}", CUDA_ARCH[arch])
                  .replace("{distro}", "$distro"))
    limits = "".join(f"* - {item} {value}\n" for item, value in gpu_software.JOB_LIMITS)
    return GpuNode(
        local_ssds=machines.bundled_local_ssds(machine_type),
        local_ssd_mount=gpu_software.LOCAL_SSD_MOUNT,
        cuda_arch=CUDA_ARCH[arch],
        cuda_repository=repository,
        cuda_keyring=Download(gpu_software.CUDA_KEYRING_DEB,
                              f"{repository}/{gpu_software.CUDA_KEYRING_DEB}"),
        cuda_keyring_package=gpu_software.CUDA_KEYRING_PACKAGE,
        dcgm_package=gpu_software.DCGM_PACKAGE.replace("{cuda_major}", "$CUDA_MAJOR"),
        dcgm_cuda_majors=gpu_software.DCGM_CUDA_MAJORS,
        enroot_version=version,
        enroot_debs=debs,
        enroot_conf=gpu_software.enroot_conf(),
        limits=limits,
        apparmor_sysctl=gpu_software.APPARMOR_USERNS_SYSCTL,
        held_patterns=gpu_software.HELD_PACKAGE_PATTERNS,
        pyxis=pyxis())
