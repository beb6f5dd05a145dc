"""The questions of `clusterprint new` and the first blueprint its answers make.

Pure: nothing here prompts or touches a file. ``gather`` walks the questions in order
through an ``Ask`` (the command's: flags, prompts, or both), checking every answer with the
same functions whichever way it came, and ``blueprint_text`` writes the commented YAML the
command validates before it writes anything.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from clusterprint.blueprint.model import (
    BUCKET_PATTERN,
    NAME_PATTERN,
    PROJECT_PATTERN,
    RESERVATION_PATTERN,
    Provisioning,
)
from clusterprint.blueprint.rules.location import zone_region
from clusterprint.blueprint.rules.storage import capacity_problem
from clusterprint.facts import catalog, machines

#: An answer's check: why the text is refused, or None when it is fine.
Check = Callable[[str], "str | None"]

MAX_NODES = 16384

#: GPU families in the order the machine table lists them: newest first.
_FAMILY_ORDER = tuple(dict.fromkeys(f.family for f in machines.MACHINE_FAMILIES))
_NETWORKING = {"tcpx": ", GPUDirect-TCPX", "tcpxo": ", GPUDirect-TCPXO", "rdma": ", RDMA",
               "none": ""}
#: CPU machine types offered, by family: N2 for general work, C2 for compute-bound jobs.
_CPU_OFFERS = {
    "N2 (CPU)": tuple(f"n2-standard-{n}" for n in (2, 4, 8, 16, 32)),
    "C2 (CPU, compute-optimized)": tuple(f"c2-standard-{n}" for n in (4, 8, 16, 30, 60)),
}


@dataclass(frozen=True)
class MachineOffer:
    """A machine type the wizard offers, its family and a line that tells it apart."""

    machine_type: str
    family: str
    description: str


def _gpu_offer(machine_type: str) -> MachineOffer | None:
    family = machines.gpu_family(machine_type)
    if family is None or not family.zones:
        return None
    return MachineOffer(machine_type, family.family,
                        f"{family.gpus} x {family.gres.upper()}{_NETWORKING[family.networking]}")


#: Every machine type the wizard offers: the GPU families whose zones the catalog knows,
#: largest first, then the CPU ones. A type outside it is written by hand.
OFFERS: tuple[MachineOffer, ...] = (
    *sorted((o for t in machines.GPU_MACHINES if (o := _gpu_offer(t))),
            key=lambda o: (_FAMILY_ORDER.index(o.family),
                           -machines.gpu_count(o.machine_type), o.machine_type)),
    *(MachineOffer(t, family, f"{t.rsplit('-', 1)[1]} vCPUs")
      for family, types in _CPU_OFFERS.items() for t in types),
)
OFFERED = {o.machine_type: o for o in OFFERS}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(o.family for o in OFFERS))

PROVISIONING_CHOICES: tuple[tuple[str, str], ...] = (
    ("on-demand", "on-demand: no commitment; capacity is not guaranteed"),
    ("spot", "spot: much cheaper, but Compute Engine can stop the VMs at any time"),
    ("flex-start", "flex-start: the VMs start once Compute Engine finds the capacity"),
    ("reservation", "reservation: capacity you reserved (you name the reservation next)"),
)
HOME_CHOICES: tuple[tuple[str, str], ...] = (
    ("filestore", "Filestore: a managed NFS share (plus Lustre scratch if you want it)"),
    ("lustre", "Managed Lustre: one fast file system for /home and scratch alike"),
)


def _tier_choice(tier: str) -> tuple[str, str]:
    bands = catalog.FILESTORE_TIERS[tier]
    return tier, f"{tier}: {bands[0].minimum} to {bands[-1].maximum} GiB"


FILESTORE_TIER_CHOICES = tuple(_tier_choice(t) for t in catalog.FILESTORE_TIERS)
LUSTRE_TIER_CHOICES = tuple(
    (str(t.throughput), f"{t.throughput} MB/s per TiB: from {t.minimum} GiB in steps of "
                        f"{t.step}")
    for t in sorted(catalog.LUSTRE_TIERS.values(), key=lambda t: t.throughput))
DEFAULT_FILESTORE_TIER = "ZONAL"
DEFAULT_LUSTRE_TIER = 500


@dataclass(frozen=True)
class Answers:
    """Everything a first blueprint needs; ``gather`` fills it, ``blueprint_text`` writes it."""

    name: str
    project: str
    machine_type: str
    count: int
    provisioning: Provisioning
    reservation: str | None
    zone: str
    home: str = "filestore"
    home_tier: str = DEFAULT_FILESTORE_TIER
    home_size_gib: int = 1024
    #: A Lustre instance: /home itself when ``home`` is lustre, else scratch at /lustre.
    lustre: bool = False
    lustre_tier: int = DEFAULT_LUSTRE_TIER
    lustre_size_gib: int = catalog.LUSTRE_TIERS[DEFAULT_LUSTRE_TIER].minimum
    bucket: str | None = None

    @property
    def region(self) -> str:
        """The zone's region: the blueprint needs both and they must agree."""
        return zone_region(self.zone)


