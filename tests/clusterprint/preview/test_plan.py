"""clusterprint plan: the resources `pulumi up` would create, worked out under mocks."""

from __future__ import annotations

import json

import pytest

from clusterprint.cli.main import main
from clusterprint.preview.plan import SECRET, UNKNOWN, Plan, plan_program
from clusterprint.preview.replacements import RULES
from tests.support.paths import ROOT
from tests.support.plans import plan_of_file, reference_plan

REFERENCE = sorted(p.name for p in (ROOT / "blueprints").glob("*.yaml"))

MUNGE_KEY = "hunter2-do-not-print"


def small_program() -> None:
    """A component with two children, a secret and a template reading a cloud-only value."""
    import pulumi
    import pulumi_gcp as gcp

    class Net(pulumi.ComponentResource):
        def __init__(self, name: str) -> None:
            super().__init__("clusterprint:index:Net", name, None, None)
            child = pulumi.ResourceOptions(parent=self)
            self.network = gcp.compute.Network(f"{name}-vpc", auto_create_subnetworks=False,
                                               mtu=8244, opts=child)
            self.subnet = gcp.compute.Subnetwork(f"{name}-subnet", network=self.network.id,
                                                 ip_cidr_range="10.0.0.0/20",
                                                 region="us-central1", opts=child)
            self.register_outputs({})

    net = Net("c")
    secret = gcp.secretmanager.Secret("c-munge", secret_id="c-munge",
                                      replication={"auto": {}},
                                      opts=pulumi.ResourceOptions(protect=True))
    pulumi.export("secret", secret.id)
    pulumi.export("token", pulumi.Output.secret("not-for-output"))
    gcp.secretmanager.SecretVersion("c-munge-v1", secret=secret.id,
                                    secret_data=pulumi.Output.secret(MUNGE_KEY))
    gcp.compute.InstanceTemplate("c-tpl", machine_type="n2-standard-4",
                                 disks=[{"boot": True, "source_image": "debian-12"}],
                                 network_interfaces=[{"subnetwork": net.subnet.self_link}],
                                 metadata={"blueprint": pulumi.Config("clusterprint").require(
                                     "blueprint")})


def planned(config: dict | None = None) -> Plan:
    return plan_program(small_program, config or {"clusterprint:blueprint": "c.yaml"})


def test_same_program_same_bytes_twice():
    assert planned().json_text() == planned().json_text()


def test_json_shape_names_parents_inputs_and_dependencies():
    data = json.loads(planned().json_text())
    by_name = {r["name"]: r for r in data["resources"]}
    for res in data["resources"]:
        assert set(res) == {"type", "name", "parent", "inputs", "dependencies", "protect"}
    assert by_name["c"]["type"] == "clusterprint:index:Net" and by_name["c"]["parent"] is None
    subnet = by_name["c-subnet"]
    assert subnet["type"] == "gcp:compute/subnetwork:Subnetwork"
    assert subnet["parent"] == "c"
    assert subnet["inputs"] == {"ipCidrRange": "10.0.0.0/20", "network": "[id of c-vpc]",
                                "region": "us-central1"}
    assert subnet["dependencies"] == ["c-vpc"]
    assert by_name["c-vpc"]["inputs"]["mtu"] == 8244


def test_values_only_the_cloud_knows_print_as_unknown():
    tpl = next(r for r in planned().resources if r.name == "c-tpl")
    assert tpl.inputs["networkInterfaces"] == [{"subnetwork": UNKNOWN}]
    assert tpl.inputs["metadata"] == {"blueprint": "c.yaml"}


def test_a_secret_prints_as_secret_never_its_value():
    plan = planned()
    version = next(r for r in plan.resources if r.name == "c-munge-v1")
    assert version.inputs["secretData"] == SECRET
    assert MUNGE_KEY not in plan.json_text() and MUNGE_KEY not in plan.tree_text()


def test_runs_do_not_leak_config_or_resources_into_each_other():
    first = planned({"clusterprint:blueprint": "one.yaml"})
    second = planned({"clusterprint:blueprint": "two.yaml"})
    assert len(first.resources) == len(second.resources)
    tpl = next(r for r in second.resources if r.name == "c-tpl")
    assert tpl.inputs["metadata"] == {"blueprint": "two.yaml"}


def test_the_tree_shows_the_component_hierarchy():
    text = planned().tree_text()
    assert text.startswith("├─ c  clusterprint:index:Net\n")
    assert "\n│  ├─ c-subnet  gcp:compute/subnetwork:Subnetwork  (region=us-central1" in text
    assert "\n│  └─ c-vpc  gcp:compute/network:Network  (mtu=8244)\n" in text
    assert "5 resources to create" in text


def test_a_saved_plan_reads_back_equal():
    plan = planned()
    assert Plan.from_json(json.loads(plan.json_text())) == plan


def test_the_protect_option_and_the_stack_outputs_are_recorded():
    """What the policies check beyond inputs: protected data and what `stack output` shows."""
    plan = planned()
    assert {r.name for r in plan.resources if r.protect} == {"c-munge"}
    assert plan.outputs == {"secret": "[id of c-munge]", "token": SECRET}
    assert "not-for-output" not in plan.json_text()


def test_a_plan_saved_before_protect_and_outputs_reads_as_unprotected():
    """diff reads plans saved by an older clusterprint, which wrote neither key."""
    data = json.loads(planned().json_text())
    del data["outputs"]
    for res in data["resources"]:
        del res["protect"]
    plan = Plan.from_json(data)
    assert plan.outputs == {} and not any(r.protect for r in plan.resources)
    assert [r.key for r in plan.resources] == [r.key for r in planned().resources]


