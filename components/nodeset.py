"""A Slurm nodeset: one instance template and one managed instance group, for any node count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from clusterprint.blueprint.model import Nodeset
from clusterprint.components.identity import NODE_SCOPES
from clusterprint.contract import naming, node_metadata
from clusterprint.facts import catalog, machines
from clusterprint.render.images import boot_path

#: The reservation affinity key that names a specific reservation.
RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def network_interfaces(machine_type: str, system_subnetworks: Sequence[pulumi.Input[str]],
                       gpu_subnetworks: Sequence[pulumi.Input[str]],
                       ) -> list[gcp.compute.InstanceTemplateNetworkInterfaceArgs]:
    """The NICs of one VM: ``system_nics`` gVNICs, then one NIC per GPU network.

    A3 High/Mega: 1 gVNIC on the system subnet + 4/8 gVNICs, one per GPU VPC (TCPX/O).
    A3 Ultra/A4: 2 gVNICs + 8 MRDMA NICs on the RoCE VPC's subnets. A VM cannot have two
    NICs in one VPC, so the second gVNIC sits on its own VPC, as in the Cluster
    Toolkit's a3ultra/a4high Slurm blueprints (``a3ultra-slurm-net-1``); A4X likewise with
    4 MRDMA NICs. A2, G2 and A3 High below 8 GPUs have no GPU networks: one gVNIC. CPU
    machines get one NIC of the default type. None has an access config: no external IP.
    """
    family = machines.gpu_family(machine_type)
    if family is None:
        return [gcp.compute.InstanceTemplateNetworkInterfaceArgs(
            subnetwork=system_subnetworks[0])]
    nics = [gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=s, nic_type="GVNIC")
            for s in system_subnetworks[:family.system_nics]]
    gpu_nic_type = "MRDMA" if family.networking == "rdma" else "GVNIC"
    nics += [gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=s, nic_type=gpu_nic_type)
             for s in gpu_subnetworks[:family.gpu_nics]]
    return nics


def scheduling(nodeset: Nodeset) -> gcp.compute.InstanceTemplateSchedulingArgs:
    """How Compute Engine provisions and keeps the nodeset's VMs, per its provisioning.

    GPU VMs cannot live-migrate, so they always terminate on host maintenance. VMs of a
    dense or calendar-mode reservation are RESERVATION_BOUND (as slurm-gcp's resume.py
    sets them): pulumi-gcp 10.2 wants a SPECIFIC_RESERVATION affinity with it, and the
    Compute docs a termination action for the reservation's end; DELETE, as for
    flex-start, so a node that ran out of reservation leaves the group instead of
    lingering stopped.
    """
    gpu = nodeset.gpus > 0
    if nodeset.provisioning == "reservation" and nodeset.reservation_bound:
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="RESERVATION_BOUND", on_host_maintenance="TERMINATE",
            automatic_restart=True, instance_termination_action="DELETE")
    if nodeset.provisioning == "spot":
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="SPOT", preemptible=True, automatic_restart=False,
            on_host_maintenance="TERMINATE", instance_termination_action="DELETE")
    if nodeset.provisioning == "flex-start":
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="FLEX_START", automatic_restart=False,
            on_host_maintenance="TERMINATE", instance_termination_action="DELETE",
            max_run_duration=gcp.compute.InstanceTemplateSchedulingMaxRunDurationArgs(
                seconds=catalog.FLEX_START_MAX_RUN_S))
    return gcp.compute.InstanceTemplateSchedulingArgs(
        provisioning_model="STANDARD", on_host_maintenance="TERMINATE" if gpu else "MIGRATE",
        automatic_restart=True)


def reservation_affinity(nodeset: Nodeset,
                         ) -> gcp.compute.InstanceTemplateReservationAffinityArgs | None:
    """A reservation nodeset consumes only its named reservation; flex-start none at all."""
    if nodeset.provisioning == "reservation" and nodeset.reservation:
        return gcp.compute.InstanceTemplateReservationAffinityArgs(
            type="SPECIFIC_RESERVATION",
            specific_reservation=(
                gcp.compute.InstanceTemplateReservationAffinitySpecificReservationArgs(
                    key=RESERVATION_KEY, values=[nodeset.reservation])))
    if nodeset.provisioning == "flex-start":
        return gcp.compute.InstanceTemplateReservationAffinityArgs(type="NO_RESERVATION")
    return None


class GpuNodeset(pulumi.ComponentResource):
    """A nodeset's VMs as one instance template and its zonal instance groups.

    A zonal group holds at most 2,000 VMs (``catalog.GROUP_VMS_MAX``, with its list of VMs
    paginated), so a nodeset has one group per 2,000 nodes it may hold (``max_count``, else
    ``count``): ``group``, ``group-2``... (``Nodeset.group_counts``), the first keeping the
    name a one-group nodeset always had. Every group names its VMs
    ``{cluster}-{nodeset}-xxxx`` and ``count`` fills them in order (``target_size``); Slurm
    finds the nodes by their nodeset's feature, so the split is invisible to jobs. The
    resource count grows with size only by one group per 2,000 nodes. ``max_count`` is a
    ceiling, not a size: it counts toward slurm.conf's ``MaxNodeCount`` (the sum of every
    nodeset's upper bound), the most nodes Slurm accepts.

    Pulumi creates each static group at its share of ``count`` and then leaves its size
    alone (``ignore_changes=["targetSize"]``: a later ``targetSize`` is neither applied nor
    set back by a refresh). A group told a smaller size deletes VMs of its own choosing,
    busy ones included; so the controller sets the size (clusterprint/node/scale_down.py,
    from its metadata ``clusterprint-nodeset-sizes``, live): a raised count creates the
    missing VMs, a lowered one drains the surplus in Slurm and deletes exactly those VMs
    once their jobs end. A flex-start group is sized by its resize requests instead.

    The template is auto-named so a changed template is created before the old one is
    deleted while the group still uses it (pulumi/pulumi#8779); the group's OPPORTUNISTIC
    update policy applies it to new and replaced VMs only, never recreating nodes under
    running jobs.

    No group repairs a failed VM (``default_action_on_failure: DO_NOTHING``): the health
    check and the controller's remediation loop reboot or recreate nodes, rate-limited.

    Flex-start capacity comes only through a resize request (Compute docs "About resize
    requests in a MIG"; slurm-gcp's mig_flex.py): each group starts at target size 0 (the
    request's VMs are not recreated), and one ``compute.ResizeRequest`` per group asks for
    its share of ``count`` VMs for the longest run duration, 7 days;
    Compute Engine deletes them when it ends. A resize request cannot be updated
    (magic-modules ResizeRequest.yaml), so a changed ``count`` previews as a replaced
    request. With ``count`` 0 there is no request: an operator adds one up to
    ``max_count``.
    """

    def __init__(self, name: str, *, nodeset: Nodeset, cluster: str, project: str,
                 region: str, zone: str, system_subnetworks: Sequence[pulumi.Input[str]],
                 service_account_email: pulumi.Input[str], startup_script: str,
                 gpu_subnetworks: Sequence[pulumi.Input[str]] = (),
                 metadata: Mapping[str, pulumi.Input[str]] | None = None,
                 tags: Sequence[str] = (), labels: Mapping[str, str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:GpuNodeset", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = naming.nodeset_labels(labels or {}, nodeset.name)
        placement: pulumi.Input[str] | None = None
        # A reservation places its own VMs and refuses a policy of ours
        # (rule slurm.reservation-placement); this guards callers that skip validation.
        if nodeset.compact_policy:
            # No max_distance: A3 machines refuse max distance 1 (toolkit nodeset metadata).
            placement = (gcp.compute.ResourcePolicy(
                naming.child(name, naming.PLACEMENT), project=project, region=region,
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                    collocation="COLLOCATED"), opts=child).self_link)
        template_metadata = {**(metadata or {}), "startup-script": startup_script,
                             node_metadata.ROLE: "compute", node_metadata.NODESET: nodeset.name}
        node_metadata.check_size(f"nodeset {nodeset.name}", template_metadata)
        self.template = gcp.compute.InstanceTemplate(
            naming.child(name, naming.TEMPLATE), project=project, region=region,
            machine_type=nodeset.machine_type,
            disks=[gcp.compute.InstanceTemplateDiskArgs(
                boot=True, auto_delete=True,
                source_image=boot_path(project, nodeset),
                disk_size_gb=nodeset.boot_disk.size_gb, disk_type=nodeset.boot_disk_type)],
            network_interfaces=network_interfaces(nodeset.machine_type, system_subnetworks,
                                                  gpu_subnetworks),
            scheduling=scheduling(nodeset), reservation_affinity=reservation_affinity(nodeset),
            # One policy at most; pulumi-gcp types the field as a single self link.
            resource_policies=placement,
            service_account=gcp.compute.InstanceTemplateServiceAccountArgs(
                email=service_account_email, scopes=NODE_SCOPES),
            metadata=template_metadata, tags=list(tags), labels=labels, opts=child)
        self.base_instance_name = naming.base_instance_name(cluster, nodeset.name)
        flex = nodeset.provisioning == "flex-start"
        #: One group per GROUP_VMS_MAX VMs the nodeset may hold, all naming their VMs
        #: ``{cluster}-{nodeset}-xxxx``: Slurm finds a nodeset's nodes by feature, so it
        #: sees one nodeset however many groups hold it.
        self.groups: list[gcp.compute.InstanceGroupManager] = []
        #: The flex-start requests, one per group with VMs to ask for.
        self.resize_requests: list[gcp.compute.ResizeRequest] = []
        for index, count in enumerate(nodeset.group_counts):
            # The resize request (flex-start) or the controller (scale_down.py), not Pulumi,
            # sets a static group's size once it exists: Pulumi would shrink it under
            # running jobs, and a refresh would set it back.
            group = self._group(naming.child(name, naming.numbered(naming.GROUP, index)),
                                project, zone, self.base_instance_name,
                                0 if flex else count, own_size=True)
            self.groups.append(group)
            if flex and count:
                self.resize_requests.append(gcp.compute.ResizeRequest(
                    naming.child(name, naming.numbered(naming.RESIZE, index)), project=project,
                    zone=zone, instance_group_manager=group.name, resize_by=count,
                    requested_run_duration=gcp.compute.ResizeRequestRequestedRunDurationArgs(
                        seconds=str(catalog.FLEX_START_MAX_RUN_S)),
                    opts=child))
        #: The groups of the elastic nodes (above count on on-demand and spot nodesets):
        #: the controller's power saving creates and deletes their VMs by name, so they
        #: start empty and Pulumi never sets their size.
        self.elastic_groups = [
            self._group(naming.child(name, naming.numbered(naming.ELASTIC_GROUP, index)),
                        project, zone,
                        naming.elastic_base_instance_name(cluster, nodeset.name), 0,
                        own_size=True)
            for index in range(nodeset.elastic_groups)]
        self.register_outputs({"template": self.template.self_link_unique,
                               "groups": [group.self_link for group in self.groups],
                               "elastic_groups": [g.self_link for g in self.elastic_groups]})

    def _group(self, logical: str, project: str, zone: str, base_instance_name: str,
               target_size: int, own_size: bool) -> gcp.compute.InstanceGroupManager:
        """One zonal group of the nodeset's template. ``own_size``: something else than
        Pulumi (a resize request, power saving, the controller's scale-down) sets its size
        after it is created, which Pulumi then leaves."""
        return gcp.compute.InstanceGroupManager(
            logical, project=project, zone=zone, base_instance_name=base_instance_name,
            versions=[gcp.compute.InstanceGroupManagerVersionArgs(
                name="primary", instance_template=self.template.self_link_unique)],
            target_size=target_size,
            # Past 1,000 VMs a zonal group needs its list of VMs paginated.
            list_managed_instances_results="PAGINATED",
            update_policy=gcp.compute.InstanceGroupManagerUpdatePolicyArgs(
                type="OPPORTUNISTIC", minimal_action="REPLACE"),
            # The group never repairs a VM on its own: Slurm and the controller's
            # remediation loop decide (a repair would race a reboot or a host-fault report).
            instance_lifecycle_policy=(
                gcp.compute.InstanceGroupManagerInstanceLifecyclePolicyArgs(
                    default_action_on_failure="DO_NOTHING")),
            wait_for_instances=False,
            opts=pulumi.ResourceOptions(parent=self,
                                        ignore_changes=["targetSize"] if own_size else None))
