"""The one shape of a standalone cluster VM (controller, login): private, with its own identity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.components.identity import NODE_SCOPES
from clusterprint.contract import node_metadata

#: Boot disk of the controller and login VMs.
SERVICE_DISK_TYPE = "pd-balanced"


def private_vm(logical: str, *, instance_name: str, project: str, zone: str, machine_type: str,
               image: str, disk_size_gb: int, subnetwork: pulumi.Input[str],
               service_account_email: pulumi.Input[str],
               metadata: Mapping[str, pulumi.Input[str]], tags: Sequence[str],
               labels: Mapping[str, str], opts: pulumi.ResourceOptions) -> gcp.compute.Instance:
    """A VM with no external IP (reached through IAP, egress through NAT).

    ``instance_name`` is fixed, not auto-named: it is the hostname Slurm and users know.
    Metadata over Compute Engine's limits is refused here, before any resource exists.
    """
    node_metadata.check_size(instance_name, metadata)
    return gcp.compute.Instance(
        logical, project=project, zone=zone, name=instance_name, machine_type=machine_type,
        boot_disk=gcp.compute.InstanceBootDiskArgs(
            auto_delete=True,
            initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                image=image, size=disk_size_gb, type=SERVICE_DISK_TYPE)),
        network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(subnetwork=subnetwork)],
        service_account=gcp.compute.InstanceServiceAccountArgs(
            email=service_account_email, scopes=NODE_SCOPES),
        metadata=dict(metadata), tags=list(tags), labels=dict(labels),
        allow_stopping_for_update=True, opts=opts)
