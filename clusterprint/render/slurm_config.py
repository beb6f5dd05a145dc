"""slurm.conf, gres.conf and cgroup.conf of a cluster, from its checked blueprint.

Names and ports the node scripts also need (the controller host, the ports) are defined
here once, so a script can never point at a different controller than slurm.conf.
"""

from __future__ import annotations

from clusterprint import catalog, gpu_software
from clusterprint.model import Blueprint, Nodeset
from clusterprint.render.environment import render

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
    declare their GPUs typed (``Gres=gpu:h100:8``), which the gpu/nvml plugin backs with the
    devices, files and CPU affinity NVML finds on the node.
    """
    parts = [f"Feature={nodeset.name}"]
    if nodeset.gpus:
        parts.append(f"Gres=gpu:{catalog.gres_type(nodeset.machine_type)}:{nodeset.gpus}")
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
                  nodesets=slurm.nodesets, partitions=partitions)


def render_gres_conf(blueprint: Blueprint) -> str:
    """gres.conf: NVML finds every GPU node's devices, whatever GPUs its nodeset has."""
    return render("slurm/gres.conf.j2", cluster=blueprint.name)


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
