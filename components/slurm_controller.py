"""The Slurm controller VM, its identity and the secrets of the keys it makes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.components.identity import NodeServiceAccount
from clusterprint.components.vm import private_vm
from clusterprint.contract import naming, node_metadata
from clusterprint.facts.iam import CLOUD_SQL_VIEWER_ROLE, MUNGE_WRITER_ROLES
from clusterprint.render.images import boot_path


class SlurmController(pulumi.ComponentResource):
    """The VM that runs slurmctld and slurmrestd (and, with accounting, slurmdbd), its
    state disk, and the secrets that will hold the cluster's munge key, the key of its REST
    API's JSON Web Tokens and (with accounting) the database password.

    Its Slurm files are metadata ``clusterprint-slurm-config`` (``slurm_config``), apart from
    the startup script: Compute Engine updates a running VM's metadata in place, and the
    controller's clusterprint-config-sync service installs a changed value and reconfigures
    Slurm, while a changed startup script runs only at the next boot.

    Pulumi creates each secret without any version: the controller generates the key on
    first boot and adds it as the first version; nodes read the munge key from Secret
    Manager, and only the controller reads the JWT key. So no key ever appears in Pulumi
    state, in instance metadata or in a plan; only the secrets' names travel (metadata
    ``clusterprint-munge-secret``, ``clusterprint-jwt-secret``, ``clusterprint-db-secret``).

    The controller's project roles are every node's (logs and metrics), plus what its
    remediation loop and RebootProgram call in the Compute API, as two custom roles: one
    to read (``read_permissions``: find the groups, list their VMs; a list cannot be
    narrowed by name) and one to act (``act_permissions``: reset, recreate, report a
    host), granted with a condition that holds it to the resources whose names start with
    one of ``acted_on`` (this cluster's VMs and groups). Compute Engine has no IAM policy
    on instance groups, and the VMs come and go under random names, so a grant on each
    resource cannot be made; a predefined Compute role would let it delete any VM.
    """

    def __init__(self, name: str, *, cluster: str, project: str, zone: str,
                 subnetwork: pulumi.Input[str], startup_script: str, slurm_config: str,
                 machine_type: str = "c2-standard-8", disk_size_gb: int = 100,
                 image: str | None = None, metadata: Mapping[str, pulumi.Input[str]] | None = None,
                 tags: Sequence[str] = (), labels: Mapping[str, str] | None = None,
                 buckets: Mapping[str, pulumi.Input[str]] | None = None,
                 read_permissions: Sequence[str] = (), act_permissions: Sequence[str] = (),
                 acted_on: Sequence[str] = (),
                 accounting: bool = True, cloud_sql_project: str | None = None,
                 state_disk_gb: int = 50, protect: bool = True,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:SlurmController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = dict(labels or {})
        self.munge_secret = generated_secret(f"{name}-munge-key", project,
                                             naming.munge_secret_id(cluster), labels, child)
        #: projects/P/secrets/S of the munge key: what every node's metadata names.
        self.munge_secret_id: pulumi.Output[str] = self.munge_secret.id
        self.jwt_secret = generated_secret(f"{name}-jwt-key", project,
                                           naming.jwt_secret_id(cluster), labels, child)
        #: projects/P/secrets/S of the JWT key: only the controller's metadata names it.
        self.jwt_secret_id: pulumi.Output[str] = self.jwt_secret.id
        # The state disk outlives the VM: slurmctld's queue and node states and MariaDB's
        # accounting database, so a replaced controller picks them up. The controller
        # formats it only when blank; storage.protect keeps Pulumi from deleting it.
        self.state_disk = gcp.compute.Disk(
            f"{name}-state", project=project, zone=zone, name=f"{cluster}-controller-state",
            type="pd-balanced", size=state_disk_gb, labels=labels,
            opts=pulumi.ResourceOptions(parent=self, protect=protect))
        db_metadata: dict[str, pulumi.Input[str]] = {}
        own_secrets: dict[str, tuple[pulumi.Input[str], Sequence[str]]] = {
            "jwt": (self.jwt_secret_id, MUNGE_WRITER_ROLES)}
        if accounting:
            # Like the munge key: no version from Pulumi; the controller adds a random
            # password on first boot (MariaDB), or the operator adds the Cloud SQL user's.
            self.db_secret = generated_secret(f"{name}-db-password", project,
                                              naming.db_secret_id(cluster), labels, child)
            db_metadata[node_metadata.DB_SECRET] = self.db_secret.id
            own_secrets["db"] = (self.db_secret.id, MUNGE_WRITER_ROLES)
        identity = NodeServiceAccount(
            f"{name}-identity", project=project,
            account_id=naming.service_account_id(cluster, naming.CONTROLLER_ACCOUNT),
            display_name=f"{cluster} Slurm controller",
            secret=self.munge_secret_id, secret_roles=MUNGE_WRITER_ROLES,
            secrets=own_secrets, buckets=buckets,
            opts=child)
        grants = list(identity.grants)
        if read_permissions:
            grants.append(self._custom_grant(f"{name}-remediation-read", project, cluster,
                                             "read", read_permissions, identity.member))
        if act_permissions:
            grants.append(self._custom_grant(f"{name}-remediation-act", project, cluster,
                                             "act", act_permissions, identity.member,
                                             acted_on))
        if cloud_sql_project:
            # Reading the instance's private IP at boot (gcloud sql instances describe).
            grants.append(gcp.projects.IAMMember(
                f"{name}-cloudsql-viewer", project=cloud_sql_project,
                role=CLOUD_SQL_VIEWER_ROLE, member=identity.member, opts=child))
        self.instance_name = node_metadata.controller_hostname(cluster)
        self.instance = private_vm(
            f"{name}-vm", instance_name=self.instance_name, project=project, zone=zone,
            machine_type=machine_type, image=image or boot_path(project),
            disk_size_gb=disk_size_gb, subnetwork=subnetwork,
            service_account_email=identity.email,
            metadata={**(metadata or {}), "startup-script": startup_script,
                      node_metadata.SLURM_CONFIG: slurm_config,
                      node_metadata.ROLE: "controller",
                      node_metadata.MUNGE_SECRET: self.munge_secret_id,
                      node_metadata.JWT_SECRET: self.jwt_secret_id, **db_metadata},
            tags=tags, labels=labels,
            # The first boot writes the key: the grant must exist before the VM does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants))
        self.state_attachment = gcp.compute.AttachedDisk(
            f"{name}-state-attachment", project=project, zone=zone,
            disk=self.state_disk.id, instance=self.instance.id,
            device_name=node_metadata.STATE_DISK_DEVICE, opts=child)
        self.service_account_email = identity.email
        self.register_outputs({"instance_name": self.instance_name,
                               "munge_secret": self.munge_secret_id,
                               "jwt_secret": self.jwt_secret_id})

    def _custom_grant(self, logical: str, project: str, cluster: str, kind: str,
                      permissions: Sequence[str], member: pulumi.Input[str],
                      prefixes: Sequence[str] = ()) -> gcp.projects.IAMMember:
        """A custom role of exactly ``permissions``, granted on the project; with
        ``prefixes``, only on the resources whose names start with one of them."""
        child = pulumi.ResourceOptions(parent=self)
        role = gcp.projects.IAMCustomRole(
            f"{logical}-role", project=project,
            role_id=f"{cluster.replace('-', '_')}_remediation_{kind}",
            title=f"{cluster} remediation ({kind})", permissions=sorted(permissions),
            opts=child)
        condition = None
        if prefixes:
            condition = gcp.projects.IAMMemberConditionArgs(
                title=f"{cluster} nodes only",
                expression=" || ".join(f'resource.name.startsWith("{p}")' for p in prefixes))
        return gcp.projects.IAMMember(logical, project=project, role=role.name, member=member,
                                      condition=condition, opts=child)


def generated_secret(logical: str, project: str, secret_id: str, labels: Mapping[str, str],
                     opts: pulumi.ResourceOptions) -> gcp.secretmanager.Secret:
    """A secret without a version, for a key the controller generates on first boot: Pulumi
    never holds what it will contain."""
    return gcp.secretmanager.Secret(
        logical, project=project, secret_id=secret_id,
        replication=gcp.secretmanager.SecretReplicationArgs(
            auto=gcp.secretmanager.SecretReplicationAutoArgs()),
        labels=dict(labels), opts=opts)
