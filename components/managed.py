"""ManagedTrainingCluster: the same blueprint, run by the managed Cluster Director API."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
from pulumi_gcp import hypercomputecluster as hcc

from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.components.cluster import iap_ssh_command, project_of
from clusterprint.components.observability import Observability
from clusterprint.components.storage import HOME_SHARE
from clusterprint.contract import naming
from clusterprint.facts import catalog

#: The one network resource's id, by which the API refers to it.
NETWORK_ID = "network"


def managed_reservation(nodeset: Nodeset, project: str, zone: str) -> str:
    """The API's reservation name ``projects/P/zones/Z/reservations/R`` from the blueprint's.

    The blueprint's ``[projects/P/reservations/]NAME`` leaves out the zone, which is the
    cluster's; a reservation block cannot be expressed.
    """
    reservation = nodeset.reservation or ""
    parts = reservation.split("/")
    if "reservationBlocks" in parts:
        raise ValueError(f"nodeset {nodeset.name}: the managed API takes a whole reservation, "
                         f"not a block ({reservation})")
    owner = parts[1] if reservation.startswith("projects/") else project
    return f"projects/{owner}/zones/{zone}/reservations/{parts[-1]}"


def compute_config(nodeset: Nodeset, project: str,
                   zone: str) -> hcc.ClusterComputeResourceConfigArgs:
    """How the API provisions a nodeset's VMs: one of on-demand, spot, flex-start, reserved."""
    if nodeset.provisioning == "reservation":
        return hcc.ClusterComputeResourceConfigArgs(
            new_reserved_instances=hcc.ClusterComputeResourceConfigNewReservedInstancesArgs(
                reservation=managed_reservation(nodeset, project, zone)))
    if nodeset.provisioning == "spot":
        return hcc.ClusterComputeResourceConfigArgs(
            new_spot_instances=hcc.ClusterComputeResourceConfigNewSpotInstancesArgs(
                machine_type=nodeset.machine_type, zone=zone, termination_action="DELETE"))
    if nodeset.provisioning == "flex-start":
        return hcc.ClusterComputeResourceConfigArgs(
            new_flex_start_instances=hcc.ClusterComputeResourceConfigNewFlexStartInstancesArgs(
                machine_type=nodeset.machine_type, zone=zone,
                max_duration=f"{catalog.FLEX_START_MAX_RUN_S}s"))
    return hcc.ClusterComputeResourceConfigArgs(
        new_on_demand_instances=hcc.ClusterComputeResourceConfigNewOnDemandInstancesArgs(
            machine_type=nodeset.machine_type, zone=zone))


def storage_resources(bp: Blueprint, project: str,
                      ) -> tuple[list[hcc.ClusterStorageResourceArgs], dict[str, str]]:
    """The API's storage resources and where each mounts (resource id -> mount path)."""
    resources: list[hcc.ClusterStorageResourceArgs] = []
    mounts: dict[str, str] = {}
    home = bp.storage.home.filestore if bp.storage.home.uses_filestore else None
    if home is not None:
        if home.tier not in catalog.MANAGED_FILESTORE_TIERS:
            tiers = " and ".join(catalog.MANAGED_FILESTORE_TIERS)
            raise ValueError(f"the managed API creates Filestore tiers {tiers} only, "
                             f"not {home.tier}")
        location = bp.region if home.tier in catalog.FILESTORE_REGIONAL_TIERS else bp.zone
        resources.append(hcc.ClusterStorageResourceArgs(id=naming.MANAGED_HOME_ID, config=(
            hcc.ClusterStorageResourceConfigArgs(
                new_filestore=hcc.ClusterStorageResourceConfigNewFilestoreArgs(
                    filestore=f"projects/{project}/locations/{location}/instances/"
                              f"{naming.filestore_instance(bp.name)}",
                    tier=home.tier, file_shares=[
                        hcc.ClusterStorageResourceConfigNewFilestoreFileShareArgs(
                            capacity_gb=str(home.capacity_gib), file_share=HOME_SHARE)])))))
        mounts[naming.MANAGED_HOME_ID] = "/home"
    for lustre in bp.storage.lustre:
        lustre_id = naming.managed_lustre_id(lustre.name)
        resources.append(hcc.ClusterStorageResourceArgs(id=lustre_id, config=(
            hcc.ClusterStorageResourceConfigArgs(
                new_lustre=hcc.ClusterStorageResourceConfigNewLustreArgs(
                    lustre=f"projects/{project}/locations/{bp.zone}/instances/"
                           f"{naming.lustre_instance_id(bp.name, lustre.name)}",
                    filesystem=lustre.filesystem, capacity_gb=str(lustre.capacity_gib),
                    per_unit_storage_throughput=str(lustre.performance_tier))))))
        mounts[lustre_id] = bp.mount_of(lustre)
    for index, bucket in enumerate(bp.storage.buckets):
        config = (hcc.ClusterStorageResourceConfigArgs(
            new_bucket=hcc.ClusterStorageResourceConfigNewBucketArgs(bucket=bucket.bucket))
            if bucket.create else hcc.ClusterStorageResourceConfigArgs(
                existing_bucket=hcc.ClusterStorageResourceConfigExistingBucketArgs(
                    bucket=bucket.bucket)))
        # Ids follow RFC 1034; bucket names may hold dots and underscores.
        bucket_id = naming.managed_bucket_id(index)
        resources.append(hcc.ClusterStorageResourceArgs(id=bucket_id, config=config))
        mounts[bucket_id] = bucket.mount_path
    return resources, mounts


