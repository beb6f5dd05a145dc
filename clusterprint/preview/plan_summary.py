"""What a planned cluster holds and what it would cost: the summary `clusterprint plan` ends with.

The counts come from the checked blueprint, which both orchestrators plan from (a managed
cluster is a single resource whose nested inputs say the same less directly). The cost is
an estimate at list prices from ``clusterprint.facts.prices`` (a GPU type's on its row of
``machines.py``), in the blueprint's region where a row exists for it, else in the reference
region (``prices.PRICE_REGION``): no discounts, no network egress, only
the nodes kept up (``count``), monthly = hourly x ``prices.HOURS_PER_MONTH``. Anything the
table has no price for is listed as "no price on record", and then the estimate has no total,
only a partial sum printed as "at least" with every missing item named (``hourly`` and
``monthly`` null in the JSON, ``partialHourly`` and ``missing`` beside them). Any unpriced
item counts, whatever it is: its size is unknown, so no threshold could rule it a small
share, and a missing GPU nodeset, the bill's bulk, is exactly what a total must not hide.

The summary also lists the images the VMs boot: clusterprint's, by content name (built when
missing from the project, by ``pulumi up`` or ``clusterprint image build``), and those the
blueprint names, which must exist. Offline, whether an image exists is unknown.

The summary is JSON data (the ``summary`` key of ``plan --json``); the text after the tree
is rendered from that same data, so both forms show the same numbers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterprint.facts import machines, prices
from clusterprint.facts.topology import PHYSICAL_TOPOLOGY_KEY
from clusterprint.render import topology
from clusterprint.render.images import built_image, needed_images, nodeset_image, pinned_path

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint, Nodeset

#: What an item without a price says instead of one.
NO_PRICE = "no price on record"
#: Who runs a managed cluster's controller (its machine type is not the blueprint's).
MANAGED_CONTROLLER = "Cluster Director"


@dataclass(frozen=True)
class _Price:
    """A unit price and where it is from; None as the price when there is none on record."""

    unit_price: float | None
    source: prices.PriceSource | None = None
    note: str = "list price"
    #: The region the price is in (an item without a price has none).
    region: str = prices.PRICE_REGION


def summarize(blueprint: Blueprint) -> dict[str, Any]:
    """The summary of a checked blueprint as ``plan --json`` writes it under ``summary``."""
    bp = blueprint
    managed = bp.orchestrator == "managed"
    gpus: Counter[str] = Counter()
    for ns in bp.slurm.nodesets:
        family = machines.gpu_family(ns.machine_type)
        if family is not None:
            gpus[family.gpu] += family.gpus * ns.count
    filestore: Counter[str] = Counter()
    home = bp.storage.home.filestore if bp.storage.home.uses_filestore else None
    if home is not None:
        filestore[home.tier] += home.capacity_gib
    lustre: Counter[str] = Counter()
    for entry in bp.storage.lustre:
        lustre[str(entry.performance_tier)] += entry.capacity_gib
    return {
        "nodes": _nodes(bp.slurm.nodesets),
        "gpus": {"byType": dict(sorted(gpus.items())), "total": sum(gpus.values())},
        "login": {"count": bp.slurm.login.count, "machineType": bp.slurm.login.machine_type},
        "controller": {"count": 1,
                       "machineType": None if managed else bp.slurm.controller.machine_type},
        "filestoreGib": dict(sorted(filestore.items())),
        "lustreGib": dict(sorted(lustre.items(), key=lambda kv: int(kv[0]))),
        "buckets": [{"bucket": b.bucket, "create": b.create} for b in bp.storage.buckets],
        "images": _images(bp),
        "topology": None if managed else topology.plan_rows(bp),
        "cost": _cost(bp),
    }


def _nodes(nodesets: list[Nodeset]) -> list[dict[str, Any]]:
    """Nodes per machine type, in the order the blueprint first names each type."""
    by_type: dict[str, list[Nodeset]] = {}
    for ns in nodesets:
        by_type.setdefault(ns.machine_type, []).append(ns)
    return [{"machineType": machine_type, "nodesets": [ns.name for ns in group],
             "count": sum(ns.count for ns in group),
             # The ceiling where a nodeset of the type sets one: Slurm's MaxNodeCount sum.
             "maxCount": (sum(ns.upper_bound for ns in group)
                          if any(ns.max_count is not None for ns in group) else None),
             "gpusPerNode": group[0].gpus,
             "gpuType": f.gpu if (f := machines.gpu_family(machine_type)) else None}
            for machine_type, group in by_type.items()]


def _images(bp: Blueprint) -> dict[str, Any]:
    """The images the VMs boot, each with who boots it: those clusterprint builds (in the
    project, when missing: ``pulumi up`` or ``clusterprint image build``), and those the
    blueprint names, which must exist. None for a managed cluster."""
    booted_by: dict[str, list[str]] = {}
    if bp.orchestrator != "managed":
        booted_by[built_image().name] = ["controller"] + (["login"] if bp.slurm.login.count
                                                          else [])
        for ns in bp.slurm.nodesets:
            image = nodeset_image(ns)
            key = image.name if image is not None else pinned_path(ns.image)
            booted_by.setdefault(key, []).append(f"nodeset {ns.name}")
    built = [{"name": image.name, "family": image.family, "base": image.base.path,
              "builderMachineType": image.builder_machine_type,
              "bootedBy": booted_by[image.name]} for image in needed_images(bp)]
    names = {image["name"] for image in built}
    named = [{"path": path, "bootedBy": who} for path, who in sorted(booted_by.items())
             if path not in names]
    return {"project": bp.project, "built": built, "named": named}


def _cost(bp: Blueprint) -> dict[str, Any]:
    """Every priced or unpriced item, the sum of the priced ones, and what it leaves out: the
    total (``hourly``, ``monthly``) only when nothing is missing, else None beside the
    partial sum and the missing items with their reasons."""
    items = [*_vm_items(bp), *_disk_items(bp), *_storage_items(bp)]
    # The sum of the rounded items, so that the printed rows add up to the printed figure.
    hourly = round(sum(i["hourly"] for i in items if i["hourly"] is not None), 4)
    monthly = round(hourly * prices.HOURS_PER_MONTH, 2)
    missing = [{"item": i["item"], "reason": i["note"]} for i in items if i["hourly"] is None]
    local = bp.region != prices.PRICE_REGION and any(i["region"] == bp.region for i in items)
    notes = [(f"list prices in {bp.region} where a row for it exists (the items that say so), "
              f"else in {prices.PRICE_REGION}, where prices differ" if local
              else f"list prices in {prices.PRICE_REGION}"
              + (f" (the blueprint's region is {bp.region}: prices there differ)"
                 if bp.region != prices.PRICE_REGION else "")),
             "no discounts (committed or sustained use) and no network egress",
             f"monthly = hourly x {prices.HOURS_PER_MONTH}",
             "only the nodes kept up (count); nodes added up to max_count cost more"]
    kept_up = {ns.provisioning for ns in bp.slurm.nodesets if ns.count > 0}
    if "reservation" in kept_up:
        notes.append("reserved nodes are estimated at the on-demand price")
    if "spot" in kept_up:
        notes.append("spot prices as of the day read: they change up to once a day")
    notes.append("boot disks of the controller and login nodes and the controller's state "
                 "disk are not counted" if bp.orchestrator == "self-managed"
                 else "boot disks of the login nodes are not counted")
    if bp.storage.buckets:
        notes.append("buckets are billed per GiB stored: not estimated")
    sources = {source.url: source for source in prices.PRICE_SOURCES}
    used = sorted({i["source"] for i in items if i["source"] is not None})
    return {
        "estimate": True, "region": prices.PRICE_REGION, "currency": "USD",
        "hoursPerMonth": prices.HOURS_PER_MONTH,
        "complete": not missing,
        "hourly": None if missing else hourly, "monthly": None if missing else monthly,
        "partialHourly": hourly, "partialMonthly": monthly,
        "items": items,
        "missing": missing,
        "excluded": [m["item"] for m in missing],
        "notes": notes,
        "sources": [{"url": url, "read": sources[url].read, "note": sources[url].note}
                    for url in used],
    }


def _vm_items(bp: Blueprint) -> list[dict[str, Any]]:
    """The nodesets' nodes kept up, the login nodes and the controller, each at its price."""
    items = [_item(f"nodeset {ns.name}: {ns.count} x {ns.machine_type}, {ns.provisioning}",
                   ns.count, "VM-hour", _vm_price(ns.machine_type, ns.provisioning, bp.region))
             for ns in bp.slurm.nodesets if ns.count > 0]
    login = bp.slurm.login
    if login.count > 0:
        items.append(_item(f"login: {login.count} x {login.machine_type}", login.count,
                           "VM-hour", _vm_price(login.machine_type, "on-demand", bp.region)))
    if bp.orchestrator == "managed":
        items.append(_item(f"controller: run by {MANAGED_CONTROLLER}", 1, "VM-hour", _Price(
            None, note="its machine type is not set by the blueprint")))
    else:
        controller = bp.slurm.controller.machine_type
        items.append(_item(f"controller: 1 x {controller}", 1, "VM-hour",
                           _vm_price(controller, "on-demand", bp.region)))
    return items


