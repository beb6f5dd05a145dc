"""Rendering what the nodes run from a checked blueprint (jinja2, pure: same bytes every time).

``node_scripts`` is what the components put in each VM's ``startup-script`` metadata (and
the controller's and login nodes' ``clusterprint-slurm-config``);
``rendered_files`` is every file by the path ``clusterprint render`` writes it to: the Slurm
files, the scripts, ``jobs/`` (the NCCL proof of each GPU partition), ``recipes/`` and the
node programs, and ``images/NAME.sh``, the install script of each image the nodes boot.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.blueprint.model import Blueprint
from clusterprint.render import metadata_guard
from clusterprint.render.capacity import capacity_files
from clusterprint.render.config_sync import ROLE_FILES, slurm_config_value
from clusterprint.render.healthcheck import healthcheck_files
from clusterprint.render.images import needed_images
from clusterprint.render.nccl_job import render_nccl_jobs
from clusterprint.render.node_scripts import (
    render_compute_script,
    render_controller_script,
    render_login_script,
)
from clusterprint.render.recipes import render_recipes
from clusterprint.render.remediation import remediation_files
from clusterprint.render.slurm_config import render_slurm_configs
from clusterprint.render.slurm_metrics import exporter_files
from clusterprint.render.topology import topology_files


@dataclass(frozen=True)
class NodeScripts:
    """The startup script of each role, and the Slurm files of the controller and login
    nodes: what the components put in VM metadata."""

    controller: str
    login: str
    #: nodeset name -> its compute nodes' startup script
    compute: dict[str, str]
    #: role (controller, login) -> its metadata ``clusterprint-slurm-config``
    slurm_config: dict[str, str]
    #: login and compute VMs' ``user-data`` (cloud-init loads the metadata guard before
    #: logins); None where users hold the node's credentials (no guard)
    user_data: str | None


def node_scripts(blueprint: Blueprint) -> NodeScripts:
    """Startup scripts for every role of the blueprint's cluster."""
    slurm_files = render_slurm_configs(blueprint)
    return NodeScripts(
        controller=render_controller_script(blueprint, slurm_files),
        login=render_login_script(blueprint, slurm_files, staged_files(blueprint)),
        compute={n.name: render_compute_script(blueprint, n) for n in blueprint.slurm.nodesets},
        slurm_config={role: slurm_config_value(slurm_files, role) for role in ROLE_FILES},
        user_data=(None if blueprint.security.users_get_node_credentials
                   else metadata_guard.cloud_config()))


def staged_files(blueprint: Blueprint) -> dict[str, str]:
    """What the login node stages for every user, by rendered path: jobs/ and recipes/."""
    return {**render_nccl_jobs(blueprint), **render_recipes(blueprint)}


def compute_script_path(nodeset: str) -> str:
    """Where a nodeset's compute script lands under ``clusterprint render --out``."""
    return f"scripts/compute-{nodeset}.sh"


def rendered_files(blueprint: Blueprint) -> dict[str, str]:
    """Every rendered file by its path relative to the output folder."""
    scripts = node_scripts(blueprint)
    files = render_slurm_configs(blueprint)
    files["scripts/controller.sh"] = scripts.controller
    files["scripts/login.sh"] = scripts.login
    files.update({compute_script_path(name): text for name, text in scripts.compute.items()})
    files.update(staged_files(blueprint))
    files.update(healthcheck_files(blueprint))
    files.update(remediation_files(blueprint))
    files.update(exporter_files(blueprint))
    files.update(topology_files(blueprint))
    files.update(capacity_files(blueprint))
    files.update({image.script_path: image.script for image in needed_images(blueprint)})
    return files
