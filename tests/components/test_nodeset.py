"""GpuNodeset on its own: NICs, provisioning, placement, and the instance group."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.model import Image, Nodeset
from clusterprint.components.nodeset import GpuNodeset
from clusterprint.facts.catalog import FLEX_START_MAX_RUN_S
from clusterprint.render.images import node_image

TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
RESIZE = "gcp:compute/resizeRequest:ResizeRequest"
SYSTEM = ["sys-0", "sys-1"]
GPU = [f"gpu-{i}" for i in range(8)]


def nodeset(cloud, **fields) -> dict:
    """Declare one GpuNodeset from plain Nodeset fields; return its template's inputs."""
    spec = Nodeset(**{"name": "ns", "machine_type": "a3-megagpu-8g", "count": 4, **fields})
    cloud.run(lambda: GpuNodeset(
        "ns", nodeset=spec, cluster="c1", project="p-roject", region="us-central1",
        zone="us-central1-a", system_subnetworks=SYSTEM, gpu_subnetworks=GPU,
        service_account_email="sa@p-roject.iam.gserviceaccount.com",
        startup_script="#!/bin/bash\n", metadata={"k": "v"}, tags=["c1"]).template.id)
    return cloud.one(TEMPLATE).inputs


@pytest.mark.parametrize(("machine_type", "expected"), [
    ("a3-megagpu-8g", ["GVNIC"] + ["GVNIC"] * 8),
    ("a3-highgpu-8g", ["GVNIC"] + ["GVNIC"] * 4),
    ("a3-ultragpu-8g", ["GVNIC"] * 2 + ["MRDMA"] * 8),
    ("a4-highgpu-8g", ["GVNIC"] * 2 + ["MRDMA"] * 8),
    ("a4x-highgpu-4g", ["GVNIC"] * 2 + ["MRDMA"] * 4),
    ("a3-edgegpu-8g", ["GVNIC"] + ["GVNIC"] * 4),
    ("a3-highgpu-2g", ["GVNIC"]),
    ("a2-ultragpu-8g", ["GVNIC"]),
    ("a2-megagpu-16g", ["GVNIC"]),
    ("g2-standard-48", ["GVNIC"]),
    ("n2-standard-4", [None]),
])
def test_nics_follow_the_machine_family(cloud, machine_type, expected):
    nics = nodeset(cloud, machine_type=machine_type)["networkInterfaces"]
    assert [nic.get("nicType") for nic in nics] == expected
    assert nics[0]["subnetwork"] == "sys-0"
    assert all("accessConfigs" not in nic for nic in nics)


def test_rdma_nics_use_both_system_subnets_then_the_gpu_subnets(cloud):
    nics = nodeset(cloud, machine_type="a4-highgpu-8g")["networkInterfaces"]
    assert [nic["subnetwork"] for nic in nics] == SYSTEM + GPU


