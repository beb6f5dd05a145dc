"""The controller's remediation loop as rendered: the program, its config, Slurm's lines.

`clusterprint render` writes ``scripts/remediate.py``, ``scripts/host_events.py`` (the
host-event watch the loop runs each pass), ``scripts/common.py`` (the node programs'
shared module, as shipped in ``clusterprint/node/``) and ``scripts/remediate.json``; the
controller script installs them, the RebootProgram, the
``clusterprint-remediate`` command and the systemd service that runs the loop. The
config is the program's own ``Config``, built here from the blueprint: its defaults (how
many failures protect a nodeset, how long a replacement may take) are the program's.
"""

from __future__ import annotations

import json

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.contract import naming
from clusterprint.facts import machines
from clusterprint.node import host_events, remediate, scale_down
from clusterprint.render.node_programs import program_files, with_modes

#: Where the controller keeps the program (with common.py beside it), its config and state.
FOLDER = "/etc/slurm/clusterprint"
PROGRAM = f"{FOLDER}/remediate.py"
CONFIG = f"{FOLDER}/remediate.json"
STATE = "/var/lib/clusterprint/remediate-state.json"
#: RebootProgram: slurmctld runs it (reboot_from_controller) with the nodes to reboot.
REBOOT_PROGRAM = "/etc/slurm/clusterprint/reboot-vm"
#: What an operator runs: ``clusterprint-remediate --reset NODESET`` and the like.
COMMAND = "/usr/local/sbin/clusterprint-remediate"
UNIT = "clusterprint-remediate.service"
#: slurm.conf's ResumeTimeout: how long the loop gives a recreated or rebooted VM.
REPLACE_TIMEOUT_S = remediate.Config.replace_timeout_s


def reports_faulty_host(nodeset: Nodeset) -> bool:
    """Whether Compute Engine takes a host-fault report for the nodeset's VMs."""
    return (nodeset.machine_type in machines.HOST_FAULT_REPORT_MACHINES
            and nodeset.provisioning == "reservation" and nodeset.reservation_bound)


def remediation_config(blueprint: Blueprint) -> remediate.Config:
    """What the loop acts on. ``project`` empty: the controller's own, from the metadata
    server (a blueprint may leave it to the stack's ``gcp:project``)."""
    checks = blueprint.slurm.health_checks
    return remediate.Config(
        project=blueprint.project or "", zone=blueprint.zone, state_file=STATE,
        max_share_per_hour=checks.max_remediation_share,
        nodesets={n.name: remediate.NodesetPolicy(
            name=n.name, base_instance_name=naming.base_instance_name(blueprint.name, n.name),
            vm_names=naming.vm_names(blueprint.name, n.name),
            nodes=n.upper_bound, on_failure=checks.on_failure,
            report_faulty_host=checks.on_failure == "replace" and reports_faulty_host(n),
            maintenance_reservations=n.maintenance_reservations)
            for n in blueprint.slurm.nodesets})


def sized_by_controller(nodeset: Nodeset) -> bool:
    """Whether the controller sets the size of the nodeset's static groups (scale_down.py):
    every nodeset but flex-start's, whose VMs come through resize requests."""
    return nodeset.provisioning != "flex-start"


def sizes_text(blueprint: Blueprint) -> str:
    """The controller's metadata ``clusterprint-nodeset-sizes``: each nodeset's ``count``
    (its static nodes), which the running loop reads every pass, so a changed count needs
    no reboot of the controller."""
    return json.dumps({n.name: n.count for n in blueprint.slurm.nodesets
                       if sized_by_controller(n)}, sort_keys=True)


def config_text(blueprint: Blueprint) -> str:
    """The config as the file holds it."""
    return json.dumps(remediation_config(blueprint).to_json(), indent=2) + "\n"


def programs(folder: str) -> dict[str, str]:
    """The loop, what it imports (its host-event watch and scale-down steps, common.py), by
    their paths in ``folder``."""
    return {path: text for module in (remediate, host_events, scale_down)
            for path, text in program_files(folder, module).items()}


def remediation_files(blueprint: Blueprint) -> dict[str, str]:
    """The programs and the config, by their paths under ``--out``."""
    return {**programs("scripts"), "scripts/remediate.json": config_text(blueprint)}


def script_context(blueprint: Blueprint) -> dict[str, object]:
    """What scripts/remediation.sh.j2 installs on the controller: the programs (the loop,
    what it imports, common.py: by their paths there, with their modes, for
    scripts/programs.sh.j2), the config."""
    return {"programs": with_modes(programs(FOLDER), PROGRAM), "config": config_text(blueprint),
            "paths": {"program": PROGRAM, "config": CONFIG, "reboot": REBOOT_PROGRAM,
                      "command": COMMAND, "unit": UNIT, "state": STATE}}


#: What the loop reads: its groups (found by their VMs' base name: Pulumi auto-names the
#: groups) and their VMs. A list is granted on the project and cannot be narrowed to
#: names, so these two read-only permissions go unconditioned.
READ_PERMISSIONS = ("compute.instanceGroupManagers.get", "compute.instanceGroupManagers.list",
                    # host events: one instances.list per nodeset per pass (host_events.py)
                    "compute.instances.list",
                    # power saving creates elastic nodes with their machine type's CPUs
                    "compute.machineTypes.get")
#: RebootProgram's VM reset (every cluster: `scontrol reboot` by hand uses it too).
REBOOT_PERMISSIONS = ("compute.instances.reset",)
#: recreateInstances, createInstances and deleteInstances on a group (remediation's
#: replace, power saving, scale-down); the group, not the caller, deletes and creates
#: the VMs.
REPLACE_PERMISSIONS = ("compute.instanceGroupManagers.update",)
REPORT_PERMISSIONS = ("compute.instances.reportHostAsFaulty",)


def act_permissions(blueprint: Blueprint) -> tuple[str, ...]:
    """What the loop and the RebootProgram change, granted on the cluster's own names only."""
    checks = blueprint.slurm.health_checks
    permissions = REBOOT_PERMISSIONS
    if checks.on_failure == "replace" or any(n.elastic or sized_by_controller(n)
                                             for n in blueprint.slurm.nodesets):
        permissions += REPLACE_PERMISSIONS
    if checks.on_failure == "replace" and any(reports_faulty_host(n)
                                              for n in blueprint.slurm.nodesets):
        permissions += REPORT_PERMISSIONS
    return permissions


def acted_on(blueprint: Blueprint, project: str) -> tuple[str, ...]:
    """The resource name prefixes the acting grant is held to: each nodeset's VMs and its
    groups (``<cluster>-nodeset-<nodeset>-group-`` and Pulumi's random suffix; ``-elastic-``
    for power saving's)."""
    zone = f"projects/{project}/zones/{blueprint.zone}"
    prefixes = []
    for nodeset in blueprint.slurm.nodesets:
        prefixes.append(f"{zone}/instances/"
                        f"{naming.base_instance_name(blueprint.name, nodeset.name)}-")
        group = naming.child(naming.nodeset_component(blueprint.name, nodeset.name),
                             naming.GROUP)
        prefixes.append(f"{zone}/instanceGroupManagers/{group}-")
        if nodeset.elastic:
            elastic = naming.child(naming.nodeset_component(blueprint.name, nodeset.name),
                                   naming.ELASTIC_GROUP)
            prefixes.append(f"{zone}/instanceGroupManagers/{elastic}-")
    return tuple(prefixes)