def _vm_price(machine_type: str, provisioning: str, region: str) -> _Price:
    """The price per VM-hour a node of this machine type and provisioning model is billed,
    in the blueprint's region where a row for it exists."""
    found = machines.machine_price(machine_type, region)
    if found is None:
        return _Price(None, note=machines.UNPRICED_MACHINES.get(
            machine_type, "not in the price table"))
    price, priced_in = found
    where = f" in {priced_in}" if priced_in != prices.PRICE_REGION else ""
    if provisioning == "spot":
        if price.spot is None:
            return _Price(None, note="the source gives no spot price")
        return _Price(price.spot, price.spot_source or price.source, f"spot price{where}",
                      priced_in)
    if provisioning == "flex-start":
        return _Price(None, note="flex-start VMs have prices of their own; none on record")
    if provisioning == "reservation":
        return _Price(price.on_demand, price.source,
                      f"reservation, at the on-demand price{where}", priced_in)
    return _Price(price.on_demand, price.source, f"on-demand price{where}", priced_in)


def _disk_items(bp: Blueprint) -> list[dict[str, Any]]:
    """The boot disks of the nodes kept up: size x count of each nodeset, by disk type."""
    items = []
    for ns in bp.slurm.nodesets:
        if ns.count == 0:
            continue
        items.append(_item(
            f"boot disks of nodeset {ns.name}: {ns.count} x {ns.boot_disk.size_gb} GiB "
            f"{ns.boot_disk_type}", ns.count * ns.boot_disk.size_gb, "GiB-month",
            _storage_price(prices.DISK_PRICES.get(ns.boot_disk_type), prices.UNPRICED_DISKS.get(
                ns.boot_disk_type, "not in the price table"))))
    return items


