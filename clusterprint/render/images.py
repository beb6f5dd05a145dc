"""The node images a blueprint needs: their install scripts, content names and boot paths.

There is one image for the nodes without GPUs (controller, login, CPU nodesets) and one per
kind of GPU node (fabric and CPU architecture). An image's install script holds only what
does not depend on a cluster: the dated base image, the parts (clusterprint/render/
node_software.py) with their pinned versions, Slurm's pinned commit. Its name is
``clusterprint-<kind>-<digest>``, the digest of that script: clusters that need the same
software share an image, and any change of content is a new image (a rollout), never an
image changed under running nodes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache

from clusterprint.blueprint.model import Blueprint, Image, Nodeset
from clusterprint.facts import gpu_software, images, machines, ops_agent, slurm
from clusterprint.facts.images import BaseImage
from clusterprint.render import gpu_fabric, gpu_node, node_software
from clusterprint.render.environment import render

#: Where an install script lists what its image holds; boot scripts read it.
MANIFEST = "/etc/clusterprint/image.json"
#: Hex digits of the script's SHA-256 in an image name.
DIGEST_LENGTH = 12
#: Where Slurm's plugins land with --prefix=/usr (libdir /usr/lib).
SLURM_PLUGIN_DIR = "/usr/lib/slurm"
#: The plugins the rendered Slurm files name: a build that lacks one fails the image (a
#: missing build dependency leaves configure silent about it).
SLURM_PLUGINS = ("auth_munge", "auth_jwt", "cred_munge", "accounting_storage_slurmdbd",
                 "accounting_storage_mysql", "gpu_nvidia", "gres_gpu", "select_cons_tres",
                 "cgroup_v2", "proctrack_cgroup", "task_cgroup", "task_affinity",
                 "jobacct_gather_cgroup", "openapi_slurmctld", "openapi_slurmdbd",
                 "rest_auth_jwt", "serializer_json", "serializer_yaml", "data_parser_v0_0_44",
                 "http_parser_libhttp_parser")
#: Ubuntu 24.04 packages Slurm's build needs for those plugins (slurm-gcp 6.13's
#: ansible/roles/slurm/vars/os_ubuntu.yml lists the same libraries; Debian's slurm-wlm
#: 26.05.5 Build-Depends): munge, JWT, JSON and YAML (the REST API), http-parser, MariaDB,
#: hwloc, D-Bus (cgroup/v2), lz4, PAM, NUMA, readline, Lua, and systemd's pkg-config file
#: (Type=notify units). PMIx is left out: no job clusterprint renders launches with it, and
#: Slurm's configure finds Ubuntu's multiarch PMIx folder only when given its path.
SLURM_BUILD_PACKAGES = ("build-essential", "pkg-config", "libmunge-dev", "libjwt-dev",
                        "libjson-c-dev", "libyaml-dev", "libhttp-parser-dev",
                        "libmariadb-dev", "libhwloc-dev", "libdbus-1-dev",
                        "liblz4-dev", "libpam0g-dev", "libnuma-dev", "libreadline-dev",
                        "liblua5.3-dev", "libcurl4-openssl-dev", "systemd-dev")
SLURM_CONFIGURE = ("--prefix=/usr", "--sysconfdir=/etc/slurm", "--libdir=/usr/lib",
                   "--with-systemdsystemunitdir=/usr/lib/systemd/system", "--with-jwt",
                   "--with-hwloc", "--enable-pam", "--disable-debug")


@dataclass(frozen=True)
class NodeImage:
    """One image clusterprint builds: what it is made from, of what, and its install script."""

    kind: str
    name: str
    base: BaseImage
    arch: machines.Architecture
    parts: tuple[str, ...]
    script: str

    @property
    def family(self) -> str:
        return images.FAMILY_PREFIX + self.kind

    @property
    def builder_machine_type(self) -> str:
        return images.BUILDER_MACHINE_TYPES[self.arch]

    @property
    def script_path(self) -> str:
        """Where ``clusterprint render --out`` writes the install script."""
        return f"images/{self.name}.sh"

    def path(self, project: str) -> str:
        """The image's path in ``project``, as a boot disk names it."""
        return f"projects/{project}/global/images/{self.name}"