class ManagedTrainingCluster(pulumi.ComponentResource):
    """A blueprint with ``orchestrator: managed`` as one ``hypercomputecluster.Cluster``.

    Google runs the controller, nodes and health checks; clusterprint supplies the
    network, compute, storage and Slurm layout. The API installs Slurm and munge and
    mounts the storage itself, so no node gets clusterprint's startup scripts: they read
    metadata only ``TrainingCluster`` sets and point slurmd at a controller VM that a
    managed cluster does not have, so every node would end FAILED. The one resource holds
    the file systems it creates, so it is ``protect``-ed like the data it carries.
    """

    def __init__(self, name: str, blueprint: Blueprint,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:ManagedTrainingCluster", name, None, opts)
        bp, project = blueprint, project_of(blueprint)
        labels = naming.cluster_labels(bp.labels, bp.name)
        storage, mounts = storage_resources(bp, project)
        mount_configs = [{"id": key, "local_mount": path} for key, path in mounts.items()]
        net = bp.network
        network_config = (
            hcc.ClusterNetworkResourceConfigArgs(
                existing_network=hcc.ClusterNetworkResourceConfigExistingNetworkArgs(
                    network=net.existing, subnetwork=net.existing_subnetwork))
            if net.existing and net.existing_subnetwork else
            hcc.ClusterNetworkResourceConfigArgs(
                new_network=hcc.ClusterNetworkResourceConfigNewNetworkArgs(
                    network=f"projects/{project}/global/networks/"
                            f"{naming.managed_network(bp.name)}")))
        self.cluster = gcp.hypercomputecluster.Cluster(
            f"{name}-cluster", project=project, cluster_id=bp.name, location=bp.region,
            labels=labels,
            network_resources=[hcc.ClusterNetworkResourceArgs(id=NETWORK_ID,
                                                              config=network_config)],
            compute_resources=[hcc.ClusterComputeResourceArgs(
                id=ns.name, config=compute_config(ns, project, bp.zone))
                for ns in bp.slurm.nodesets],
            storage_resources=storage,
            orchestrator=hcc.ClusterOrchestratorArgs(slurm=hcc.ClusterOrchestratorSlurmArgs(
                login_nodes=hcc.ClusterOrchestratorSlurmLoginNodesArgs(
                    count=str(bp.slurm.login.count), machine_type=bp.slurm.login.machine_type,
                    zone=bp.zone, enable_os_login=True, enable_public_ips=False, labels=labels,
                    storage_configs=[hcc.ClusterOrchestratorSlurmLoginNodesStorageConfigArgs(**m)
                                     for m in mount_configs]),
                node_sets=[hcc.ClusterOrchestratorSlurmNodeSetArgs(
                    id=ns.name, compute_id=ns.name, static_node_count=str(ns.count),
                    max_dynamic_node_count=str(ns.upper_bound - ns.count),
                    compute_instance=hcc.ClusterOrchestratorSlurmNodeSetComputeInstanceArgs(
                        labels=labels,
                        boot_disk=hcc.ClusterOrchestratorSlurmNodeSetComputeInstanceBootDiskArgs(
                            size_gb=str(ns.boot_disk.size_gb), type=ns.boot_disk_type)),
                    storage_configs=[hcc.ClusterOrchestratorSlurmNodeSetStorageConfigArgs(**m)
                                     for m in mount_configs])
                    for ns in bp.slurm.nodesets],
                partitions=[hcc.ClusterOrchestratorSlurmPartitionArgs(
                    id=p.name, node_set_ids=p.nodesets) for p in bp.slurm.partitions],
                default_partition=bp.slurm.default_partition.name)),
            opts=pulumi.ResourceOptions(parent=self, protect=bp.storage.protect))
        login_nodes = self.cluster.orchestrator.apply(
            lambda o: [i.instance.rsplit("/", 1)[-1] for i in
                       ((o.slurm.login_nodes.instances if o and o.slurm else None) or [])
                       if i.instance])
        #: What `pulumi stack output` shows: the same keys as TrainingCluster where they apply.
        self.exports: dict[str, pulumi.Input[object]] = {
            "cluster": self.cluster.name,
            "login_nodes": login_nodes,
            "mounts": {path: f"managed:{key}" for key, path in mounts.items()},
            "partitions": {p.name: p.nodesets for p in bp.slurm.partitions},
            "ssh": login_nodes.apply(
                lambda names: iap_ssh_command(names[0], bp.zone, project) if names else ""),
        }
        self.exports |= Observability(
            f"{name}-observability", cluster=bp.name, project=project, region=bp.region,
            tensorboard=bp.observability.tensorboard, dashboard=bp.observability.dashboard,
            labels=labels, opts=pulumi.ResourceOptions(parent=self)).exports
        self.register_outputs(self.exports)
