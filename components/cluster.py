"""TrainingCluster: one checked blueprint in, the whole self-managed Slurm cluster out."""

from __future__ import annotations

import pulumi

from clusterprint.blueprint.gpu_fabric import gpu_networking, gpu_ranges
from clusterprint.blueprint.model import Blueprint
from clusterprint.components.identity import NodeServiceAccount
from clusterprint.components.login import LoginNodes
from clusterprint.components.network import ClusterNetwork
from clusterprint.components.node_image import NodeImage
from clusterprint.components.nodeset import GpuNodeset
from clusterprint.components.observability import Observability
from clusterprint.components.private_service_access import PrivateServiceAccess
from clusterprint.components.slurm_controller import SlurmController
from clusterprint.components.storage import SharedStorage
from clusterprint.contract import naming, node_metadata
from clusterprint.facts.iam import MUNGE_READER_ROLES
from clusterprint.render import node_scripts, ops_agent, remediation
from clusterprint.render.images import NodeImage as ImageToBuild
from clusterprint.render.images import built_image, needed_images, nodeset_image
from clusterprint.render.slurm_config import SLURMRESTD_PORT


def project_of(blueprint: Blueprint) -> str:
    """The blueprint's project, else the stack's ``gcp:project``.

    Neither is a user's mistake, not a bug: ``RunError`` makes Pulumi print the message
    and the fix alone, without a Python traceback.
    """
    project = blueprint.project or pulumi.Config("gcp").get("project")
    if not project:
        raise pulumi.RunError("no project: set `project` in the blueprint or run "
                              "`pulumi config set gcp:project PROJECT`")
    return project


#: What boots an image: a VM, or the template a group makes its VMs from.
BOOTS_AN_IMAGE = frozenset({"gcp:compute/instance:Instance",
                            "gcp:compute/instanceTemplate:InstanceTemplate"})


def waiting_for(image: NodeImage) -> pulumi.ResourceTransformation:
    """A transformation that makes every VM and template under a component wait for
    ``image``.

    ``depends_on`` of a component does not reach its children (the Python SDK hands a
    child its parent's providers, protect and transformations only), and the components
    take the image's path as a plain string, which `pulumi preview` shows as it is; a
    transformation passes on to every child, so the controller, login and nodeset VMs wait
    for their image's build, and nothing else of theirs does.
    """
    def transform(args: pulumi.ResourceTransformationArgs
                  ) -> pulumi.ResourceTransformationResult | None:
        if args.type_ not in BOOTS_AN_IMAGE:
            return None
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(
            args.opts, pulumi.ResourceOptions(depends_on=[image])))
    return transform


def iap_ssh_command(instance: str, zone: str, project: str) -> str:
    """How a user reaches a node that has no external IP: SSH through IAP."""
    return f"gcloud compute ssh {instance} --zone {zone} --project {project} --tunnel-through-iap"


