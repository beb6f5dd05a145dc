"""Login nodes: where users arrive through IAP and submit jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi

from clusterprint.components.identity import NODE_ROLES, NodeServiceAccount
from clusterprint.components.vm import private_vm
from clusterprint.contract import naming, node_metadata
from clusterprint.facts.iam import MUNGE_READER_ROLES, VERTEX_AI_ROLE
from clusterprint.render.images import boot_path

#: Login nodes hold no data of their own: a small boot disk is enough.
LOGIN_DISK_GB = 50


class LoginNodes(pulumi.ComponentResource):
    """``count`` login VMs named ``{cluster}-login-{i}``, with their own identity.

    Plain instances rather than an instance group: their names are what users ssh to,
    and the count is small and fixed (at most 16), so it never grows with the cluster.
    Their Slurm client files are metadata ``clusterprint-slurm-config`` (``slurm_config``),
    which their clusterprint-config-sync service follows while they run.
    """

    def __init__(self, name: str, *, cluster: str, project: str, zone: str,
                 subnetwork: pulumi.Input[str], munge_secret: pulumi.Input[str],
                 startup_script: str, slurm_config: str, count: int = 1,
                 machine_type: str = "n2-standard-4",
                 image: str | None = None, metadata: Mapping[str, pulumi.Input[str]] | None = None,
                 tags: Sequence[str] = (), labels: Mapping[str, str] | None = None,
                 buckets: Mapping[str, pulumi.Input[str]] | None = None,
                 tensorboard: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:LoginNodes", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # With a TensorBoard, users upload runs and register models from here: its name is
        # metadata for clusterprint-tensorboard-upload, Vertex AI User what both need.
        extra = {node_metadata.TENSORBOARD: tensorboard} if tensorboard is not None else {}
        identity = NodeServiceAccount(
            f"{name}-identity", project=project,
            account_id=naming.service_account_id(cluster, naming.LOGIN_ACCOUNT),
            roles=NODE_ROLES + ((VERTEX_AI_ROLE,) if extra else ()),
            display_name=f"{cluster} login nodes", secret=munge_secret,
            secret_roles=MUNGE_READER_ROLES, buckets=buckets,
            opts=child)
        self.service_account_email = identity.email
        self.instance_names = [node_metadata.login_hostname(cluster, i) for i in range(count)]
        self.instances = [
            private_vm(
                f"{name}-{i}", instance_name=instance_name, project=project, zone=zone,
                machine_type=machine_type, image=image or boot_path(project),
                disk_size_gb=LOGIN_DISK_GB, subnetwork=subnetwork,
                service_account_email=identity.email,
                metadata={**(metadata or {}), **extra, "startup-script": startup_script,
                          node_metadata.SLURM_CONFIG: slurm_config,
                          node_metadata.ROLE: "login", node_metadata.MUNGE_SECRET: munge_secret},
                tags=tags, labels=labels or {},
                opts=pulumi.ResourceOptions(parent=self, depends_on=identity.grants))
            for i, instance_name in enumerate(self.instance_names)]
        self.register_outputs({"instance_names": self.instance_names})
