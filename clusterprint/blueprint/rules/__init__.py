"""The rules a JSON Schema cannot say, one small function each, grouped by domain.

Each rule has a stable id (users and CI match on it), reads the checked model and
yields every problem it sees rather than stopping at the first.
"""

from __future__ import annotations

from clusterprint.blueprint.findings import Finding
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules import (
    labels,
    location,
    managed,
    names,
    network,
    recipes,
    security,
    slurm,
    storage,
)
from clusterprint.blueprint.rules.registry import RULES, rule

__all__ = ["RULES", "check", "rule"]

# Importing each domain registers its rules.
_DOMAINS = (location, names, labels, network, storage, slurm, recipes, security, managed)


def check(blueprint: Blueprint) -> list[Finding]:
    """Every finding of every rule, in rule order, as the blueprint's orchestrator sees it."""
    found = [finding for r in RULES for finding in r.check(blueprint)]
    return managed.as_managed_mode_sees_it(blueprint, found)
