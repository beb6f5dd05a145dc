"""Where ``clusterprint image build`` runs the builders of a blueprint's images.

``pulumi up`` builds in the cluster's own subnetwork, behind its Cloud NAT
(``components/node_image.py``). Before a cluster exists there is no such subnetwork, and
Pulumi names it with a random suffix, so the command builds in the subnetwork the blueprint
names (``network.existing_subnetwork``), or one given with ``--subnetwork``, each without an
external IP (it must reach the internet through Cloud NAT); otherwise in the project's
``default`` network with an ephemeral external IP, as the Cluster Toolkit's image builds do
(``omit_external_ip: false`` in its a4xhigh-slurm-blueprint.yaml).
"""

from __future__ import annotations

from clusterprint.blueprint.model import Blueprint
from clusterprint.build.builder import BuildSite


def command_site(blueprint: Blueprint, project: str, subnetwork: str | None = None
                 ) -> BuildSite:
    """Where ``clusterprint image build`` runs the builders of ``blueprint``."""
    chosen = subnetwork or blueprint.network.existing_subnetwork
    return BuildSite(project=project, zone=blueprint.zone, subnetwork=chosen,
                     external_ip=chosen is None)


def network_words(site: BuildSite) -> str:
    """Where the builders run, as a person reads it."""
    if site.subnetwork is None:
        return f"the default network of {site.project}, with an external IP"
    return f"{site.subnetwork}, without an external IP (it needs Cloud NAT)"
