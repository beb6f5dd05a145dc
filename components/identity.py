"""A service account per node role, holding only the roles that role needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.contract import naming
from clusterprint.facts.iam import BUCKET_ROLE, NODE_PROJECT_ROLES

#: Roles every node needs (the Ops Agent ships logs and metrics), as the policies allow them.
NODE_ROLES = NODE_PROJECT_ROLES
#: Scopes of every node VM. Secret Manager accepts only the cloud-platform scope, so
#: access is narrowed by the account's IAM roles rather than by OAuth scopes (the
#: practice Compute Engine documents for service accounts).
NODE_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


class NodeServiceAccount(pulumi.ComponentResource):
    """One role's identity: a service account, its project, secret and bucket roles.

    Granting per role keeps a login or compute node from writing the munge key, and
    each role's account holds only what its scripts use. ``secret`` is the munge key's
    secret, which every role reads; ``secrets`` are the further secrets only this role
    uses (the controller's JWT key), by a short label: ``{label: (secret, roles)}``.
    """

    def __init__(self, name: str, *, project: str, account_id: str, display_name: str,
                 roles: Sequence[str] = NODE_ROLES, secret: pulumi.Input[str] | None = None,
                 secret_roles: Sequence[str] = (),
                 secrets: Mapping[str, tuple[pulumi.Input[str], Sequence[str]]] | None = None,
                 buckets: Mapping[str, pulumi.Input[str]] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:NodeServiceAccount", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        account = gcp.serviceaccount.Account(
            f"{name}-account", project=project, account_id=account_id,
            display_name=display_name, opts=child)
        self.email: pulumi.Output[str] = account.email
        self.member: pulumi.Output[str] = account.member
        self.grants: list[pulumi.Resource] = [
            gcp.projects.IAMMember(f"{name}-{role.removeprefix('roles/')}", project=project,
                                   role=role, member=account.member, opts=child)
            for role in roles]
        if secret is not None:
            self.grants += [
                gcp.secretmanager.SecretIamMember(
                    f"{name}-secret-{role.removeprefix('roles/')}", project=project,
                    secret_id=secret, role=role, member=account.member, opts=child)
                for role in secret_roles]
        self.grants += [
            gcp.secretmanager.SecretIamMember(
                f"{name}-{label}-secret-{role.removeprefix('roles/')}", project=project,
                secret_id=other, role=role, member=account.member, opts=child)
            for label, (other, roles) in (secrets or {}).items() for role in roles]
        self.grants += [
            # Named by bucket, not by position: a shifted position would replace a grant
            # and its delete would revoke the identical grant just created.
            gcp.storage.BucketIAMMember(naming.bucket_grant(name, key), bucket=bucket,
                                        role=BUCKET_ROLE, member=account.member, opts=child)
            for key, bucket in (buckets or {}).items()]
        self.register_outputs({"email": self.email})