def _storage_items(bp: Blueprint) -> list[dict[str, Any]]:
    """The Filestore /home and each Lustre instance, at their tier's price per GiB-month."""
    items = []
    home = bp.storage.home.filestore if bp.storage.home.uses_filestore else None
    if home is not None:
        items.append(_item(
            f"Filestore /home: {home.capacity_gib} GiB {home.tier}", home.capacity_gib,
            "GiB-month", _storage_price(prices.FILESTORE_PRICES.get(home.tier),
                                        prices.UNPRICED_FILESTORE_TIERS.get(home.tier, ""))))
    for entry in bp.storage.lustre:
        tier = entry.performance_tier
        items.append(_item(
            f"Lustre {entry.name}: {entry.capacity_gib} GiB tier {tier}", entry.capacity_gib,
            "GiB-month", _storage_price(prices.LUSTRE_PRICES.get(tier),
                                        prices.UNPRICED_LUSTRE_TIERS.get(tier, ""))))
    return items


def _storage_price(price: prices.StoragePrice | None, unpriced_reason: str) -> _Price:
    """A per GiB-month price from one of the catalog's storage tables, or why there is none."""
    if price is None:
        return _Price(None, note=unpriced_reason)
    return _Price(price.per_gib_month, price.source)


def _item(what: str, quantity: int, per: str, price: _Price) -> dict[str, Any]:
    """One cost row: hourly is quantity x the price, a GiB-month price spread over the month."""
    hourly = None
    if price.unit_price is not None:
        per_hour = (price.unit_price if per == "VM-hour"
                    else price.unit_price / prices.HOURS_PER_MONTH)
        hourly = round(quantity * per_hour, 4)
    return {"item": what, "quantity": quantity, "per": per, "unitPrice": price.unit_price,
            "hourly": hourly, "region": None if hourly is None else price.region,
            "source": price.source.url if price.source else None,
            "read": price.source.read if price.source else None,
            "note": price.note if price.unit_price is not None
            else f"{NO_PRICE}: {price.note}"}


