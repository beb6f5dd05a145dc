"""The summary `clusterprint plan` ends with: what the cluster holds, and what it would cost.

The counts are worked out here from each blueprint's YAML with the model's defaults spelt
out, not by the code under test; the cost is checked against hand-computed sums of the
price table's rows.
"""

from __future__ import annotations

import json
import re
import typing
from collections import Counter
from pathlib import Path

import pytest
import yaml

from clusterprint.blueprint.model import BootDisk
from clusterprint.blueprint.validate import load_checked
from clusterprint.cli.main import main
from clusterprint.facts import catalog, machines, prices
from clusterprint.preview.plan import Plan, PlanFormatError
from clusterprint.preview.plan_summary import NO_PRICE, summarize
from clusterprint.render.images import needed_images
from tests.support.paths import BLUEPRINTS, ROOT

REFERENCE = [*sorted(BLUEPRINTS.glob("*.yaml")),
             *sorted((ROOT / "tests" / "components" / "blueprints").glob("*.yaml"))]
CPU_SMALL = BLUEPRINTS / "cpu-small.yaml"
A3ULTRA = BLUEPRINTS / "a3ultra.yaml"

#: GPUs per VM of the machine types the reference blueprints use, from
#: cloud.google.com/compute/docs/accelerator-optimized-machines (not from the catalog).
GPUS = {"a3-megagpu-8g": ("nvidia-h100-mega-80gb", 8), "a3-ultragpu-8g": ("nvidia-h200-141gb", 8),
        "a4-highgpu-8g": ("nvidia-b200", 8)}


def expected_counts(path: Path) -> dict:
    """The summary's counts, from the YAML and the defaults blueprint-v1 documents."""
    raw = yaml.safe_load(path.read_text())
    slurm, storage = raw["slurm"], raw.get("storage", {})
    nodes: dict[str, dict] = {}
    gpus: Counter[str] = Counter()
    for ns in slurm["nodesets"]:
        row = nodes.setdefault(ns["machine_type"], {"count": 0, "ceiling": 0, "max": False})
        row["count"] += ns["count"]
        row["ceiling"] += ns.get("max_count", ns["count"])
        row["max"] = row["max"] or "max_count" in ns
        if ns["machine_type"] in GPUS:
            gpu, per_vm = GPUS[ns["machine_type"]]
            gpus[gpu] += per_vm * ns["count"]
    home = storage.get("home", {"filestore": {}})
    filestore = ({} if "lustre" in home else
                 {home["filestore"].get("tier", "ZONAL"):
                  home["filestore"].get("capacity_gib", 1024)})
    lustre: Counter[str] = Counter()
    for entry in storage.get("lustre", []):
        lustre[str(entry.get("performance_tier", 500))] += entry["capacity_gib"]
    login = slurm.get("login", {})
    managed = raw.get("orchestrator") == "managed"
    return {
        "nodes": {t: (r["count"], r["ceiling"] if r["max"] else None) for t, r in nodes.items()},
        "gpus": (dict(gpus), sum(gpus.values())),
        "login": (login.get("count", 1), login.get("machine_type", "n2-standard-4")),
        "controller": None if managed else slurm.get("controller", {}).get(
            "machine_type", "c2-standard-8"),
        "filestoreGib": filestore,
        "lustreGib": dict(lustre),
        "buckets": [(b["bucket"], b.get("create", True)) for b in storage.get("buckets", [])],
    }


