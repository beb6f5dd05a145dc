"""slurm.conf, gres.conf and cgroup.conf of a cluster, from its checked blueprint.

Names and ports the node scripts also need (the controller host, the ports) are defined
here once, so a script can never point at a different controller than slurm.conf.
"""

from __future__ import annotations

from clusterprint.blueprint.model import Blueprint, Nodeset, Partition
from clusterprint.contract import node_metadata
from clusterprint.facts import gpu_software, machines
from clusterprint.render import capacity
from clusterprint.render.environment import render
from clusterprint.render.healthcheck import slurm_conf_lines
from clusterprint.render.remediation import REBOOT_PROGRAM, REPLACE_TIMEOUT_S
from clusterprint.render.topology import partition_topology, render_topology_yaml

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
#: slurmrestd's port on the controller (Slurm's documented default).
SLURMRESTD_PORT = 6820
#: The key slurmctld signs and checks JSON Web Tokens with; only the controller holds it.
JWT_KEY = "/etc/slurm/jwt_hs256.key"
#: slurmdbd's port on the controller (Slurm's documented default).
SLURMDBD_PORT = 6819
#: Where the controller mounts its state disk, which outlives the VM: slurmctld's
#: StateSaveLocation (queue, job ids, node states) and MariaDB's datadir live on it.
STATE_MOUNT = "/var/lib/clusterprint-state"
STATE_SAVE_LOCATION = f"{STATE_MOUNT}/slurmctld"
MARIADB_DATADIR = f"{STATE_MOUNT}/mysql"
#: The database user slurmdbd connects as (MariaDB's, or the one made in Cloud SQL).
STORAGE_USER = "slurm"


def accounting_database(blueprint: Blueprint) -> str:
    """The database slurmdbd keeps its tables in: the Cloud SQL one named, else Slurm's own."""
    sql = blueprint.slurm.accounting.cloud_sql
    return sql.database if sql else "slurm_acct_db"


#: Slurm's time limit for a partition whose blueprint entry sets none.
UNLIMITED = "UNLIMITED"
#: The share of a VM's nominal memory its kernel leaves to slurmd as RealMemory, at least.
KERNEL_SHARE = 0.9
#: Seconds slurmd lets the Prolog and Epilog scripts run before it kills them and drains
#: the node: RxDM's prolog pulls two images and waits up to 120 s for its buffers.
PROLOG_EPILOG_TIMEOUT_S = 600


def conf_server(blueprint: Blueprint) -> str:
    """Where configless slurmd fetches its configuration: ``host:port`` of slurmctld."""
    return f"{node_metadata.controller_hostname(blueprint.name)}:{SLURMCTLD_PORT}"


def dynamic_node_conf(nodeset: Nodeset, power_saving: bool = False) -> str:
    """The ``slurmd -Z --conf`` line a node of ``nodeset`` registers with.

    The feature puts the node in its NodeSet (and so in its partitions); GPU nodesets
    declare their GPUs typed (``Gres=gpu:h100:8``), which the gpu/nvidia plugin backs with the
    devices, files and CPU affinity the NVIDIA driver shows on the node. In a cluster with
    power saving a static node is never powered down (``SuspendTime=INFINITE``); an elastic
    node's registration changes nothing of the node power saving created, so the same line
    serves both.
    """
    parts = [f"Feature={nodeset.name}"]
    if nodeset.gpus:
        parts.append(f"Gres=gpu:{machines.gres_type(nodeset.machine_type)}:{nodeset.gpus}")
    if power_saving:
        parts.append(capacity.STATIC)
    return " ".join(parts)


def default_mem_per_cpu(nodesets: list[Nodeset]) -> int | None:
    """DefMemPerCPU (MiB) for a partition of CPU nodesets: what every node can give each CPU.

    Memory is a consumable resource and cgroup-confined, so a job that asks for none gets
    this much per CPU and may share its node. Dynamic nodes register the memory the kernel
    reports, a few percent below the machine type's: KERNEL_SHARE leaves that out, so even
    a job given every CPU of the leanest shape fits. None (a job then gets its nodes' whole
    memory) where a shape's memory is not in the catalog or a nodeset has GPUs.
    """
    shapes = [machines.cpu_shape(n.machine_type) for n in nodesets]
    if not shapes or any(n.gpus for n in nodesets) or not all(s in machines.MIB_PER_VCPU_AT_LEAST
                                                 for s in shapes):
        return None
    return int(min(machines.MIB_PER_VCPU_AT_LEAST[s] for s in shapes) * KERNEL_SHARE)


