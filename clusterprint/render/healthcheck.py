"""The node health check as rendered: the program, one config per nodeset, Slurm's lines.

`clusterprint render` writes ``scripts/healthcheck.py`` (the program, as shipped in
``clusterprint/node/healthcheck.py``) and ``scripts/healthcheck-<nodeset>.json``; each
compute script installs both, a HealthCheckProgram wrapper and, where the nodeset's GPUs
are checked, the prolog (and with ``gpu: thorough`` the epilog) that runs the program.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.facts import machines

#: Where a node keeps the program and its config (node-local, beside prolog.d: configless
#: slurmd fetches only slurm.conf and its kin) and its state.
PROGRAM = "/etc/slurm/clusterprint/healthcheck.py"
CONFIG = "/etc/slurm/clusterprint/healthcheck.json"
STATE = "/var/lib/clusterprint/healthcheck-state.json"
#: HealthCheckProgram: Slurm runs it without arguments, so a wrapper names the mode.
HEALTH_CHECK_PROGRAM = "/etc/slurm/clusterprint/healthcheck"
#: Slurm runs the files of a Prolog/Epilog glob in reverse alphabetical order
#: (slurm.conf(5), Prolog): 90- runs before 10-rxdm and the other GPU prologs, so a
#: broken GPU drains the node and requeues the job before they spend minutes on it.
PROLOG = "/etc/slurm/prolog.d/90-clusterprint-healthcheck"
EPILOG = "/etc/slurm/epilog.d/90-clusterprint-healthcheck"
#: HealthCheckNodeState: any node, but CYCLE spreads the runs over the interval instead
#: of running every node's check at the same moment (slurm.conf(5)). Written in the order
#: `scontrol show config` prints it back (cycle,any), so the kept value reads as written.
NODE_STATE = "CYCLE,ANY"
#: Free space a node needs, GiB: the boot disk always, the local SSD where it is mounted
#: (enroot's images and caches live there on GPU nodes).
MIN_FREE_GIB = {"/": 10, "/mnt/localssd": 50}
#: The DCGM diagnostic levels of ``gpu: quick`` (before each job) and ``thorough`` (also
#: after a failed job): level 1 takes seconds, level 2 about two minutes (dcgmi diag docs).
DCGM_QUICK, DCGM_THOROUGH = 1, 2


def program_text() -> str:
    """The program as the package ships it: the very file its tests run."""
    return resources.files("clusterprint.node").joinpath("healthcheck.py").read_text()


def gpu_model(accelerator: str) -> str:
    """The model nvidia-smi names a GCE accelerator type with: nvidia-h100-mega-80gb is
    an H100, nvidia-tesla-a100 an A100, nvidia-gb200 a GB200."""
    match = re.match(r"nvidia-(?:tesla-)?([a-z]+\d+)", accelerator)
    assert match, f"not an NVIDIA accelerator type: {accelerator}"
    return match[1].upper()


def checks_gpus(blueprint: Blueprint, nodeset: Nodeset) -> bool:
    """Whether the nodeset's GPUs are checked: it has some and ``gpu`` is not ``off``."""
    return nodeset.gpus > 0 and blueprint.slurm.health_checks.gpu != "off"


def mounts(blueprint: Blueprint) -> list[str]:
    """Every shared file system a compute node mounts: /home, Lustre and buckets."""
    lustre = [blueprint.mount_of(x) for x in blueprint.storage.lustre]
    buckets = [b.mount_path for b in blueprint.storage.buckets]
    return list(dict.fromkeys(["/home", *lustre, *buckets]))


def healthcheck_config(blueprint: Blueprint, nodeset: Nodeset) -> dict:
    """What the program checks on a node of ``nodeset``."""
    gpu = None
    if checks_gpus(blueprint, nodeset):
        family = machines.gpu_family(nodeset.machine_type)
        model = gpu_model(family.gpu)
        thorough = blueprint.slurm.health_checks.gpu == "thorough"
        gpu = {"count": nodeset.gpus, "model": model, "nvlink": family.nvlink,
               "dcgm_level": DCGM_QUICK,
               "dcgm_level_after_failure": DCGM_THOROUGH if thorough else None}
    return {"nodeset": nodeset.name, "gpu": gpu, "mounts": mounts(blueprint),
            "disks": [{"path": path, "min_free_gib": gib, "if_mounted": path != "/"}
                      for path, gib in MIN_FREE_GIB.items()],
            "nvlink_error_threshold": 0, "state_file": STATE}


def config_path(nodeset: str) -> str:
    """Where a nodeset's config lands under ``clusterprint render --out``."""
    return f"scripts/healthcheck-{nodeset}.json"


def config_text(blueprint: Blueprint, nodeset: Nodeset) -> str:
    """The config as the file holds it."""
    return json.dumps(healthcheck_config(blueprint, nodeset), indent=2) + "\n"


def healthcheck_files(blueprint: Blueprint) -> dict[str, str]:
    """The program and every nodeset's config, by their paths under ``--out``."""
    files = {"scripts/healthcheck.py": program_text()}
    files.update({config_path(n.name): config_text(blueprint, n)
                  for n in blueprint.slurm.nodesets})
    return files


def slurm_conf_lines(blueprint: Blueprint) -> list[str]:
    """slurm.conf's health check lines: none when ``interval_s`` is 0."""
    interval = blueprint.slurm.health_checks.interval_s
    if not interval:
        return []
    return [f"HealthCheckProgram={HEALTH_CHECK_PROGRAM}", f"HealthCheckInterval={interval}",
            f"HealthCheckNodeState={NODE_STATE}"]


def script_context(blueprint: Blueprint, nodeset: Nodeset) -> dict[str, object]:
    """What scripts/healthcheck.sh.j2 installs on a node of ``nodeset``."""
    return {"program": program_text(), "config": config_text(blueprint, nodeset),
            "paths": {"program": PROGRAM, "config": CONFIG, "wrapper": HEALTH_CHECK_PROGRAM,
                      "prolog": PROLOG, "epilog": EPILOG},
            "prolog": checks_gpus(blueprint, nodeset),
            "epilog": checks_gpus(blueprint, nodeset)
            and blueprint.slurm.health_checks.gpu == "thorough"}
