"""List prices for the cost estimate of `clusterprint plan`, each row with its source and day.

Kept apart from the cloud's limits: prices change from week to week, limits rarely. A
machine type, disk or storage tier without a price is listed in an UNPRICED table with the
reason (a GPU machine type on its row of ``machines.py``), so the estimate says "no price on
record" instead of counting it as free.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.facts.catalog import FILESTORE_TIERS, LUSTRE_TIERS

#: The region every price row is in unless it names another (a GPU machine type's rows for
#: other regions are on its row of machines.MACHINE_FAMILIES): list prices differ by region.
PRICE_REGION = "us-central1"
#: Hours in the month the estimate multiplies by (Google's pricing pages use 730).
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class PriceSource:
    """Where a price was read, and when."""

    url: str
    #: The day the price was read (ISO date).
    read: str
    note: str


#: Cyclenerd/google-cloud-pricing-cost-calculator's pricing.yml, which its CI generates each
#: week from Google's Cloud Billing Catalog API (the SKUs behind cloud.google.com/compute/
#: vm-instance-pricing): per machine type, region, on-demand ``hour`` and ``hour_spot``,
#: GPUs and bundled Local SSD included. Google's own pricing pages load their tables in the
#: browser, so no stored copy of them holds a us-central1 number.
CYCLENERD_PRICING = PriceSource(
    "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
    "fd66b26ff84fee5cdd94f341ea89206e76c06b99/pricing.yml",
    "2026-12-01", "generated 2026-07-30 from the Cloud Billing Catalog API")
#: The same file, committed 2026-08-20 by the repository's weekly "Pricing updated" job: the
#: A3 Mega rows (a3-megagpu-8g ``hour`` and ``hour_spot`` in each region it lists; us-central1
#: is not among them).
CYCLENERD_PRICING_A3_MEGA = PriceSource(
    "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
    "dac31281f2a4575f0a8bff20ac04fc71a5ff2190/pricing.yml",
    "2026-12-03", "committed 2026-08-20 by its pricing job from the Cloud Billing Catalog API")
#: A dataset of GPU list prices from the Cloud Billing Catalog API (snapshot 2026-10-13), per
#: GPU as a share of the instance price: the instance price is 8 times it.
GPU_LIST_PRICES = PriceSource(
    "https://huggingface.co/datasets/tanod/cloud-gpu-list-prices", "2026-12-01",
    "snapshot 2026-10-13 from the Cloud Billing Catalog API, per GPU; x 8 per VM")
#: Every source a price row may name.
PRICE_SOURCES = (CYCLENERD_PRICING, CYCLENERD_PRICING_A3_MEGA, GPU_LIST_PRICES)


@dataclass(frozen=True)
class MachinePrice:
    """A machine type's list price per VM-hour, USD (rounded to 4 places), in PRICE_REGION
    or in the region its row is filed under."""

    on_demand: float
    #: Spot prices move (at most once a day); None where the source gives none.
    spot: float | None
    source: PriceSource


def cyclenerd(hour: float, spot: float) -> MachinePrice:
    """A us-central1 row of CYCLENERD_PRICING: its ``hour`` and ``hour_spot``."""
    return MachinePrice(hour, spot, CYCLENERD_PRICING)


#: CPU machine types' prices, us-central1 rows of CYCLENERD_PRICING: (hour, hour_spot). A GPU
#: machine type's price, or why it has none, is on its row of machines.MACHINE_FAMILIES.
CPU_MACHINE_PRICES: dict[str, MachinePrice] = {
    t: cyclenerd(hour, spot) for t, (hour, spot) in {
        "n2-standard-2": (0.0971, 0.0461),
        "n2-standard-4": (0.1942, 0.0921),
        "n2-standard-8": (0.3885, 0.1842),
        "n2-standard-16": (0.7769, 0.3685),
        "n2-standard-32": (1.5539, 0.737),
        "n2-standard-48": (2.3308, 1.1054),
        "n2-standard-64": (3.1078, 1.4739),
        "n2-standard-80": (3.8847, 1.8424),
        "n2-standard-96": (4.6617, 2.2109),
        "n2-standard-128": (6.2156, 2.9478),
        "n2-highmem-2": (0.131, 0.0621),
        "n2-highmem-4": (0.262, 0.1243),
        "n2-highmem-8": (0.5241, 0.2486),
        "n2-highmem-16": (1.0481, 0.4971),
        "n2-highmem-32": (2.0962, 0.9942),
        "n2-highmem-48": (3.1443, 1.4914),
        "n2-highmem-64": (4.1924, 1.9885),
        "n2-highmem-80": (5.2406, 2.4856),
        "n2-highmem-96": (6.2887, 2.9827),
        "n2-highmem-128": (7.707, 3.6554),
        "n2-highcpu-2": (0.0717, 0.034),
        "n2-highcpu-4": (0.1434, 0.068),
        "n2-highcpu-8": (0.2868, 0.136),
        "n2-highcpu-16": (0.5736, 0.272),
        "n2-highcpu-32": (1.1471, 0.544),
        "n2-highcpu-48": (1.7207, 0.816),
        "n2-highcpu-64": (2.2943, 1.088),
        "n2-highcpu-80": (2.8678, 1.36),
        "n2-highcpu-96": (3.4414, 1.632),
        "c2-standard-8": (0.4176, 0.1994),
        "e2-standard-2": (0.067, 0.0402),
    }.items()
}


@dataclass(frozen=True)
class StoragePrice:
    """A storage price per provisioned GiB-month in PRICE_REGION, USD."""

    per_gib_month: float
    source: PriceSource


#: Persistent disk list prices per GiB-month (CYCLENERD_PRICING compute.storage balanced,
#: ssd and hdd in us-central1): what a nodeset's boot disks cost.
DISK_PRICES: dict[str, StoragePrice] = {
    "pd-balanced": StoragePrice(0.10, CYCLENERD_PRICING),
    "pd-ssd": StoragePrice(0.17, CYCLENERD_PRICING),
    "pd-standard": StoragePrice(0.04, CYCLENERD_PRICING),
}
#: Disk types without a price on record.
UNPRICED_DISKS: dict[str, str] = {
    "hyperdisk-balanced": "billed per GiB and per provisioned IOPS and throughput; no stored "
                          "source prices it",
}

#: Filestore list prices per GiB-month by tier, and Managed Lustre's by performance tier:
#: none on record yet (see the UNPRICED tables below for why).
FILESTORE_PRICES: dict[str, StoragePrice] = {}
LUSTRE_PRICES: dict[int, StoragePrice] = {}

_STORAGE_PAGE = ("{} pricing page ({}) loads its price table in the browser: no stored copy "
                 "holds a us-central1 number")
#: Filestore tiers without a price on record.
UNPRICED_FILESTORE_TIERS: dict[str, str] = {
    tier: _STORAGE_PAGE.format("Filestore's", "cloud.google.com/filestore/pricing")
    for tier in FILESTORE_TIERS if tier not in FILESTORE_PRICES
}
#: Managed Lustre performance tiers without a price on record.
UNPRICED_LUSTRE_TIERS: dict[int, str] = {
    tier: _STORAGE_PAGE.format("Managed Lustre's", "cloud.google.com/managed-lustre/pricing")
    for tier in LUSTRE_TIERS if tier not in LUSTRE_PRICES
}
