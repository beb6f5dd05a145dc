"""The cluster's networks: system VPC, subnet, firewall, NAT, GPU networks, peerings."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.blueprint.model import Peering
from clusterprint.contract import naming
from clusterprint.facts import catalog, gpu_software

#: Every protocol: nodes of one cluster talk Slurm, munge, NCCL and MPI to each other.
ALL_TRAFFIC = [gcp.compute.FirewallAllowArgs(protocol="all")]


class ClusterNetwork(pulumi.ComponentResource):
    """Where the cluster's VMs and shared file systems talk, and nothing else reaches in.

    The system VPC carries Slurm, SSH (from ``ssh_source_ranges`` only, IAP by default;
    an empty list opens no SSH rule at all) and file-system traffic; the GPU networks
    carry only GPU-to-GPU traffic:
    ``tcpx``/``tcpxo`` get one VPC per GPU NIC (A3 High 4, A3 Mega 8), ``rdma`` one VPC
    with the zone's RoCE network profile and one subnet per GPU NIC (A3 Ultra, A4),
    plus ``extra_gvnic_cidrs``: one more plain VPC per additional gVNIC those machines
    carry. Nodes get no external IP, so egress goes through Cloud NAT when ``nat``.
    """

    def __init__(self, name: str, *, project: str, region: str, zone: str, mtu: int,
                 subnet_cidr: str = "10.0.0.0/20",
                 ssh_source_ranges: Sequence[str] = (catalog.IAP_RANGE,), nat: bool = True,
                 node_tag: str | None = None,
                 gpu_networking: gpu_software.GpuNetworking = "none",
                 gpu_subnet_cidrs: Sequence[str] = (), extra_gvnic_cidrs: Sequence[str] = (),
                 peerings: Sequence[Peering] = (), existing_network: str | None = None,
                 existing_subnetwork: str | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:ClusterNetwork", name, None, opts)
        self._name, self._project, self._region, self._mtu = name, project, region, mtu
        self._child = pulumi.ResourceOptions(parent=self)
        #: The network tag every cluster VM carries; the firewall rules select on it.
        self.node_tag = node_tag or name

        if (existing_network is None) != (existing_subnetwork is None):
            raise ValueError("existing_network and existing_subnetwork come together")
        if existing_network is not None and existing_subnetwork is not None:
            self.network_id: pulumi.Input[str] = existing_network
            self.subnetwork: pulumi.Input[str] = existing_subnetwork
        else:
            network = self._vpc(f"{name}-vpc")
            self.network_id = network.id
            self.subnetwork = self._subnet(f"{name}-subnet", network.id, subnet_cidr)
        self._firewalls(ssh_source_ranges)
        if nat:
            self._nat()

        #: Subnets of the gVNIC NICs, system subnet first: a VM takes as many as its
        #: family has system NICs.
        self.system_subnetworks: list[pulumi.Input[str]] = [self.subnetwork] + [
            self._isolated_subnet(f"{name}-gvnic-{i}", cidr)
            for i, cidr in enumerate(extra_gvnic_cidrs, start=1)]
        #: Subnets of the GPU NICs, in NIC order.
        self.gpu_subnetworks: list[pulumi.Input[str]] = self._gpu_subnets(
            gpu_networking, list(gpu_subnet_cidrs), zone)

        self.peerings = [
            gcp.compute.NetworkPeering(
                naming.peering(name, p.name), network=self.network_id, peer_network=p.peer_network,
                export_custom_routes=p.export_custom_routes,
                import_custom_routes=p.import_custom_routes, opts=self._child)
            for p in peerings]
        self.register_outputs({"network_id": self.network_id, "subnetwork": self.subnetwork,
                               "system_subnetworks": self.system_subnetworks,
                               "gpu_subnetworks": self.gpu_subnetworks})

    def _vpc(self, logical: str, network_profile: str | None = None) -> gcp.compute.Network:
        return gcp.compute.Network(
            logical, project=self._project, auto_create_subnetworks=False, mtu=self._mtu,
            routing_mode="REGIONAL", network_profile=network_profile, opts=self._child)

    def _subnet(self, logical: str, network: pulumi.Input[str], cidr: str) -> pulumi.Output[str]:
        return gcp.compute.Subnetwork(
            logical, project=self._project, region=self._region, network=network,
            ip_cidr_range=cidr, private_ip_google_access=True, opts=self._child).id

    def _firewalls(self, ssh_sources: Sequence[str]) -> None:
        # Tags rather than the subnet's range: an existing subnetwork's range is not known.
        gcp.compute.Firewall(
            f"{self._name}-internal", project=self._project, network=self.network_id,
            direction="INGRESS", allows=ALL_TRAFFIC, source_tags=[self.node_tag],
            target_tags=[self.node_tag], opts=self._child)
        if not ssh_sources:
            # A rule without sources admits 0.0.0.0/0 (hashicorp/terraform-provider-google#6789).
            return
        gcp.compute.Firewall(
            f"{self._name}-ssh", project=self._project, network=self.network_id,
            direction="INGRESS", source_ranges=list(ssh_sources), target_tags=[self.node_tag],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            opts=self._child)

    def _nat(self) -> None:
        router = gcp.compute.Router(f"{self._name}-router", project=self._project,
                                    region=self._region, network=self.network_id,
                                    opts=self._child)
        # Only the cluster's subnet: an existing network may already NAT its other subnets.
        gcp.compute.RouterNat(
            f"{self._name}-nat", project=self._project, region=self._region, router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[gcp.compute.RouterNatSubnetworkArgs(
                name=self.subnetwork, source_ip_ranges_to_nats=["ALL_IP_RANGES"])],
            opts=self._child)

    def _isolated_subnet(self, logical: str, cidr: str) -> pulumi.Output[str]:
        """A VPC with one subnet that admits only traffic from inside that subnet."""
        network = self._vpc(logical)
        gcp.compute.Firewall(f"{logical}-internal", project=self._project, network=network.id,
                             direction="INGRESS", allows=ALL_TRAFFIC, source_ranges=[cidr],
                             opts=self._child)
        return self._subnet(f"{logical}-subnet", network.id, cidr)

    def _gpu_subnets(self, kind: gpu_software.GpuNetworking, cidrs: list[str],
                     zone: str) -> list[pulumi.Input[str]]:
        if kind == "none" or not cidrs:
            return []
        if kind != "rdma":
            return [self._isolated_subnet(f"{self._name}-gpu-{i}", cidr)
                    for i, cidr in enumerate(cidrs)]
        # A RoCE VPC takes no firewall rules; its subnets carry the MRDMA NICs
        # (Cluster Toolkit modules/network/gpu-rdma-vpc).
        profile = f"projects/{self._project}/global/networkProfiles/{zone}-vpc-roce"
        roce = self._vpc(f"{self._name}-rdma", network_profile=profile)
        return [self._subnet(f"{self._name}-rdma-{i}", roce.id, cidr)
                for i, cidr in enumerate(cidrs)]
