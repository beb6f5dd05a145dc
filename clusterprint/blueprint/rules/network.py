"""Network rules: CIDRs that parse and never overlap, MTU, existing networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, Fix, KeyPath, error, format_path, warning
from clusterprint.blueprint.gpu_fabric import fabric_kinds, gpu_ranges, subnets_needed
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.facts import addresses, catalog, machines

#: GPU subnets are carved as /N from gpu_subnets_cidr; smaller than /29 is useless.
SMALLEST_GPU_SUBNET = 29


def parse_cidr(text: str) -> tuple[ipaddress.IPv4Network | None, str | None, str | None]:
    """A network from CIDR text, or (None, problem, hint) saying what is wrong."""
    try:
        return ipaddress.IPv4Network(text, strict=True), None, None
    except ValueError:
        pass
    try:
        loose = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        return None, f"{text!r} is not an IPv4 CIDR block", "e.g. 10.0.0.0/20"
    return None, f"{text} has host bits set", f"try {loose}"


SUBNET: KeyPath = ("network", "subnet_cidr")
GPU_RANGE: KeyPath = ("network", "gpu_subnets_cidr")
PSA_RANGE: KeyPath = ("network", "private_service_access", "range")


def _address_space(bp: Blueprint) -> list[tuple[KeyPath, str]]:
    """The ranges the cluster's own addresses come from: they must never overlap."""
    net = bp.network
    found = [(SUBNET, net.subnet_cidr), (GPU_RANGE, net.gpu_subnets_cidr)]
    if net.private_service_access.range:
        found.append((PSA_RANGE, net.private_service_access.range))
    return found


def _cidrs(bp: Blueprint) -> list[tuple[KeyPath, str]]:
    """Every CIDR of the blueprint: the address space plus the SSH sources."""
    return _address_space(bp) + [(("network", "ssh_source_ranges", i), r)
                                 for i, r in enumerate(bp.network.ssh_source_ranges)]


@rule("network.cidr")
def check_cidrs_parse(bp: Blueprint) -> Iterator[Finding]:
    """Every CIDR is a network address with a prefix (no host bits)."""
    for path, text in _cidrs(bp):
        _, problem, hint = parse_cidr(text)
        if problem:
            yield error(path, problem, hint)


#: Prefix lengths allowed: /29 is the smallest IPv4 subnet range Compute Engine accepts and
#: /24 the smallest range private service access allocates (cloud.google.com/vpc/docs/subnets,
#: .../vpc/docs/configure-private-services-access); /8 caps both at one whole 10.0.0.0/8.
RANGE_PREFIXES = {SUBNET: (8, 29), PSA_RANGE: (8, 24)}


@rule("network.range-size")
def check_range_sizes(bp: Blueprint) -> Iterator[Finding]:
    """A subnet is /8 to /29 and a private service access range /8 to /24."""
    for path, text in _address_space(bp):
        parsed, _, _ = parse_cidr(text)
        limits = RANGE_PREFIXES.get(path)
        if parsed is None or limits is None:
            continue
        shortest, longest = limits
        if not shortest <= parsed.prefixlen <= longest:
            yield error(path, f"/{parsed.prefixlen} is outside /{shortest} to /{longest}",
                        f"use a prefix length from {shortest} to {longest}")


@rule("network.cidr-overlap")
def check_cidr_overlaps(bp: Blueprint) -> Iterator[Finding]:
    """The subnet, the PSA range and the GPU subnets must not overlap one another."""
    ranges: list[tuple[KeyPath, str, ipaddress.IPv4Network]] = []
    for path, text in _address_space(bp):
        parsed, _, _ = parse_cidr(text)
        if parsed is None or (path == GPU_RANGE and subnets_needed(bp) == 0):
            continue
        ranges.append((path, text, parsed))
    for i, (path, text, cidr) in enumerate(ranges):
        for other_path, other_text, other in ranges[:i]:
            if cidr.overlaps(other):
                yield error(path, f"{text} overlaps {other_text} of {format_path(other_path)}",
                            "choose ranges that do not overlap")


@rule("network.gpu-subnets-size")
def check_gpu_subnets_size(bp: Blueprint) -> Iterator[Finding]:
    """gpu_subnets_cidr must split into a /29 or larger per GPU NIC and extra gVNIC."""
    count = subnets_needed(bp)
    cidr, _, _ = parse_cidr(bp.network.gpu_subnets_cidr)
    if count == 0 or cidr is None or len(fabric_kinds(bp)) > 1:
        return
    needed = (count - 1).bit_length()
    if cidr.prefixlen + needed > SMALLEST_GPU_SUBNET:
        yield error(GPU_RANGE,
                    f"{cidr} is too small to split into {count} GPU subnets",
                    f"use a prefix of /{SMALLEST_GPU_SUBNET - needed} or larger")


