"""TrainingCluster on each reference blueprint: what a reviewer of the stack checks."""

from __future__ import annotations

import json

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.components.cluster import TrainingCluster
from clusterprint.contract import node_metadata
from clusterprint.render import metadata_guard
from clusterprint.render.images import needed_images
from tests.support.pulumi_mocks import reference_blueprint

REFERENCES = ["a3mega", "a3ultra", "a4", "cpu-small"]
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
INSTANCE = "gcp:compute/instance:Instance"
BUILT_IMAGE = "pulumi-python:dynamic/clusterprint:BuiltImage"
#: Data-bearing types, the controller's state disk (queue and accounting database) among them.
DATA = {"gcp:filestore/instance:Instance", "gcp:lustre/instance:Instance",
        "gcp:storage/bucket:Bucket", "gcp:compute/disk:Disk"}
#: NICs per VM of each reference blueprint's nodesets.
NICS = {"a3mega": {"a3mega": 9}, "a3ultra": {"a3ultra": 10}, "a4": {"a4": 10, "a4spot": 10},
        "cpu-small": {"cpu": 1}}


def build(cloud, blueprint: Blueprint) -> dict:
    """Declare the cluster of a blueprint; return its resolved exports."""
    return cloud.run(lambda: TrainingCluster(blueprint.name, blueprint).exports)


def with_count(blueprint: Blueprint, count: int) -> Blueprint:
    data = blueprint.model_dump(by_alias=True)
    for ns in data["slurm"]["nodesets"]:
        ns["count"] = ns["max_count"] = count
    return Blueprint.model_validate_json(json.dumps(data))


def templates(cloud) -> dict[str, dict]:
    return {t.inputs["metadata"]["clusterprint-nodeset"]: t.inputs
            for t in cloud.of_type(TEMPLATE)}


