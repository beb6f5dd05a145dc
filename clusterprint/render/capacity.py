"""Power saving as the controller runs it: clusterprint/node/capacity.py, its config, the
programs slurmctld calls and the slurm.conf and gres.conf lines that go with them.

A cluster has power saving when a nodeset has elastic nodes (``Nodeset.elastic``: above
``count`` where ``power_saving``: by default every nodeset but a reservation's). Then
slurm.conf names the three programs, a
finite global SuspendTime (Slurm 26.05 turns power saving off without one, even where every
node has its own), Slurm's default rates (300 resumes and 60 suspends a minute), and
``idle_on_node_suspend`` (a drained elastic node that Slurm powers down comes back healthy:
its VM is deleted and the next resume creates a new one). Elastic nodes carry their
nodeset's ``suspend_time_s``; static nodes register with ``SuspendTime=INFINITE``, so no
idle static node is ever powered down. gres.conf names the elastic nodes' GPUs: Slurm
refuses ``scontrol create`` of any node while gres.conf holds only ``AutoDetect=nvidia``
("Cannot use AutoDetect on cloud/dynamic node", seen on 26.05.5). A partition with elastic
nodes carries its own ResumeTimeout (``resume_timeout_s``), the longest of its nodesets':
their family's boot (machines.resume_timeout_s), or, for flex-start, Slurm's longest
(slurm.RESUME_TIMEOUT_MAX_S), since its capacity comes when Dynamic Workload Scheduler finds
it. Other partitions keep the global one, which bounds a reboot or a replacement.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.contract import naming
from clusterprint.facts import catalog, machines, slurm
from clusterprint.node import capacity
from clusterprint.render import remediation, topology
from clusterprint.render.node_programs import program_files, with_modes

FOLDER = remediation.FOLDER
PROGRAM = f"{FOLDER}/capacity.py"
CONFIG = f"{FOLDER}/capacity.json"
#: The programs slurmctld runs (as SlurmUser) with a hostlist.
PROGRAMS = {"resume": f"{FOLDER}/capacity-resume", "suspend": f"{FOLDER}/capacity-suspend",
            "resume-fail": f"{FOLDER}/capacity-resume-fail"}
#: Its state, written by slurmctld's programs and the watch service, both as SlurmUser.
STATE_DIR = "/var/lib/clusterprint/capacity"
STATE = f"{STATE_DIR}/state.json"
UNIT = "clusterprint-capacity.service"
#: The global SuspendTime: every elastic node has its own, so this only turns power saving
#: on; static nodes have INFINITE.
SUSPEND_TIME_S = 300
#: How long Slurm waits for SuspendProgram's deletes before it counts a node powered down.
SUSPEND_TIMEOUT_S = 300
#: What a static node adds to its registration where the cluster has power saving.
STATIC = "SuspendTime=INFINITE"


def elastic_nodesets(blueprint: Blueprint) -> list[Nodeset]:
    return [n for n in blueprint.slurm.nodesets if n.elastic]


def power_saving(blueprint: Blueprint) -> bool:
    return bool(elastic_nodesets(blueprint))


def nodeset_resume_timeout_s(nodeset: Nodeset) -> int:
    """How long Slurm waits for an elastic node of ``nodeset`` to register."""
    if nodeset.provisioning == "flex-start":
        return slurm.RESUME_TIMEOUT_MAX_S
    return machines.resume_timeout_s(nodeset.machine_type)


def resume_timeout_s(nodesets: list[Nodeset]) -> int | None:
    """A partition's ResumeTimeout: the longest of its elastic nodesets' (a node in several
    partitions takes the longest of theirs: slurm.conf.5 of 26.05); None without one."""
    return max((nodeset_resume_timeout_s(n) for n in nodesets if n.elastic), default=None)


def elastic_prefix(blueprint: Blueprint, nodeset: Nodeset) -> str:
    return naming.elastic_base_instance_name(blueprint.name, nodeset.name)


def created_topology(blueprint: Blueprint, nodeset: Nodeset) -> str:
    """The Topology= an elastic node is created with: in the tree, unplaced (a node in no
    topology takes no part in a job of several nodes), where the nodeset has one."""
    if topology.placement(blueprint, nodeset) is None:
        return ""
    return f"{topology.TREE}:{topology.TREE}:unplaced"


def capacity_config(blueprint: Blueprint) -> capacity.Config:
    """What power saving acts on. ``project`` empty: the controller's own."""
    return capacity.Config(
        project=blueprint.project or "", zone=blueprint.zone, state_file=STATE,
        group_vms_max=catalog.GROUP_VMS_MAX, request_vms_max=catalog.GROUP_REQUEST_VMS_MAX,
        nodesets={n.name: capacity.Nodeset(
            name=n.name,
            base_instance_name=naming.elastic_base_instance_name(blueprint.name, n.name),
            prefix=elastic_prefix(blueprint, n), count=n.elastic,
            digits=naming.ELASTIC_DIGITS, machine_type=n.machine_type, features=n.name,
            gres=(f"gpu:{machines.gres_type(n.machine_type)}:{n.gpus}" if n.gpus else ""),
            topology=created_topology(blueprint, n), suspend_time_s=n.suspend_time_s,
            run_duration_s=(catalog.FLEX_START_MAX_RUN_S if n.provisioning == "flex-start"
                            else 0))
            for n in elastic_nodesets(blueprint)})


def config_text(blueprint: Blueprint) -> str:
    config = asdict(capacity_config(blueprint))
    for nodeset in config["nodesets"].values():
        nodeset.pop("name")
    return json.dumps(config, indent=2) + "\n"


def slurm_conf_lines(blueprint: Blueprint) -> list[str]:
    """slurm.conf's power-saving lines; none without elastic nodes."""
    if not power_saving(blueprint):
        return []
    return [f"ResumeProgram={PROGRAMS['resume']}", f"SuspendProgram={PROGRAMS['suspend']}",
            f"ResumeFailProgram={PROGRAMS['resume-fail']}", f"SuspendTime={SUSPEND_TIME_S}",
            f"SuspendTimeout={SUSPEND_TIMEOUT_S}"]


def gres_lines(blueprint: Blueprint) -> list[str]:
    """gres.conf's lines for the elastic nodes, by name: AutoDetect off for them (a CPU
    node's too), their GPUs named."""
    lines = []
    for nodeset in elastic_nodesets(blueprint):
        line = f"NodeName={naming.elastic_nodes(blueprint.name, nodeset.name, nodeset.elastic)}"
        line += " AutoDetect=off"
        if nodeset.gpus:
            line += (f" Name=gpu Type={machines.gres_type(nodeset.machine_type)}"
                     f" File=/dev/nvidia[0-{nodeset.gpus - 1}]")
        lines.append(line)
    return lines


def capacity_files(blueprint: Blueprint) -> dict[str, str]:
    """The program, common.py and the config under ``--out``; nothing without elastic nodes."""
    if not power_saving(blueprint):
        return {}
    return {**program_files("scripts", capacity),
            "scripts/capacity.json": config_text(blueprint)}


def script_context(blueprint: Blueprint) -> dict[str, object] | None:
    """What scripts/capacity.sh.j2 installs on the controller, None without elastic nodes."""
    if not power_saving(blueprint):
        return None
    return {"programs": with_modes(program_files(FOLDER, capacity), PROGRAM),
            "config": config_text(blueprint),
            "program": PROGRAM, "config_path": CONFIG, "steps": PROGRAMS,
            "state_dir": STATE_DIR, "unit": UNIT}