def test_reservation_is_consumed_by_name(cloud):
    template = nodeset(cloud, provisioning="reservation",
                       reservation="projects/p-roject/reservations/r1")
    assert template["reservationAffinity"] == {
        "type": "SPECIFIC_RESERVATION",
        "specificReservation": {"key": "compute.googleapis.com/reservation-name",
                                "values": ["projects/p-roject/reservations/r1"]}}
    assert template["scheduling"]["provisioningModel"] == "STANDARD"
    assert template["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_a_reservation_template_gets_no_placement_policy_of_ours(cloud):
    template = nodeset(cloud, provisioning="reservation", placement="compact",
                       reservation="projects/p-roject/reservations/r1")
    assert "resourcePolicies" not in template
    assert not cloud.of_type(POLICY)


def test_a_dense_or_calendar_reservation_is_consumed_reservation_bound(cloud):
    template = nodeset(cloud, machine_type="a4-highgpu-8g", provisioning="reservation",
                       reservation="projects/p-roject/reservations/dense", reservation_bound=True)
    assert template["scheduling"] == {
        "provisioningModel": "RESERVATION_BOUND", "onHostMaintenance": "TERMINATE",
        "automaticRestart": True, "instanceTerminationAction": "DELETE"}
    assert template["reservationAffinity"]["type"] == "SPECIFIC_RESERVATION"
    assert template["reservationAffinity"]["specificReservation"]["values"] == [
        "projects/p-roject/reservations/dense"]


def test_spot_vms_are_preemptible_and_never_restart(cloud):
    scheduling = nodeset(cloud, provisioning="spot")["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT" and scheduling["preemptible"] is True
    assert scheduling["automaticRestart"] is False
    assert scheduling["onHostMaintenance"] == "TERMINATE"


def test_flex_start_has_a_run_duration_and_no_reservation(cloud):
    template = nodeset(cloud, provisioning="flex-start")
    assert template["scheduling"]["provisioningModel"] == "FLEX_START"
    assert template["scheduling"]["maxRunDuration"] == {"seconds": FLEX_START_MAX_RUN_S}
    assert template["reservationAffinity"] == {"type": "NO_RESERVATION"}


def test_flex_start_capacity_comes_from_one_resize_request_on_an_empty_group(cloud):
    nodeset(cloud, provisioning="flex-start", count=8, max_count=16)
    groups = {g.name: g for g in cloud.of_type(GROUP)}
    # The 8 elastic nodes' group starts empty too: power saving asks for their VMs with a
    # resize request of its own per resume (clusterprint/node/capacity.py).
    assert sorted(groups) == ["ns-elastic", "ns-group"]
    assert groups["ns-elastic"].inputs["targetSize"] == 0
    assert groups["ns-elastic"].ignore_changes == ("targetSize",)
    group = groups["ns-group"]
    assert group.inputs["targetSize"] == 0
    assert group.inputs["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "DO_NOTHING"}
    assert group.ignore_changes == ("targetSize",)
    request = cloud.one(RESIZE)
    assert request.parent == "ns"
    assert request.inputs["resizeBy"] == 8 and request.inputs["zone"] == "us-central1-a"
    assert request.inputs["instanceGroupManager"] == "ns-group-auto"
    assert request.inputs["requestedRunDuration"] == {"seconds": str(FLEX_START_MAX_RUN_S)}


def test_flex_start_without_static_nodes_requests_nothing(cloud):
    nodeset(cloud, provisioning="flex-start", count=0, max_count=4)
    assert [g.inputs["targetSize"] for g in cloud.of_type(GROUP)] == [0, 0]
    assert not cloud.of_type(RESIZE)


@pytest.mark.parametrize("provisioning", ["on-demand", "spot", "reservation"])
def test_other_groups_start_with_count_vms_and_then_the_controller_sizes_them(
        cloud, provisioning):
    """A lowered targetSize would let the group delete busy VMs: after creating the group,
    Pulumi leaves its size to the controller's scale-down (refresh included)."""
    extra = {"reservation": "r1"} if provisioning == "reservation" else {}
    nodeset(cloud, provisioning=provisioning, count=3, **extra)
    group = cloud.one(GROUP)
    assert group.inputs["targetSize"] == 3 and group.ignore_changes == ("targetSize",)
    assert group.inputs["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "DO_NOTHING"}
    assert not cloud.of_type(RESIZE)


def test_on_demand_gpu_vms_terminate_on_maintenance(cloud):
    template = nodeset(cloud)
    assert template["scheduling"]["provisioningModel"] == "STANDARD"
    assert template["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "reservationAffinity" not in template


def test_compact_placement_is_attached_to_the_template(cloud):
    template = nodeset(cloud, placement="compact")
    policy = cloud.one(POLICY)
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
    assert template["resourcePolicies"].endswith(policy.name)


def test_no_placement_policy_unless_compact(cloud):
    assert "resourcePolicies" not in nodeset(cloud)
    assert not cloud.of_type(POLICY)


def test_the_group_keeps_count_vms_of_the_auto_named_template(cloud):
    template = nodeset(cloud, count=16, max_count=32)
    assert "name" not in template
    group = next(g for g in cloud.of_type(GROUP) if g.name == "ns-group").inputs
    assert group["targetSize"] == 16 and group["zone"] == "us-central1-a"
    assert group["baseInstanceName"] == "c1-ns"
    assert group["versions"][0]["instanceTemplate"].endswith("ns-template?id=1")
    assert group["updatePolicy"]["type"] == "OPPORTUNISTIC"


def built(kind: str) -> str:
    """The path of clusterprint's built image of ``kind`` in the test's project."""
    return f"projects/p-roject/global/images/{node_image(kind).name}"


def test_boot_disk_image_metadata_and_identity(cloud):
    template = nodeset(cloud, machine_type="a4-highgpu-8g")
    disk = template["disks"][0]
    assert disk["diskType"] == "hyperdisk-balanced"
    assert disk["sourceImage"] == built("gpu-rdma")
    assert template["metadata"]["startup-script"] == "#!/bin/bash\n"
    assert template["metadata"]["clusterprint-role"] == "compute"
    assert template["metadata"]["clusterprint-nodeset"] == "ns"
    assert template["metadata"]["k"] == "v"
    assert template["serviceAccount"]["email"] == "sa@p-roject.iam.gserviceaccount.com"
    assert template["tags"] == ["c1"]


@pytest.mark.parametrize("machine_type", ["a2-highgpu-4g", "g2-standard-24"])
def test_a2_and_g2_boot_the_gpu_image_without_fabric_from_pd_balanced(cloud, machine_type):
    disk = nodeset(cloud, machine_type=machine_type)["disks"][0]
    assert disk["sourceImage"] == built("gpu")
    assert node_image("gpu").base.name.startswith("ubuntu-accelerator-2404-amd64-with-nvidia-580-v")
    assert disk["diskType"] == "pd-balanced"


def test_a4x_boots_the_arm64_gpu_image_from_hyperdisk(cloud):
    disk = nodeset(cloud, machine_type="a4x-highgpu-4g")["disks"][0]
    assert disk["sourceImage"] == built("gpu-rdma-arm64")
    assert node_image("gpu-rdma-arm64").base.name.startswith(
        "ubuntu-accelerator-2404-arm64-with-nvidia-580-v")
    assert disk["diskType"] == "hyperdisk-balanced"


def test_a_cpu_nodeset_boots_the_cpu_image(cloud):
    disk = nodeset(cloud, machine_type="n2-standard-4")["disks"][0]
    assert disk["sourceImage"] == built("cpu")
    assert disk["diskType"] == "pd-balanced"


@pytest.mark.parametrize(("image", "path"), [
    (Image(project="my-images", name="slurm-a3mega-v3"),
     "projects/my-images/global/images/slurm-a3mega-v3"),
    (Image(project="my-images", family="slurm-a3mega"),
     "projects/my-images/global/images/family/slurm-a3mega")])
def test_a_named_image_is_booted_exactly_and_a_family_only_where_named(cloud, image, path):
    assert nodeset(cloud, image=image)["disks"][0]["sourceImage"] == path


@pytest.mark.parametrize("count", [4, 2000])
def test_up_to_one_groups_limit_resources_do_not_grow_with_the_node_count(cloud, count):
    nodeset(cloud, count=count, placement="compact")
    assert sorted(r.typ for r in cloud.resources) == sorted(
        ["clusterprint:index:GpuNodeset", POLICY, TEMPLATE, GROUP])
    assert cloud.one(GROUP).name == "ns-group"


@pytest.mark.parametrize(("count", "max_count", "sizes"), [
    (2001, None, [2000, 1]),
    (4096, None, [2000, 2000, 96]),
    (16384, None, [2000] * 8 + [384]),
    (2500, 2500, [2000, 500]),
])
def test_a_nodeset_past_one_groups_limit_is_split_over_groups_of_one_name(
        cloud, count, max_count, sizes):
    nodeset(cloud, count=count, max_count=max_count)
    # Registered in any order: in the order of their names' numbers.
    groups = sorted(cloud.of_type(GROUP), key=lambda g: int(g.name.rsplit("-", 1)[1])
                    if g.name[-1].isdigit() else 1)
    assert [g.name for g in groups] == ["ns-group"] + [f"ns-group-{i}"
                                                       for i in range(2, len(sizes) + 1)]
    assert [g.inputs["targetSize"] for g in groups] == sizes
    # One VM name pattern, one template: Slurm sees one nodeset.
    assert {g.inputs["baseInstanceName"] for g in groups} == {"c1-ns"}
    assert len({str(g.inputs["versions"]) for g in groups}) == 1
    assert all(g.inputs["listManagedInstancesResults"] == "PAGINATED" for g in groups)
    assert all(g.parent == "ns" for g in groups) and len(cloud.of_type(TEMPLATE)) == 1


def test_elastic_nodes_get_groups_of_their_own_whose_size_pulumi_leaves(cloud):
    """Power saving creates and deletes the elastic VMs by name: a refresh that set their
    group's size back would delete VMs under running jobs."""
    nodeset(cloud, provisioning="spot", count=3, max_count=4003)
    by_name = {g.name: g for g in cloud.of_type(GROUP)}
    assert sorted(by_name) == ["ns-elastic", "ns-elastic-2", "ns-group"]
    assert by_name["ns-group"].inputs["targetSize"] == 3
    for name in ("ns-elastic", "ns-elastic-2"):
        assert by_name[name].inputs["targetSize"] == 0
        assert by_name[name].ignore_changes == ("targetSize",)
        assert by_name[name].inputs["baseInstanceName"] == "c1-ns-e"


@pytest.mark.parametrize("extra", [{"provisioning": "reservation", "reservation": "r1"},
                                   {"provisioning": "flex-start", "power_saving": False},
                                   {"provisioning": "spot", "power_saving": False}],
                         ids=["reservation", "flex-start-off", "spot-off"])
def test_a_ceiling_without_power_saving_gets_no_elastic_group(cloud, extra):
    nodeset(cloud, count=2, max_count=8, **extra)
    assert [g.name for g in cloud.of_type(GROUP)] == ["ns-group"]


def test_a_split_flex_start_nodeset_asks_each_group_for_its_share(cloud):
    nodeset(cloud, provisioning="flex-start", count=2100, max_count=4500)
    # Two groups for the 2,100 static nodes, two for the 2,400 elastic ones: all empty.
    assert sorted(g.inputs["targetSize"] for g in cloud.of_type(GROUP)) == [0, 0, 0, 0]
    requests = sorted(cloud.of_type(RESIZE), key=lambda r: r.name)
    assert [(r.name, r.inputs["resizeBy"], r.inputs["instanceGroupManager"])
            for r in requests] == [("ns-resize", 2000, "ns-group-auto"),
                                   ("ns-resize-2", 100, "ns-group-2-auto")]
