"""The GPU network fabric a blueprint needs: which kind, and the subnets carved for it.

The validator and the network component must agree on this exactly (a rule that
accepts a range the component cannot carve is a failed `pulumi up`), so both read it
from here.
"""

from __future__ import annotations

import ipaddress

from clusterprint.blueprint.model import Blueprint
from clusterprint.facts import gpu_software, machines


def fabric_kinds(bp: Blueprint) -> list[gpu_software.GpuNetworking]:
    """The GPU networking kinds of the blueprint's nodesets (empty with gpu_networks: none)."""
    if bp.network.gpu_networks == "none":
        return []
    return sorted({f.networking for n in bp.slurm.nodesets
                   if (f := machines.gpu_family(n.machine_type)) and f.networking != "none"})


def gpu_networking(bp: Blueprint) -> gpu_software.GpuNetworking:
    """The one kind of GPU network the cluster builds: one cluster, one GPU fabric.

    TCPX(O) VPCs and a RoCE VPC cannot serve a mix; the rule ``network.gpu-fabric``
    refuses such blueprints, and this refuses them for callers that skip validation.
    """
    kinds = fabric_kinds(bp)
    if len(kinds) > 1:
        raise ValueError(f"nodesets mix GPU networking kinds {', '.join(kinds)}; one cluster "
                         f"builds one kind of GPU network (or set network.gpu_networks: none)")
    return kinds[0] if kinds else "none"


def _families(bp: Blueprint) -> list[machines.MachineFamily]:
    kinds = fabric_kinds(bp)
    return [f for n in bp.slurm.nodesets
            if (f := machines.gpu_family(n.machine_type)) and f.networking in kinds]


def gpu_subnet_count(bp: Blueprint) -> int:
    """Subnets for GPU NICs: one per GPU NIC of the widest family."""
    return max((f.gpu_nics for f in _families(bp)), default=0)


def extra_gvnic_count(bp: Blueprint) -> int:
    """gVNICs beyond the first (A3 Ultra, A4: 1): each needs a VPC and subnet of its own."""
    return max((f.system_nics - 1 for f in _families(bp)), default=0)


def carve(cidr: ipaddress.IPv4Network, count: int) -> list[ipaddress.IPv4Network]:
    """``count`` equal subnets carved from ``cidr`` (the first power of two that fits)."""
    if count == 0:
        return []
    return list(cidr.subnets(prefixlen_diff=(count - 1).bit_length()))[:count]


def subnets_needed(bp: Blueprint) -> int:
    """Every subnet carved from ``network.gpu_subnets_cidr``."""
    return gpu_subnet_count(bp) + extra_gvnic_count(bp)


def gpu_ranges(bp: Blueprint) -> tuple[list[str], list[str]]:
    """The CIDRs of the GPU subnets and of the extra gVNIC subnets, carved together.

    Both come from ``network.gpu_subnets_cidr`` so no two NICs of a VM overlap: first
    one range per GPU NIC, then one per gVNIC beyond the first.
    """
    gpu = gpu_subnet_count(bp)
    carved = [str(c) for c in carve(ipaddress.IPv4Network(bp.network.gpu_subnets_cidr),
                                    subnets_needed(bp))]
    return carved[:gpu], carved[gpu:]
