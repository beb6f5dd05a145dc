"""The price rows read back what their sources say, number for number.

The numbers below are copied by hand from each source (the comments on prices.py and
machines.py quote them): a row edited by mistake, or moved to another source, fails here.
"""

import pytest

from clusterprint.facts import catalog, machines, prices

#: Filestore per GiB-hour in us-central1, as prices.FILESTORE_PRICING's source gives them.
FILESTORE_PER_GIB_HOUR = {"BASIC_HDD": 0.000219178, "BASIC_SSD": 0.000410959,
                          "ZONAL": 0.000342466, "REGIONAL": 0.000616438,
                          "ENTERPRISE": 0.000616438, "HIGH_SCALE_SSD": 0.000342466}


@pytest.mark.parametrize(("tier", "per_month"), [
    ("BASIC_HDD", 0.16), ("BASIC_SSD", 0.30), ("ZONAL", 0.25), ("REGIONAL", 0.45),
    ("ENTERPRISE", 0.45), ("HIGH_SCALE_SSD", 0.25)])
def test_filestore_tiers_are_the_source_s_hourly_rates_times_730(tier, per_month):
    row = prices.FILESTORE_PRICES[tier]
    assert row.per_gib_month == per_month == round(FILESTORE_PER_GIB_HOUR[tier] * 730, 4)
    assert row.source is prices.FILESTORE_PRICING


@pytest.mark.parametrize(("tier", "per_month"), [(125, 0.145), (250, 0.21), (500, 0.34),
                                                 (1000, 0.60)])
def test_lustre_tiers_are_the_source_s_iowa_rows(tier, per_month):
    row = prices.LUSTRE_PRICES[tier]
    assert (row.per_gib_month, row.source) == (per_month, prices.LUSTRE_PRICING)


def test_every_storage_tier_of_the_catalog_has_a_price():
    assert set(prices.FILESTORE_PRICES) == set(catalog.FILESTORE_TIERS)
    assert set(prices.LUSTRE_PRICES) == set(catalog.LUSTRE_TIERS)
    assert prices.UNPRICED_FILESTORE_TIERS == prices.UNPRICED_LUSTRE_TIERS == {}


def test_a4_is_eight_b200_slices_on_demand_and_spot_each_from_its_source():
    (a4,) = [f for f in machines.MACHINE_FAMILIES if f.family == "A4"]
    price = a4.price
    assert isinstance(price, prices.MachinePrice) and a4.gpus == 8
    assert price.on_demand == round(8 * 16.11, 4) == 128.88
    assert price.spot == round(8 * 4.9542, 4) == 39.6336
    assert (price.source, price.spot_source) == (prices.A4_ON_DEMAND, prices.A4_SPOT)
    assert machines.machine_price(a4.machine_type, prices.PRICE_REGION) == (
        price, prices.PRICE_REGION)


@pytest.mark.parametrize("family", ["A4X", "A3 Edge"])
def test_families_no_source_prices_stay_unpriced_with_a_reason(family):
    rows = [f for f in machines.MACHINE_FAMILIES if f.family == family]
    assert rows and all(f.machine_type in machines.UNPRICED_MACHINES for f in rows)
    assert all("no source read gives a price for the whole VM" in f.price for f in rows)


def test_a3_mega_has_regional_rows_but_none_in_us_central1():
    (mega,) = [f for f in machines.MACHINE_FAMILIES if f.family == "A3 Mega"]
    assert isinstance(mega.price, str) and "us-central1" in mega.price
    assert machines.machine_price(mega.machine_type, prices.PRICE_REGION) is None
    assert machines.machine_price(mega.machine_type, "us-east4")[0].on_demand == 92.9376


def test_every_source_is_named_by_a_row():
    """No source listed that no price row reads from."""
    regional = [price for f in machines.MACHINE_FAMILIES for _, price in f.regional_prices]
    rows = [*machines.MACHINE_PRICES.values(), *regional, *prices.DISK_PRICES.values(),
            *prices.FILESTORE_PRICES.values(), *prices.LUSTRE_PRICES.values()]
    named = {r.source for r in rows} | {getattr(r, "spot_source", None) for r in rows}
    assert set(prices.PRICE_SOURCES) <= named