def kind_of(machine_type: str) -> str:
    """``cpu`` for machines without GPUs, else ``gpu``, its fabric (where the fabric has
    software to install) and (arm64) architecture: the software differs by those and by
    nothing else of the machine type."""
    family = machines.gpu_family(machine_type)
    if family is None:
        return "cpu"
    software = gpu_software.FABRIC.get(family.networking)
    fabric = f"-{family.networking}" if software and node_software.installs(software) else ""
    return f"gpu{fabric}" + ("-arm64" if family.arch == "arm64" else "")


def _machine_of_kind(kind: str) -> str | None:
    """A GPU machine type of ``kind`` (None for cpu): its family row has the software."""
    if kind == "cpu":
        return None
    for family in machines.MACHINE_FAMILIES:
        if kind_of(family.machine_type) == kind:
            return family.machine_type
    raise ValueError(f"no machine type is of image kind {kind!r}")


def install_context(parts: tuple[str, ...], machine_type: str | None,
                    cuda_major: int | None) -> dict[str, object]:
    """What scripts/install.sh.j2 renders the install steps of ``parts`` from, for nodes of
    ``machine_type`` (None: without GPUs); ``cuda_major`` None reads it from the driver."""
    family = machines.gpu_family(machine_type) if machine_type else None
    fabric = None
    if "fabric" in parts and family is not None:
        fabric = gpu_fabric.fabric_install_context(gpu_software.FABRIC[family.networking])
    return {
        "parts": parts,
        "base_packages": node_software.BASE_PACKAGES,
        "munge_packages": node_software.MUNGE_PACKAGES,
        "nfs_packages": node_software.NFS_PACKAGES,
        "mariadb_packages": node_software.MARIADB_PACKAGES,
        "slurm": {"version": slurm.SLURM_VERSION, "commit": slurm.SLURM_COMMIT,
                  "tag": slurm.SLURM_TAG, "repository": slurm.SLURM_REPOSITORY,
                  "build_packages": SLURM_BUILD_PACKAGES, "configure": SLURM_CONFIGURE,
                  "plugins": SLURM_PLUGINS, "plugin_dir": SLURM_PLUGIN_DIR},
        "ops_agent": {"package": ops_agent.PACKAGE, "key": ops_agent.KEY, "unit": ops_agent.UNIT,
                      "repository": ops_agent.REPOSITORY.replace("{codename}", "$codename")},
        "tensorboard": {"venv": node_software.TENSORBOARD_VENV,
                        "package": node_software.TENSORBOARD_UPLOADER_PACKAGE},
        "pyxis": gpu_node.pyxis(),
        "gpu": gpu_node.gpu_node(machine_type) if machine_type else None,
        "cuda_major": cuda_major,
        "fabric": fabric,
        "held_patterns": gpu_software.HELD_PACKAGE_PATTERNS,
    }


def _manifest(name: str, kind: str, base: BaseImage, parts: tuple[str, ...]) -> str:
    return json.dumps({"name": name, "family": images.FAMILY_PREFIX + kind, "base": base.path,
                       "slurm": slurm.SLURM_VERSION, "parts": list(parts)},
                      indent=2) + "\n"


@cache
def node_image(kind: str) -> NodeImage:
    """The image of ``kind`` (see kind_of), its name the digest of its install script."""
    machine_type = _machine_of_kind(kind)
    family = machines.gpu_family(machine_type) if machine_type else None
    if family is None:
        base, arch, parts = images.CPU_BASE, "x86_64", node_software.CPU_PARTS
    else:
        base, arch = images.GPU_BASES[family.arch], family.arch
        fabric = gpu_software.FABRIC.get(family.networking)
        extra = ("fabric",) if fabric and node_software.installs(fabric) else ()
        parts = node_software.GPU_PARTS + extra
    context = {"install": install_context(parts, machine_type, base.cuda_major), "base": base,
               "arch": arch, "family": images.FAMILY_PREFIX + kind, "manifest": MANIFEST}

    def script(name: str) -> str:
        return render("images/image.sh.j2", name=name,
                      manifest_text=_manifest(name, kind, base, parts), **context)

    digest = hashlib.sha256(script("").encode()).hexdigest()[:DIGEST_LENGTH]
    name = f"{images.FAMILY_PREFIX}{kind}-{digest}"
    return NodeImage(kind=kind, name=name, base=base, arch=arch, parts=parts,
                     script=script(name))