class Ask(Protocol):
    """One answer per question, from a flag or from the person at the terminal."""

    def given(self, key: str) -> bool:
        """Whether a flag answers ``key`` (so no question about it is asked)."""

    def text(self, key: str, message: str, check: Check, default: str | None = None) -> str:
        """A typed answer that passes ``check``."""

    def choice(self, key: str, message: str, choices: Sequence[tuple[str, str]],
               default: str | None = None, check: Check | None = None) -> str | None:
        """One of ``choices`` (value, title); ``check`` says why a flag's value is refused."""

    def confirm(self, key: str, message: str, default: bool) -> bool:
        """Yes or no."""


def _pattern_problem(pattern: str, what: str) -> Check:
    def check(text: str) -> str | None:
        return None if re.fullmatch(pattern, text) else f"{text!r} is not {what}"
    return check


name_problem = _pattern_problem(
    NAME_PATTERN, "a cluster name: 2 to 20 lowercase letters, digits and hyphens, starting "
                  "with a letter and not ending with a hyphen")
project_problem = _pattern_problem(
    PROJECT_PATTERN, "a project id: 6 to 30 lowercase letters, digits and hyphens, starting "
                     "with a letter")
reservation_problem = _pattern_problem(
    RESERVATION_PATTERN, "a reservation: NAME or projects/P/reservations/NAME (optionally "
                         "/reservationBlocks/B)")
bucket_problem = _pattern_problem(
    BUCKET_PATTERN, "a bucket name: 3 to 63 lowercase letters, digits, dots, hyphens and "
                    "underscores")


def count_problem(text: str) -> str | None:
    """A node count is a whole number from 1 to the most a nodeset holds."""
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_NODES:
        return f"{text!r} is not a node count from 1 to {MAX_NODES}"
    return None


def _size_problem(bands: tuple[catalog.CapacityBand, ...], what: str) -> Check:
    def check(text: str) -> str | None:
        if not text.strip().isdigit():
            return f"{text!r} is not a size in GiB"
        problem = capacity_problem(int(text), bands, what)
        return f"{problem[0]} ({problem[1]})" if problem else None
    return check


def filestore_size_problem(tier: str) -> Check:
    """The validator's own Filestore capacity check, as an answer's check."""
    return _size_problem(catalog.FILESTORE_TIERS[tier], f"Filestore tier {tier}")


def lustre_size_problem(tier: int) -> Check:
    """The validator's own Lustre capacity check, as an answer's check."""
    return _size_problem(catalog.LUSTRE_TIERS[tier].bands(), f"performance tier {tier}")


def regions_of(machine_type: str) -> list[str]:
    """The regions holding at least one zone of ``machine_type``, in the catalog's order."""
    return list(dict.fromkeys(zone_region(z) for z in machines.machine_zones(machine_type)))


def zones_of(machine_type: str, region: str | None) -> list[str]:
    """The zones of ``machine_type``, only those in ``region`` when one is chosen."""
    return [z for z in machines.machine_zones(machine_type)
            if region is None or zone_region(z) == region]


def region_problem(machine_type: str) -> Check:
    """A region must hold a zone of the machine type; the message lists those that do."""
    def check(region: str) -> str | None:
        regions = regions_of(machine_type)
        if region in regions or machine_type not in OFFERED:  # a refused type says it all
            return None
        return f"{machine_type} is in no zone of {region}; its regions: {', '.join(regions)}"
    return check


def zone_problem(machine_type: str, region: str | None) -> Check:
    """A zone must hold the machine type (and lie in the region chosen); lists the valid ones."""
    def check(zone: str) -> str | None:
        everywhere = zones_of(machine_type, None)
        if machine_type not in OFFERED:  # a refused type says it all
            return None
        if zone not in everywhere:
            return (f"{machine_type} does not exist in zone {zone}; its zones: "
                    f"{', '.join(everywhere)}")
        if region is not None and zone_region(zone) != region:
            return (f"zone {zone} is not in region {region}; {machine_type} in {region}: "
                    f"{', '.join(zones_of(machine_type, region))}")
        return None
    return check


def machine_problem(text: str) -> str | None:
    """Only the offered types: the wizard knows their zones and writes a valid file for each."""
    if text in OFFERED:
        return None
    return f"{text!r} is not a machine type clusterprint new offers; choose one of " + \
        ", ".join(OFFERED)