@rule("network.gpu-fabric")
def check_one_gpu_fabric(bp: Blueprint) -> Iterator[Finding]:
    """One cluster builds one GPU fabric: TCPX(O) VPCs or a RoCE VPC, not both."""
    if len(fabric_kinds(bp)) < 2:
        return
    gpu_sets = [(i, f) for i, n in enumerate(bp.slurm.nodesets)
                if (f := machines.gpu_family(n.machine_type))]
    first_index, first = gpu_sets[0]
    for index, family in gpu_sets[1:]:
        if family.networking != first.networking:
            yield error(("slurm", "nodesets", index, "machine_type"),
                        f"{family.machine_type} needs {family.networking} GPU networking, "
                        f"nodesets[{first_index}] needs {first.networking}",
                        (Fix("one GPU fabric per cluster: split it in two"),
                         Fix("set network.gpu_networks: none", sets="network.gpu_networks")))


@rule("network.mtu-recommended")
def check_mtu_recommended(bp: Blueprint) -> Iterator[Finding]:
    """An MTU other than the GPU family's recommendation works but costs throughput."""
    mtu = bp.network.mtu
    families = {f.machine_type: f for n in bp.slurm.nodesets
                if (f := machines.gpu_family(n.machine_type))}
    for family in families.values():
        if mtu is not None and family.recommended_mtu not in (None, mtu):
            yield warning(("network", "mtu"),
                          f"{mtu} differs from {family.recommended_mtu}, the MTU recommended for "
                          f"{family.machine_type}",
                          f"set {family.recommended_mtu} or leave mtu unset")


@rule("network.existing")
def check_existing_pair(bp: Blueprint) -> Iterator[Finding]:
    """`existing` and `existing_subnetwork` come together: one names the other's VPC."""
    net = bp.network
    if net.existing and not net.existing_subnetwork:
        yield error(("network", "existing"), "an existing network needs existing_subnetwork",
                    "add network.existing_subnetwork: projects/P/regions/R/subnetworks/S")
    if net.existing_subnetwork and not net.existing:
        yield error(("network", "existing_subnetwork"), "existing_subnetwork needs existing",
                    "add network.existing: projects/P/global/networks/N")


@rule("network.existing-project")
def check_existing_in_project(bp: Blueprint) -> Iterator[Finding]:
    """An existing network must live in the cluster's project.

    clusterprint creates the firewall rules, NAT and private service access range in
    the cluster's project; on a Shared VPC host in another project they would fail.
    """
    net = bp.network
    for key, name in (("existing", net.existing), ("existing_subnetwork", net.existing_subnetwork)):
        owner = name.split("/")[1] if name else None
        if owner and bp.project and owner != bp.project:
            yield error(("network", key),
                        f"is in project {owner}, the cluster in {bp.project}; networks of "
                        f"another project (Shared VPC) are not supported",
                        "use a network of the cluster's project, or leave existing unset")


@rule("network.existing-ignored")
def check_existing_ignores(bp: Blueprint) -> Iterator[Finding]:
    """The MTU and the subnet range belong to a network clusterprint creates."""
    net = bp.network
    if not net.existing:
        return
    for key in ("mtu", "subnet_cidr"):
        if key in net.model_fields_set:
            yield warning(("network", key), "has no effect on an existing network",
                          "remove it; the existing network keeps its own")


@rule("network.psa")
def check_psa_choice(bp: Blueprint) -> Iterator[Finding]:
    """Private service access takes a prefix length or an explicit range, not both."""
    psa = bp.network.private_service_access
    if psa.range is not None and psa.prefix_length is not None:
        yield error(("network", "private_service_access"),
                    "set either prefix_length or range, not both",
                    "an explicit range fixes the prefix length already")


@rule("network.peerings")
def check_peerings(bp: Blueprint) -> Iterator[Finding]:
    """Each peering reaches another network, and only once.

    A network cannot peer with itself, and two networks share at most one peering. The
    cluster's own network is known here only as ``existing``: a network clusterprint
    creates takes its name from Pulumi, with a random suffix.
    """
    net = bp.network
    first: dict[str, int] = {}
    for index, peering in enumerate(net.peerings):
        path = ("network", "peerings", index, "peer_network")
        if peering.peer_network == net.existing:
            yield error(path, "is the cluster's own network (network.existing)",
                        "peer with another network, or remove this peering")
        elif peering.peer_network in first:
            yield error(path, f"peerings[{first[peering.peer_network]}] already peers with "
                              f"{peering.peer_network}", "peer with each network once")
        first.setdefault(peering.peer_network, index)

def _psa_blocks(bp: Blueprint) -> list[tuple[str, int]]:
    """What each producer takes from the PSA range: (what, prefix length)."""
    home = bp.storage.home
    blocks = []
    if home.uses_filestore and home.filestore is not None:
        blocks.append((f"Filestore {home.filestore.tier}",
                       catalog.FILESTORE_PSA_PREFIX[home.filestore.tier]))
    blocks += [(f"Lustre {x.name}", catalog.LUSTRE_PSA_PREFIX) for x in bp.storage.lustre]
    return blocks


