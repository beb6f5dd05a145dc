"""The node health check as rendered: the program, one config per nodeset, Slurm's lines.

`clusterprint render` writes ``scripts/healthcheck.py`` (the program, as shipped in
``clusterprint/node/healthcheck.py``), ``scripts/common.py`` (the module it shares with the
other node programs) and ``scripts/healthcheck-<nodeset>.json``; each compute script
installs them, a HealthCheckProgram wrapper and, where the nodeset's GPUs are checked, the
prolog (and with ``gpu: thorough`` the epilog) that runs the program.

The config is the program's own ``Config``, built here from the blueprint and written as
JSON: what the blueprint does not decide (free space, timeouts, budgets, the state file)
keeps the program's defaults, and a value the program would refuse fails the render.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.facts import machines
from clusterprint.node import healthcheck as program
from clusterprint.render.node_programs import program_files

#: Where a node keeps the program and its config (node-local, beside prolog.d: configless
#: slurmd fetches only slurm.conf and its kin) and its state.
PROGRAM = "/etc/slurm/clusterprint/healthcheck.py"
CONFIG = "/etc/slurm/clusterprint/healthcheck.json"
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


def healthcheck_config(blueprint: Blueprint, nodeset: Nodeset) -> program.Config:
    """What the program checks on a node of ``nodeset``: its GPUs always (so that a GPU
    nodeset's config says whether they are checked), what they must be where they are.
    ``gpu: quick`` runs DCGM level 1 before each job, ``thorough`` also level 2 after a
    failed one (level 1 takes seconds, level 2 about two minutes: dcgmi diag docs)."""
    gpu = None
    if checks_gpus(blueprint, nodeset):
        family = machines.gpu_family(nodeset.machine_type)
        thorough = blueprint.slurm.health_checks.gpu == "thorough"
        gpu = program.GpuChecks(gpu_model(family.gpu), nvlink=family.nvlink,
                                dcgm_level=program.DCGM_QUICK,
                                dcgm_level_after_failure=program.DCGM_THOROUGH if thorough
                                else None)
    return program.Config(nodeset.name, nodeset.gpus, gpu, mounts=tuple(mounts(blueprint)))


def config_path(nodeset: str) -> str:
    """Where a nodeset's config lands under ``clusterprint render --out``."""
    return f"scripts/healthcheck-{nodeset}.json"


def config_text(blueprint: Blueprint, nodeset: Nodeset) -> str:
    """The config as the file holds it."""
    return json.dumps(dataclasses.asdict(healthcheck_config(blueprint, nodeset)),
                      indent=2) + "\n"


def healthcheck_files(blueprint: Blueprint) -> dict[str, str]:
    """The program, common.py and every nodeset's config, by their paths under ``--out``."""
    files = program_files("scripts", program)
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
    return {"files": program_files(posixpath.dirname(PROGRAM), program),
            "config": config_text(blueprint, nodeset),
            "paths": {"program": PROGRAM, "config": CONFIG, "wrapper": HEALTH_CHECK_PROGRAM,
                      "prolog": PROLOG, "epilog": EPILOG},
            "prolog": checks_gpus(blueprint, nodeset),
            "epilog": checks_gpus(blueprint, nodeset)
            and blueprint.slurm.health_checks.gpu == "thorough"}
