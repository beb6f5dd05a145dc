"""The stack program as an importable function, so a plan can run it under mocks."""

from __future__ import annotations

import pulumi

from clusterprint.components.cluster import TrainingCluster
from clusterprint.components.managed import ManagedTrainingCluster
from clusterprint.model import Blueprint
from clusterprint.validate import InvalidBlueprint, load_checked

#: The stack config key naming the blueprint file, relative to the project directory.
BLUEPRINT_KEY = "blueprint"
DEFAULT_BLUEPRINT = "blueprints/a3mega.yaml"


def build(blueprint_path: str) -> TrainingCluster | ManagedTrainingCluster:
    """Load and check the blueprint, then declare its cluster (see ``declare``).

    A blueprint that ``clusterprint validate`` refuses is refused here with the same
    lines, before any resource is declared.
    """
    try:
        blueprint = load_checked(blueprint_path)
    except InvalidBlueprint as exc:
        raise pulumi.RunError(f"{blueprint_path} is not a valid blueprint:\n{exc}") from exc
    return declare(blueprint)


def declare(blueprint: Blueprint) -> TrainingCluster | ManagedTrainingCluster:
    """Declare the cluster of an already checked blueprint and export what users need.

    ``clusterprint plan`` and ``diff`` call this with the blueprint they checked, so a
    file is read once (a pipe can be read only once).
    """
    kind = ManagedTrainingCluster if blueprint.orchestrator == "managed" else TrainingCluster
    cluster = kind(blueprint.name, blueprint)
    for key, value in cluster.exports.items():
        pulumi.export(key, value)
    return cluster


def main() -> TrainingCluster | ManagedTrainingCluster:
    """The program ``pulumi up`` runs: the blueprint named by ``clusterprint:blueprint``."""
    path = pulumi.Config("clusterprint").get(BLUEPRINT_KEY) or DEFAULT_BLUEPRINT
    return build(path)
