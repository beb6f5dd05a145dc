"""The controller's Slurm exporter as rendered: the program, its config, its service.

`clusterprint render` writes ``scripts/slurm_exporter.py`` (clusterprint/node/, beside the
remediation loop it reads the state of) and ``scripts/slurm-exporter.json``; the
controller script installs them and the systemd service that serves /metrics on
127.0.0.1, which the Ops Agent's Prometheus receiver (clusterprint/facts/slurm_metrics.py)
scrapes. The config names every nodeset of the blueprint, so each has its figures, zeros
included, before a node registers; the partitions the exporter asks Slurm for.
"""

from __future__ import annotations

import json

from clusterprint.blueprint.model import Blueprint
from clusterprint.facts import slurm_metrics
from clusterprint.node import slurm_exporter
from clusterprint.render import remediation
from clusterprint.render.node_programs import program_files, with_modes

PROGRAM = f"{remediation.FOLDER}/slurm_exporter.py"
CONFIG = f"{remediation.FOLDER}/slurm-exporter.json"
UNIT = "clusterprint-slurm-exporter.service"
#: The journal tag of the service (its SyslogIdentifier).
LOG_TAG = "clusterprint-slurm-exporter"


def exporter_config(blueprint: Blueprint) -> slurm_exporter.Config:
    """What the exporter reports on: the blueprint's nodesets (a new one reaches the
    controller at its next boot, as the loop's config does), the loop's state file, the port
    the receiver scrapes."""
    return slurm_exporter.Config(
        nodesets=[n.name for n in blueprint.slurm.nodesets],
        state_file=remediation.STATE, port=slurm_metrics.PORT, address=slurm_metrics.ADDRESS)


def config_text(blueprint: Blueprint) -> str:
    """The config as the file holds it."""
    return json.dumps(exporter_config(blueprint).__dict__, indent=2) + "\n"


def exporter_files(blueprint: Blueprint) -> dict[str, str]:
    """The program (what it imports is the loop's, remediation_files) and the config, by
    their paths under ``--out``."""
    return {**program_files("scripts", slurm_exporter),
            "scripts/slurm-exporter.json": config_text(blueprint)}


def script_context(blueprint: Blueprint) -> dict[str, object]:
    """What scripts/slurm_exporter.sh.j2 installs on the controller: the program with
    common.py (the loop's modules, which it imports, are shipped with the loop), the config,
    the service."""
    programs = with_modes(program_files(remediation.FOLDER, slurm_exporter), PROGRAM)
    return {"programs": programs, "config": config_text(blueprint),
            # a new loop may write its state anew: the exporter restarts with it
            "restart_on": sorted({*programs, *remediation.programs(remediation.FOLDER)}),
            "program": PROGRAM, "config_path": CONFIG, "unit": UNIT, "log_tag": LOG_TAG,
            "address": slurm_metrics.ADDRESS, "port": slurm_metrics.PORT,
            # what the controller's Ops Agent scrapes it with (render/ops_agent.py)
            "receiver": slurm_metrics.receiver(blueprint.name)}
