"""Which input changes make Pulumi replace a resource instead of updating it.

pulumi-gcp is bridged from terraform-provider-google: an input whose Terraform
schema says ``ForceNew: true`` (the docs: "Changing this forces a new resource to
be created") makes `pulumi preview` show a replacement. The table keeps, per
resource type, the camelCase inputs that do so (a dotted path covers everything
under it), or the few that can be updated when every other input forces a
replacement, each with the provider source it was read from. A type missing from
the table is assumed to update in place. `pulumi preview --diff` is the authority;
this table is the offline estimate a reviewer sees first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TF = "hashicorp/terraform-provider-google google/services/"


@dataclass(frozen=True)
class ReplacementRule:
    """How one resource type reacts to changed inputs."""

    #: Inputs that force a replacement; ``("*",)`` means every input does.
    replace_on: tuple[str, ...]
    #: Where this was read (provider source file or doc) and what it says.
    source: str
    #: With ``replace_on == ("*",)``: the inputs that are updatable after all.
    updatable: tuple[str, ...] = ()
    #: Inputs that force a replacement only when this test of (old, new) says so.
    replace_when: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = ()
    #: Replacing or deleting it loses data (Filestore, Lustre, buckets).
    data_bearing: bool = False


def _not_an_expansion(old: Any, new: Any) -> bool:
    """A subnet range can only grow in place: same start, shorter prefix."""
    try:
        before, after = ipaddress.ip_network(old), ipaddress.ip_network(new)
    except (TypeError, ValueError):
        return True
    return not (after.network_address == before.network_address
                and after.prefixlen < before.prefixlen)


#: Type token -> rule. Sources: the ForceNew flags of each resource's schema in
#: terraform-provider-google (path given), which pulumi-gcp 10.x bridges.
RULES: dict[str, ReplacementRule] = {
    "gcp:compute/network:Network": ReplacementRule(
        ("name", "project", "autoCreateSubnetworks", "description", "internalIpv6Range",
         "networkProfile", "params"),
        TF + "compute/resource_compute_network.go: ForceNew on name, auto_create_subnetworks, "
        "description, internal_ipv6_range, network_profile, params, project; mtu and "
        "routing_mode are updatable"),
    "gcp:compute/subnetwork:Subnetwork": ReplacementRule(
        ("name", "project", "network", "region", "description", "ipv6AccessType",
         "purpose", "reservedInternalRange"),
        TF + "compute/resource_compute_subnetwork.go: ForceNew on name, network, region, "
        "description, project; ip_cidr_range is updatable only by expansion "
        "(CustomizeDiff: shrinking or moving the range forces a new subnetwork)",
        replace_when=(("ipCidrRange", _not_an_expansion),)),
    "gcp:compute/firewall:Firewall": ReplacementRule(
        ("name", "project", "network", "direction"),
        TF + "compute/resource_compute_firewall.go: ForceNew on name, network, direction, "
        "project; rules, ranges and tags are updatable"),
    "gcp:compute/router:Router": ReplacementRule(
        ("name", "project", "network", "region", "encryptedInterconnectRouter"),
        TF + "compute/resource_compute_router.go: ForceNew on name, network, region, project"),
    "gcp:compute/routerNat:RouterNat": ReplacementRule(
        ("name", "project", "router", "region"),
        TF + "compute/resource_compute_router_nat.go: ForceNew on name, router, region, "
        "project"),
    "gcp:compute/networkPeering:NetworkPeering": ReplacementRule(
        ("name", "network", "peerNetwork"),
        TF + "compute/resource_compute_network_peering.go: ForceNew on name, network, "
        "peer_network; custom route import/export is updatable"),
    "gcp:compute/globalAddress:GlobalAddress": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_global_address.go: every field but labels is ForceNew",
        updatable=("labels",)),
    "gcp:servicenetworking/connection:Connection": ReplacementRule(
        ("network", "service"),
        TF + "servicenetworking/resource_service_networking_connection.go: ForceNew on "
        "network and service; reserved_peering_ranges is updatable"),
    "gcp:filestore/instance:Instance": ReplacementRule(
        ("name", "project", "location", "zone", "tier", "fileShares.name",
         "fileShares.sourceBackup", "networks", "kmsKeyName", "protocol"),
        TF + "filestore/resource_filestore_instance.go: ForceNew on name, location, tier, "
        "file_shares.name, networks, kms_key_name, protocol, project; "
        "file_shares.capacity_gb and nfs_export_options are updatable",
        data_bearing=True),
    "gcp:lustre/instance:Instance": ReplacementRule(
        ("*",),
        TF + "lustre/resource_lustre_instance.go: the update mask holds capacity_gib, "
        "description, gke_support_enabled and labels only; instance_id, location, "
        "filesystem, network, per_unit_storage_throughput are ForceNew",
        updatable=("capacityGib", "description", "gkeSupportEnabled", "labels"),
        data_bearing=True),
    "gcp:storage/bucket:Bucket": ReplacementRule(
        ("name", "project", "location"),
        TF + "storage/resource_storage_bucket.go: ForceNew on name, location, project; "
        "storage class, versioning, lifecycle and access settings are updatable",
        data_bearing=True),
    "gcp:compute/instanceTemplate:InstanceTemplate": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_instance_template.go: every field is ForceNew "
        "(templates are immutable); an instance group using it is updated to the new one"),
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_region_instance_template.go: every field is ForceNew"),
    "gcp:compute/instanceGroupManager:InstanceGroupManager": ReplacementRule(
        ("name", "project", "zone", "baseInstanceName"),
        TF + "compute/resource_compute_instance_group_manager.go: ForceNew on name, zone, "
        "base_instance_name, project; target_size, versions and update_policy are "
        "updatable"),
    "gcp:compute/resourcePolicy:ResourcePolicy": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_resource_policy.go: every field but description is "
        "ForceNew", updatable=("description",)),
    "gcp:compute/instance:Instance": ReplacementRule(
        ("name", "project", "zone", "bootDisk.initializeParams", "bootDisk.diskEncryptionKeyRaw",
         "bootDisk.kmsKeySelfLink", "bootDisk.source", "scratchDisks", "reservationAffinity",
         "networkInterfaces.network", "networkInterfaces.nicType", "hostname"),
        TF + "compute/resource_compute_instance.go: ForceNew on name, zone, boot_disk "
        "parameters, scratch_disk, reservation_affinity, hostname, network_interface.network; "
        "machine_type, metadata, service_account update (some with allow_stopping_for_update)"),
    "gcp:serviceaccount/account:Account": ReplacementRule(
        ("accountId", "project"),
        TF + "resourcemanager/resource_google_service_account.go: ForceNew on account_id, "
        "project; display_name and description are updatable"),
    "gcp:secretmanager/secret:Secret": ReplacementRule(
        ("secretId", "project", "replication"),
        TF + "secretmanager/resource_secret_manager_secret.go: ForceNew on secret_id, "
        "replication, project"),
    "gcp:secretmanager/secretVersion:SecretVersion": ReplacementRule(
        ("secret", "secretData", "isSecretDataBase64"),
        TF + "secretmanager/resource_secret_manager_secret_version.go: ForceNew on secret and "
        "secret_data"),
    "gcp:vertex/aiTensorboard:AiTensorboard": ReplacementRule(
        ("region", "project", "encryptionSpec"),
        TF + "vertexai/resource_vertex_ai_tensorboard.go: ForceNew on region, "
        "encryption_spec, project; display_name, description and labels are updatable"),
    "gcp:monitoring/dashboard:Dashboard": ReplacementRule(
        ("project",),
        TF + "monitoring/resource_monitoring_dashboard.go: ForceNew on project; "
        "dashboard_json is updatable"),
    **{iam: ReplacementRule(
        ("*",),
        "hashicorp/terraform-provider-google google/tpgiamresource/resource_iam_member.go: "
        "role, member and condition are ForceNew (an IAM member is never updated)")
       for iam in ("gcp:projects/iAMMember:IAMMember",
                   "gcp:storage/bucketIAMMember:BucketIAMMember",
                   "gcp:secretmanager/secretIamMember:SecretIamMember",
                   "gcp:serviceaccount/iAMMember:IAMMember")},
    # The managed cluster creates its Filestore, Lustre and buckets itself
    # (storage_resources), so replacing or deleting it is counted as data loss.
    "gcp:hypercomputecluster/cluster:Cluster": ReplacementRule(
        ("clusterId", "location", "project"),
        TF + "hypercomputecluster/resource_hypercomputecluster_cluster.go: ForceNew on "
        "cluster_id, location, project (other fields not checked field by field)",
        data_bearing=True),
}


def is_data_bearing(type_: str) -> bool:
    """True for the types whose replacement or deletion loses data."""
    rule = RULES.get(type_)
    return rule is not None and rule.data_bearing


def replaced_on_any_change(type_: str) -> bool:
    """True for types with almost nothing updatable (templates, policies, IAM members)."""
    rule = RULES.get(type_)
    return rule is not None and rule.replace_on == ("*",)


def forces_replacement(type_: str, path: str, old: Any = None, new: Any = None) -> bool:
    """Whether changing the input at ``path`` (dotted, no list indexes) replaces it."""
    rule = RULES.get(type_)
    if rule is None:
        return False

    def covers(entry: str) -> bool:
        return path == entry or path.startswith(entry + ".")

    for entry, test in rule.replace_when:
        if covers(entry):
            return test(old, new)
    if rule.replace_on == ("*",):
        return not any(covers(entry) for entry in rule.updatable)
    return any(covers(entry) for entry in rule.replace_on)
