"""Where machine types exist: the zones of each, read from one dated source.

A GPU machine type's zones are on its row of ``machines.py``, written with ``zones`` below;
a CPU series' zones are here.
"""

from __future__ import annotations


def zones(spec: str) -> tuple[str, ...]:
    """``"us-central1:abc europe-west4:b"`` as its zones: us-central1-a, -b, -c, europe-west4-b."""
    return tuple(f"{region}-{letter}" for part in spec.split()
                 for region, letters in [part.split(":")] for letter in letters)


#: Where the zones here and on machines.py's rows come from, and when they were read.
#: Google's own "GPU regions and zones" page (cloud.google.com/compute/docs/gpus/
#: gpu-regions-zones) could not be read here; this is SkyPilot's catalog of Compute Engine
#: machine types per zone, generated from the Compute Engine API (machineTypes.
#: aggregatedList): skypilot-org/skypilot-catalog
#: catalogs/v8/gcp/vms.csv at commit 006059e0f18acb1341e22a27751e9f80df6ba92f
#: (https://github.com/skypilot-org/skypilot-catalog/blob/006059e0f18acb1341e22a27751e9f80df6ba92f/catalogs/v8/gcp/vms.csv),
#: read 2026-12-01. Its reference blueprints' zones agree (a3mega us-central1-a, a3ultra
#: europe-west1-b, a4 us-central1-b). Not in that copy, so not offered: A4X and G2 (G2's
#: rows were not read). AI zones such as us-south1-ai1b are left out: a blueprint's zone
#: is a region plus one letter.
MACHINE_ZONES_SOURCE = ("skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv at 006059e0, "
                        "from the Compute Engine API; read 2026-12-01")

#: Zones of each CPU series (every shape of N2 and C2 is in its series' zones). Source and
#: date: MACHINE_ZONES_SOURCE.
CPU_SERIES_ZONES: dict[str, tuple[str, ...]] = {
    "c2": zones(
        "asia-east1:abc asia-east2:abc asia-northeast1:abc asia-northeast2:abc "
        "asia-northeast3:abc asia-south1:abc asia-south2:abc asia-southeast1:abc "
        "australia-southeast1:abc europe-north1:abc europe-west1:bcd europe-west2:abc "
        "europe-west3:abc europe-west4:abc europe-west6:abc me-central2:abc me-west1:abc "
        "northamerica-northeast1:abc southamerica-east1:abc southamerica-west1:abc "
        "us-central1:abcf us-east1:bcd us-east4:abc us-east5:abc us-west1:abc us-west2:abc "
        "us-west3:abc us-west4:abc"),
    "n2": zones(
        "africa-south1:abc asia-east1:abc asia-east2:abc asia-northeast1:abc "
        "asia-northeast2:abc asia-northeast3:abc asia-south1:abc asia-south2:abc "
        "asia-southeast1:abc asia-southeast2:abc australia-southeast1:abc "
        "australia-southeast2:abc europe-central2:abc europe-north1:abc "
        "europe-southwest1:abc europe-west1:bcd europe-west10:abc europe-west12:abc "
        "europe-west2:abc europe-west3:abc europe-west4:abc europe-west6:abc "
        "europe-west8:abc europe-west9:abc me-central1:abc me-central2:abc me-west1:abc "
        "northamerica-northeast1:abc northamerica-northeast2:abc southamerica-east1:abc "
        "southamerica-west1:abc us-central1:abcf us-east1:bcd us-east4:abc us-east5:abc "
        "us-south1:abc us-west1:abc us-west2:abc us-west3:abc us-west4:abc"),
}


def known_zones() -> frozenset[str]:
    """Every zone the catalog's table names, for CPU series and GPU machine types alike."""
    from clusterprint.facts import machines  # machines.py reads this module's table

    return frozenset(z for found in CPU_SERIES_ZONES.values() for z in found) | frozenset(
        z for family in machines.MACHINE_FAMILIES for z in family.zones)
