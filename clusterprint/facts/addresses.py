"""Which addresses are public, and how many of them a list of source ranges admits.

One judgement, two callers: the policy `no-open-firewall` (and the advisory
`ssh-source-ranges-wide`) over a planned firewall's ``sourceRanges``
(clusterprint.preview.policies), and the blueprint rule ``network.open-firewall`` over the
ranges a blueprint gives its firewalls, so `validate` refuses what the policy would.

Standard library only: the policy pack's virtualenv has nothing else.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from clusterprint.facts import catalog

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Blocks whose addresses are not public: those the IANA IPv4 and IPv6 Special-Purpose
#: Address Registries mark not "Globally Reachable" (iana.org/assignments/
#: iana-ipv4-special-registry, .../iana-ipv6-special-registry), as CPython 3.13's ipaddress
#: lists them for ``is_global``. Kept here, not read from ``is_global``, because the Python
#: that runs the pack may be older and disagree: 3.11's tables predate CPython's 2024
#: correction (gh-113171), and a network's ``is_global`` looks at its first and last
#: address only. Unlike CPython, a block IANA marks N/A (2002::/16 6to4) counts as public:
#: its hosts are anywhere on the internet, and a firewall errs on the side of counting.
NOT_PUBLIC: tuple[Network, ...] = tuple(ipaddress.ip_network(block) for block in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
    "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
    "2001:db8::/32", "3fff::/20", "fc00::/7", "fe80::/10"))
#: The blocks inside NOT_PUBLIC that the registries mark globally reachable (PCP and TURN
#: anycast, AMT, AS112, ORCHIDv2, DRIP) or N/A (Teredo, the retired ORCHID): public.
PUBLIC_EXCEPTIONS: tuple[Network, ...] = tuple(ipaddress.ip_network(block) for block in (
    "192.0.0.9/32", "192.0.0.10/32", "2001::/32", "2001:1::1/128", "2001:1::2/128",
    "2001:3::/32", "2001:4:112::/48", "2001:10::/28", "2001:20::/28", "2001:30::/28"))
#: The bound of `no-open-firewall`: the most public addresses one rule's source ranges may
#: admit together, IAP's range aside, given as the prefix length of a block that holds as
#: many, by IP version. A /24 (IPv4) and a /48 (IPv6) are the smallest blocks routed on the
#: internet, so one is at most one organisation's site; the bound is 256 of them, a /16's
#: worth of IPv4 (65,536 addresses) and a /40's of IPv6. Past it a rule lets a whole
#: provider's customers in, however its ranges are split, and the policy refuses it.
OPEN_PREFIX = {4: 16, 6: 40}
#: SSH from more public addresses than one routed site's block holds (a /24, a /48), IAP's
#: range aside, is "wide": advisory, for a rule within OPEN_PREFIX.
WIDE_SSH_PREFIX = {4: 24, 6: 48}
#: Address bits by IP version, for the size of a block of a given prefix length.
ADDRESS_BITS = {4: ipaddress.IPV4LENGTH, 6: ipaddress.IPV6LENGTH}
def _without(networks: Iterable[Network], holes: Iterable[Network]) -> list[Network]:
    """The addresses of ``networks`` that are in none of ``holes``, as disjoint blocks."""
    left = list(networks)
    for hole in holes:
        left = [piece for network in left for piece in _cut(network, hole)]
    return left


def _cut(network: Network, hole: Network) -> Iterable[Network]:
    """``network`` less ``hole``: two blocks are disjoint or one holds the other."""
    if network.version != hole.version or not network.overlaps(hole):
        return [network]
    if network.subnet_of(hole):
        return []
    return network.address_exclude(hole)


#: Every address a firewall need not count: the special-purpose blocks less their public
#: exceptions, and IAP's range, which every cluster admits SSH from.
UNCOUNTED: tuple[Network, ...] = (*_without(NOT_PUBLIC, PUBLIC_EXCEPTIONS),
                                  ipaddress.ip_network(catalog.IAP_RANGE))


@dataclass(frozen=True)
class PublicSources:
    """The public addresses a rule's source ranges of one IP version admit, IAP's aside."""

    version: int
    count: int
    #: The ranges as written that hold any of them, each once.
    ranges: tuple[str, ...]

    def exceed(self, prefixes: Mapping[int, int]) -> bool:
        """Whether they outnumber a block of this version's prefix length in ``prefixes``."""
        return self.count > 2 ** (ADDRESS_BITS[self.version] - prefixes[self.version])

    def text(self, prefixes: Mapping[int, int]) -> str:
        """How many they are, the bound they pass and the ranges that hold them."""
        return (f"{self.count:,} public IPv{self.version} addresses, more than a "
                f"/{prefixes[self.version]} holds: {', '.join(self.ranges)}")


def public_sources(ranges: Iterable[str]) -> list[PublicSources]:
    """What the union of ``ranges`` admits, by IP version: an address counts once however
    many ranges hold it, so splitting or repeating a range changes nothing.

    A range with host bits set reads as the block it lies in (whatever the API makes of
    it, it admits no more); one that is not an IP range is left to the caller to refuse.
    """
    parsed = []
    for text in ranges:
        try:
            parsed.append((text, ipaddress.ip_network(text, strict=False)))
        except ValueError:
            continue
    found = []
    for version in sorted({network.version for _, network in parsed}):
        mine = [(text, network) for text, network in parsed if network.version == version]
        union = ipaddress.collapse_addresses(network for _, network in mine)
        count = sum(block.num_addresses for block in _without(union, UNCOUNTED))
        held = dict.fromkeys(text for text, network in mine if _without([network], UNCOUNTED))
        if count:
            found.append(PublicSources(version, count, tuple(held)))
    return found


def open_to_internet(ranges: Iterable[str]) -> list[PublicSources]:
    """The public addresses of ``ranges`` past OPEN_PREFIX: a firewall rule from them opens
    the cluster to the internet, and both the policy and validate refuse it."""
    return [admitted for admitted in public_sources(ranges) if admitted.exceed(OPEN_PREFIX)]


def wide_ssh(ranges: Iterable[str]) -> list[PublicSources]:
    """The public addresses of ``ranges`` past WIDE_SSH_PREFIX but within OPEN_PREFIX: SSH
    from them is allowed, with a warning."""
    return [admitted for admitted in public_sources(ranges)
            if admitted.exceed(WIDE_SSH_PREFIX) and not admitted.exceed(OPEN_PREFIX)]