def planned(capsys, path: Path | str) -> tuple[dict, str]:
    """The summary of ``plan --json`` and the text ``plan`` prints, through the CLI."""
    assert main(["plan", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(["plan", str(path)]) == 0
    return data["summary"], capsys.readouterr().out


@pytest.mark.parametrize("path", REFERENCE, ids=[p.name for p in REFERENCE])
def test_the_summary_counts_what_each_reference_blueprint_declares(capsys, path):
    summary, text = planned(capsys, path)
    want = expected_counts(path)
    assert {r["machineType"]: (r["count"], r["maxCount"]) for r in summary["nodes"]} == (
        want["nodes"])
    assert (summary["gpus"]["byType"], summary["gpus"]["total"]) == want["gpus"]
    assert (summary["login"]["count"], summary["login"]["machineType"]) == want["login"]
    assert summary["controller"] == {"count": 1, "machineType": want["controller"]}
    assert summary["filestoreGib"] == want["filestoreGib"]
    assert summary["lustreGib"] == want["lustreGib"]
    assert [(b["bucket"], b["create"]) for b in summary["buckets"]] == want["buckets"]
    # The text after the tree shows the same numbers.
    for machine_type, (count, ceiling) in want["nodes"].items():
        shown = f" (max_count {ceiling})" if ceiling is not None else ""
        assert f"  nodes       {machine_type}: {count}{shown}\n" in text
    assert f"total {want['gpus'][1]}\n" in text
    for tier, gib in want["lustreGib"].items():
        assert f"  Lustre      tier {tier}: {gib} GiB\n" in text


@pytest.mark.parametrize("path", REFERENCE, ids=[p.name for p in REFERENCE])
def test_the_total_is_the_sum_of_the_priced_items_or_says_it_is_incomplete(capsys, path):
    """A total only when every item is priced; else hourly and monthly are null, the partial
    sum stands beside them, the text says "at least" and INCOMPLETE, and names every item
    without a price (with its reason in the JSON)."""
    summary, text = planned(capsys, path)
    cost = summary["cost"]
    assert cost["estimate"] is True and cost["region"] == "us-central1"
    priced = [i for i in cost["items"] if i["hourly"] is not None]
    unpriced = [i for i in cost["items"] if i["hourly"] is None]
    partial = cost["partialHourly"]
    assert partial == pytest.approx(sum(i["hourly"] for i in priced), abs=1e-9)
    # Rounded to the cent: half a cent either way, and a float's noise on an exact half.
    assert cost["partialMonthly"] == pytest.approx(partial * 730, abs=0.005 + 1e-6)
    assert cost["missing"] == [{"item": i["item"], "reason": i["note"]} for i in unpriced]
    assert cost["excluded"] == [i["item"] for i in unpriced]
    assert cost["complete"] is (not unpriced)
    for item in unpriced:
        assert item["note"].startswith(f"{NO_PRICE}: ") and item["unitPrice"] is None
        assert f"  {item['item']}: {item['note']}\n" in text
    (total,) = [line for line in text.splitlines() if line.startswith("  total: ")]
    figures = f"{_usd(partial)}/hour, ${cost['partialMonthly']:,.2f}/month (730 hours)"
    if unpriced:
        assert (cost["hourly"], cost["monthly"]) == (None, None)
        assert total.startswith(f"  total: at least {figures}: INCOMPLETE, {NO_PRICE} for ")
        for item in unpriced:
            label, what = item["item"].split(": ", 1)
            assert f"{label} ({what})" in total
    else:
        assert (cost["hourly"], cost["monthly"]) == (partial, cost["partialMonthly"])
        assert total == f"  total: {figures}"
    assert "an estimate" in text and "no network egress" in text and "x 730" in text


def _usd(amount: float) -> str:
    """Dollars as the summary prints them: cents, or four places below a dollar."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def test_sixteen_a3_mega_nodes_without_a_price_leave_no_total_standing(capsys):
    """The case the issue names: a3mega.yaml in us-central1, where no source prices A3 Mega,
    prints its $10.62 an hour of CPU nodes, disks, Filestore and Lustre as a floor, never as
    the total: 2560 GiB ZONAL at $0.25 a GiB-month is $0.8767 an hour, 18000 GiB of Lustre
    tier 500 at $0.34 is $8.3836, and the A3 Mega nodes are the one item left out."""
    summary, text = planned(capsys, BLUEPRINTS / "a3mega.yaml")
    cost = summary["cost"]
    assert cost["hourly"] is None and cost["complete"] is False
    hourly = {i["item"]: i["hourly"] for i in cost["items"]}
    assert hourly["Filestore /home: 2560 GiB ZONAL"] == 0.8767
    assert hourly["Lustre scratch: 18000 GiB tier 500"] == 8.3836
    (missing,) = cost["missing"]
    assert missing["item"] == "nodeset a3mega: 16 x a3-megagpu-8g, reservation"
    assert missing["reason"].startswith(f"{NO_PRICE}: ") and "us-central1" in missing["reason"]
    assert ("  total: at least $10.62/hour, $7,750.63/month (730 hours): INCOMPLETE, no price "
            "on record for nodeset a3mega (16 x a3-megagpu-8g, reservation)\n") in text


def test_gpu_nodes_in_a_region_with_a_row_are_priced_there_and_dominate(tmp_path):
    """a3mega.yaml moved to us-east4: every item has a price, so the total is their sum, and
    the 16 A3 Mega nodes at us-east4's $92.9376 an hour (pricing.yml at dac3128) are nearly
    all of it; the CPU types, Filestore and Lustre stay at us-central1's."""
    raw = yaml.safe_load((BLUEPRINTS / "a3mega.yaml").read_text())
    raw["region"], raw["zone"] = "us-east4", "us-east4-a"
    path = tmp_path / "a3mega-east4.yaml"
    path.write_text(yaml.safe_dump(raw))
    cost = summarize(load_checked(str(path)))["cost"]
    gpu = cost["items"][0]
    assert (gpu["unitPrice"], gpu["hourly"], gpu["region"]) == (92.9376, 1487.0016, "us-east4")
    assert gpu["note"] == "reservation, at the on-demand price in us-east4"
    assert gpu["source"] == prices.CYCLENERD_PRICING_A3_MEGA.url
    assert cost["complete"] is True and cost["missing"] == []
    assert cost["hourly"] == round(sum(i["hourly"] for i in cost["items"]), 4)
    assert gpu["hourly"] / cost["hourly"] > 0.99
    assert {i["region"] for i in cost["items"][1:]} == {"us-central1"}
    assert cost["notes"][0].startswith("list prices in us-east4 where a row for it exists")


def test_cpu_small_costs_its_nodes_login_controller_boot_disks_and_home(capsys):
    """Worked by hand from the price table (us-central1): spot n2-standard-4 $0.0921,
    e2-standard-2 $0.0670, n2-standard-2 $0.0971 an hour, pd-balanced $0.10 and Filestore
    BASIC_HDD $0.16 a GiB-month. Every item has a price: the total stands, complete."""
    summary, text = planned(capsys, CPU_SMALL)
    cost = summary["cost"]
    hourly = {i["item"]: i["hourly"] for i in cost["items"]}
    assert hourly == {
        "nodeset cpu: 2 x n2-standard-4, spot": 0.1842,
        "login: 1 x e2-standard-2": 0.067,
        "controller: 1 x n2-standard-2": 0.0971,
        "boot disks of nodeset cpu: 2 x 200 GiB pd-balanced": 0.0548,  # 400 x 0.10 / 730
        "Filestore /home: 1024 GiB BASIC_HDD": 0.2244,  # 1024 x 0.16 / 730
    }
    assert cost["complete"] is True and cost["missing"] == cost["excluded"] == []
    assert (cost["hourly"], cost["monthly"]) == (0.6275, 458.07)
    assert cost["items"][-1]["source"] == prices.FILESTORE_PRICING.url
    assert "  Filestore /home: 1024 GiB BASIC_HDD: $0.2244/hour (list price, $0.1600 per " \
           "GiB-month)\n" in text
    assert "  total: $0.6275/hour, $458.07/month (730 hours)\n" in text
    assert "INCOMPLETE" not in text
    assert "  note: spot prices as of the day read" in text


def test_a_storage_tier_without_a_price_leaves_the_total_incomplete(monkeypatch, capsys):
    """Take BASIC_HDD's row out of the table and cpu-small's /home has no price: the rest,
    $0.4031 an hour, is a floor marked INCOMPLETE that names /home, never a total."""
    monkeypatch.delitem(prices.FILESTORE_PRICES, "BASIC_HDD")
    monkeypatch.setitem(prices.UNPRICED_FILESTORE_TIERS, "BASIC_HDD", "no source read prices it")
    summary, text = planned(capsys, CPU_SMALL)
    cost = summary["cost"]
    assert (cost["hourly"], cost["monthly"]) == (None, None)
    assert (cost["partialHourly"], cost["partialMonthly"]) == (0.4031, 294.26)
    assert cost["missing"] == [{"item": "Filestore /home: 1024 GiB BASIC_HDD",
                                "reason": f"{NO_PRICE}: no source read prices it"}]
    assert ("  total: at least $0.4031/hour, $294.26/month (730 hours): INCOMPLETE, no price "
            "on record for Filestore /home (1024 GiB BASIC_HDD)\n") in text


def test_a4_nodes_are_priced_as_eight_b200_slices_and_lustre_per_gib_month(capsys):
    """a4.yaml (us-central1): 4 reserved a4-highgpu-8g at 8 x $16.11 = $128.88 an hour, 2
    spot ones at 8 x $4.9542 = $39.6336, each from its own source, 72000 GiB of Lustre tier
    250 at $0.21 a GiB-month ($20.7123 an hour). Their Hyperdisk boot disks have no price:
    the estimate stays incomplete and names them, not the GPU nodes."""
    summary, text = planned(capsys, BLUEPRINTS / "a4.yaml")
    cost = summary["cost"]
    items = {i["item"]: i for i in cost["items"]}
    reserved = items["nodeset a4: 4 x a4-highgpu-8g, reservation"]
    spot = items["nodeset a4spot: 2 x a4-highgpu-8g, spot"]
    lustre = items["Lustre shared: 72000 GiB tier 250"]
    assert (reserved["unitPrice"], reserved["hourly"], reserved["source"]) == (
        128.88, 515.52, prices.A4_ON_DEMAND.url)
    assert (spot["unitPrice"], spot["hourly"], spot["source"]) == (
        39.6336, 79.2672, prices.A4_SPOT.url)
    assert (lustre["unitPrice"], lustre["hourly"], lustre["source"]) == (
        0.21, 20.7123, prices.LUSTRE_PRICING.url)
    assert [m["item"] for m in cost["missing"]] == [
        "boot disks of nodeset a4: 4 x 200 GiB hyperdisk-balanced",
        "boot disks of nodeset a4spot: 2 x 200 GiB hyperdisk-balanced"]
    assert "INCOMPLETE, no price on record for boot disks of nodeset a4 (" in text
    assert {prices.A4_ON_DEMAND.url, prices.A4_SPOT.url} <= {s["url"] for s in cost["sources"]}


def test_a_reservation_is_estimated_at_the_on_demand_price_of_the_blueprint_s_region(tmp_path):
    """a3ultra (europe-west1): 8 reserved A3 Ultra VMs at $91.9472 (8 x europe-west1's
    $11.4934 per H200) an hour; in us-central1 they would be $83.492 (8 x $10.4365)."""
    cost = summarize(load_checked(str(A3ULTRA)))["cost"]
    nodes = cost["items"][0]
    assert (nodes["quantity"], nodes["unitPrice"], nodes["hourly"]) == (8, 91.9472, 735.5776)
    assert nodes["note"] == "reservation, at the on-demand price in europe-west1"
    assert nodes["region"] == "europe-west1"
    assert "reserved nodes are estimated at the on-demand price" in cost["notes"]
    assert any("list prices in europe-west1 where a row for it exists" in note
               for note in cost["notes"])
    elsewhere = A3ULTRA.read_text().replace("europe-west1", "us-central1")
    (tmp_path / "central.yaml").write_text(elsewhere)
    central = summarize(load_checked(str(tmp_path / "central.yaml")))["cost"]["items"][0]
    assert (central["unitPrice"], central["region"]) == (83.492, "us-central1")
    assert central["note"] == "reservation, at the on-demand price"
    assert [s["url"] for s in cost["sources"]] == sorted(
        [prices.CYCLENERD_PRICING.url, prices.GPU_LIST_PRICES.url,
         prices.FILESTORE_PRICING.url, prices.LUSTRE_PRICING.url])


def test_storage_outside_us_central1_is_priced_at_us_central1_s_rows():
    """a3ultra (europe-west1): its sources price Filestore and Lustre in us-central1 only, so
    /home (10240 GiB ZONAL at $0.25) and scratch (36000 GiB tier 1000 at $0.60) are priced
    there, and say so."""
    cost = summarize(load_checked(str(A3ULTRA)))["cost"]
    items = {i["item"]: i for i in cost["items"]}
    home, scratch = (items["Filestore /home: 10240 GiB ZONAL"],
                     items["Lustre scratch: 36000 GiB tier 1000"])
    assert (home["hourly"], home["region"]) == (3.5068, "us-central1")
    assert (scratch["hourly"], scratch["region"]) == (29.589, "us-central1")
    assert cost["notes"][0].endswith("else in us-central1, where prices differ")


def test_the_cost_heading_names_every_region_an_item_is_priced_in(capsys):
    """a3ultra: its GPU nodes in europe-west1, the CPU types in us-central1."""
    _, text = planned(capsys, A3ULTRA)
    assert ("\nEstimated cost in europe-west1 and us-central1 at list prices (USD), an "
            "estimate:\n") in text
    assert ("  nodeset a3ultra: 8 x a3-ultragpu-8g, reservation: $735.58/hour (reservation, at "
            "the on-demand price in europe-west1, $91.95 per VM-hour)\n") in text


@pytest.mark.parametrize(("old", "new", "item", "hourly"), [
    ("provisioning: spot", "provisioning: on-demand", "nodeset cpu: 2 x n2-standard-4, on-demand",
     0.3884),
    ("machine_type: n2-standard-2", "machine_type: c3-standard-4", "controller: 1 x c3-standard-4",
     None),
], ids=["on-demand-nodes", "cpu-type-not-in-the-table"])
def test_each_node_is_priced_by_its_provisioning_or_said_to_have_no_price(
        tmp_path, old, new, item, hourly):
    path = tmp_path / "bp.yaml"
    path.write_text(CPU_SMALL.read_text().replace(old, new))
    cost = summarize(load_checked(str(path)))["cost"]
    row = next(i for i in cost["items"] if i["item"] == item)
    assert row["hourly"] == hourly
    assert (item in cost["excluded"]) == (hourly is None)
    if hourly is None:
        assert row["note"] == f"{NO_PRICE}: not in the price table"


def test_a_managed_cluster_says_cluster_director_runs_its_controller(capsys):
    summary, text = planned(capsys, ROOT / "tests" / "components" / "blueprints" / "managed.yaml")
    assert "  controller  1, run by Cluster Director\n" in text
    controller = next(i for i in summary["cost"]["items"] if i["item"].startswith("controller"))
    assert controller["hourly"] is None and controller["item"] in summary["cost"]["excluded"]
    # The flex-start nodeset keeps no node up: it costs nothing and is not priced.
    assert not any("nodeset flex" in i["item"] for i in summary["cost"]["items"])


def reference_machine_types() -> set[str]:
    """Every machine type a reference blueprint names, and the model's defaults."""
    types = {"c2-standard-8", "n2-standard-4"}
    for path in REFERENCE:
        slurm = yaml.safe_load(path.read_text())["slurm"]
        types |= {ns["machine_type"] for ns in slurm["nodesets"]}
        types |= {slurm[k]["machine_type"] for k in ("controller", "login") if k in slurm}
    return types


def test_every_machine_type_the_catalog_offers_is_priced_or_listed_as_unpriced():
    """A new catalog type without a price row fails here instead of costing nothing."""
    offered = {*machines.GPU_MACHINES, *catalog.MANAGED_N2_MACHINES,
               *catalog.MANAGED_LOGIN_MACHINES, *reference_machine_types()}
    priced, unpriced = set(machines.MACHINE_PRICES), set(machines.UNPRICED_MACHINES)
    assert not priced & unpriced
    assert offered - priced - unpriced == set()
    assert unpriced <= offered


def test_every_disk_and_storage_tier_is_priced_or_listed_as_unpriced():
    disk_types = set(typing.get_args(typing.get_args(BootDisk.model_fields["type"].annotation)[0]))
    for priced, unpriced, offered in (
            (prices.DISK_PRICES, prices.UNPRICED_DISKS, disk_types),
            (prices.FILESTORE_PRICES, prices.UNPRICED_FILESTORE_TIERS, catalog.FILESTORE_TIERS),
            (prices.LUSTRE_PRICES, prices.UNPRICED_LUSTRE_TIERS, catalog.LUSTRE_TIERS)):
        assert not set(priced) & set(unpriced)
        assert set(priced) | set(unpriced) == set(offered)


def test_every_price_row_names_its_source_and_the_day_read():
    regional = [price for f in machines.MACHINE_FAMILIES for _, price in f.regional_prices]
    rows = [*machines.MACHINE_PRICES.values(), *regional, *prices.DISK_PRICES.values(),
            *prices.FILESTORE_PRICES.values(), *prices.LUSTRE_PRICES.values()]
    for row in rows:
        assert row.source in prices.PRICE_SOURCES
        assert getattr(row, "spot_source", None) in (None, *prices.PRICE_SOURCES)
    for source in prices.PRICE_SOURCES:
        assert source.url.startswith("https://") and re.fullmatch(r"\d{4}-\d\d-\d\d", source.read)
    for price in [*machines.MACHINE_PRICES.values(), *regional]:
        assert price.on_demand > 0 and (price.spot is None or 0 < price.spot < price.on_demand)
    for family in machines.MACHINE_FAMILIES:
        regions = [region for region, _ in family.regional_prices]
        # One row per region, none for the home region (its price is the row's own).
        assert len(set(regions)) == len(regions) and prices.PRICE_REGION not in regions


def saved(capsys, tmp_path: Path, keep_summary: bool) -> str:
    assert main(["plan", str(CPU_SMALL), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    if not keep_summary:
        del data["summary"]
    path = tmp_path / f"plan-{keep_summary}.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(("old_summary", "new_summary"),
                         [(True, False), (False, True), (True, True)])
def test_diff_reads_saved_plans_with_or_without_the_summary(capsys, tmp_path, old_summary,
                                                             new_summary):
    old, new = saved(capsys, tmp_path, old_summary), saved(capsys, tmp_path, new_summary)
    assert main(["diff", old, new, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changes"] == [] and report["summary"]["unchanged"] > 0


def test_a_saved_plan_keeps_its_summary_and_refuses_one_that_is_not_an_object(capsys, tmp_path):
    data = json.loads(Path(saved(capsys, tmp_path, True)).read_text())
    plan = Plan.from_json(data)
    assert plan.summary == data["summary"] and plan.as_json() == data
    with pytest.raises(PlanFormatError, match='"summary" must be an object'):
        Plan.from_json({**data, "summary": ["nodes"]})


#: Four nodesets of two machine types and three provisioning models, one kept at zero.
MIXED_NODESETS = """\
    - name: cpu
      machine_type: n2-standard-4
      count: 2
      max_count: 4
      provisioning: spot
    - name: steady
      machine_type: n2-standard-4
      count: 3
    - name: big
      machine_type: n2-standard-8
      count: 1
      provisioning: reservation
      reservation: projects/my-project/reservations/big
    - name: burst
      machine_type: n2-standard-8
      count: 0
      max_count: 6
      provisioning: spot
  partitions:
    - name: debug
      nodesets: [cpu, steady, big, burst]
"""


def mixed(tmp_path: Path, cpu_provisioning: str = "spot") -> Path:
    """cpu-small with MIXED_NODESETS and two login nodes."""
    text = CPU_SMALL.read_text()
    start, end = text.index("    - name: cpu\n"), text.index("      max_time:")
    text = (text[:start] + MIXED_NODESETS.replace("provisioning: spot\n    - name: steady",
                                                  f"provisioning: {cpu_provisioning}\n"
                                                  "    - name: steady") + text[end:])
    text = text.replace("login: {count: 1,", "login: {count: 2,")
    path = tmp_path / "mixed.yaml"
    path.write_text(text)
    return path


def test_nodes_are_counted_per_machine_type_across_nodesets(tmp_path, capsys):
    """Two nodesets of a type add up, and so do their ceilings: a nodeset without max_count
    tops out at its count (cpu 4 + steady 3; big 1 + burst 6)."""
    summary, text = planned(capsys, mixed(tmp_path))
    assert [(r["machineType"], r["nodesets"], r["count"], r["maxCount"])
            for r in summary["nodes"]] == [("n2-standard-4", ["cpu", "steady"], 5, 7),
                                           ("n2-standard-8", ["big", "burst"], 1, 7)]
    assert summary["login"] == {"count": 2, "machineType": "e2-standard-2"}
    assert "  nodes       n2-standard-4: 5 (max_count 7)\n" in text
    assert "  nodes       n2-standard-8: 1 (max_count 7)\n" in text
    assert "  login       2 x e2-standard-2\n" in text


def test_each_provisioning_model_is_priced_by_its_own_rule(tmp_path):
    """By hand from the table: spot n2-standard-4 $0.0921, on-demand $0.1942, n2-standard-8
    on demand $0.3885 (a reservation's estimate), e2-standard-2 $0.0670; pd-balanced $0.10 a
    GiB-month. The nodeset kept at zero costs nothing, its boot disks neither."""
    cost = summarize(load_checked(str(mixed(tmp_path))))["cost"]
    hourly = {i["item"]: (i["quantity"], i["hourly"], i["note"]) for i in cost["items"]}
    assert hourly == {
        "nodeset cpu: 2 x n2-standard-4, spot": (2, 0.1842, "spot price"),
        "nodeset steady: 3 x n2-standard-4, on-demand": (3, 0.5826, "on-demand price"),
        "nodeset big: 1 x n2-standard-8, reservation": (
            1, 0.3885, "reservation, at the on-demand price"),
        "login: 2 x e2-standard-2": (2, 0.134, "on-demand price"),
        "controller: 1 x n2-standard-2": (1, 0.0971, "on-demand price"),
        "boot disks of nodeset cpu: 2 x 200 GiB pd-balanced": (400, 0.0548, "list price"),
        "boot disks of nodeset steady: 3 x 200 GiB pd-balanced": (600, 0.0822, "list price"),
        "boot disks of nodeset big: 1 x 200 GiB pd-balanced": (200, 0.0274, "list price"),
        "Filestore /home: 1024 GiB BASIC_HDD": (1024, 0.2244, "list price"),
    }
    # Every item has a price: the total is their sum.
    assert cost["hourly"] == round(sum(h for _, h, _ in hourly.values()), 4) == 1.7752
    assert cost["complete"] is True
    assert "reserved nodes are estimated at the on-demand price" in cost["notes"]
    assert any(note.startswith("spot prices") for note in cost["notes"])


def test_only_nodes_kept_up_bring_their_model_s_note(tmp_path):
    """The only spot nodeset left (burst) keeps no node up: no spot note."""
    cost = summarize(load_checked(str(mixed(tmp_path, "on-demand"))))["cost"]
    assert not any(note.startswith("spot prices") for note in cost["notes"])
    assert "nodeset cpu: 2 x n2-standard-4, on-demand" in [i["item"] for i in cost["items"]]


@pytest.mark.parametrize("path", REFERENCE, ids=[p.name for p in REFERENCE])
def test_the_plan_names_every_image_the_vms_boot_and_how_it_comes_to_exist(capsys, path):
    bp = load_checked(str(path))
    summary, text = planned(capsys, path)
    images = needed_images(bp)
    assert [i["name"] for i in summary["images"]["built"]] == [i.name for i in images]
    assert summary["images"]["named"] == []
    if bp.orchestrator == "managed":
        assert images == [] and "Images (" not in text
        return
    assert (f"Images (in project {bp.project}; clusterprint's are built where missing, by "
            "`pulumi up` or `clusterprint image build`)\n") in text
    for image in images:
        booted_by = next(i["bootedBy"] for i in summary["images"]["built"]
                         if i["name"] == image.name)
        assert (f"  {image.name}  ({', '.join(booted_by)}): family {image.family}, from "
                f"{image.base.path}, built on {image.builder_machine_type}\n") in text
    cpu = summary["images"]["built"][0]
    assert cpu["name"].startswith("clusterprint-cpu-")
    assert cpu["bootedBy"][:2] == ["controller", "login"]


def test_a_nodeset_booting_its_own_image_is_listed_as_one_that_must_exist(tmp_path, capsys):
    own = "      image: {project: my-images, name: big-20261201}\n"
    text = mixed(tmp_path).read_text().replace("    - name: big\n", "    - name: big\n" + own)
    (tmp_path / "own.yaml").write_text(text)
    summary, printed = planned(capsys, tmp_path / "own.yaml")
    assert summary["images"]["named"] == [
        {"path": "projects/my-images/global/images/big-20261201", "bootedBy": ["nodeset big"]}]
    (built,) = summary["images"]["built"]
    assert built["bootedBy"] == ["controller", "login", "nodeset cpu", "nodeset steady",
                                 "nodeset burst"]
    assert ("  projects/my-images/global/images/big-20261201  (nodeset big): the blueprint's "
            "own, never built: it must exist\n") in printed


def test_a_plan_saved_before_images_were_listed_still_prints(capsys, tmp_path):
    from clusterprint.preview.plan_summary import summary_text

    summary = json.loads(Path(saved(capsys, tmp_path, True)).read_text())["summary"]
    del summary["images"]
    assert "Images (" not in summary_text(summary) and "Summary" in summary_text(summary)


def test_the_summary_says_per_gpu_nodeset_what_slurm_knows_of_its_place(capsys, tmp_path):
    # a4: a reserved nodeset (its place is known at boot) and a spot one (not documented).
    summary, text = planned(capsys, BLUEPRINTS / "a4.yaml")
    assert summary["topology"] == [
        {"nodeset": "a4", "topologies": ["fabric"], "blockNodes": None, "knownAtBoot": True,
         "why": None},
        {"nodeset": "a4spot", "topologies": ["fabric"], "blockNodes": None,
         "knownAtBoot": False, "why": None}]
    assert "  nodeset a4: tree fabric (cluster, block, sub-block; a tree assumes no block " \
           "size); known at boot (reserved blocks or compact placement)\n" in text
    assert "  nodeset a4spot: tree fabric" in text and "may not be known at boot" in text
    # A4X: the NVLink blocks Slurm assumes, 18 nodes each; G2: no topology, and why.
    a4x = tmp_path / "a4x.yaml"
    raw = yaml.safe_load((BLUEPRINTS / "a4.yaml").read_text())
    raw["name"], raw["recipes"] = "a4x", []
    raw["slurm"]["nodesets"][0]["machine_type"] = "a4x-highgpu-4g"
    raw["slurm"]["nodesets"][1]["machine_type"] = "g2-standard-8"
    a4x.write_text(yaml.safe_dump(raw))
    summary, text = planned(capsys, a4x)
    assert [(r["topologies"], r["blockNodes"]) for r in summary["topology"]] == [
        (["fabric", "nvlink"], 18), ([], None)]
    assert "+ blocks nvlink of 18 nodes (NVLink domains)" in text
    assert "  nodeset a4spot: none: Google publishes no physical topology for G2\n" in text
    # No GPU nodeset, no section.
    summary, text = planned(capsys, CPU_SMALL)
    assert summary["topology"] == [] and "\nTopology" not in text
