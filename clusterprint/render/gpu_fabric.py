"""What makes a GPU nodeset's NICs carry NCCL traffic: the image's install steps and the boot's.

The family's software comes from ``clusterprint.facts.gpu_software`` (keyed by the catalog's
networking kind): its image installs it (``fabric_install_context``), and a nodeset's boot
sets it up only when the cluster builds that GPU network (``network.gpu_networks: none``
leaves the VMs with one NIC and nothing to drive).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.blueprint import gpu_fabric
from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.facts import gpu_software, machines
from clusterprint.node import nics
from clusterprint.render import node_programs
from clusterprint.render.environment import render

#: Placeholders of gpu_software.AptSource lines, and the boot script's variables for them.
_APT_PLACEHOLDERS = {"{os_id}": "${FABRIC_OS_ID}", "{codename}": "${FABRIC_CODENAME}",
                     "{distro}": "${FABRIC_DISTRO}", "{cuda_arch}": "${FABRIC_CUDA_ARCH}"}
#: Placeholders of gpu_software.FabricSoftware.env, and the variables found at boot.
_ENV_PLACEHOLDERS = {"{socket}": "${SOCKET_IFNAMES}", "{gpu}": "${GPU_IFNAMES}"}
#: The prolog and epilog that start and stop RxDM (Slurm runs every file of these folders).
RXDM_PROLOG = "/etc/slurm/prolog.d/10-rxdm"
RXDM_EPILOG = "/etc/slurm/epilog.d/10-rxdm"


@dataclass(frozen=True)
class Repository:
    """An apt repository as the boot script adds it: its name, key and source line."""

    name: str
    #: double-quoted shell words, placeholders as the script's variables
    key_url: str
    line: str
    #: "repository NAME (LINE)", as failures name it
    label: str
    #: whether apt-transport-artifact-registry must be there first (ar+https)
    artifact_registry: bool
    #: added by its keyring package (NVIDIA's CUDA repository: ensure_cuda_repository)
    keyring: bool


def _shell_words(text: str, placeholders: dict[str, str]) -> str:
    """``text`` as one double-quoted shell word with ``placeholders`` as variables."""
    if any(c in text for c in '"$`\\'):
        raise ValueError(f"{text!r}: a catalog value may not hold shell quoting characters")
    for placeholder, variable in placeholders.items():
        text = text.replace(placeholder, variable)
    return f'"{text}"'


def repository(source: gpu_software.AptSource) -> Repository:
    """How the boot script adds ``source``."""
    return Repository(source.name, _shell_words(source.key_url, _APT_PLACEHOLDERS),
                      _shell_words(source.line, _APT_PLACEHOLDERS),
                      _shell_words(f"repository {source.name} ({source.line})", _APT_PLACEHOLDERS),
                      source.line.startswith("ar+"), source.keyring)


def env_lines(software: gpu_software.FabricSoftware) -> list[str]:
    """The job environment's lines as an unquoted heredoc's body: only the interface
    names found at boot are expanded, every other ``$`` stays for the job's shell."""
    lines = []
    for line in (software.env_script, *software.env):
        line = line.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
        for placeholder, variable in _ENV_PLACEHOLDERS.items():
            line = line.replace(placeholder, variable)
        lines.append(line)
    return lines


def family_fabric(blueprint: Blueprint, nodeset: Nodeset) -> machines.MachineFamily | None:
    """The nodeset's GPU family when the cluster builds its GPU network, else None."""
    family = machines.gpu_family(nodeset.machine_type)
    if family is None or family.networking not in gpu_fabric.fabric_kinds(blueprint):
        return None
    return family


def fabric_install_context(software: gpu_software.FabricSoftware) -> dict[str, object]:
    """What scripts/install_fabric.sh.j2 renders: the family's fabric software, which an
    image holds whatever cluster boots it."""
    if software.installer and not software.installer.target.startswith("/var/lib/"):
        raise ValueError("the plugin installers write through -v /var/lib:/var/lib")
    parts = [{"part": part, "repository": repository(part.source) if part.source else None}
             for part in software.apt]
    transport = repository(gpu_software.AR_TRANSPORT)
    dmabuf = repository(software.dmabuf.source) if software.dmabuf else None
    added = [r for r in (transport, dmabuf, *(p["repository"] for p in parts)) if r]
    # Only the variables some repository line uses are set (shellcheck refuses unused ones).
    apt_vars = sorted({variable[2:-1] for variable in _APT_PLACEHOLDERS.values()
                       if any(variable in r.key_url + r.line for r in added)})
    return {"software": software, "parts": parts, "transport": transport,
            "transport_package": gpu_software.AR_TRANSPORT_PACKAGE,
            "dmabuf_repository": dmabuf, "apt_vars": apt_vars}


def fabric_context(blueprint: Blueprint, nodeset: Nodeset) -> dict[str, object] | None:
    """What gpu_fabric.sh.j2 renders for the nodeset at boot, or None: it gets no fabric part."""
    family = family_fabric(blueprint, nodeset)
    if family is None:
        return None
    software = gpu_software.FABRIC[family.networking]
    rxdm = (render("scripts/rxdm.sh.j2", title=software.title, rxdm=software.rxdm,
                   machine_type=family.machine_type) if software.rxdm else "")
    return {
        "software": software,
        "system_nics": family.system_nics,
        "gpu_nics": family.gpu_nics,
        "env_lines": env_lines(software),
        "nccl_env": gpu_software.NCCL_ENV_FILE,
        "nics_program": node_programs.module_text(nics),
        "rxdm_script": rxdm,
        "rxdm_prolog": RXDM_PROLOG,
        "rxdm_epilog": RXDM_EPILOG,
    }
