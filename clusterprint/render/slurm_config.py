"""slurm.conf, gres.conf and cgroup.conf of a cluster, from its checked blueprint.

Names and ports the node scripts also need (the controller host, the ports) are defined
here once, so a script can never point at a different controller than slurm.conf.
"""

from __future__ import annotations

from clusterprint import gpu_software
from clusterprint.model import Blueprint, Nodeset
from clusterprint.render.environment import render
from clusterprint.render.healthcheck import slurm_conf_lines

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
#: Slurm's time limit for a partition whose blueprint entry sets none.
UNLIMITED = "UNLIMITED"


def controller_host(blueprint: Blueprint) -> str:
    """The controller's short internal DNS name: the components name its VM exactly so."""
    return f"{blueprint.name}-controller"


def conf_server(blueprint: Blueprint) -> str:
    """Where configless slurmd fetches its configuration: ``host:port`` of slurmctld."""
    return f"{controller_host(blueprint)}:{SLURMCTLD_PORT}"


def dynamic_node_conf(nodeset: Nodeset) -> str:
    """The ``slurmd -Z --conf`` line a node of ``nodeset`` registers with.

    The feature puts the node in its NodeSet (and so in its partitions); GPU nodesets
    declare their GPU count, which gres.conf (its File= line, or NVML) backs with devices.
    """
    parts = [f"Feature={nodeset.name}"]
    if nodeset.gpus:
        parts.append(f"Gres=gpu:{nodeset.gpus}")
    return " ".join(parts)


def render_slurm_conf(blueprint: Blueprint) -> str:
    """slurm.conf: the cluster, its node sets and partitions."""
    slurm = blueprint.slurm
    default = slurm.default_partition.name
    partitions = [{"name": p.name, "nodesets": p.nodesets, "default": p.name == default,
                   "max_time": p.max_time or UNLIMITED} for p in slurm.partitions]
    return render("slurm/slurm.conf.j2", cluster=blueprint.name,
                  controller_host=controller_host(blueprint), slurmctld_port=SLURMCTLD_PORT,
                  slurmd_port=SLURMD_PORT,
                  max_node_count=sum(n.upper_bound for n in slurm.nodesets),
                  nodesets=slurm.nodesets, partitions=partitions,
                  health_checks=slurm_conf_lines(blueprint))


def gpu_device_files(gpus: int) -> str:
    """The NVIDIA device files of a node with ``gpus`` GPUs, as gres.conf's File= names them."""
    return "/dev/nvidia0" if gpus == 1 else f"/dev/nvidia[0-{gpus - 1}]"


def render_gres_conf(blueprint: Blueprint) -> str:
    """gres.conf: NVML detection, and the device files where every node has the same GPUs."""
    gpus = blueprint.slurm.uniform_gpus
    return render("slurm/gres.conf.j2", cluster=blueprint.name,
                  files=gpu_device_files(gpus) if gpus else None,
                  mixed=any(nodeset.gpus for nodeset in blueprint.slurm.nodesets))


def render_cgroup_conf(blueprint: Blueprint) -> str:
    """cgroup.conf: how jobs are confined."""
    return render("slurm/cgroup.conf.j2", cluster=blueprint.name)


def render_slurm_configs(blueprint: Blueprint) -> dict[str, str]:
    """The Slurm files by name, as the controller installs them: plugstack.conf (pyxis) only
    where a nodeset has GPUs, since only GPU nodes run containers."""
    files = {"slurm.conf": render_slurm_conf(blueprint),
             "gres.conf": render_gres_conf(blueprint),
             "cgroup.conf": render_cgroup_conf(blueprint)}
    if any(nodeset.gpus for nodeset in blueprint.slurm.nodesets):
        files["plugstack.conf"] = gpu_software.plugstack_conf()
    return files