def partition_conf(blueprint: Blueprint, partition: Partition) -> dict:
    """One partition line's values.

    A partition with GPU nodes gives each job whole nodes (Exclusive=NODE, which replaces
    the deprecated OverSubscribe=EXCLUSIVE in 26.05: slurm.conf.5 at slurm-26-05-3-1): a
    training job wants all the GPUs, NICs and memory of a node, and a small job beside it
    would steal the fabric. Its jobs then get their nodes' whole memory by default.
    """
    nodesets = [n for n in blueprint.slurm.nodesets if n.name in partition.nodesets]
    max_time = partition.max_time or UNLIMITED
    # Only names of listed nodesets are written (rule names.partition-nodesets refuses others).
    return {"name": partition.name,
            "nodesets": [name for name in partition.nodesets if blueprint.slurm.nodeset(name)],
            "default": partition.name == blueprint.slurm.default_partition.name,
            "max_time": max_time, "default_time": partition.default_time or max_time,
            "exclusive": any(n.gpus for n in nodesets),
            "def_mem_per_cpu": default_mem_per_cpu(nodesets),
            "topology": partition_topology(blueprint, partition),
            "resume_timeout": capacity.resume_timeout_s(nodesets)}


def render_slurm_conf(blueprint: Blueprint) -> str:
    """slurm.conf: the cluster, its node sets and partitions."""
    slurm = blueprint.slurm
    partitions = [partition_conf(blueprint, p) for p in slurm.partitions]
    return render("slurm/slurm.conf.j2", cluster=blueprint.name,
                  controller_host=node_metadata.controller_hostname(blueprint.name),
                  slurmctld_port=SLURMCTLD_PORT,
                  slurmd_port=SLURMD_PORT,
                  max_node_count=sum(n.upper_bound for n in slurm.nodesets),
                  prolog_epilog_timeout=PROLOG_EPILOG_TIMEOUT_S, jwt_key=JWT_KEY,
                  state_save_location=STATE_SAVE_LOCATION,
                  accounting=slurm.accounting.enabled, slurmdbd_port=SLURMDBD_PORT,
                  nodesets=slurm.nodesets, partitions=partitions,
                  health_checks=slurm_conf_lines(blueprint),
                  reboot_program=REBOOT_PROGRAM, resume_timeout=REPLACE_TIMEOUT_S,
                  power_saving=capacity.slurm_conf_lines(blueprint))


def render_slurmdbd_conf(blueprint: Blueprint) -> str:
    """slurmdbd.conf without its secrets: the controller appends StoragePass (and, for
    Cloud SQL, StorageHost: the instance's private IP) at boot, from Secret Manager."""
    sql = blueprint.slurm.accounting.cloud_sql
    return render("slurm/slurmdbd.conf.j2", cluster=blueprint.name,
                  dbd_host=node_metadata.controller_hostname(blueprint.name),
                  dbd_port=SLURMDBD_PORT,
                  storage_host=None if sql else "localhost", storage_user=STORAGE_USER,
                  database=accounting_database(blueprint))


def render_gres_conf(blueprint: Blueprint) -> str:
    """gres.conf: gpu/nvidia finds every GPU node's devices, whatever GPUs its nodeset has."""
    return render("slurm/gres.conf.j2", cluster=blueprint.name,
                  elastic=capacity.gres_lines(blueprint))


def render_cgroup_conf(blueprint: Blueprint) -> str:
    """cgroup.conf: how jobs are confined."""
    return render("slurm/cgroup.conf.j2", cluster=blueprint.name)


def render_slurm_configs(blueprint: Blueprint) -> dict[str, str]:
    """The Slurm files by name, as the controller installs them: plugstack.conf (pyxis) only
    where a nodeset has GPUs, since only GPU nodes run containers; topology.yaml only where a
    nodeset's nodes have a place in the network; slurmdbd.conf only with accounting on."""
    files = {"slurm.conf": render_slurm_conf(blueprint),
             "gres.conf": render_gres_conf(blueprint),
             "cgroup.conf": render_cgroup_conf(blueprint)}
    if any(nodeset.gpus for nodeset in blueprint.slurm.nodesets):
        files["plugstack.conf"] = gpu_software.plugstack_conf()
    if (topology_yaml := render_topology_yaml(blueprint)) is not None:
        files["topology.yaml"] = topology_yaml
    if blueprint.slurm.accounting.enabled:
        files["slurmdbd.conf"] = render_slurmdbd_conf(blueprint)
    return files