def summary_text(summary: dict[str, Any]) -> str:
    """The readable summary printed after the plan's tree, from the ``summary`` data."""
    lines = ["", "Summary"]
    for row in summary["nodes"]:
        ceiling = f" (max_count {row['maxCount']})" if row["maxCount"] is not None else ""
        lines.append(f"  nodes       {row['machineType']}: {row['count']}{ceiling}")
    gpus = summary["gpus"]
    by_type = "".join(f"{gpu}: {n}, " for gpu, n in gpus["byType"].items())
    lines.append(f"  GPUs        {by_type}total {gpus['total']}")
    login, controller = summary["login"], summary["controller"]
    lines.append(f"  login       {login['count']} x {login['machineType']}")
    lines.append("  controller  " + (f"1 x {controller['machineType']}"
                                      if controller["machineType"] else
                                      f"1, run by {MANAGED_CONTROLLER}"))
    lines += [f"  Filestore   {tier}: {gib} GiB" for tier, gib in summary["filestoreGib"].items()]
    lines += [f"  Lustre      tier {tier}: {gib} GiB" for tier, gib in summary["lustreGib"].items()]
    lines += [f"  bucket      {b['bucket']} ({'created' if b['create'] else 'existing'})"
              for b in summary["buckets"]]
    lines += _images_text(summary.get("images"))
    lines += _topology_text(summary.get("topology"))
    cost = summary["cost"]
    # The regions the items are priced in: the home's, the blueprint's where it has rows.
    regions = sorted({i["region"] for i in cost["items"]} - {None})
    lines += ["", f"Estimated cost in {' and '.join(regions or [cost['region']])} at list "
                  f"prices ({cost['currency']}), an estimate:"]
    for item in cost["items"]:
        shown = (f"{_usd(item['hourly'])}/hour ({item['note']}, "
                 f"{_usd(item['unitPrice'])} per {item['per']})"
                 if item["hourly"] is not None else item["note"])
        lines.append(f"  {item['item']}: {shown}")
    lines.append(_total_text(cost))
    lines += [f"  note: {note}" for note in cost["notes"]]
    lines += [f"  prices: {s['url']} (read {s['read']}; {s['note']})" for s in cost["sources"]]
    return "\n".join(lines) + "\n"


def _total_text(cost: dict[str, Any]) -> str:
    """The total line: the sum when every item is priced; else "at least" the partial sum,
    said to be incomplete and by which items."""
    figures = (f"{_usd(cost['partialHourly'])}/hour, ${cost['partialMonthly']:,.2f}/month "
               f"({cost['hoursPerMonth']} hours)")
    if cost["complete"]:
        return f"  total: {figures}"
    # "nodeset gpu: 16 x a3-megagpu-8g, reservation" reads "nodeset gpu (16 x ...)"; every
    # item's text has its label before ": ".
    labels = ", ".join(" (".join(m["item"].split(": ", 1)) + ")" for m in cost["missing"])
    return f"  total: at least {figures}: INCOMPLETE, {NO_PRICE} for {labels}"


def _images_text(images: dict[str, Any] | None) -> list[str]:
    """The images section: each image, who boots it and how it comes to exist (nothing for
    a plan saved before the summary had images, or a managed cluster's)."""
    if not images or not (images["built"] or images["named"]):
        return []
    project = f"project {images['project']}" if images["project"] else "the stack's project"
    lines = ["", f"Images (in {project}; clusterprint's are built where missing, by `pulumi "
                 "up` or `clusterprint image build`)"]
    for image in images["built"]:
        lines.append(f"  {image['name']}  ({', '.join(image['bootedBy'])}): family "
                     f"{image['family']}, from {image['base']}, built on "
                     f"{image['builderMachineType']}")
    lines += [f"  {image['path']}  ({', '.join(image['bootedBy'])}): the blueprint's own, "
              "never built: it must exist" for image in images["named"]]
    return lines


def _topology_text(rows: list[dict[str, Any]] | None) -> list[str]:
    """Per GPU nodeset, the topology Slurm places its jobs by and whether its nodes learn
    their place at boot (nothing for a plan saved before the summary had it, or for a
    cluster without GPU nodesets)."""
    if not rows:
        return []
    lines = ["", f"Topology (each node reads its place at boot: metadata {PHYSICAL_TOPOLOGY_KEY})"]
    for row in rows:
        if not row["topologies"]:
            lines.append(f"  nodeset {row['nodeset']}: none: {row['why']}")
            continue
        shown = ["tree fabric (cluster, block, sub-block; a tree assumes no block size)"]
        if row["blockNodes"]:
            shown.append(f"blocks nvlink of {row['blockNodes']} nodes (NVLink domains)")
        known = ("known at boot (reserved blocks or compact placement)" if row["knownAtBoot"]
                 else "may not be known at boot: Google documents a place only for VMs on "
                      "reserved blocks or under compact placement; a node without one "
                      "registers unplaced")
        lines.append(f"  nodeset {row['nodeset']}: {' + '.join(shown)}; {known}")
    return lines


def _usd(amount: float) -> str:
    """Dollars with cents, and four places below a dollar, where cents would hide the price."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"