def gather(ask: Ask) -> Answers:
    """Ask every question in order; later questions offer only what earlier answers allow."""
    name = ask.text("name", "Cluster name (prefixes every resource)", name_problem)
    project = ask.text("project", "Google Cloud project id", project_problem)
    if not ask.given("machine_type"):
        family = ask.choice("family", "Machine family", [(f, f) for f in FAMILIES])
    else:
        family = None
    offers = [(o.machine_type, f"{o.machine_type}: {o.description}") for o in OFFERS
              if family is None or o.family == family]
    machine_type = ask.choice("machine_type", "Machine type", offers, check=machine_problem)
    count_text = ask.text("count", f"How many {machine_type} nodes", count_problem)
    # A refused --count is reported by the Ask; 0 stands in so the other flags are checked.
    count = 0 if count_problem(count_text) else int(count_text)
    provisioning = ask.choice("provisioning", "How to get the VMs", PROVISIONING_CHOICES)
    reservation = None
    if provisioning == "reservation":
        reservation = ask.text("reservation", "Reservation name", reservation_problem)
    region = ask.choice("region", f"Region (those with {machine_type})",
                        [(r, r) for r in regions_of(machine_type)],
                        check=region_problem(machine_type))
    zone = ask.choice("zone", "Zone", [(z, z) for z in zones_of(machine_type, region)],
                      check=zone_problem(machine_type, region))
    home = ask.choice("home", "/home on", HOME_CHOICES, default="filestore")
    storage: dict = {"home": home, "lustre": home == "lustre"}
    if home == "filestore":
        tier = ask.choice("home_tier", "Filestore tier", FILESTORE_TIER_CHOICES,
                          default=DEFAULT_FILESTORE_TIER)
        storage["home_tier"] = tier
        storage["home_size_gib"] = int(ask.text(
            "home_size", "Filestore size in GiB", filestore_size_problem(tier),
            default=str(catalog.FILESTORE_TIERS[tier][0].minimum)))
        storage["lustre"] = ask.confirm("lustre", "Add Managed Lustre scratch at /lustre?",
                                        default=False)
    if storage["lustre"]:
        lustre_tier = int(ask.choice("lustre_tier", "Lustre performance tier",
                                     LUSTRE_TIER_CHOICES, default=str(DEFAULT_LUSTRE_TIER)))
        storage["lustre_tier"] = lustre_tier
        storage["lustre_size_gib"] = int(ask.text(
            "lustre_size", "Lustre size in GiB", lustre_size_problem(lustre_tier),
            default=str(catalog.LUSTRE_TIERS[lustre_tier].minimum)))
    if ask.confirm("use_bucket", "Mount a Cloud Storage bucket (created for the cluster)?",
                   default=False):
        storage["bucket"] = ask.text("bucket", "Bucket name (bucket names are global)",
                                     bucket_problem, default=f"{project}-{name}-data")
    return Answers(name=name, project=project, machine_type=machine_type, count=count,
                   provisioning=provisioning, reservation=reservation, zone=zone, **storage)


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar that reads back as the same string (``null`` is quoted)."""
    from clusterprint.blueprint.loader import LoadError, parse

    try:
        plain = parse(f"k: {text}\n", False).data == {"k": text}
    except LoadError:  # text YAML cannot take plain is written quoted instead
        plain = False
    return text if plain else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _line(text: str, comment: str = "", width: int = 30) -> str:
    """A YAML line with its comment aligned, as the reference blueprints write them."""
    return f"{text.ljust(width)} # {comment}" if comment else text


def _summary(a: Answers) -> str:
    offer = OFFERED[a.machine_type]
    what = {"on-demand": "on demand", "spot": "as spot VMs", "flex-start": "with flex-start",
            "reservation": f"from reservation {a.reservation}"}[a.provisioning]
    storage = (f"Filestore /home ({a.home_tier}, {a.home_size_gib} GiB)" if a.home == "filestore"
               else f"Managed Lustre /home ({a.lustre_size_gib} GiB at tier {a.lustre_tier})")
    if a.lustre and a.home == "filestore":
        storage += f", {a.lustre_size_gib} GiB of Lustre scratch at tier {a.lustre_tier}"
    if a.bucket:
        storage += f", bucket {a.bucket} at /gcs/{a.bucket}"
    return (f"{offer.family}: {a.count} x {a.machine_type} ({offer.description}) {what} in "
            f"{a.zone}; {storage}.")


def _comment(text: str) -> list[str]:
    """``text`` as comment lines of at most 90 characters."""
    return [f"# {line}" for line in textwrap.wrap(text, 88, break_on_hyphens=False)]


def _storage_lines(a: Answers) -> list[str]:
    lines = ["storage:", "  home:"]
    if a.home == "filestore":
        lines += ["    # Each tier has its own range and step; `clusterprint validate` says them.",
                  f"    filestore: {{tier: {a.home_tier}, capacity_gib: {a.home_size_gib}}}"]
    else:
        lines.append(_line("    lustre: shared", "/home on the Lustre entry below"))
    if a.lustre:
        tier = catalog.LUSTRE_TIERS[a.lustre_tier]
        name = "shared" if a.home == "lustre" else "scratch"
        lines += ["  lustre:", f"    - name: {name}", f"      filesystem: {name}"]
        if a.home == "filestore":
            lines.append("      mount: /lustre")
        lines += [_line(f"      performance_tier: {a.lustre_tier}",
                        "MB/s per TiB; fixed once created"),
                  _line(f"      capacity_gib: {a.lustre_size_gib}",
                        f"tier {a.lustre_tier}: {tier.minimum} GiB and up in steps of "
                        f"{tier.step}")]
    if a.bucket:
        lines += ["  buckets:",
                  _line(f"    - bucket: {_scalar(a.bucket)}", "bucket names are global"),
                  _line(f"      mount: /gcs/{a.bucket}", "where the nodes see it"),
                  _line("      create: true", "false: mount a bucket you already have")]
    lines.append(_line("  protect: true", "data-bearing resources refuse deletion; false for "
                                          "a playground"))
    return lines


def _nodeset_lines(a: Answers, nodeset: str) -> list[str]:
    lines = ["  nodesets:", f"    - name: {nodeset}", f"      machine_type: {a.machine_type}",
             _line(f"      count: {a.count}", "nodes kept up; add max_count for dynamic "
                                              "nodes on top"),
             f"      provisioning: {a.provisioning}"]
    if a.reservation:
        lines += [_line(f"      reservation: {_scalar(a.reservation)}",
                        "CHANGE if it moves: it must live in `zone`"),
                  "      # A dense or calendar-mode reservation also needs",
                  "      # reservation_bound: true. A reservation places its own VMs: for",
                  "      # close nodes, reserve with a compact placement policy.",
                  "      placement: none"]
    return lines


def controller_machine_type(zone: str) -> str:
    """The controller: C2 where the zone has it (as the model's default), else N2."""
    return "c2-standard-8" if zone in machines.machine_zones("c2-standard-8") else "n2-standard-8"


#: The login node type: N2 exists in every zone the wizard offers (a test holds it to that).
LOGIN_MACHINE_TYPE = "n2-standard-4"


def blueprint_text(a: Answers, file: str, schema: str, modeline_note: str | None = None) -> str:
    """The blueprint for ``a``, commented like the reference blueprints in blueprints/.

    ``file`` is where it is written (the comments name it), ``schema`` the path of the JSON
    Schema for the modeline, and ``modeline_note`` a comment saying how to get the schema
    where no copy was found.
    """
    gpus = machines.gpu_count(a.machine_type)
    nodeset = "gpu" if gpus else "cpu"
    zone_note = ("CHANGE with region: the zone of your reservation" if a.reservation else
                 f"CHANGE with region: a zone with {a.machine_type}")
    change = ("`project`" + (", `slurm.nodesets[0].reservation`" if a.reservation else "")
              + (", `storage.buckets[0].bucket` (bucket names are global)" if a.bucket else "")
              + ", and `region`/`zone` if you move; review the sizes, they are what you pay for.")
    head = [f"# yaml-language-server: $schema={schema}"]
    if modeline_note:
        head.append(f"# {modeline_note}")
    head += ["#", *_comment(_summary(a)),
             *_comment(f"Written by `clusterprint new`: check it with `clusterprint validate "
                       f"{file}` and see what it creates with `clusterprint plan {file}` "
                       f"before `pulumi up`."),
             "#",
             *_comment(f"CHANGE BEFORE USE: {change}"),
             "apiVersion: clusterprint/v1",
             "kind: TrainingCluster",
             f"name: {_scalar(a.name)}",
             _line(f"project: {a.project}", "CHANGE: your project id"),
             f"region: {a.region}",
             _line(f"zone: {a.zone}", zone_note),
             "",
             *_comment("network: the defaults: a new VPC with Cloud NAT, SSH only through IAP"
                       + (", and the GPU networks the family needs" if gpus else "") + "."),
             "",
             *_storage_lines(a),
             "",
             "slurm:",
             f"  controller: {{machine_type: {controller_machine_type(a.zone)}, "
             f"disk_size_gb: 100}}",
             f"  login: {{count: 1, machine_type: {LOGIN_MACHINE_TYPE}}}",
             *_nodeset_lines(a, nodeset),
             "  partitions:",
             f"    - name: {nodeset}",
             f"      nodesets: [{nodeset}]",
             "      default: true"]
    if not gpus:
        head += ["  health_checks:", _line("    gpu: off", "CPU nodes: no GPU checks")]
    return "\n".join(head) + "\n"
