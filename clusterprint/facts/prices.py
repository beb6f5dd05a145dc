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
#: GPUs and bundled Local SSD included. Google's own pricing pages hold their numbers in the
#: page (tables, and an inline JSON array of every region for Compute Engine), but the stored
#: copies the search tools have of them keep only the prose, so none of them is a source here.
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
#: A4's on-demand price: a GPU price feed's notes on its Cloud Billing Catalog scrape of
#: 2026-07-07 ("Data facts derived from the real CSVs"), whose on-demand Americas SKU "A4 Nvidia
#: B200 (1 gpu slice) running in Americas" is $16.11 per GPU-hour. A4 bills through that slice
#: SKU alone (no vCPU, memory or Local SSD SKUs beside it: A4_SPOT's test prices a VM at 8
#: slices), so a VM is 8 x the slice.
A4_ON_DEMAND = PriceSource(
    "https://github.com/daniel-wong-tsmc/random_for_fun/blob/"
    "609dc74911bdaf7e4ea8f6ee792387fd9547dd49/docs/superpowers/plans/"
    "2026-07-08-f78-stage5-price-feed-reader.md",
    "2026-12-04", "Cloud Billing SKU 'A4 Nvidia B200 (1 gpu slice) running in Americas' in its "
                  "scrape of 2026-07-07: $16.11 per GPU-hour; x 8 per VM")
#: A4's spot price: SpareCores' crawler test of the live SKU "Spot Preemptible A4 Nvidia B200
#: (1 gpu slice) running in Americas" (service region us-central1, $4.9542 per GPU-hour),
#: which it prices at $39.6336 per a4-highgpu-8g (8 slices, nothing else).
A4_SPOT = PriceSource(
    "https://github.com/SpareCores/sc-crawler/blob/55aec325af33114492129f365fe20dabe79028ba/"
    "tests/test_gcp.py",
    "2026-12-04", "live SKU 'Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in "
                  "Americas', us-central1: $4.9542 per GPU-hour, $39.6336 per VM (8 slices)")
#: Filestore's us-central1 rates: gcp-cost-estimator's Filestore mapper, "verified 2026-06-15
#: from https://cloud.google.com/filestore/pricing", per GiB-hour: BASIC_HDD 0.000219178,
#: BASIC_SSD 0.000410959, ZONAL 0.000342466, REGIONAL 0.000616438, ENTERPRISE "same rate as
#: REGIONAL", HIGH_SCALE_SSD "same rate as ZONAL" (the pricing page prices "Regional and
#: Enterprise" and "Zonal and High Scale" together: its stored German copy, cloud.google.com/
#: filestore/pricing?hl=de, read 2026-12-04). An undated stored Polish copy (?hl=pl) works an
#: example at $0.000274 per GiB-hour ($0.20 a GiB-month) for Basic HDD in us-west1: it
#: disagrees, its date is unknown, and the dated source is the one used.
FILESTORE_PRICING = PriceSource(
    "https://github.com/d3ep0ps/gcp-cost-estimator/blob/"
    "0611f8ae4e5962e7e322834b02bef3935605024b/src/gcp_cost_estimator/core/pricing/gcp/"
    "filestore.py",
    "2026-12-04", "us-central1 rates 'verified 2026-06-15 from cloud.google.com/filestore/"
                  "pricing', per GiB-hour; x 730 per GiB-month")
#: Managed Lustre's us-central1 prices: a cluster repository's storage comparison, "Pricing
#: verified 2026-06-05 against <...>.billing.cloud_pricing_export (authoritative SKU rates)":
#: "Managed Lustre Capacity 500-Perf Iowa: $0.34/GiB-month ... Other Iowa tiers for reference:
#: 125-Perf $0.145, 250-Perf $0.21, 1000-Perf $0.60". The New Stack's report of the service's
#: general availability (July 2025) gives the same $0.145 a GiB-month for the 125 MB/s tier.
LUSTRE_PRICING = PriceSource(
    "https://github.com/WandLZhang/slurm-multi-region-gpu-public/blob/"
    "1b191967e06c4b9ab2568bdadea35b781c88b462/docs/storage_comparison.md",
    "2026-12-04", "committed 2026-06-05: Managed Lustre Capacity SKUs of Iowa (us-central1) "
                  "from a Cloud Billing pricing export, per GiB-month")
#: Every source a price row may name.
PRICE_SOURCES = (CYCLENERD_PRICING, CYCLENERD_PRICING_A3_MEGA, GPU_LIST_PRICES, A4_ON_DEMAND,
                 A4_SPOT, FILESTORE_PRICING, LUSTRE_PRICING)


@dataclass(frozen=True)
class MachinePrice:
    """A machine type's list price per VM-hour, USD (rounded to 4 places), in PRICE_REGION
    or in the region its row is filed under."""

    on_demand: float
    #: Spot prices move (at most once a day); None where the source gives none.
    spot: float | None
    source: PriceSource
    #: Where the spot price is from, where another source than ``source`` gives it.
    spot_source: PriceSource | None = None


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


def per_gib_hour(rate: float, source: PriceSource) -> StoragePrice:
    """A storage price its source gives per GiB-hour, as the GiB-month price it is (x 730)."""
    return StoragePrice(round(rate * HOURS_PER_MONTH, 4), source)


#: Filestore list prices per GiB-month by tier in us-central1 (FILESTORE_PRICING's rates per
#: GiB-hour x 730: BASIC_HDD 0.16, BASIC_SSD 0.30, ZONAL and HIGH_SCALE_SSD 0.25, REGIONAL and
#: ENTERPRISE 0.45 a GiB-month). ZONAL's rate holds for both its capacity bands: the page prices
#: "Zonal and High Scale" as one, and the 10 to 100 TiB band is the former High Scale SSD
#: (cloud.google.com/filestore/docs/service-tiers).
FILESTORE_PRICES: dict[str, StoragePrice] = {
    tier: per_gib_hour(rate, FILESTORE_PRICING) for tier, rate in {
        "BASIC_HDD": 0.000219178,
        "BASIC_SSD": 0.000410959,
        "ZONAL": 0.000342466,
        "REGIONAL": 0.000616438,
        "ENTERPRISE": 0.000616438,
        "HIGH_SCALE_SSD": 0.000342466,
    }.items()
}
#: Managed Lustre list prices per GiB-month by performance tier (MB/s per TiB) in us-central1:
#: LUSTRE_PRICING's "N-Perf Iowa" rows.
LUSTRE_PRICES: dict[int, StoragePrice] = {
    tier: StoragePrice(price, LUSTRE_PRICING)
    for tier, price in {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60}.items()
}

_NO_STORAGE_SOURCE = "no source read prices this {} tier"
#: Filestore tiers without a price on record (none today: every tier of the catalog has one).
UNPRICED_FILESTORE_TIERS: dict[str, str] = {
    tier: _NO_STORAGE_SOURCE.format("Filestore")
    for tier in FILESTORE_TIERS if tier not in FILESTORE_PRICES
}
#: Managed Lustre performance tiers without a price on record (none today).
UNPRICED_LUSTRE_TIERS: dict[int, str] = {
    tier: _NO_STORAGE_SOURCE.format("Managed Lustre")
    for tier in LUSTRE_TIERS if tier not in LUSTRE_PRICES
}
