"""ClusterNetwork on its own, with plain arguments: what another stack would reuse."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.model import Peering
from clusterprint.components.network import ClusterNetwork

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
ZONE = "us-central1-a"


def network(cloud, **kwargs) -> dict:
    """Declare a ClusterNetwork and resolve its subnet lists."""
    def program():
        net = ClusterNetwork("net", project="p-roject", region="us-central1", zone=ZONE,
                             **{"mtu": 8244, **kwargs})
        return {"system": net.system_subnetworks, "gpu": net.gpu_subnetworks}
    return cloud.run(program)


def test_system_vpc_has_the_mtu_and_no_auto_subnets(cloud):
    network(cloud)
    vpc = cloud.one(NETWORK)
    assert vpc.inputs["mtu"] == 8244
    assert vpc.inputs["autoCreateSubnetworks"] is False
    subnet = cloud.one(SUBNET)
    assert subnet.inputs["ipCidrRange"] == "10.0.0.0/20"
    assert subnet.inputs["privateIpGoogleAccess"] is True


def test_ssh_only_from_the_given_ranges_and_nodes_talk_freely(cloud):
    network(cloud, ssh_source_ranges=["35.235.240.0/20"], node_tag="c1")
    rules = {r.name: r.inputs for r in cloud.of_type(FIREWALL)}
    ssh = rules["net-ssh"]
    assert ssh["sourceRanges"] == ["35.235.240.0/20"]
    assert ssh["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    internal = rules["net-internal"]
    assert internal["sourceTags"] == ["c1"] and internal["targetTags"] == ["c1"]
    assert "sourceRanges" not in internal


def test_no_ssh_sources_means_no_ssh_rule(cloud):
    network(cloud, ssh_source_ranges=[], node_tag="c1")
    assert [r.name for r in cloud.of_type(FIREWALL)] == ["net-internal"]


def test_nat_only_when_asked(cloud):
    network(cloud, nat=False)
    assert not cloud.of_type("gcp:compute/routerNat:RouterNat")


def test_nat_covers_the_cluster_subnet(cloud):
    network(cloud)
    nat = cloud.one("gcp:compute/routerNat:RouterNat")
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert len(nat.inputs["subnetworks"]) == 1


def test_tcpxo_gets_one_vpc_and_firewall_per_gpu_subnet(cloud):
    cidrs = [f"10.128.{i * 32}.0/19" for i in range(8)]
    result = network(cloud, gpu_networking="tcpxo", gpu_subnet_cidrs=cidrs)
    assert len(result["gpu"]) == 8
    vpcs = cloud.of_type(NETWORK)
    assert len(vpcs) == 9 and all(v.inputs["mtu"] == 8244 for v in vpcs)
    gpu_subnets = sorted(s.inputs["ipCidrRange"] for s in cloud.of_type(SUBNET)
                         if s.name.startswith("net-gpu"))
    assert gpu_subnets == sorted(cidrs)
    gpu_rules = [r for r in cloud.of_type(FIREWALL) if r.name.startswith("net-gpu")]
    assert sorted(r.inputs["sourceRanges"][0] for r in gpu_rules) == sorted(cidrs)


def test_rdma_is_one_roce_vpc_with_eight_subnets_and_no_firewall(cloud):
    cidrs = [f"10.128.{i * 16}.0/20" for i in range(8)]
    result = network(cloud, mtu=8896, gpu_networking="rdma", gpu_subnet_cidrs=cidrs,
                     extra_gvnic_cidrs=["10.128.128.0/20"])
    assert len(result["gpu"]) == 8 and len(result["system"]) == 2
    roce = [v for v in cloud.of_type(NETWORK) if v.inputs.get("networkProfile")]
    assert len(roce) == 1
    assert roce[0].inputs["networkProfile"] == (
        f"projects/p-roject/global/networkProfiles/{ZONE}-vpc-roce")
    assert len([s for s in cloud.of_type(SUBNET) if s.name.startswith("net-rdma-")]) == 8
    assert not [r for r in cloud.of_type(FIREWALL) if r.name.startswith("net-rdma")]
    # The second gVNIC's own VPC is a plain one, closed to everything but its subnet.
    gvnic_rule = next(r for r in cloud.of_type(FIREWALL) if r.name == "net-gvnic-1-internal")
    assert gvnic_rule.inputs["sourceRanges"] == ["10.128.128.0/20"]


def test_existing_network_is_used_not_created(cloud):
    existing = "projects/p-roject/global/networks/shared"
    subnet = "projects/p-roject/regions/us-central1/subnetworks/shared-sub"
    result = network(cloud, existing_network=existing, existing_subnetwork=subnet)
    assert not cloud.of_type(NETWORK) and not cloud.of_type(SUBNET)
    assert result["system"] == [subnet]
    assert all(r.inputs["network"] == existing for r in cloud.of_type(FIREWALL))


def test_peerings_point_at_their_peer(cloud):
    peer = "projects/other-proj/global/networks/shared"
    network(cloud, peerings=[Peering(name="to-shared", peer_network=peer,
                                     import_custom_routes=True)])
    peering = cloud.one("gcp:compute/networkPeering:NetworkPeering")
    assert peering.inputs["peerNetwork"] == peer
    assert peering.inputs["importCustomRoutes"] is True
    assert peering.inputs["exportCustomRoutes"] is False


def test_an_existing_network_needs_its_subnetwork(cloud):
    with pytest.raises(ValueError, match="come together"):
        network(cloud, existing_network="projects/p-roject/global/networks/shared")
