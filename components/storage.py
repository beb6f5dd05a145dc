"""Shared file systems: Filestore or Lustre /home, Managed Lustre scratch, bucket mounts."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.blueprint.model import Bucket, FilestoreHome, Lustre
from clusterprint.contract import naming
from clusterprint.facts import catalog

#: The Filestore file share exported as /home.
HOME_SHARE = "home"
#: Why the API refuses to delete a protected instance, as the console shows it.
PROTECTION_REASON = "clusterprint storage.protect: /home of a training cluster"
#: LNet: Lustre servers open connections back to their clients on this port
#: (cloud.google.com/managed-lustre/docs/vpc, with gke_support_enabled off).
LNET_PORT = "988"


class SharedStorage(pulumi.ComponentResource):
    """The data that outlives any node: /home, Lustre scratch and Cloud Storage buckets.

    Every data-bearing resource is ``protect``-ed in Pulumi and, where the API has its
    own guard, protected there too (Filestore deletion protection; buckets never
    ``force_destroy``, so a bucket with objects refuses deletion; Managed Lustre has no
    such flag, so Pulumi's ``protect`` is its guard), so neither a stray
    ``pulumi destroy`` nor a replacing diff loses data silently. Filestore and Lustre
    live on private service access: pass its connection in ``depends_on`` and its range
    in ``service_range``.
    """

    def __init__(self, name: str, *, cluster: str, project: str, region: str, zone: str,
                 network: pulumi.Input[str], node_tag: str,
                 service_range: pulumi.Input[str] | None = None,
                 filestore: FilestoreHome | None = None, lustre: Sequence[Lustre] = (),
                 buckets: Sequence[Bucket] = (),
                 protect: bool = True, labels: dict[str, str] | None = None,
                 depends_on: Sequence[pulumi.Resource] = (),
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:SharedStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        data = pulumi.ResourceOptions(parent=self, protect=protect, depends_on=list(depends_on))
        labels = labels or {}

        #: ``nfs:IP:/home`` of the Filestore /home, when there is one.
        self.filestore_source: pulumi.Output[str] | None = None
        if filestore is not None:
            regional = filestore.tier in catalog.FILESTORE_REGIONAL_TIERS
            instance = gcp.filestore.Instance(
                naming.child(name, naming.FILESTORE_HOME), project=project,
                name=naming.filestore_instance(cluster),
                location=region if regional else zone, tier=filestore.tier,
                file_shares=gcp.filestore.InstanceFileSharesArgs(
                    name=HOME_SHARE, capacity_gb=filestore.capacity_gib),
                # The full network name: a short one shows a replacement on every preview
                # (hashicorp/terraform-provider-google#16548).
                networks=[gcp.filestore.InstanceNetworkArgs(
                    network=network, modes=["MODE_IPV4"],
                    connect_mode="PRIVATE_SERVICE_ACCESS")],
                deletion_protection_enabled=protect,
                deletion_protection_reason=PROTECTION_REASON if protect else None,
                labels=labels, opts=data)
            self.filestore_source = instance.networks.apply(
                lambda nets: f"nfs:{nets[0].ip_addresses[0]}:/{HOME_SHARE}")

        #: Lustre entry name -> its mount point ``IP@tcp:/FILESYSTEM``.
        self.lustre_sources: dict[str, pulumi.Output[str]] = {}
        for entry in lustre:
            instance = gcp.lustre.Instance(
                naming.child(name, entry.name), project=project,
                instance_id=naming.lustre_instance_id(cluster, entry.name),
                location=zone, network=network, filesystem=entry.filesystem,
                # The API takes both numbers as strings.
                capacity_gib=str(entry.capacity_gib),
                per_unit_storage_throughput=str(entry.performance_tier),
                gke_support_enabled=False, labels=labels, opts=data)
            self.lustre_sources[entry.name] = instance.mount_point
        if lustre and service_range is not None:
            gcp.compute.Firewall(
                naming.child(name, naming.LNET_FIREWALL), project=project, network=network,
                direction="INGRESS", source_ranges=[service_range], target_tags=[node_tag],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[LNET_PORT])],
                opts=child)

        #: Bucket name -> the same name, a created bucket's as its Output so grants wait for it.
        self.bucket_names: dict[str, pulumi.Input[str]] = {}
        for bucket in buckets:
            bucket_name: pulumi.Input[str] = bucket.bucket
            if bucket.create:
                bucket_name = gcp.storage.Bucket(
                    naming.child(name, bucket.bucket), project=project, name=bucket.bucket,
                    location=region.upper(), uniform_bucket_level_access=True,
                    public_access_prevention="enforced", force_destroy=False, labels=labels,
                    opts=pulumi.ResourceOptions(parent=self, protect=protect)).name
            self.bucket_names[bucket.bucket] = bucket_name
        self.register_outputs({"filestore_source": self.filestore_source,
                               "lustre_sources": self.lustre_sources})