@pytest.mark.parametrize("name", REFERENCES)
def test_every_resource_hangs_under_the_cluster(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    components = {r.name for r in cloud.resources if not r.custom}
    top = [r for r in cloud.resources if r.typ == "clusterprint:index:TrainingCluster"]
    assert len(top) == 1
    assert all(r.parent in components for r in cloud.resources if r is not top[0])
    assert all(r.name.startswith(bp.name) for r in cloud.resources)


@pytest.mark.parametrize("name", REFERENCES)
def test_every_vpc_carries_the_blueprint_mtu(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    vpcs = cloud.of_type("gcp:compute/network:Network")
    assert vpcs and {v.inputs["mtu"] for v in vpcs} == {bp.mtu}


@pytest.mark.parametrize("name", REFERENCES)
def test_every_zonal_resource_is_in_the_zone(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    zonal = [r for r in cloud.resources if "zone" in r.inputs]
    assert zonal and {r.inputs["zone"] for r in zonal} == {bp.zone}
    for lustre in cloud.of_type("gcp:lustre/instance:Instance"):
        assert lustre.inputs["location"] == bp.zone
    for filestore in cloud.of_type("gcp:filestore/instance:Instance"):
        assert filestore.inputs["location"] == bp.zone  # every reference uses a zonal tier


@pytest.mark.parametrize("name", REFERENCES)
def test_nic_counts_follow_the_machine_family(cloud, name):
    build(cloud, reference_blueprint(name))
    counts = {ns: len(t["networkInterfaces"]) for ns, t in templates(cloud).items()}
    assert counts == NICS[name]


@pytest.mark.parametrize("name", REFERENCES)
def test_no_vm_gets_an_external_ip(cloud, name):
    build(cloud, reference_blueprint(name))
    vms = cloud.of_type(TEMPLATE) + cloud.of_type("gcp:compute/instance:Instance")
    nics = [nic for vm in vms for nic in vm.inputs["networkInterfaces"]]
    assert nics and not [nic for nic in nics if nic.get("accessConfigs")]


@pytest.mark.parametrize("name", REFERENCES)
def test_groups_keep_the_static_count(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    sizes = {g.inputs["baseInstanceName"]: g.inputs["targetSize"] for g in cloud.of_type(GROUP)}
    assert sizes == {f"{bp.name}-{n.name}": n.count for n in bp.slurm.nodesets} | {
        f"{bp.name}-{n.name}-e": 0 for n in bp.slurm.nodesets if n.elastic}


@pytest.mark.parametrize("name", REFERENCES)
def test_the_controller_carries_the_desired_counts_and_pulumi_leaves_the_sizes(cloud, name):
    """A changed count changes the controller's metadata (its loop reads it every pass) and
    no group's size: Pulumi ignores targetSize after creating a group."""
    bp = reference_blueprint(name)
    build(cloud, bp)
    (controller,) = [vm for vm in cloud.of_type(INSTANCE)
                     if vm.inputs["metadata"]["clusterprint-role"] == "controller"]
    sizes = json.loads(controller.inputs["metadata"][node_metadata.NODESET_SIZES])
    assert sizes == {n.name: n.count for n in bp.slurm.nodesets if n.provisioning != "flex-start"}
    assert {g.ignore_changes for g in cloud.of_type(GROUP)} == {("targetSize",)}
    others = [vm for vm in cloud.of_type(INSTANCE) if vm is not controller]
    assert others and not [vm for vm in others
                           if node_metadata.NODESET_SIZES in vm.inputs["metadata"]]
    assert not [t for t in cloud.of_type(TEMPLATE)
                if node_metadata.NODESET_SIZES in t.inputs["metadata"]]


@pytest.mark.parametrize("name", REFERENCES)
def test_every_node_may_publish_its_boot_as_guest_attributes(cloud, name):
    """`clusterprint status` reads each boot's stage there: controller, login and nodesets."""
    build(cloud, reference_blueprint(name))
    vms = cloud.of_type(INSTANCE) + cloud.of_type(TEMPLATE)
    assert {vm.inputs["metadata"]["clusterprint-role"] for vm in vms} == {
        "controller", "login", "compute"}
    assert {vm.inputs["metadata"][node_metadata.GUEST_ATTRIBUTES] for vm in vms} == {"TRUE"}


@pytest.mark.parametrize("name", REFERENCES)
def test_data_is_protected_as_the_blueprint_says(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    data = [r for r in cloud.resources if r.typ in DATA]
    assert data and {r.protect for r in data} == {bp.storage.protect}
    assert not [r for r in cloud.resources if r.protect and r.typ not in DATA]


@pytest.mark.parametrize("name", ["a3mega", "a3ultra"])
def test_reservations_are_consumed_by_name(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    for ns in bp.slurm.nodesets:
        affinity = templates(cloud)[ns.name]["reservationAffinity"]
        assert affinity["specificReservation"]["values"] == [ns.reservation]


def test_a4_spot_nodeset_and_reserved_nodeset_differ_only_where_they_should(cloud):
    build(cloud, reference_blueprint("a4"))
    reserved, spot = templates(cloud)["a4"], templates(cloud)["a4spot"]
    assert reserved["scheduling"]["provisioningModel"] == "STANDARD"
    assert spot["scheduling"]["provisioningModel"] == "SPOT"
    assert "reservationAffinity" not in spot
    assert reserved["networkInterfaces"] == spot["networkInterfaces"]


@pytest.mark.parametrize("name", ["a3mega", "a3ultra"])
def test_resource_count_does_not_grow_with_nodes_up_to_one_groups_limit(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, with_count(bp, 4))
    small = sorted((r.typ, r.name) for r in cloud.resources)
    build(cloud, with_count(bp, 2000))
    large = sorted((r.typ, r.name) for r in cloud.resources[len(small):])
    assert small and large == small
    assert {g.inputs["targetSize"] for g in cloud.of_type(GROUP)} == {4, 2000}


def test_past_the_limit_only_groups_are_added_and_the_first_keeps_its_name(cloud):
    bp = reference_blueprint("a3mega")
    build(cloud, with_count(bp, 4))
    small = sorted((r.typ, r.name) for r in cloud.resources)
    build(cloud, with_count(bp, 4096))
    large = sorted((r.typ, r.name) for r in cloud.resources[len(small):])
    added = sorted(set(large) - set(small))
    assert set(small) <= set(large)
    assert [typ for typ, _ in added] == [GROUP, GROUP]
    first = next(name for typ, name in small if typ == GROUP)
    assert [name for _, name in added] == [f"{first}-2", f"{first}-3"]


@pytest.mark.parametrize("name", REFERENCES)
def test_no_key_or_database_password_is_ever_an_input(cloud, name):
    build(cloud, reference_blueprint(name))
    assert not [r for r in cloud.resources if "secretVersion" in r.typ]
    text = json.dumps([r.inputs for r in cloud.resources], default=str).lower()
    assert "secretdata" not in text
    cluster = reference_blueprint(name).name
    assert sorted(s.inputs["secretId"] for s in cloud.of_type(
        "gcp:secretmanager/secret:Secret")) == [
            f"{cluster}-db-password", f"{cluster}-jwt-key", f"{cluster}-munge-key"]


def test_exports_say_where_to_log_in_and_what_is_mounted(cloud):
    exports = build(cloud, reference_blueprint("a3mega"))
    assert exports["controller"] == "a3mega-controller"
    assert exports["login_nodes"] == ["a3mega-login-0"]
    assert exports["ssh"] == ("gcloud compute ssh a3mega-login-0 --zone us-central1-a "
                              "--project my-project --tunnel-through-iap")
    assert exports["mounts"] == {"/home": "nfs:10.200.0.2:/home",
                                 "/lustre": "lustre:10.200.0.3@tcp:/scratch",
                                 "/gcs/checkpoints": "gs://my-project-a3mega-ckpts"}
    assert exports["partitions"] == {"a3mega": ["a3mega"]}
    assert exports["rest_api"] == "http://a3mega-controller:6820"
    assert exports["rest_tunnel"] == exports["ssh"] + " -- -N -L 6820:a3mega-controller:6820"
    assert {"tensorboard", "dashboard"} <= exports.keys()


def test_lustre_home_reaches_the_nodes_as_metadata(cloud):
    exports = build(cloud, reference_blueprint("a4"))
    assert exports["mounts"]["/home"] == "lustre:10.200.0.3@tcp:/shared"
    assert not cloud.of_type("gcp:filestore/instance:Instance")
    for template in templates(cloud).values():
        metadata = template["metadata"]
        assert metadata["clusterprint-home-source"] == "lustre:10.200.0.3@tcp:/shared"
        assert metadata["clusterprint-lustre-shared"] == "10.200.0.3@tcp:/shared"
        assert metadata["clusterprint-munge-secret"] == (
            "projects/test-project/secrets/a4-munge-key")
        # Only the controller signs and checks REST API tokens.
        assert "clusterprint-jwt-secret" not in metadata


@pytest.mark.parametrize("name", ["a3mega", "cpu-small"])
def test_every_vm_and_data_resource_carries_the_cluster_label(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    labelled = [r for r in cloud.resources if r.custom and r.typ in DATA | {
        TEMPLATE, "gcp:compute/instance:Instance", "gcp:secretmanager/secret:Secret"}]
    assert labelled
    for resource in labelled:
        assert resource.inputs["labels"]["clusterprint-cluster"] == bp.name
        assert bp.labels.items() <= resource.inputs["labels"].items()


def with_network(blueprint: Blueprint, **network) -> Blueprint:
    data = blueprint.model_dump(by_alias=True)
    data["network"] |= network
    return Blueprint.model_validate_json(json.dumps(data))


@pytest.mark.parametrize("ssh", [None, []], ids=["ssh-as-written", "ssh-none"])
@pytest.mark.parametrize("name", REFERENCES)
def test_no_firewall_admits_traffic_without_a_source(cloud, name, ssh):
    # A firewall rule with no source admits 0.0.0.0/0 (hashicorp/terraform-provider-google#6789).
    bp = reference_blueprint(name)
    bp = bp if ssh is None else with_network(bp, ssh_source_ranges=ssh)
    build(cloud, bp)
    firewalls = cloud.of_type("gcp:compute/firewall:Firewall")
    assert firewalls
    for rule in firewalls:
        assert rule.inputs.get("sourceRanges") or rule.inputs.get("sourceTags"), rule.name
    ssh_rules = [r for r in firewalls if r.name.endswith("-network-ssh")]
    assert len(ssh_rules) == (1 if bp.network.ssh_source_ranges else 0)


def test_the_most_labels_a_blueprint_may_set_fit_every_resource(cloud):
    bp = reference_blueprint("cpu-small").model_copy(
        update={"labels": {f"k{i}": "v" for i in range(62)}})
    build(cloud, bp)
    counts = [len(r.inputs["labels"]) for r in cloud.resources if r.inputs.get("labels")]
    assert max(counts) == 64


def test_file_systems_sit_on_the_full_system_network_name(cloud):
    bp = reference_blueprint("a3mega")
    build(cloud, bp)
    full = "projects/my-project/global/networks/a3mega-network-vpc"
    filestore = cloud.one("gcp:filestore/instance:Instance").inputs
    assert filestore["networks"][0]["network"] == full
    assert (filestore["tier"], filestore["fileShares"]["capacityGb"]) == ("ZONAL", 2560)
    lustre = cloud.one("gcp:lustre/instance:Instance").inputs
    assert lustre["network"] == full
    assert (lustre["perUnitStorageThroughput"], lustre["capacityGib"]) == ("500", "18000")
    assert cloud.one("gcp:servicenetworking/connection:Connection").inputs["network"] == full


def test_each_role_holds_only_the_project_and_secret_roles_it_uses(cloud):
    build(cloud, reference_blueprint("a4"))

    def roles_by_identity(token: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for grant in cloud.of_type(token):
            found.setdefault(grant.parent, set()).add(grant.inputs["role"])
        return found

    logs_and_metrics = {"roles/logging.logWriter", "roles/monitoring.metricWriter"}
    # The remediation loop's two custom roles (tests/components/test_remediation_access.py).
    remediation = {"projects/my-project/roles/a4_remediation_read",
                   "projects/my-project/roles/a4_remediation_act"}
    assert roles_by_identity("gcp:projects/iAMMember:IAMMember") == {
        "a4-controller-identity": logs_and_metrics,
        "a4-controller": remediation,
        "a4-login-identity": logs_and_metrics,
        "a4-compute-identity": logs_and_metrics}
    reader = {"roles/secretmanager.secretAccessor"}
    assert roles_by_identity("gcp:secretmanager/secretIamMember:SecretIamMember") == {
        "a4-controller-identity": reader | {"roles/secretmanager.secretVersionAdder",
                                            "roles/secretmanager.viewer"},
        "a4-login-identity": reader,
        "a4-compute-identity": reader}


def admits_tcp(rule: dict, port: int) -> bool:
    """Whether a firewall rule's allows take TCP traffic to ``port``."""
    for allow in rule.get("allows", []):
        if allow["protocol"] not in ("all", "tcp"):
            continue
        ports = allow.get("ports") or [f"0-{65535}"]
        for spec in ports:
            low, _, high = str(spec).partition("-")
            if int(low) <= port <= int(high or low):
                return True
    return False


@pytest.mark.parametrize("name", REFERENCES)
def test_the_rest_api_port_admits_only_the_clusters_own_vms(cloud, name):
    """slurmrestd listens on 6820 of the controller: no rule lets anything but the cluster's
    VMs reach it (IAP reaches SSH only; users forward the port through a login node)."""
    build(cloud, reference_blueprint(name))
    controller = next(vm.inputs for vm in cloud.of_type("gcp:compute/instance:Instance")
                      if vm.inputs["metadata"]["clusterprint-role"] == "controller")
    (nic,) = controller["networkInterfaces"]
    subnet = nic["subnetwork"].rsplit("/", 1)[-1]
    (network,) = [s.inputs["network"] for s in cloud.of_type(
        "gcp:compute/subnetwork:Subnetwork") if s.name == subnet]
    reaching = [r.inputs for r in cloud.of_type("gcp:compute/firewall:Firewall")
                if r.inputs["network"] == network and set(
                    r.inputs.get("targetTags") or controller["tags"]) & set(controller["tags"])]
    assert any(admits_tcp(r, 22) and r.get("sourceRanges") for r in reaching), "SSH from IAP"
    rest = [r for r in reaching if admits_tcp(r, 6820)]
    assert rest and all(r.get("sourceTags") == controller["tags"] and not r.get("sourceRanges")
                        for r in rest), rest
    assert not [r for r in reaching if r.get("sourceRanges") and admits_tcp(r, 6820)]


@pytest.mark.parametrize("name, tensorboard", [("a3mega", True), ("a4", False)])
def test_only_login_nodes_of_a_cluster_with_a_tensorboard_carry_its_name_and_role(
        cloud, name, tensorboard):
    build(cloud, reference_blueprint(name))
    assert reference_blueprint(name).observability.tensorboard is tensorboard
    key = "clusterprint-tensorboard"
    logins = cloud.of_type("gcp:compute/instance:Instance")
    login_metadata = [vm.inputs["metadata"] for vm in logins
                      if vm.inputs["metadata"]["clusterprint-role"] == "login"]
    assert login_metadata
    if tensorboard:
        resource = cloud.one("gcp:vertex/aiTensorboard:AiTensorboard")
        expected = f"projects/my-project/locations/us-central1/tensorboards/{resource.name}"
        assert all(m[key] == expected for m in login_metadata)
    else:
        assert all(key not in m for m in login_metadata)
    # The compute nodes and the controller never get it: recipes write logs, the login uploads.
    others = [vm.inputs["metadata"] for vm in logins if vm.inputs["metadata"] not in login_metadata]
    assert all(key not in m for m in others + [t["metadata"] for t in templates(cloud).values()])
    vertex = {g.parent for g in cloud.of_type("gcp:projects/iAMMember:IAMMember")
              if g.inputs["role"] == "roles/aiplatform.user"}
    assert vertex == ({f"{name}-login-identity"} if tensorboard else set())


def test_login_and_compute_vms_load_the_metadata_guard_before_logins(cloud):
    build(cloud, reference_blueprint("cpu-small"))
    instances = {vm.inputs["name"]: vm.inputs["metadata"]
                 for vm in cloud.of_type("gcp:compute/instance:Instance")}
    guarded = [instances["cpu-small-login-0"], *(t["metadata"] for t in templates(cloud).values())]
    for metadata in guarded:
        assert metadata["user-data"] == metadata_guard.cloud_config()
    # Users never log in to the controller: it keeps its credentials for its own services.
    assert "user-data" not in instances["cpu-small-controller"]


def test_a_cluster_whose_users_get_node_credentials_has_no_guard(cloud):
    data = reference_blueprint("cpu-small").model_dump(by_alias=True)
    data["security"] = {"users_get_node_credentials": True}
    build(cloud, Blueprint.model_validate_json(json.dumps(data)))
    assert not [vm for vm in cloud.of_type("gcp:compute/instance:Instance")
                if "user-data" in vm.inputs["metadata"]]
    assert not [t for t in cloud.of_type(TEMPLATE) if "user-data" in t.inputs["metadata"]]


@pytest.mark.parametrize("name", REFERENCES)
def test_one_node_image_per_image_the_vms_boot(cloud, name):
    bp = reference_blueprint(name)
    build(cloud, bp)
    components = cloud.of_type("clusterprint:index:NodeImage")
    built = cloud.of_type(BUILT_IMAGE)
    assert sorted(r.inputs["name"] for r in built) == [i.name for i in needed_images(bp)]
    assert {r.parent for r in built} == {c.name for c in components}
    assert {c.parent for c in components} == {bp.name}


def booted(resource) -> str:
    """The image a VM or template boots."""
    if resource.typ == INSTANCE:
        return resource.inputs["bootDisk"]["initializeParams"]["image"]
    (boot,) = [d for d in resource.inputs["disks"] if d.get("boot")]
    return boot["sourceImage"]


@pytest.mark.parametrize("name", REFERENCES)
def test_every_vm_and_template_waits_for_the_image_it_boots(cloud, name):
    build(cloud, reference_blueprint(name))
    builds = {r.inputs["path"]: r.name for r in cloud.of_type(BUILT_IMAGE)}
    booting = cloud.of_type(INSTANCE) + cloud.of_type(TEMPLATE)
    assert booting
    for resource in booting:
        waits_for = [d for d in resource.dependencies if d in builds.values()]
        assert waits_for == [builds[booted(resource)]], resource.name


def test_nothing_but_what_boots_waits_for_an_image_build(cloud):
    build(cloud, reference_blueprint("a3mega"))
    builds = {r.name for r in cloud.of_type(BUILT_IMAGE)}
    waiting = {r.typ for r in cloud.resources if builds & set(r.dependencies)}
    assert waiting == {INSTANCE, TEMPLATE}


def test_a_nodeset_booting_its_own_image_waits_for_no_build(cloud):
    data = reference_blueprint("a4").model_dump(by_alias=True)
    for ns in data["slurm"]["nodesets"]:
        ns["image"] = {"project": "my-images", "name": "a4-slurm-20261201"}
    bp = Blueprint.model_validate_json(json.dumps(data))
    build(cloud, bp)
    assert [r.inputs["kind"] for r in cloud.of_type(BUILT_IMAGE)] == ["cpu"]
    builds = {r.name for r in cloud.of_type(BUILT_IMAGE)}
    for template in cloud.of_type(TEMPLATE):
        assert booted(template) == "projects/my-images/global/images/a4-slurm-20261201"
        assert not builds & set(template.dependencies)


@pytest.mark.parametrize(("nat", "external_ip"), [(True, False), (False, True)])
def test_images_build_in_the_clusters_subnetwork_once_its_nat_exists(cloud, nat, external_ip):
    data = reference_blueprint("cpu-small").model_dump(by_alias=True)
    data["network"]["nat"] = nat
    build(cloud, Blueprint.model_validate_json(json.dumps(data)))
    (image,) = cloud.of_type(BUILT_IMAGE)
    assert image.inputs["subnetwork"] == (f"projects/{data['project']}/regions/{data['region']}"
                                          "/subnetworks/cpu-small-network-subnet")
    assert image.inputs["externalIp"] is external_ip
    assert ("cpu-small-network-nat" in image.dependencies) is nat
    assert "cpu-small-network-subnet" in image.dependencies
