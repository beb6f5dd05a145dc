"""PrivateServiceAccess on its own."""

from __future__ import annotations

from clusterprint.components.private_service_access import PrivateServiceAccess

ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
CONNECTION = "gcp:servicenetworking/connection:Connection"
NETWORK = "projects/p-roject/global/networks/n"


def test_a_prefix_length_reserves_a_peering_range(cloud):
    cidr = cloud.run(lambda: PrivateServiceAccess("psa", network=NETWORK, project="p-roject",
                                                  prefix_length=22).cidr)
    address = cloud.one(ADDRESS).inputs
    assert (address["purpose"], address["addressType"]) == ("VPC_PEERING", "INTERNAL")
    assert address["prefixLength"] == 22 and "address" not in address
    assert cidr == "10.200.0.0/22"


def test_an_explicit_range_fixes_address_and_prefix(cloud):
    cidr = cloud.run(lambda: PrivateServiceAccess("psa", network=NETWORK, project="p-roject",
                                                  address="10.210.0.0/20").cidr)
    address = cloud.one(ADDRESS).inputs
    assert (address["address"], address["prefixLength"]) == ("10.210.0.0", 20)
    assert cidr == "10.210.0.0/20"


def test_destroy_abandons_a_connection_producers_still_hold(cloud):
    cloud.run(lambda: PrivateServiceAccess("psa", network=NETWORK, project="p-roject").cidr)
    connection = cloud.one(CONNECTION).inputs
    assert connection["deletionPolicy"] == "ABANDON"
    assert connection["service"] == "servicenetworking.googleapis.com"
    assert connection["network"] == NETWORK
