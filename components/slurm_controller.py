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
                 subnetwork: pulumi.Input[str], startup_script: str,
                 machine_type: str = "c2-standard-8", disk_size_gb: int = 100,
                 image: str | None = None, metadata: Mapping[str, pulumi.Input[str]] | None = None,
                 tags: Sequence[str] = (), labels: Mapping[str, str] | None = None,
                 buckets: Mapping[str, pulumi.Input[str]] | None = None,
                 read_permissions: Sequence[str] = (), act_permissions: Sequence[str] = (),
                 acted_on: Sequence[str] = (),
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
        identity = NodeServiceAccount(
            f"{name}-identity", project=project,
            account_id=naming.service_account_id(cluster, naming.CONTROLLER_ACCOUNT),
            display_name=f"{cluster} Slurm controller",
            secret=self.munge_secret_id, secret_roles=MUNGE_WRITER_ROLES, buckets=buckets,
            opts=child)
        grants = list(identity.grants)
        if read_permissions:
            grants.append(self._custom_grant(f"{name}-remediation-read", project, cluster,
                                             "read", read_permissions, identity.member))
        if act_permissions:
            grants.append(self._custom_grant(f"{name}-remediation-act", project, cluster,
                                             "act", act_permissions, identity.member,
                                             acted_on))
        self.instance_name = node_metadata.controller_hostname(cluster)
        self.instance = private_vm(
            f"{name}-vm", instance_name=self.instance_name, project=project, zone=zone,
            machine_type=machine_type, image=image or boot_image(machine_type),
            disk_size_gb=disk_size_gb, subnetwork=subnetwork,
            service_account_email=identity.email,
            metadata={**(metadata or {}), "startup-script": startup_script,
                      node_metadata.ROLE: "controller",
                      node_metadata.MUNGE_SECRET: self.munge_secret_id},
            tags=tags, labels=labels,
            # The first boot writes the key: the grant must exist before the VM does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants))
        self.service_account_email = identity.email
        self.register_outputs({"instance_name": self.instance_name,
                               "munge_secret": self.munge_secret_id})

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
