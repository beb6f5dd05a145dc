"""One zone: every zonal part of the cluster lives in ``zone``, inside ``region``."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, error, format_path, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.blueprint.rules.slurm import MachineTypeKey, machine_types
from clusterprint.facts import machines
from clusterprint.facts.zones import CPU_SERIES_ZONES, known_zones


def zone_region(zone: str) -> str:
    """The region a zone belongs to: ``us-central1-a`` lies in ``us-central1``."""
    return zone.rsplit("-", 1)[0]


@rule("location.zone-in-region")
def check_zone_in_region(bp: Blueprint) -> Iterator[Finding]:
    """The zone must lie in the region; every zonal resource takes the zone."""
    if zone_region(bp.zone) != bp.region:
        yield error(("zone",), f"zone {bp.zone} is not in region {bp.region}",
                    f"try {bp.region}-a, or region {zone_region(bp.zone)}")


def zones_instead(bp: Blueprint) -> list[str]:
    """The zones of the zone's region, where the catalog's zone table knows that region and
    not the zone (and ``zone_unlisted`` does not say it is newer than the table); else none."""
    known = known_zones()
    if bp.zone_unlisted or bp.zone in known:
        return []
    return sorted(z for z in known if zone_region(z) == zone_region(bp.zone))


@rule("location.zone-known")
def check_zone_known(bp: Blueprint) -> Iterator[Finding]:
    """A zone the region does not have (``us-central1-q``) fails only at `pulumi up`; a
    region the catalog's zone table knows lists its zones, so the typo is an error with
    the close match, whatever the machine types. A region the table does not know is not
    checked, and ``zone_unlisted: true`` says the zone is newer than the table."""
    here = zones_instead(bp)
    if not here:
        return
    close = difflib.get_close_matches(bp.zone, here, n=1, cutoff=0)
    yield error(("zone",), f"zone {bp.zone} is not a zone of {zone_region(bp.zone)} as far as "
                           "the catalog's zone table knows",
                f"did you mean {close[0]}? its zones: {', '.join(here)}; if the zone is newer "
                "than the table, set zone_unlisted: true")


@rule("location.existing-subnetwork-region")
def check_existing_subnetwork_region(bp: Blueprint) -> Iterator[Finding]:
    """An existing subnetwork must be in the cluster's region to carry its VMs."""
    sub = bp.network.existing_subnetwork
    if sub and sub.split("/")[3] != bp.region:
        yield error(("network", "existing_subnetwork"),
                    f"subnetwork is in region {sub.split('/')[3]}, the cluster in {bp.region}")


def offered_instead(machine_type: str, zone: str) -> list[str]:
    """The same CPU shape in the series ``zone`` offers: c2-standard-8 gives n2-standard-8
    where C2 is missing (the controller's default type is C2)."""
    if machines.gpu_family(machine_type):
        return []
    shape = machine_type.partition("-")[2]
    return [other for series in CPU_SERIES_ZONES
            if (other := f"{series}-{shape}") != machine_type
            and machines.cpu_machine_known(other) and zone in machines.machine_zones(other)]


def _way_out(key: MachineTypeKey, zones: tuple[str, ...], bp: Blueprint) -> str:
    """The nearest of the region's zones that offer the type; else the same shape of a series
    the zone offers; else the regions that offer it."""
    here = [z for z in zones if zone_region(z) == bp.region]
    if here:
        close = difflib.get_close_matches(bp.zone, here, n=1, cutoff=0)
        return f"did you mean {close[0]}? zones of {bp.region} that offer it: {', '.join(here)}"
    instead = offered_instead(key.machine_type, bp.zone)
    if instead:
        return f"{bp.zone} offers {', '.join(instead)}: set {format_path(key.path)} to one"
    return (f"{bp.region} has none; regions that do: "
            f"{', '.join(sorted({zone_region(z) for z in zones}))}")


@rule("location.machine-zone")
def check_machine_in_zone(bp: Blueprint) -> Iterator[Finding]:
    """A machine type the zone does not offer fails only at ``pulumi up``, after the
    network and storage exist; the catalog's zone table says so offline.

    An error with the zones that do offer it, as the wizard refuses such a zone. The table
    is a dated copy (``facts.zones.MACHINE_ZONES_SOURCE``) and Google adds zones, so
    ``zone_unlisted: true`` makes it a warning; a type whose zones the table does not list
    is not checked at all. A zone its region does not have is location.zone-known's one
    error, not one more per machine type.
    """
    if zones_instead(bp):
        return
    escaped = False
    for key in machine_types(bp):
        zones = machines.machine_zones(key.machine_type)
        if not zones or bp.zone in zones:
            continue
        message = f"{key.machine_type} is not offered in zone {bp.zone}"
        if bp.zone_unlisted:
            escaped = True
            yield warning(key.path, f"{message} as far as the catalog's zone table knows; "
                                    "zone_unlisted says it is",
                          "check it is: gcloud compute machine-types list "
                          f"--filter=name={key.machine_type} --zones={bp.zone}")
            continue
        yield error(key.path, message, f"{_way_out(key, zones, bp)}; if the catalog's zone "
                                       "table is older than the zone's offer, set "
                                       "zone_unlisted: true")
    if bp.zone_unlisted and not escaped:
        yield warning(("zone_unlisted",), f"the catalog's zone table lists every machine type "
                                          f"of the blueprint in {bp.zone}, or none of them",
                      "remove zone_unlisted, so validate checks the zone")