class TrainingCluster(pulumi.ComponentResource):
    """A Slurm training cluster in one zone, composed from the blueprint's parts.

    Networks first, then private service access and the shared storage on it, then the
    controller (which owns the munge secret), login nodes and one GpuNodeset per
    nodeset. Scripts are rendered from the blueprint alone; what only exists once
    resources do (file-system addresses, the munge secret's name) reaches the nodes as
    instance metadata under the keys of ``clusterprint.contract.node_metadata``.
    """

    def __init__(self, name: str, blueprint: Blueprint,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:TrainingCluster", name, None, opts)
        bp, child = blueprint, pulumi.ResourceOptions(parent=self)
        project, cluster = project_of(bp), bp.name
        labels = naming.cluster_labels(bp.labels, cluster)
        scripts = node_scripts(bp)
        net = bp.network
        gpu_cidrs, gvnic_cidrs = gpu_ranges(bp)

        network = ClusterNetwork(
            f"{name}-network", project=project, region=bp.region, zone=bp.zone, mtu=bp.mtu,
            subnet_cidr=net.subnet_cidr, ssh_source_ranges=net.ssh_source_ranges, nat=net.nat,
            node_tag=cluster, gpu_networking=gpu_networking(bp), gpu_subnet_cidrs=gpu_cidrs,
            extra_gvnic_cidrs=gvnic_cidrs, peerings=net.peerings, existing_network=net.existing,
            existing_subnetwork=net.existing_subnetwork, opts=child)
        psa = PrivateServiceAccess(
            f"{name}-psa", network=network.network_id, project=project,
            prefix_length=net.private_service_access.effective_prefix_length,
            address=net.private_service_access.range, opts=child)
        # Each image the VMs boot, built in the cluster's subnetwork once its NAT exists.
        self.images = {
            image.name: NodeImage(
                naming.child(name, f"image-{image.kind}"), image=image, project=project,
                zone=bp.zone, subnetwork=network.subnetwork, external_ip=not net.nat,
                depends_on=[network], opts=child)
            for image in needed_images(bp)}
        home = bp.storage.home
        storage = SharedStorage(
            naming.child(name, naming.STORAGE), cluster=cluster, project=project,
            region=bp.region, zone=bp.zone, network=network.network_id,
            node_tag=network.node_tag, service_range=psa.cidr,
            filestore=home.filestore if home.uses_filestore else None,
            lustre=bp.storage.lustre, buckets=bp.storage.buckets, protect=bp.storage.protect,
            labels=labels, depends_on=[psa.connection], opts=child)

        home_source = (storage.filestore_source if home.uses_filestore
                       else pulumi.Output.concat("lustre:", storage.lustre_sources[home.lustre]))
        metadata: dict[str, pulumi.Input[str]] = {
            "enable-oslogin": "TRUE",
            # Each boot publishes its progress there, which `clusterprint status` reads.
            node_metadata.GUEST_ATTRIBUTES: "TRUE",
            node_metadata.HOME_SOURCE: home_source,
            **{node_metadata.lustre_source(n): s for n, s in storage.lustre_sources.items()}}
        # Login and compute VMs: cloud-init loads the metadata guard before logins open.
        guarded = {**metadata, **({"user-data": scripts.user_data} if scripts.user_data else {})}
        shared = dict(project=project, zone=bp.zone, subnetwork=network.subnetwork,
                      tags=[network.node_tag], labels=labels, buckets=storage.bucket_names)
        on_cpu_image = self._booting(built_image())

        controller = SlurmController(
            f"{name}-controller", cluster=cluster, startup_script=scripts.controller,
            slurm_config=scripts.slurm_config["controller"],
            machine_type=bp.slurm.controller.machine_type,
            disk_size_gb=bp.slurm.controller.disk_size_gb,
            # The desired counts: the loop reads them every pass (a change needs no reboot).
            metadata={**metadata, node_metadata.NODESET_SIZES: remediation.sizes_text(bp)},
            **shared,
            read_permissions=remediation.READ_PERMISSIONS,
            act_permissions=remediation.act_permissions(bp),
            acted_on=remediation.acted_on(bp, project),
            accounting=bp.slurm.accounting.enabled,
            cloud_sql_project=(bp.slurm.accounting.cloud_sql.project
                               if bp.slurm.accounting.enabled and bp.slurm.accounting.cloud_sql
                               else None),
            protect=bp.storage.protect, opts=on_cpu_image)
        observability = Observability(
            f"{name}-observability", cluster=cluster, project=project, region=bp.region,
            tensorboard=bp.observability.tensorboard, dashboard=bp.observability.dashboard,
            alerts=True, alert_emails=bp.observability.alert_emails,
            metrics=ops_agent.metrics_written(bp), labels=labels, opts=child)
        login = LoginNodes(
            f"{name}-login", cluster=cluster, munge_secret=controller.munge_secret_id,
            startup_script=scripts.login, slurm_config=scripts.slurm_config["login"],
            count=bp.slurm.login.count,
            machine_type=bp.slurm.login.machine_type, metadata=guarded,
            tensorboard=observability.tensorboard, **shared, opts=on_cpu_image)

        compute_identity = NodeServiceAccount(
            f"{name}-compute-identity", project=project,
            account_id=naming.service_account_id(cluster, naming.COMPUTE_ACCOUNT),
            display_name=f"{cluster} compute nodes", secret=controller.munge_secret_id,
            secret_roles=MUNGE_READER_ROLES, buckets=storage.bucket_names, opts=child)
        self.nodesets = {
            ns.name: GpuNodeset(
                naming.nodeset_component(name, ns.name), nodeset=ns, cluster=cluster,
                project=project, region=bp.region, zone=bp.zone,
                system_subnetworks=network.system_subnetworks,
                gpu_subnetworks=network.gpu_subnetworks,
                service_account_email=compute_identity.email,
                startup_script=scripts.compute[ns.name],
                metadata={**guarded, node_metadata.MUNGE_SECRET: controller.munge_secret_id},
                tags=[network.node_tag], labels=labels, opts=self._booting(nodeset_image(ns)))
            for ns in bp.slurm.nodesets}

        mounts: dict[str, pulumi.Input[str]] = {"/home": home_source}
        mounts |= {bp.mount_of(x): pulumi.Output.concat("lustre:", storage.lustre_sources[x.name])
                   for x in bp.storage.lustre if x.name != home.lustre}
        mounts |= {b.mount_path: f"gs://{b.bucket}" for b in bp.storage.buckets}
        #: What `pulumi stack output` shows a user: where to log in and what is mounted.
        self.exports: dict[str, pulumi.Input[object]] = {
            "controller": controller.instance_name,
            "login_nodes": login.instance_names,
            "mounts": mounts,
            "partitions": {p.name: p.nodesets for p in bp.slurm.partitions},
            "munge_secret": controller.munge_secret_id,
        }
        #: The REST API, reachable from the cluster's own VMs only (a login node).
        self.exports["rest_api"] = f"http://{controller.instance_name}:{SLURMRESTD_PORT}"
        if login.instance_names:
            self.exports["ssh"] = iap_ssh_command(login.instance_names[0], bp.zone, project)
            # From a laptop: forward the port through the login node's IAP SSH, so no
            # firewall rule admits the REST port from outside the cluster.
            self.exports["rest_tunnel"] = (
                f"{self.exports['ssh']} -- -N -L {SLURMRESTD_PORT}:"
                f"{controller.instance_name}:{SLURMRESTD_PORT}")
        self.exports |= observability.exports
        self.register_outputs(self.exports)

    def _booting(self, image: ImageToBuild | None) -> pulumi.ResourceOptions:
        """A child's options: its VMs wait for ``image`` (None: the blueprint names its own)."""
        if image is None:
            return pulumi.ResourceOptions(parent=self)
        return pulumi.ResourceOptions(parent=self,
                                      transformations=[waiting_for(self.images[image.name])])
