"""Private service access: the peering through which Filestore and Managed Lustre are reached."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

SERVICE = "servicenetworking.googleapis.com"


class PrivateServiceAccess(pulumi.ComponentResource):
    """Reserves a range in the VPC and peers it with Google's service producers.

    Filestore (connect mode PRIVATE_SERVICE_ACCESS) and Managed Lustre get their
    addresses from this range, so both must depend on ``connection``.

    ``deletion_policy`` defaults to ABANDON: deleting the connection fails with
    "Producer services ... still using this connection" for as long as a producer
    holds resources in the range, which it may do for a while after its instance is
    gone (pulumi/pulumi-gcp#3354, hashicorp/terraform-provider-google#16275); ABANDON
    drops the connection from the stack instead of failing ``pulumi destroy``. The
    provider documents the cost: the peering stays on the network, so deleting a VPC
    this stack created then waits for that peering; pass ``REMOVE_PEERING`` for
    throwaway networks, whose peering is then removed once the producers are gone.
    """

    def __init__(self, name: str, *, network: pulumi.Input[str], project: str,
                 prefix_length: int = 20, address: str | None = None,
                 deletion_policy: str = "ABANDON",
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:PrivateServiceAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # An explicit range (`range: 10.200.0.0/20`) fixes the address and its prefix.
        base, prefix = (address.split("/") if address else (None, str(prefix_length)))
        self.range = gcp.compute.GlobalAddress(
            f"{name}-range", project=project, network=network, purpose="VPC_PEERING",
            address_type="INTERNAL", address=base, prefix_length=int(prefix), opts=child)
        self.connection = gcp.servicenetworking.Connection(
            f"{name}-peering", network=network, service=SERVICE,
            reserved_peering_ranges=[self.range.name], deletion_policy=deletion_policy,
            opts=child)
        #: The reserved range as a CIDR, for firewall rules that admit the producers.
        self.cidr: pulumi.Output[str] = pulumi.Output.concat(self.range.address, "/", prefix)
        self.register_outputs({"connection": self.connection.id, "cidr": self.cidr})
