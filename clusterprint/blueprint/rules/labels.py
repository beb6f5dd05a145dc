"""Label rules: which label keys a blueprint may set."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, error
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.contract import naming


@rule("labels.reserved")
def check_reserved_labels(bp: Blueprint) -> Iterator[Finding]:
    """``clusterprint-*`` keys are clusterprint's own: it would silently replace the
    blueprint's value (the dashboard selects VMs by ``clusterprint-cluster``)."""
    prefix = naming.RESERVED_LABEL_PREFIX
    for key in bp.labels:
        if key.startswith(prefix):
            rest = key.removeprefix(prefix)
            yield error(("labels", key), f"label keys starting {prefix} are clusterprint's own",
                        f"use a key of your own, e.g. {rest}" if rest else
                        "use a key of your own")
