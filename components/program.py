"""The stack program as an importable function, so a plan can run it under mocks."""

from __future__ import annotations

import shlex
from pathlib import Path

import pulumi

from clusterprint.blueprint.findings import Finding, Located
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_file, printable
from clusterprint.components.cluster import TrainingCluster
from clusterprint.components.managed import ManagedTrainingCluster
from clusterprint.components.teardown import after_destroy

#: The stack config key naming the blueprint file, relative to the project directory.
BLUEPRINT_KEY = "blueprint"
#: Where the reference blueprints live, relative to the project directory.
REFERENCE_BLUEPRINTS = "blueprints"
#: The blueprint a stack without one is pointed at: the cheapest cluster to try.
FIRST_BLUEPRINT = f"{REFERENCE_BLUEPRINTS}/cpu-small.yaml"


def build(blueprint_path: str) -> TrainingCluster | ManagedTrainingCluster:
    """Load and check the blueprint, then declare its cluster (see ``declare``).

    A blueprint that ``clusterprint validate`` refuses is refused here with the same
    lines, before any resource is declared. The warnings of one it accepts go to
    Pulumi's log, so ``pulumi preview`` and ``up`` show what ``validate`` would.
    """
    checked = check_file(blueprint_path)
    if not checked.ok or checked.blueprint is None:
        lines = "\n".join(checked.lines())
        raise pulumi.RunError(f"{blueprint_path} is not a valid blueprint:\n{lines}")
    warnings = [f for f in checked.findings if f.finding.severity == "warning"]
    mismatch = project_mismatch(blueprint_path, checked.blueprint)
    for finding in warnings + ([mismatch] if mismatch else []):
        pulumi.log.warn(printable(finding.line_text()))
    return declare(checked.blueprint, blueprint_path)


def project_mismatch(blueprint_path: str, blueprint: Blueprint) -> Located | None:
    """A warning when the blueprint's ``project`` is not the stack's ``gcp:project``.

    Every component passes the blueprint's project to its resources explicitly, so the
    cluster lands there whatever the stack says; ``gcp:project`` is only the provider's
    fallback. Two different projects usually mean a stack pointed at the wrong
    blueprint, or a blueprint copied without changing ``project``.
    """
    stack_project = pulumi.Config("gcp").get("project")
    if not blueprint.project or not stack_project or blueprint.project == stack_project:
        return None
    return Located(blueprint_path, None, None, Finding(
        ("project",), "stack.project",
        f"{blueprint.project} differs from the stack's gcp:project {stack_project}; every "
        f"resource is created in {blueprint.project}, the blueprint's project",
        f"pulumi config set gcp:project {blueprint.project}, or remove project from the "
        f"blueprint to use the stack's", "warning"))


def declare(blueprint: Blueprint, blueprint_path: str | None = None
            ) -> TrainingCluster | ManagedTrainingCluster:
    """Declare the cluster of an already checked blueprint and export what users need,
    ending with what a ``pulumi destroy`` would leave billing (components/teardown.py).

    ``clusterprint plan`` and ``diff`` call this with the blueprint they checked, so a
    file is read once (a pipe can be read only once). With the blueprint's path (``pulumi
    up``'s), a self-managed cluster also exports ``status``: the command that shows its VMs
    boot, which ``pulumi up`` prints as it ends (its groups do not wait for their VMs).
    """
    kind = ManagedTrainingCluster if blueprint.orchestrator == "managed" else TrainingCluster
    cluster = kind(blueprint.name, blueprint)
    if blueprint_path and isinstance(cluster, TrainingCluster):
        cluster.exports["status"] = f"clusterprint status {shlex.quote(blueprint_path)}"
    for key, value in cluster.exports.items():
        pulumi.export(key, value)
    pulumi.export("after_destroy", after_destroy(blueprint))
    return cluster


def no_blueprint_message() -> str:
    """Why a stack without ``clusterprint:blueprint`` is refused, and the command that fixes it.

    The stack has no default blueprint on purpose: any default would be a cluster
    someone pays for without having chosen it. The choices are the reference
    blueprints found next to the program (``pulumi up`` runs in the project directory).
    """
    choices = sorted(p.as_posix() for p in Path(REFERENCE_BLUEPRINTS).glob("*.yaml"))
    example = FIRST_BLUEPRINT if FIRST_BLUEPRINT in choices else "PATH/TO/BLUEPRINT.yaml"
    text = (f"this stack names no blueprint (the config key clusterprint:{BLUEPRINT_KEY} "
            f"is not set); choose one and run:\n"
            f"    pulumi config set clusterprint:{BLUEPRINT_KEY} {example}")
    if choices:
        text += (f"\nreference blueprints: {', '.join(choices)}, or a file of your own"
                 + (f" ({FIRST_BLUEPRINT} is the cheapest to try)" if example in choices else ""))
    return text


def main() -> TrainingCluster | ManagedTrainingCluster:
    """The program ``pulumi up`` runs: the blueprint named by ``clusterprint:blueprint``."""
    path = pulumi.Config("clusterprint").get(BLUEPRINT_KEY)
    if not path:
        raise pulumi.RunError(no_blueprint_message())
    return build(path)
