"""The Slurm files of the controller and login nodes as one metadata value, and the program
that installs them at boot and on every change (clusterprint/node/config_sync.py).

The value of metadata ``clusterprint-slurm-config`` is the one source of those files: the
startup scripts carry no copy, so a changed slurm.conf changes that key only, which a
running node follows (the clusterprint-config-sync service), while a changed startup
script waits for the VM's next boot.
"""

from __future__ import annotations

import json

from clusterprint.contract import node_metadata
from clusterprint.node import config_sync
from clusterprint.render import node_programs

#: The Slurm files each role installs: the controller every one it serves the configless
#: compute nodes; a login node what its client commands read (slurm.conf; srun also reads
#: plugstack.conf for pyxis, and every command loads the topology plugins topology.yaml
#: names). gres.conf and cgroup.conf only matter where slurmd runs.
ROLE_FILES = {"controller": ("slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf",
                             "topology.yaml"),
              "login": ("slurm.conf", "plugstack.conf", "topology.yaml")}
#: The command the nodes run: a link to the program, which lies beside common.py in the
#: folder script_context is given (node_scripts.MLOPS_LIB on a login node, remediation.FOLDER
#: on the controller); Python resolves the link.
PROGRAM = "/usr/local/sbin/clusterprint-config-sync"
UNIT = "clusterprint-config-sync.service"
#: The journal tag of the service (its SyslogIdentifier).
LOG_TAG = "clusterprint-config-sync"


def program_text() -> str:
    """The program as the package ships it, the very file its tests run, with the
    interpreter line that makes it a command."""
    return node_programs.module_text(config_sync, shebang=True)


def slurm_config_value(slurm_files: dict[str, str], role: str) -> str:
    """What metadata ``clusterprint-slurm-config`` holds on a VM of ``role``: its files, by
    name, as one JSON object (the same bytes for the same files)."""
    chosen = {name: slurm_files[name] for name in ROLE_FILES[role] if name in slurm_files}
    return json.dumps(chosen, sort_keys=True)


def script_context(role: str, folder: str) -> dict[str, object]:
    """What scripts/config_sync.sh.j2 installs on a controller or login node: the program
    and common.py in ``folder`` (the program executable), the command a link to it."""
    files = node_programs.program_files(folder, config_sync, shebang=True)
    program = next(iter(files))
    return {"files": node_programs.with_modes(files, program), "program": program,
            "path": PROGRAM, "unit": UNIT, "log_tag": LOG_TAG, "key": node_metadata.SLURM_CONFIG,
            "role": role}
