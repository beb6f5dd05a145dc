"""One zone: every zonal part of the cluster lives in ``zone``, inside ``region``."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, error, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.blueprint.rules.slurm import machine_types
from clusterprint.facts import machines


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


@rule("location.machine-zone")
def check_machine_in_zone(bp: Blueprint) -> Iterator[Finding]:
    """A machine type the zone does not offer fails only at ``pulumi up``, after the
    network and storage exist; the catalog's zone table says so offline.

    A warning, not an error: the table is a dated copy (``facts.zones.MACHINE_ZONES_SOURCE``)
    and Google adds zones; a type the table does not list is not checked at all.
    """
    for path, machine_type in machine_types(bp):
        zones = machines.machine_zones(machine_type)
        if not zones or bp.zone in zones:
            continue
        here = [z for z in zones if zone_region(z) == bp.region]
        hint = (f"zones of {bp.region} that offer it: {', '.join(here)}" if here else
                f"{bp.region} has none; regions that do: "
                f"{', '.join(sorted({zone_region(z) for z in zones}))}")
        yield warning(path, f"{machine_type} is not offered in zone {bp.zone}, as far as the "
                            f"catalog's zone table knows", hint)
