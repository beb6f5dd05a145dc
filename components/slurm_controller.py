"""The Slurm controller VM, its identity and the munge key's secret."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint import naming, node_metadata
from clusterprint.policies import MUNGE_WRITER_ROLES
from components.identity import NodeServiceAccount
from components.images import boot_image
from components.vm import private_vm


class SlurmController(pulumi.ComponentResource):
    """The VM that runs slurmctld, and the secret that will hold the cluster's munge key.

    Pulumi creates the secret without any version: the controller generates the key on
    first boot and adds it as the first version, and nodes read it from Secret Manager.
    So the key never appears in Pulumi state, in instance metadata or in a plan; only the
    secret's name travels (metadata ``clusterprint-munge-secret``).

    The controller's project roles are every node's (logs and metrics) and no more: no
    script calls the Compute API (nothing resizes groups or replaces VMs), and a
    project-wide Compute role would let it delete any VM in the project.
    """

    def __init__(self, name: str, *, cluster: str, project: str, zone: str,
                 subnetwork: pulumi.Input[str], startup_script: str,
                 machine_type: str = "c2-standard-8", disk_size_gb: int = 100,
                 image: str | None = None, metadata: Mapping[str, pulumi.Input[str]] | None = None,
                 tags: Sequence[str] = (), labels: Mapping[str, str] | None = None,
                 buckets: Mapping[str, pulumi.Input[str]] | None = None,
                 accounting: bool = True, cloud_sql_project: str | None = None,
                 state_disk_gb: int = 50, protect: bool = True,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:SlurmController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = dict(labels or {})
        self.munge_secret = gcp.secretmanager.Secret(
            f"{name}-munge-key", project=project, secret_id=naming.munge_secret_id(cluster),
            replication=gcp.secretmanager.SecretReplicationArgs(
                auto=gcp.secretmanager.SecretReplicationAutoArgs()),
            labels=labels, opts=child)
        #: projects/P/secrets/S of the munge key: what every node's metadata names.
        self.munge_secret_id: pulumi.Output[str] = self.munge_secret.id
        # The state disk outlives the VM: slurmctld's queue and node states and MariaDB's
        # accounting database, so a replaced controller picks them up. The controller
        # formats it only when blank; storage.protect keeps Pulumi from deleting it.
        self.state_disk = gcp.compute.Disk(
            f"{name}-state", project=project, zone=zone, name=f"{cluster}-controller-state",
            type="pd-balanced", size=state_disk_gb, labels=labels,
            opts=pulumi.ResourceOptions(parent=self, protect=protect))
        db_metadata: dict[str, pulumi.Input[str]] = {}
        if accounting:
            # Like the munge key: no version from Pulumi; the controller adds a random
            # password on first boot (MariaDB), or the operator adds the Cloud SQL user's.
            self.db_secret = gcp.secretmanager.Secret(
                f"{name}-db-password", project=project,
                secret_id=naming.db_secret_id(cluster),
                replication=gcp.secretmanager.SecretReplicationArgs(
                    auto=gcp.secretmanager.SecretReplicationAutoArgs()),
                labels=labels, opts=child)
            db_metadata[node_metadata.DB_SECRET] = self.db_secret.id
        identity = NodeServiceAccount(
            f"{name}-identity", project=project,
            account_id=naming.service_account_id(cluster, naming.CONTROLLER_ACCOUNT),
            display_name=f"{cluster} Slurm controller",
            secret=self.munge_secret_id, secret_roles=MUNGE_WRITER_ROLES, buckets=buckets,
            opts=child)
        grants = list(identity.grants)
        if accounting:
            grants += [gcp.secretmanager.SecretIamMember(
                f"{name}-db-secret-{role.removeprefix('roles/secretmanager.')}",
                project=project, secret_id=self.db_secret.id, role=role,
                member=identity.member, opts=child) for role in MUNGE_WRITER_ROLES]
        if cloud_sql_project:
            # Reading the instance's private IP at boot (gcloud sql instances describe).
            grants.append(gcp.projects.IAMMember(
                f"{name}-cloudsql-viewer", project=cloud_sql_project,
                role="roles/cloudsql.viewer", member=identity.member, opts=child))
        self.instance_name = node_metadata.controller_hostname(cluster)
        self.instance = private_vm(
            f"{name}-vm", instance_name=self.instance_name, project=project, zone=zone,
            machine_type=machine_type, image=image or boot_image(machine_type),
            disk_size_gb=disk_size_gb, subnetwork=subnetwork,
            service_account_email=identity.email,
            metadata={**(metadata or {}), "startup-script": startup_script,
                      node_metadata.ROLE: "controller",
                      node_metadata.MUNGE_SECRET: self.munge_secret_id, **db_metadata},
            tags=tags, labels=labels,
            # The first boot writes the key: the grant must exist before the VM does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants))
        self.state_attachment = gcp.compute.AttachedDisk(
            f"{name}-state-attachment", project=project, zone=zone,
            disk=self.state_disk.id, instance=self.instance.id,
            device_name=node_metadata.STATE_DISK_DEVICE, opts=child)
        self.service_account_email = identity.email
        self.register_outputs({"instance_name": self.instance_name,
                               "munge_secret": self.munge_secret_id})