def nodeset_image(nodeset: Nodeset) -> NodeImage | None:
    """The image clusterprint builds for ``nodeset``; None where the blueprint names one."""
    return None if nodeset.image is not None else built_image(nodeset)


def needed_images(blueprint: Blueprint) -> list[NodeImage]:
    """Every image clusterprint builds that the blueprint's VMs boot, each once, by name;
    none for a managed cluster, whose VMs the Cluster Director API makes from its own."""
    if blueprint.orchestrator == "managed":
        return []
    controller = built_image()  # the controller's and login nodes'
    found = {controller.name: controller}
    for nodeset in blueprint.slurm.nodesets:
        image = nodeset_image(nodeset)
        if image is not None:
            found.setdefault(image.name, image)
    return sorted(found.values(), key=lambda image: image.name)


def pinned_path(image: Image) -> str:
    """The path of the image a blueprint names: an exact image, or (only if it says so) the
    newest of a family."""
    if image.name is not None:
        return f"projects/{image.project}/global/images/{image.name}"
    return f"projects/{image.project}/global/images/family/{image.family}"


def built_image(nodeset: Nodeset | None = None) -> NodeImage:
    """clusterprint's image for ``nodeset`` (None: the controller and login nodes)."""
    return node_image("cpu" if nodeset is None else kind_of(nodeset.machine_type))


def boot_path(project: str, nodeset: Nodeset | None = None) -> str:
    """What a VM boots: the nodeset's named image, else clusterprint's built image in
    ``project`` (the controller and login nodes, ``nodeset`` None: always the built one)."""
    if nodeset is not None and nodeset.image is not None:
        return pinned_path(nodeset.image)
    return built_image(nodeset).path(project)


def boot_context(parts: tuple[str, ...], nodeset: Nodeset | None = None) -> dict[str, object]:
    """What scripts/image.sh.j2 renders for a role needing ``parts``: the image check, the
    install steps where the blueprint allows installing at boot, and the way out it names
    when the image lacks a part."""
    image = nodeset.image if nodeset is not None else None
    at_boot = image is not None and image.install_at_boot
    machine_type = nodeset.machine_type if nodeset is not None and nodeset.gpus else None
    boots = pinned_path(image) if image is not None else built_image(nodeset).name
    return {"boots": boots, "manifest": MANIFEST, "parts": parts,
            "slurm_series": slurm.release_series(slurm.SLURM_VERSION),
            "install_at_boot": at_boot, "key": image_key(nodeset),
            "fix": missing_part_fix(nodeset),
            "install": install_context(parts, machine_type, None) if at_boot else None}


def image_key(nodeset: Nodeset | None) -> str | None:
    """The blueprint key of the image ``nodeset`` boots, the nodeset by its name (None: the
    controller and login nodes, which boot clusterprint's image whatever the blueprint says)."""
    return None if nodeset is None else f"slurm.nodesets[{nodeset.name}].image"


def missing_part_fix(nodeset: Nodeset | None) -> str:
    """What a boot whose image lacks a part its role needs tells the user to do."""
    key = image_key(nodeset)
    if nodeset is None:
        return ("the controller and login nodes boot only the image clusterprint builds: "
                "build it (clusterprint image build)")
    if nodeset.image is not None:
        return (f"set {key}.install_at_boot: true to install what it lacks at boot, or drop "
                f"{key} to boot the image clusterprint builds")
    return (f"build it (clusterprint image build), or name an image of your own in {key} "
            "with install_at_boot: true")