@rule("network.psa-size")
def check_psa_size(bp: Blueprint) -> Iterator[Finding]:
    """The private service access range must hold Filestore and every Lustre instance.

    Each producer takes an aligned block of its own (Filestore /26 or /29 by tier, each
    Lustre instance /23); the sum of the blocks is the least the range must hold.
    """
    psa = bp.network.private_service_access
    if bp.orchestrator == "managed" or (psa.range and parse_cidr(psa.range)[0] is None):
        return
    blocks = _psa_blocks(bp)
    needed = sum(2 ** (32 - prefix) for _, prefix in blocks)
    prefix = psa.effective_prefix_length
    if needed <= 2 ** (32 - prefix):
        return
    key = "range" if psa.range else "prefix_length"
    path = ("network", "private_service_access", key) if key in psa.model_fields_set else (
        "network", "private_service_access")
    wanted = 32 - (needed - 1).bit_length()
    parts = [f"{what} a /{p}" for what, p in blocks]
    takes = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    yield error(path, f"a /{prefix} range holds {2 ** (32 - prefix)} addresses, but {takes} "
                      f"take {needed}", f"use a prefix length of {wanted} or shorter")


SSH_RANGES: KeyPath = ("network", "ssh_source_ranges")


def firewall_sources(bp: Blueprint) -> list[tuple[KeyPath, list[str]]]:
    """The source ranges of each firewall rule the blueprint's ranges make, at the key that
    gives them: the SSH rule's, each isolated GPU or gVNIC subnet's own range (a RoCE VPC
    takes no rule), and the Lustre LNet rule's explicit private service access range."""
    net = bp.network
    found: list[tuple[KeyPath, list[str]]] = []
    if net.ssh_source_ranges:
        found.append((SSH_RANGES, list(net.ssh_source_ranges)))
    if subnets_needed(bp) and len(fabric_kinds(bp)) == 1 and parse_cidr(net.gpu_subnets_cidr)[0]:
        gpu, gvnic = gpu_ranges(bp)
        isolated = gvnic + (gpu if fabric_kinds(bp) != ["rdma"] else [])
        found += [(GPU_RANGE, [cidr]) for cidr in isolated]
    if bp.storage.lustre and net.private_service_access.range:
        found.append((PSA_RANGE, [net.private_service_access.range]))
    return found


def _at_first(path: KeyPath, ranges: list[str], held: tuple[str, ...]) -> KeyPath:
    """The SSH list's first range that holds public addresses; another key as it is."""
    return (*path, ranges.index(held[0])) if path == SSH_RANGES else path


#: The one bound of no-open-firewall, as the policy's fix says it.
OPEN_BOUND = f"a /{addresses.OPEN_PREFIX[4]}'s worth of public addresses"


@rule("network.open-firewall")
def check_open_firewall(bp: Blueprint) -> Iterator[Finding]:
    """No firewall rule the blueprint makes is open to the internet: the judgement of the
    mandatory policy `no-open-firewall` (clusterprint.facts.addresses), made from the file,
    so `validate` and a `pulumi up` without the policy pack refuse what the pack would."""
    carved: dict[KeyPath, list[str]] = {}
    for path, ranges in firewall_sources(bp):
        for admitted in addresses.open_to_internet(ranges):
            if path == SSH_RANGES:
                yield error(_at_first(path, ranges, admitted.ranges),
                            f"SSH would be open to {admitted.text(addresses.OPEN_PREFIX)}, "
                            "which the policy no-open-firewall refuses",
                            f"admit IAP's {catalog.IAP_RANGE} or the ranges your users come "
                            f"from, {OPEN_BOUND} at most in all")
            else:
                carved.setdefault(path, []).extend(admitted.ranges)
    for path, subnets in carved.items():
        yield error(path, f"the firewall rule of each subnet made from it would admit more than "
                          f"{OPEN_BOUND}: {', '.join(subnets)}, which the policy "
                          "no-open-firewall refuses",
                    "use a private range: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")


@rule("network.ssh-wide")
def check_ssh_wide(bp: Blueprint) -> Iterator[Finding]:
    """SSH from more public addresses than one routed site holds: the advisory policy
    `ssh-source-ranges-wide`, as a warning."""
    ranges = bp.network.ssh_source_ranges
    for admitted in addresses.wide_ssh(ranges):
        yield warning(_at_first(SSH_RANGES, ranges, admitted.ranges),
                      f"SSH would be open to {admitted.text(addresses.WIDE_SSH_PREFIX)}",
                      f"narrow it to IAP's {catalog.IAP_RANGE} or your offices' ranges")
