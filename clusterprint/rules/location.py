"""One zone: every zonal part of the cluster lives in ``zone``, inside ``region``."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.findings import Finding, error
from clusterprint.model import Blueprint
from clusterprint.rules.registry import rule


def zone_region(zone: str) -> str:
    """The region a zone belongs to: ``us-central1-a`` lies in ``us-central1``."""
    return zone.rsplit("-", 1)[0]


@rule("location.zone-in-region")
def check_zone_in_region(bp: Blueprint) -> Iterator[Finding]:
    """The zone must lie in the region; every zonal resource takes the zone."""
    if zone_region(bp.zone) != bp.region:
        yield error(("zone",), f"zone {bp.zone} is not in region {bp.region}",
                    f"try {bp.region}-a, or region {zone_region(bp.zone)}")


@rule("location.existing-subnetwork-region")
def check_existing_subnetwork_region(bp: Blueprint) -> Iterator[Finding]:
    """An existing subnetwork must be in the cluster's region to carry its VMs."""
    sub = bp.network.existing_subnetwork
    if sub and sub.split("/")[3] != bp.region:
        yield error(("network", "existing_subnetwork"),
                    f"subnetwork is in region {sub.split('/')[3]}, the cluster in {bp.region}")
