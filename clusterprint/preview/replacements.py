"""Which input changes make Pulumi replace a resource instead of updating it.

pulumi-gcp is bridged from terraform-provider-google-beta (pulumi/pulumi-gcp
provider/go.mod), which like the GA provider is generated from
GoogleCloudPlatform/magic-modules: an input whose Terraform schema says
``ForceNew: true`` (the docs: "Changing this forces a new resource to be created")
makes `pulumi preview` show a replacement. The table keeps, per
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
MM = "GoogleCloudPlatform/magic-modules mmv1/products/"
#: Handwritten resources at their source, newer than some copies of the generated Go.
MM_TF = "GoogleCloudPlatform/magic-modules mmv1/third_party/terraform/services/"


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
    #: List inputs whose items the API keys by ``id`` (its maps), matched by id.
    keyed: tuple[KeyedList, ...] = ()


@dataclass(frozen=True)
class KeyedList:
    """A list input whose items are a map keyed by ``id`` in the API.

    Items match by id, not by position. A new item is added in place; what removing one
    costs is the item's own matter.
    """

    path: str
    #: Removing an item replaces the resource: the item is data the resource created.
    removal_replaces: bool = False


def _not_an_expansion(old: Any, new: Any) -> bool:
    """A subnet range changes in place only when the new range holds the whole old one.

    Mirrors ``IsShrinkageIpCidr`` (magic-modules
    mmv1/templates/terraform/constants/subnetwork.tmpl): the new block must contain the
    old block's first and last address, wherever it starts; values it cannot parse do
    not force a replacement there either.
    """
    try:
        before = ipaddress.ip_network(old, strict=False)
        after = ipaddress.ip_network(new, strict=False)
        return not before.subnet_of(after)
    except (TypeError, ValueError):
        return False


def _shrinking(old: Any, new: Any) -> bool:
    """A disk grows in place; a smaller size recreates it (the provider's CustomizeDiff)."""
    try:
        return float(new) < float(old)
    except (TypeError, ValueError):
        return False


def _unlocking(old: Any, new: Any) -> bool:
    """A locked bucket retention policy can be unlocked only by a new bucket."""
    return bool(old) and not new


#: Type token -> rule. Sources: the ForceNew flags of each resource's Terraform schema,
#: read in a handwritten resource's Go file or in a generated resource's magic-modules
#: YAML, where ``immutable: true`` becomes ForceNew and a resource-level ``immutable:
#: true`` makes every field without its own ``update_url`` ForceNew. A list whose length
#: changes can force a replacement that a per-field table cannot see.
RULES: dict[str, ReplacementRule] = {
    "gcp:compute/network:Network": ReplacementRule(
        ("name", "project", "autoCreateSubnetworks", "description", "internalIpv6Range",
         "networkProfile", "params"),
        MM + "compute/Network.yaml: resource immutable; name, description, "
        "auto_create_subnetworks, internal_ipv6_range, network_profile, params immutable; "
        "mtu, routing_mode, enable_ula_internal_ipv6 and the firewall enforcement order "
        "have an update_url"),
    "gcp:compute/subnetwork:Subnetwork": ReplacementRule(
        ("name", "project", "network", "region", "description", "purpose",
         "reservedInternalRange", "externalIpv6Prefix", "ipCollection"),
        MM + "compute/Subnetwork.yaml: resource immutable; network, purpose, region "
        "immutable, name, description, reserved_internal_range, external_ipv6_prefix, "
        "ip_collection have no update_url; ip_cidr_range, private_ip_google_access, "
        "secondary ranges, log_config, stack_type and ipv6_access_type have one; "
        "custom_diff ForceNewIfChange(ip_cidr_range, IsShrinkageIpCidr)",
        replace_when=(("ipCidrRange", _not_an_expansion),)),
    "gcp:compute/firewall:Firewall": ReplacementRule(
        ("name", "project", "direction", "params"),
        TF + "compute/resource_compute_firewall.go: ForceNew on name, direction, params, "
        "project; network, rules, ranges and tags are not ForceNew"),
    "gcp:compute/router:Router": ReplacementRule(
        ("name", "project", "network", "region", "encryptedInterconnectRouter"),
        MM + "compute/Router.yaml: name, network, region, encrypted_interconnect_router "
        "immutable; bgp and description are updatable"),
    "gcp:compute/routerNat:RouterNat": ReplacementRule(
        ("name", "project", "router", "region", "initialNatIps", "endpointTypes", "type"),
        MM + "compute/RouterNat.yaml: router, region, name, initial_nat_ips, "
        "endpoint_types, type immutable; subnetworks, IP allocation, timeouts, "
        "log_config and rules are updatable"),
    "gcp:compute/networkPeering:NetworkPeering": ReplacementRule(
        ("name", "network", "peerNetwork"),
        TF + "compute/resource_compute_network_peering.go: ForceNew on name, network, "
        "peer_network; custom route import/export is updatable (not re-checked: no "
        "component creates one)"),
    "gcp:compute/globalAddress:GlobalAddress": ReplacementRule(
        ("*",),
        MM + "compute/GlobalAddress.yaml: resource immutable; only labels has an "
        "update_url",
        updatable=("labels",)),
    "gcp:servicenetworking/connection:Connection": ReplacementRule(
        ("network", "service"),
        TF + "servicenetworking/resource_service_networking_connection.go: ForceNew on "
        "network and service; reserved_peering_ranges and deletion_policy are updatable"),
    # clusterprint's own dynamic resource: another image name is new content, so a new image
    # (the old one stays for the clusters that boot it).
    "pulumi-python:dynamic/clusterprint:BuiltImage": ReplacementRule(
        ("name", "project"),
        "clusterprint components/node_image.py: BuiltImageProvider.diff replaces on name and "
        "project; where the builder runs changes nothing of a built image"),
    "gcp:filestore/instance:Instance": ReplacementRule(
        ("project", "location", "zone", "tier", "protocol", "kmsKeyName", "networks",
         "fileShares.name", "fileShares.sourceBackup", "tags", "initialReplication"),
        MM + "filestore/Instance.yaml: zone, location, tier, protocol, networks (every "
        "field), file_shares.name, file_shares.source_backup, kms_key_name, tags, "
        "initial_replication immutable; file_shares.capacity_gb, nfs_export_options, "
        "labels, description, deletion protection and performance_config are updatable; "
        "name is not immutable either, so a rename previews as an update",
        data_bearing=True),
    "gcp:lustre/instance:Instance": ReplacementRule(
        ("instanceId", "location", "project", "filesystem", "network",
         "perUnitStorageThroughput", "kmsKey", "dynamicTierOptions"),
        MM + "lustre/Instance.yaml: location, instance_id, filesystem, network, "
        "per_unit_storage_throughput, kms_key, dynamic_tier_options immutable; "
        "capacity_gib, description, gke_support_enabled, labels, access_rules_options, "
        "maintenance_policy and placement_policy are in the update mask",
        data_bearing=True),
    "gcp:compute/disk:Disk": ReplacementRule(
        ("name", "project", "zone", "type", "image", "snapshot", "sourceDisk",
         "diskEncryptionKey", "sourceImageEncryptionKey", "sourceSnapshotEncryptionKey",
         "physicalBlockSizeBytes", "description", "storagePool", "asyncPrimaryDisk"),
        MM + "compute/Disk.yaml: name, zone, type, image, snapshot, source_disk, the "
        "encryption keys, physical_block_size_bytes, description, storage_pool and "
        "async_primary_disk immutable; labels, provisioned IOPS and throughput updatable; "
        "size only grows in place (customizeDiff: a smaller size forces a new disk)",
        replace_when=(("size", _shrinking),),
        data_bearing=True),
    "gcp:compute/attachedDisk:AttachedDisk": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_attached_disk.go: every field ForceNew (disk, "
        "instance, device_name, mode, project, zone); re-attaching keeps the disk's data"),
    "gcp:storage/bucket:Bucket": ReplacementRule(
        ("name", "project", "location", "enableObjectRetention",
         "customPlacementConfig.dataLocations", "hierarchicalNamespace"),
        TF + "storage/resource_storage_bucket.go: ForceNew on name, location, project, "
        "enable_object_retention, custom_placement_config.data_locations, "
        "hierarchical_namespace; CustomizeDiff ForceNewIfChange when "
        "retention_policy.is_locked goes from true to false; storage class, versioning, "
        "lifecycle, labels and access settings are updatable",
        replace_when=(("retentionPolicy.isLocked", _unlocking),),
        data_bearing=True),
    "gcp:compute/instanceTemplate:InstanceTemplate": ReplacementRule(
        ("*",),
        MM_TF + "compute/resource_compute_instance_template.go.tmpl: every field is "
        "ForceNew (labels through the ForceNew effective_labels) but "
        "advanced_machine_features.turbo_mode and network_interface.igmp_query; an "
        "instance group using it is updated to the new one",
        updatable=("advancedMachineFeatures.turboMode", "networkInterfaces.igmpQuery")),
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate": ReplacementRule(
        ("*",),
        TF + "compute/resource_compute_region_instance_template.go: every field is "
        "ForceNew (not re-checked: no component creates one)"),
    "gcp:compute/instanceGroupManager:InstanceGroupManager": ReplacementRule(
        ("name", "project", "zone", "baseInstanceName"),
        MM_TF + "compute/resource_compute_instance_group_manager.go.tmpl: ForceNew on name, zone, "
        "base_instance_name, project; target_size, version and update_policy are "
        "updatable"),
    "gcp:compute/resizeRequest:ResizeRequest": ReplacementRule(
        ("*",),
        MM + "compute/ResizeRequest.yaml: resource immutable and no update method "
        "(\"Resize requests are currently not update-able\"): a changed resize_by or "
        "requested_run_duration makes a new request"),
    "gcp:compute/resourcePolicy:ResourcePolicy": ReplacementRule(
        ("region", "project", "groupPlacementPolicy.gpuTopology",
         "groupPlacementPolicy.tpuTopology", "diskConsistencyGroupPolicy.enabled"),
        TF + "compute/resource_compute_resource_policy.go (from " + MM
        + "compute/ResourcePolicy.yaml, which has an update_url): ForceNew on region, "
        "project, group_placement_policy.gpu_topology and tpu_topology, "
        "disk_consistency_group_policy.enabled; name, collocation and vm_count are not "
        "ForceNew"),
    "gcp:compute/instance:Instance": ReplacementRule(
        ("name", "project", "zone", "hostname", "bootDisk.deviceName",
         "bootDisk.diskEncryptionKeyRaw", "bootDisk.kmsKeySelfLink",
         "bootDisk.guestOsFeatures", "bootDisk.initializeParams", "bootDisk.mode",
         "bootDisk.source", "networkInterfaces.nicType", "networkInterfaces.networkAttachment",
         "networkInterfaces.queueCount", "networkInterfaces.ipv6AccessConfigs.externalIpv6",
         "networkInterfaces.ipv6AccessConfigs.externalIpv6PrefixLength",
         "networkInterfaces.ipv6AccessConfigs.name", "networkPerformanceConfig",
         "guestAccelerators", "params", "scheduling.preemptible",
         "scheduling.provisioningModel", "scheduling.maxRunDuration",
         "scheduling.onInstanceStopAction", "scheduling.localSsdRecoveryTimeout",
         "scratchDisks", "confidentialInstanceConfig", "reservationAffinity",
         "advancedMachineFeatures.enableUefiNetworking", "keyRevocationActionType"),
        MM_TF + "compute/resource_compute_instance.go.tmpl (and pulumi_gcp.compute.instance: name, "
        "hostname 'Changing this forces a new resource'): ForceNew on the fields listed; "
        "boot_disk.auto_delete, machine_type, metadata, labels, tags, service_account, "
        "network_interface.network/subnetwork and description update in place (some "
        "only with allow_stopping_for_update); network_ip alone and a changed count of "
        "network interfaces force a replacement too"),
    "gcp:serviceaccount/account:Account": ReplacementRule(
        ("accountId", "project"),
        TF + "resourcemanager/resource_google_service_account.go (and "
        "pulumi_gcp.serviceaccount.account): ForceNew on account_id, project; "
        "display_name, description and disabled are updatable"),
    "gcp:projects/iAMCustomRole:IAMCustomRole": ReplacementRule(
        ("roleId", "project"),
        TF + "resourcemanager/resource_google_project_iam_custom_role.go: ForceNew on "
        "role_id, project; title, description, permissions and stage are updatable"),
    "gcp:secretmanager/secret:Secret": ReplacementRule(
        ("secretId", "project", "replication", "tags"),
        MM + "secretmanager/Secret.yaml: secret_id, replication (every field), tags "
        "immutable; labels, annotations, topics, rotation, ttl are updatable"),
    "gcp:secretmanager/secretVersion:SecretVersion": ReplacementRule(
        ("secret", "secretData", "isSecretDataBase64"),
        TF + "secretmanager/resource_secret_manager_secret_version.go: ForceNew on secret "
        "and secret_data (not re-checked: no component creates one)"),
    "gcp:vertex/aiTensorboard:AiTensorboard": ReplacementRule(
        ("region", "project", "encryptionSpec"),
        MM + "vertexai/Tensorboard.yaml: region and encryption_spec immutable; "
        "display_name, description and labels are updatable"),
    "gcp:monitoring/dashboard:Dashboard": ReplacementRule(
        ("project",),
        TF + "monitoring/resource_monitoring_dashboard.go: ForceNew on project; "
        "dashboard_json is updatable"),
    "gcp:monitoring/alertPolicy:AlertPolicy": ReplacementRule(
        ("project",),
        MM + "monitoring/AlertPolicy.yaml: no immutable property (update_verb PATCH with an "
        "update mask); project is in base_url"),
    "gcp:monitoring/notificationChannel:NotificationChannel": ReplacementRule(
        ("project",),
        MM + "monitoring/NotificationChannel.yaml: no immutable property (update_verb PATCH); "
        "project is in base_url"),
    **{iam: ReplacementRule(
        ("*",),
        "hashicorp/terraform-provider-google google/tpgiamresource/resource_iam_member.go: "
        "role, member and condition are ForceNew and there is no Update (an IAM member is "
        "never updated)")
       for iam in ("gcp:projects/iAMMember:IAMMember",
                   "gcp:storage/bucketIAMMember:BucketIAMMember",
                   "gcp:secretmanager/secretIamMember:SecretIamMember",
                   "gcp:serviceaccount/iAMMember:IAMMember")},
    # The managed cluster creates its Filestore, Lustre and buckets itself
    # (storage_resources), so replacing or deleting it is counted as data loss. Every
    # managed blueprint has /home among them (Filestore or Lustre).
    "gcp:hypercomputecluster/cluster:Cluster": ReplacementRule(
        ("clusterId", "location", "project", "orchestrator.slurm.loginNodes.zone",
         "computeResources.config", "storageResources.config", "networkResources.config",
         "orchestrator.slurm.nodeSets.computeInstance.bootDisk",
         "orchestrator.slurm.loginNodes.bootDisk"),
        MM + "hypercomputecluster/Cluster.yaml: location, cluster_id, "
        "orchestrator.slurm.login_nodes.zone, "
        "storage_resources.config.new_lustre.per_unit_storage_throughput immutable; the "
        "Cluster Director v1 API (googleapis/google-cloud-python packages/"
        "google-cloud-hypercomputecluster hypercomputecluster_v1/types/"
        "hypercompute_cluster.py) marks ComputeResource.config, StorageResource.config, "
        "NetworkResource.config (each 'Immutable', every field under them too) and "
        "BootDisk.type and size_gb Immutable. The provider leaves those out of ForceNew "
        "(they are in its update mask; the 2025 Cluster.yaml still had boot_disk "
        "immutable), so `pulumi preview` shows an update that the API refuses: applying "
        "the change takes a new cluster. compute_resources, storage_resources and "
        "network_resources are maps keyed by id (set_hash_func), node_sets and partitions "
        "lists of items with an id",
        data_bearing=True,
        keyed=(KeyedList("computeResources"),
               KeyedList("storageResources", removal_replaces=True),
               KeyedList("networkResources", removal_replaces=True),
               KeyedList("orchestrator.slurm.nodeSets"),
               KeyedList("orchestrator.slurm.partitions"))),
}


def keyed_lists(type_: str) -> dict[str, bool]:
    """The type's id-keyed list inputs, each with whether removing an item replaces it."""
    rule = RULES.get(type_)
    return {k.path: k.removal_replaces for k in rule.keyed} if rule else {}


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
