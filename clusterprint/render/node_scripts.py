"""The startup script of each node role, rendered from the checked blueprint.

What the blueprint fixes (mount paths, buckets, the nodeset's Slurm line, the Slurm
files) is rendered in; what only exists once resources do (Filestore and Lustre
addresses, the munge key's secret) is read from instance metadata at boot.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.contract import node_metadata
from clusterprint.node import capacity as capacity_program
from clusterprint.node import healthcheck as healthcheck_program
from clusterprint.node import (
    mlops_broker,
    register_model,
    tensorboard_sync,
    tensorboard_upload,
)
from clusterprint.render import (
    capacity,
    config_sync,
    gpu_node,
    healthcheck,
    metadata_guard,
    node_programs,
    ops_agent,
    recipes,
    remediation,
    slurm_metrics,
    topology,
)
from clusterprint.render.environment import render
from clusterprint.render.gpu_fabric import fabric_context
from clusterprint.render.images import boot_context
from clusterprint.render.nccl_job import STAGED_JOBS, STAGED_RECIPES, staged_job_path
from clusterprint.render.node_software import compute_parts, controller_parts, login_parts
from clusterprint.render.slurm_config import (
    JWT_KEY,
    MARIADB_DATADIR,
    SLURMRESTD_PORT,
    STATE_MOUNT,
    STATE_SAVE_LOCATION,
    STORAGE_USER,
    accounting_database,
    conf_server,
    dynamic_node_conf,
)

#: Metadata keys as the scripts' templates name them.
METADATA_KEYS = {"home_source": node_metadata.HOME_SOURCE,
                 "munge_secret": node_metadata.MUNGE_SECRET,
                 "jwt_secret": node_metadata.JWT_SECRET,
                 "db_secret": node_metadata.DB_SECRET,
                 "boot_state": f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_STATE}",
                 "boot_log": f"{node_metadata.BOOT_NAMESPACE}/{node_metadata.BOOT_LOG}"}

#: The login node's helpers: command -> the module that is its program (the broker runs the
#: same commands as root, mlops_broker.HELPERS).
MLOPS_HELPERS: dict[str, ModuleType] = {
    mlops_broker.HELPERS["tensorboard-upload"]: tensorboard_upload,
    mlops_broker.HELPERS["register-model"]: register_model,
}
#: Where the helpers' modules live, side by side, for they import the broker's module, and
#: on a login node config-sync beside the shared common.py; the commands are links to them.
MLOPS_LIB = "/usr/local/lib/clusterprint"
MLOPS_UNIT = "clusterprint-mlops.service"
TENSORBOARD_SYNC_UNIT = "clusterprint-tensorboard-sync.service"


def mlops_context(blueprint: Blueprint) -> dict[str, object]:
    """What the login script installs for users' MLOps: each helper as an executable, the
    configuration clusterprint-register-model reads, and (with a TensorBoard) the uploader."""
    config: dict[str, object] = {"region": blueprint.region,
                                 "buckets": [{"name": b.bucket, "mount": b.mount_path}
                                             for b in blueprint.storage.buckets]}
    guarded = not blueprint.security.users_get_node_credentials
    if guarded:  # users hold no node credentials: their helpers go through the broker
        config["broker"] = mlops_broker.SOCKET
    tensorboard = blueprint.observability.tensorboard
    if tensorboard:  # root's step uploads the recipes' runs (tensorboard_sync.py)
        config["tensorboard_runs"] = {"root": recipes.storage_root(blueprint),
                                      "folder": recipes.RUN_FOLDER}
    # The topology commands (the per-block NCCL proof) are installed the same way.
    commands = {**MLOPS_HELPERS, **topology.login_commands(blueprint)}
    modules = {f"{MLOPS_LIB}/{Path(m.__file__).name}": m
               for m in (mlops_broker, *commands.values(),
                         *([tensorboard_sync] if tensorboard else []))}
    return {"modules": {path: node_programs.module_text(m, shebang=True)
                        for path, m in modules.items()},
            "commands": {command: f"{MLOPS_LIB}/{Path(m.__file__).name}"
                         for command, m in commands.items()},
            "broker": {"program": f"{MLOPS_LIB}/{Path(mlops_broker.__file__).name}",
                       "socket": mlops_broker.SOCKET, "unit": MLOPS_UNIT} if guarded else None,
            "config_path": register_model.CONFIG,
            "config": json.dumps(config, indent=2, sort_keys=True) + "\n",
            "tensorboard": tensorboard,
            "sync": {"program": f"{MLOPS_LIB}/{Path(tensorboard_sync.__file__).name}",
                     "unit": TENSORBOARD_SYNC_UNIT} if tensorboard else None}


def boot_log_tag(role: str) -> str:
    """The journal tag of a boot's lines on a node of ``role`` (compute-NODESET for a
    compute node): its Ops Agent keeps them by it."""
    return f"clusterprint-{role}"


def _common(blueprint: Blueprint, role: str, image: dict[str, object]) -> dict[str, object]:
    scratch = [{"name": x.name, "mount": blueprint.mount_of(x),
                "key": node_metadata.lustre_source(x.name)}
               for x in blueprint.storage.lustre if blueprint.mount_of(x) != "/home"]
    buckets = [{"name": b.bucket, "mount": b.mount_path} for b in blueprint.storage.buckets]
    return {"role": role, "log_tag": boot_log_tag(role), "cluster": blueprint.name,
            "keys": METADATA_KEYS, "scratch": scratch, "buckets": buckets, "image": image}


def render_controller_script(blueprint: Blueprint, slurm_files: dict[str, str]) -> str:
    """The controller's script: /home, the munge and JWT keys (created on first boot), the
    state disk, accounting (the database, its password's secret, slurmdbd), the Slurm files
    from metadata and the service that follows them, slurmctld, slurmrestd on the cluster
    network, the remediation loop, the Slurm exporter. ``slurm_files`` gives slurmdbd.conf
    (written with its password at boot); the others reach the VM as metadata only."""
    accounting = blueprint.slurm.accounting
    state = {"device": f"/dev/disk/by-id/google-{node_metadata.STATE_DISK_DEVICE}",
             "mount": STATE_MOUNT, "slurmctld": STATE_SAVE_LOCATION, "datadir": MARIADB_DATADIR}
    loop = remediation.script_context(blueprint)
    power = capacity.script_context(blueprint)
    # config-sync beside the loop and power saving: the three share one common.py.
    sync = config_sync.script_context("controller", remediation.FOLDER)
    exporter = slurm_metrics.script_context(blueprint)
    programs = node_programs.shipped_once(loop["programs"], power["programs"] if power else {},
                                          sync["files"], exporter["programs"])
    blocks = topology.blocks_context(blueprint)
    database = accounting.enabled and not accounting.cloud_sql
    units = ("slurmctld.service", *(("slurmdbd.service",) if accounting.enabled else ()),
             *(("mariadb.service",) if database else ()), "slurmrestd.service",
             remediation.UNIT, sync["unit"], *((power["unit"],) if power else ()),
             *((blocks["unit"],) if blocks else ()), exporter["unit"])
    # slurmctld runs the power-saving programs (ResumeProgram...): their entries carry their tag.
    agent = ops_agent.script_context(blueprint, "controller", units, boot_log_tag("controller"),
                                     programs=(capacity_program.LOG.program,) if power else (),
                                     metrics=(exporter["receiver"],))
    return render("scripts/controller.sh.j2", ops_agent=agent, files=slurm_files, jwt_key=JWT_KEY,
                  rest_port=SLURMRESTD_PORT, remediation=loop, programs=programs,
                  state=state, accounting=accounting if accounting.enabled else None,
                  storage_user=STORAGE_USER, database=accounting_database(blueprint),
                  config_sync=sync, blocks=blocks, capacity=power, slurm_exporter=exporter,
                  **_common(blueprint, "controller",
                            boot_context(controller_parts(blueprint))))


def render_login_script(blueprint: Blueprint, slurm_files: dict[str, str],
                        jobs: dict[str, str]) -> str:
    """A login node's script: storage, munge, the client configuration (from metadata, and
    the service that follows it) and the jobs and recipes (``{rendered path: text}``) it
    stages for every user under ``STAGED_ROOT``."""
    staged = {staged_job_path(path): text for path, text in jobs.items()}
    sync = config_sync.script_context("login", MLOPS_LIB)
    mlops, guard = mlops_context(blueprint), metadata_guard.script_context(blueprint, "login")
    units = (sync["unit"], *((mlops["broker"]["unit"],) if mlops["broker"] else ()),
             *((guard["unit"],) if guard else ()),
             *((mlops["sync"]["unit"],) if mlops["sync"] else ()))
    agent = ops_agent.script_context(blueprint, "login", units, boot_log_tag("login"))
    return render("scripts/login.sh.j2", files=slurm_files, jobs=staged, jobs_dir=STAGED_JOBS,
                  recipes_dir=STAGED_RECIPES, staged_folders=(STAGED_JOBS, STAGED_RECIPES),
                  mlops=mlops, config_sync=sync, ops_agent=agent,
                  programs=node_programs.shipped_once(sync["files"]), guard=guard,
                  **_common(blueprint, "login", boot_context(
                      login_parts(blueprint, pyxis="plugstack.conf" in slurm_files))))


def render_compute_script(blueprint: Blueprint, nodeset: Nodeset) -> str:
    """A compute node's script: storage, munge, the GPU fabric of its family (if the cluster
    builds that GPU network), the health check, then slurmd as a dynamic node of ``nodeset``.
    The health check runs inside slurmd (HealthCheckProgram, prolog, epilog), outside any
    unit's stream: it sends its entries to the journal itself, with its tag."""
    guard = metadata_guard.script_context(blueprint, "compute")
    role = f"compute-{nodeset.name}"
    agent = ops_agent.script_context(blueprint, "compute",
                                     ("slurmd.service", *((guard["unit"],) if guard else ())),
                                     boot_log_tag(role), nodeset,
                                     programs=(healthcheck_program.log.program,))
    return render("scripts/compute.sh.j2", ops_agent=agent, nodeset=nodeset.name, gpus=nodeset.gpus,
                  fabric=fabric_context(blueprint, nodeset),
                  node_conf=dynamic_node_conf(nodeset, capacity.power_saving(blueprint)),
                  conf_server=conf_server(blueprint),
                  node=gpu_node.gpu_node(nodeset.machine_type) if nodeset.gpus else None,
                  healthcheck=healthcheck.script_context(blueprint, nodeset),
                  topology=topology.placement(blueprint, nodeset),
                  guard=guard,
                  **_common(blueprint, role,
                            boot_context(compute_parts(blueprint, nodeset), nodeset)))