def test_an_invalid_blueprint_prints_the_validator_lines_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: clusterprint/v1\nkind: TrainingCluster\nname: Bad_Name\n")
    assert main(["plan", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{bad}:3:7: error: name:" in captured.err


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_an_unreadable_file_exits_2(tmp_path, capsys, flags):
    assert main(["plan", str(tmp_path / "absent.yaml"), *flags]) == 2
    assert "no such file" in capsys.readouterr().err


def plan_cli(capsys, path: str, *flags: str) -> str:
    assert main(["plan", path, *flags]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("blueprint", REFERENCE)
def test_every_reference_blueprint_plans_resources_the_diff_table_knows(capsys, blueprint):
    data = json.loads(plan_cli(capsys, str(ROOT / "blueprints" / blueprint), "--json"))
    resources = data["resources"]
    names = [r["name"] for r in resources]
    assert len(names) == len(set(names)), "logical names must be unique for parent references"
    assert resources[0]["type"] == "clusterprint:index:TrainingCluster"
    assert all(r["parent"] in names for r in resources[1:])
    assert all(dep in names for r in resources for dep in r["dependencies"])
    unknown_types = {r["type"] for r in resources if r["type"].startswith("gcp:")} - set(RULES)
    assert not unknown_types, "add these types to clusterprint/preview/replacements.py"


def test_a_reference_blueprint_plans_to_the_same_bytes_twice(capsys):
    path = str(ROOT / "blueprints" / "a3mega.yaml")
    assert plan_cli(capsys, path, "--json") == plan_cli(capsys, path, "--json")


def test_the_default_output_is_a_tree_with_key_inputs(capsys):
    text = plan_cli(capsys, str(ROOT / "blueprints" / "a3mega.yaml"))
    assert text.startswith("└─ a3mega  clusterprint:index:TrainingCluster\n")
    assert ("a3mega-nodeset-a3mega-group  gcp:compute/instanceGroupManager:InstanceGroupManager"
            "  (targetSize=16, zone=us-central1-a)") in text
    assert "perUnitStorageThroughput=500" in text


def planned_with(tmp_path, capsys, count: int) -> list[dict]:
    """The a3mega reference's planned resources with its nodeset at ``count`` nodes."""
    text = (ROOT / "blueprints" / "a3mega.yaml").read_text()
    path = tmp_path / f"a3mega-{count}.yaml"
    path.write_text(text.replace("count: 16\n      max_count: 16",
                                 f"count: {count}\n      max_count: {count}"))
    return json.loads(plan_cli(capsys, str(path), "--json"))["resources"]


def test_node_count_does_not_change_the_resource_count_up_to_one_group(tmp_path, capsys):
    small = json.loads(plan_cli(capsys, str(ROOT / "blueprints" / "a3mega.yaml"), "--json"))
    big = planned_with(tmp_path, capsys, 2000)
    assert len(big) == len(small["resources"])
    group = next(r for r in big if r["name"] == "a3mega-nodeset-a3mega-group")
    assert group["inputs"]["targetSize"] == 2000


def test_a_nodeset_past_one_group_plans_one_more_group_per_2000_nodes(tmp_path, capsys):
    small = planned_with(tmp_path, capsys, 16)
    big = planned_with(tmp_path, capsys, 4096)
    added = {r["name"] for r in big} - {r["name"] for r in small}
    assert sorted(added) == ["a3mega-nodeset-a3mega-group-2", "a3mega-nodeset-a3mega-group-3"]
    sizes = {r["name"].rsplit("-nodeset-", 1)[1]: r["inputs"]["targetSize"] for r in big
             if r["type"].endswith("InstanceGroupManager")}
    assert sizes == {"a3mega-group": 2000, "a3mega-group-2": 2000, "a3mega-group-3": 96}


@pytest.mark.parametrize("name", REFERENCE)
def test_vms_and_templates_boot_the_rendered_scripts(name):
    """What `clusterprint render` writes is exactly what the plan puts in each VM's metadata."""
    from clusterprint.blueprint.validate import load_checked
    from clusterprint.render import node_scripts

    blueprint = load_checked(str(ROOT / "blueprints" / name))
    scripts = node_scripts(blueprint)
    booted = {r.name: r.inputs["metadata"]["startup-script"]
              for r in plan_of_file(ROOT / "blueprints" / name).resources
              if r.type in ("gcp:compute/instance:Instance",
                            "gcp:compute/instanceTemplate:InstanceTemplate")}
    cluster = blueprint.name
    assert booted.pop(f"{cluster}-controller-vm") == scripts.controller
    for nodeset, script in scripts.compute.items():
        assert booted.pop(f"{cluster}-nodeset-{nodeset}-template") == script
    assert booted and all(text == scripts.login for text in booted.values())


def test_the_plan_shows_the_tensorboard_reaching_the_login_node_only():
    """With observability.tensorboard the login VM's metadata names the TensorBoard the plan
    creates; no other VM or template carries it."""
    from clusterprint.preview.plan import mock_id

    resources = reference_plan("a3mega").resources
    tensorboard = next(r for r in resources if r.type == "gcp:vertex/aiTensorboard:AiTensorboard")
    carried = {r.name: r.inputs["metadata"].get("clusterprint-tensorboard") for r in resources
               if r.type in ("gcp:compute/instance:Instance",
                             "gcp:compute/instanceTemplate:InstanceTemplate")}
    assert carried.pop("a3mega-login-0") == mock_id(tensorboard.name)
    assert carried and set(carried.values()) == {None}
