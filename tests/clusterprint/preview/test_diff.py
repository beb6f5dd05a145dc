"""clusterprint diff: what a reviewer is told, and the exit status CI acts on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.cli.main import main
from clusterprint.preview.diff import diff_plans
from clusterprint.preview.plan import Plan, PlannedResource
from clusterprint.preview.replacements import RULES, forces_replacement
from tests.support.paths import BLUEPRINTS, ROOT
from tests.support.plans import plan_of_file

LUSTRE = "gcp:lustre/instance:Instance"
FILESTORE = "gcp:filestore/instance:Instance"
BUCKET = "gcp:storage/bucket:Bucket"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
MIG = "gcp:compute/instanceGroupManager:InstanceGroupManager"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
INSTANCE = "gcp:compute/instance:Instance"
CLUSTER = "gcp:hypercomputecluster/cluster:Cluster"
A3MEGA = BLUEPRINTS / "a3mega.yaml"


def saved_plan() -> dict:
    """A small plan as `plan --json` writes it: storage, a nodeset template and its group."""
    return {"resources": [
        {"type": "clusterprint:index:TrainingCluster", "name": "c", "parent": None,
         "inputs": {}, "dependencies": []},
        {"type": LUSTRE, "name": "c-scratch", "parent": "c", "dependencies": [],
         "inputs": {"capacityGib": "18000", "perUnitStorageThroughput": "500",
                    "filesystem": "scratch", "location": "us-central1-a"}},
        {"type": FILESTORE, "name": "c-home", "parent": "c", "dependencies": [],
         "inputs": {"tier": "ZONAL", "location": "us-central1-a",
                    "fileShares": {"name": "home", "capacityGb": 2560}}},
        {"type": BUCKET, "name": "c-ckpts", "parent": "c", "dependencies": [],
         "inputs": {"name": "my-ckpts", "location": "US-CENTRAL1"}},
        {"type": TEMPLATE, "name": "c-gpu-template", "parent": "c", "dependencies": [],
         "inputs": {"machineType": "a3-megagpu-8g"}},
        {"type": MIG, "name": "c-gpu-group", "parent": "c",
         "dependencies": ["c-gpu-template"],
         "inputs": {"targetSize": 16, "zone": "us-central1-a", "baseInstanceName": "c-gpu",
                    "versions": [{"instanceTemplate": "[unknown]"}]}},
    ]}


def edited(change) -> dict:
    data = saved_plan()
    change({r["name"]: r for r in data["resources"]}, data)
    return data


def write(tmp_path: Path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def run_diff(tmp_path: Path, capsys, new: dict, *flags: str) -> tuple[int, str]:
    old_file = write(tmp_path, "old.json", saved_plan())
    new_file = write(tmp_path, "new.json", new)
    code = main(["diff", old_file, new_file, *flags])
    return code, capsys.readouterr().out


def set_input(name: str, key: str, value):
    return lambda by_name, _: by_name[name]["inputs"].__setitem__(key, value)


def test_changing_the_lustre_tier_is_a_replacement_and_exits_3(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(
        set_input("c-scratch", "perUnitStorageThroughput", "1000")), "--json")
    assert code == 3
    report = json.loads(out)
    assert report["dataLoss"] is True
    change = next(c for c in report["changes"] if c["name"] == "c-scratch")
    assert change["action"] == "replace"
    assert change["inputs"] == [{"path": "perUnitStorageThroughput", "old": "500",
                                 "new": "1000", "forcesReplacement": True}]


def test_changing_the_filestore_tier_exits_3(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(set_input("c-home", "tier", "REGIONAL")))
    assert code == 3
    assert "DATA LOSS" in out
    assert "replace  c-home" in out


def test_allow_data_loss_exits_0_but_still_flags_it(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(set_input("c-home", "tier", "REGIONAL")),
                         "--allow-data-loss")
    assert code == 0
    assert "DATA LOSS" in out and "allowed by --allow-data-loss" in out


def test_growing_lustre_capacity_is_an_update(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(set_input("c-scratch", "capacityGib", "36000")),
                         "--json")
    assert code == 0
    (change,) = json.loads(out)["changes"]
    assert (change["action"], change["name"]) == ("update", "c-scratch")


def test_resizing_a_nodeset_updates_its_instance_group(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(set_input("c-gpu-group", "targetSize", 32)))
    assert code == 0
    assert "update   c-gpu-group" in out
    assert "targetSize: 16 -> 32" in out


def test_identical_plans_show_no_change(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, saved_plan(), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["changes"] == []
    assert report["summary"]["unchanged"] == len(saved_plan()["resources"])


def test_removing_a_created_bucket_is_a_delete_and_exits_3(tmp_path, capsys):
    def drop_bucket(_, data):
        data["resources"] = [r for r in data["resources"] if r["type"] != BUCKET]

    code, out = run_diff(tmp_path, capsys, edited(drop_bucket), "--format", "markdown")
    assert code == 3
    assert "[!CAUTION]" in out and "**delete** `c-ckpts`" in out


def test_a_changed_template_is_replaced_and_its_group_only_updated():
    old = Plan.from_json(saved_plan())
    new = Plan.from_json(edited(set_input("c-gpu-template", "machineType", "a3-ultragpu-8g")))
    changes = {c.name: c for c in diff_plans(old, new).changes}
    assert changes["c-gpu-template"].action == "replace"
    assert changes["c-gpu-group"].action == "update"
    assert changes["c-gpu-group"].replaced_dependencies == ("c-gpu-template",)
    assert not diff_plans(old, new).data_loss


def test_a_replaced_dependency_referenced_by_id_in_a_forcing_input_cascades():
    net = PlannedResource("gcp:compute/network:Network", "n", None, {"networkProfile": "a"})
    sub = PlannedResource(SUBNET, "s", None, {"network": "[id of n]"}, ("n",))
    new_net = PlannedResource(net.type, "n", None, {"networkProfile": "b"})
    changes = {c.name: c.action for c in diff_plans(Plan([net, sub]), Plan([new_net, sub])).changes}
    assert changes == {"n": "replace", "s": "replace"}


@pytest.mark.parametrize(("old", "new", "replaced"), [
    ("10.0.0.0/20", "10.0.0.0/19", False),   # expansion: in place
    ("10.0.16.0/20", "10.0.0.0/19", False),  # expansion that moves the start: in place too
    ("10.0.0.0/20", "10.0.0.0/21", True),    # shrinking
    ("10.0.0.0/20", "10.1.0.0/20", True),    # moving
])
def test_a_subnet_range_only_grows_in_place(old, new, replaced):
    assert forces_replacement(SUBNET, "ipCidrRange", old, new) is replaced


@pytest.mark.parametrize(("type_", "path", "replaced"), [
    (FILESTORE, "fileShares.capacityGb", False),
    (FILESTORE, "fileShares.name", True),
    (FILESTORE, "networks.connectMode", True),
    (FILESTORE, "deletionProtectionEnabled", False),
    (LUSTRE, "capacityGib", False),
    (LUSTRE, "maintenancePolicy.weeklyMaintenanceWindows.dayOfWeek", False),
    (LUSTRE, "kmsKey", True),
    (BUCKET, "location", True),
    (BUCKET, "hierarchicalNamespace.enabled", True),
    (BUCKET, "publicAccessPrevention", False),
    (INSTANCE, "bootDisk.initializeParams.size", True),
    (INSTANCE, "bootDisk.autoDelete", False),
    (INSTANCE, "networkInterfaces.subnetwork", False),
    (INSTANCE, "machineType", False),
    (INSTANCE, "scheduling.provisioningModel", True),
    ("gcp:compute/resourcePolicy:ResourcePolicy", "groupPlacementPolicy.collocation", False),
    ("gcp:compute/resourcePolicy:ResourcePolicy", "region", True),
    ("gcp:compute/resizeRequest:ResizeRequest", "resizeBy", True),
    ("gcp:compute/resizeRequest:ResizeRequest", "requestedRunDuration.seconds", True),
    ("gcp:compute/instanceGroupManager:InstanceGroupManager", "instanceLifecyclePolicy", False),
    ("gcp:compute/firewall:Firewall", "network", False),
    ("gcp:compute/firewall:Firewall", "direction", True),
    ("gcp:compute/routerNat:RouterNat", "type", True),
    (SUBNET, "ipv6AccessType", False),
    ("gcp:secretmanager/secret:Secret", "replication.auto", True),
    (CLUSTER, "orchestrator.slurm.loginNodes.zone", True),
    (CLUSTER, "storageResources.config.newLustre.perUnitStorageThroughput", True),
    (CLUSTER, "storageResources.config.newFilestore.fileShares.capacityGb", True),
    (CLUSTER, "computeResources.config.newOnDemandInstances.machineType", True),
    (CLUSTER, "networkResources.config.newNetwork.network", True),
    (CLUSTER, "orchestrator.slurm.nodeSets.computeInstance.bootDisk.sizeGb", True),
    (CLUSTER, "orchestrator.slurm.nodeSets.staticNodeCount", False),
    (CLUSTER, "orchestrator.slurm.loginNodes.count", False),
    (CLUSTER, "orchestrator.slurm.partitions.nodeSetIds", False),
    (CLUSTER, "labels", False),
])
def test_the_table_follows_the_provider_schema(type_, path, replaced):
    assert forces_replacement(type_, path) is replaced


@pytest.mark.parametrize(("old", "new", "replaced"), [
    (True, False, True),    # unlocking a locked retention policy: only a new bucket can
    (False, True, False),   # locking one is an update
])
def test_unlocking_a_bucket_retention_policy_replaces_the_bucket(old, new, replaced):
    assert forces_replacement(BUCKET, "retentionPolicy.isLocked", old, new) is replaced


def test_growing_the_filestore_share_is_an_update_and_exits_0(tmp_path, capsys):
    def grow(by_name, _):
        by_name["c-home"]["inputs"]["fileShares"]["capacityGb"] = 5120

    code, out = run_diff(tmp_path, capsys, edited(grow), "--json")
    assert code == 0
    (change,) = json.loads(out)["changes"]
    assert (change["action"], change["name"], change["dataLoss"]) == ("update", "c-home", False)


def test_moving_a_bucket_is_a_replacement_and_exits_3(tmp_path, capsys):
    code, out = run_diff(tmp_path, capsys, edited(set_input("c-ckpts", "location", "EU")),
                         "--json")
    assert code == 3
    bucket = by_name(json.loads(out))["c-ckpts"]
    assert (bucket["action"], bucket["dataLoss"]) == ("replace", True)


def test_a_lustre_maintenance_window_is_an_update(tmp_path, capsys):
    window = {"weeklyMaintenanceWindows": [{"dayOfWeek": "SUNDAY",
                                            "startTime": {"hours": 3}}]}
    code, out = run_diff(tmp_path, capsys,
                         edited(set_input("c-scratch", "maintenancePolicy", window)), "--json")
    assert code == 0
    (change,) = json.loads(out)["changes"]
    assert (change["action"], change["name"]) == ("update", "c-scratch")


def test_every_table_entry_names_its_source():
    for type_, rule in RULES.items():
        assert rule.source.startswith(("hashicorp/terraform-provider-google ",
                                       "GoogleCloudPlatform/magic-modules ",
                                       "clusterprint components/")), type_
        assert rule.replace_on, type_
    assert {t for t, r in RULES.items() if r.data_bearing} == {
        LUSTRE, FILESTORE, BUCKET, CLUSTER, "gcp:compute/disk:Disk"}


@pytest.mark.parametrize("content", [
    "{not json", '{"resources": 5}', '{"resources": [{"name": "x"}]}', "[1, 2]", "",
])
def test_garbage_input_exits_1_without_a_traceback(tmp_path, capsys, content):
    good = write(tmp_path, "good.json", saved_plan())
    bad = write(tmp_path, "bad.json", content)
    assert main(["diff", good, bad]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.err.strip()
    assert captured.out == ""


TERRAFORM_STATE = {"version": 4, "terraform_version": "1.9.0", "serial": 3, "lineage": "x",
                   "outputs": {}, "resources": []}


@pytest.mark.parametrize(("content", "said"), [
    (TERRAFORM_STATE, 'unexpected top-level key "lineage" (it looks like a Terraform state)'),
    ({"resources": [{"mode": "managed", "type": "google_compute_network", "name": "vpc",
                     "provider": "x", "instances": []}]},
     'resources[0] has unexpected key "instances"'),
    ({"resources": []}, "it lists no resources; every plan holds at least its cluster"),
    ({"resources": [{**saved_plan()["resources"][0], "type": "google_compute_network"}]},
     'resources[0].type "google_compute_network" is not a Pulumi type token such as '
     "gcp:compute/network:Network"),
    ({"resources": [{k: v for k, v in saved_plan()["resources"][0].items() if k != "inputs"}]},
     'resources[0] has missing key "inputs"'),
    ({"resources": [{**saved_plan()["resources"][0], "protect": "yes"}]},
     "resources[0].protect must be true or false"),
    ({**saved_plan(), "outputs": ["ssh"]}, '"outputs" must be an object'),
], ids=["terraform-state", "terraform-resources", "no-resources", "not-a-type-token",
        "missing-key", "protect-not-bool", "outputs-not-object"])
def test_json_that_is_not_a_clusterprint_plan_exits_1(tmp_path, capsys, content, said):
    good = write(tmp_path, "good.json", saved_plan())
    bad = write(tmp_path, "bad.json", content)
    assert main(["diff", bad, good]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"{bad}: not a clusterprint plan: {said}\n")


def test_json_that_is_neither_plan_nor_blueprint_says_so(tmp_path, capsys):
    good = write(tmp_path, "good.json", saved_plan())
    other = write(tmp_path, "package.json", {"name": "web", "version": "1.0.0"})
    assert main(["diff", good, other]) == 1
    assert capsys.readouterr().err == (
        f'{other}: neither a clusterprint plan (`clusterprint plan --json` output, a '
        f'"resources" list) nor a blueprint (apiVersion: clusterprint/v1)\n')


def test_a_missing_file_exits_1(tmp_path, capsys):
    good = write(tmp_path, "good.json", saved_plan())
    assert main(["diff", good, str(tmp_path / "absent.json")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_every_table_type_is_a_real_pulumi_gcp_token():
    import pulumi_gcp

    package = Path(pulumi_gcp.__file__).parent
    for type_ in (t for t in RULES if t.startswith("gcp:")):
        module = type_.split(":")[1].split("/")[0]
        sources = "".join(p.read_text() for p in (package / module).glob("*.py"))
        assert f"'{type_}'" in sources, type_


@pytest.fixture(scope="module")
def a3mega_plan(tmp_path_factory) -> str:
    """The reference blueprint's plan, saved once as `plan --json` writes it."""
    path = tmp_path_factory.mktemp("plans") / "a3mega.json"
    path.write_text(plan_of_file(A3MEGA).json_text())
    return str(path)


def diff_blueprint(tmp_path, capsys, a3mega_plan, old: str, new: str, *flags: str):
    """Diff the saved reference plan against the reference blueprint with one edit."""
    text = A3MEGA.read_text()
    edited_text = re.sub(old, new, text)
    assert edited_text != text, f"{old!r} is not in the reference blueprint"
    changed = write(tmp_path, "changed.yaml", edited_text)
    code = main(["diff", a3mega_plan, changed, "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict:
    return {c["name"]: c for c in report["changes"]}


def test_blueprint_lustre_tier_change_replaces_the_instance_and_exits_3(
        tmp_path, capsys, a3mega_plan):
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan,
                                  r"performance_tier: 500", "performance_tier: 1000")
    assert code == 3
    lustre = by_name(report)["a3mega-storage-scratch"]
    assert (lustre["action"], lustre["dataLoss"]) == ("replace", True)
    assert {"path": "perUnitStorageThroughput", "old": "500", "new": "1000",
            "forcesReplacement": True} in lustre["inputs"]


def test_blueprint_filestore_tier_change_exits_3_unless_allowed(tmp_path, capsys, a3mega_plan):
    edit = (r"tier: ZONAL", "tier: REGIONAL")
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan, *edit)
    assert code == 3
    assert by_name(report)["a3mega-storage-home"]["action"] == "replace"
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan, *edit, "--allow-data-loss")
    assert code == 0 and report["dataLoss"] is True


def test_blueprint_filestore_growth_updates_home_in_place(tmp_path, capsys, a3mega_plan):
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan,
                                  r"capacity_gib: 2560", "capacity_gib: 5120")
    assert code == 0 and report["dataLoss"] is False
    home = by_name(report)["a3mega-storage-home"]
    assert home["action"] == "update"
    assert {"path": "fileShares.capacityGb", "old": 2560, "new": 5120,
            "forcesReplacement": False} in home["inputs"]


def test_blueprint_nodeset_resize_updates_the_instance_group(tmp_path, capsys, a3mega_plan):
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan,
                                  r"count: 16\n      max_count: 16",
                                  "count: 32\n      max_count: 32")
    assert code == 0 and report["dataLoss"] is False
    group = by_name(report)["a3mega-nodeset-a3mega-group"]
    assert group["action"] == "update"
    assert {"path": "targetSize", "old": 16, "new": 32,
            "forcesReplacement": False} in group["inputs"]


def test_blueprint_removing_a_created_bucket_deletes_it_and_exits_3(
        tmp_path, capsys, a3mega_plan):
    code, report = diff_blueprint(tmp_path, capsys, a3mega_plan,
                                  r"  buckets:\n(    .*\n|      .*\n)+", "  buckets: []\n")
    assert code == 3
    bucket = next(c for c in report["changes"] if c["type"] == BUCKET)
    assert (bucket["action"], bucket["dataLoss"]) == ("delete", True)


def test_a_blueprint_against_itself_shows_no_change(capsys):
    assert main(["diff", str(A3MEGA), str(A3MEGA)]) == 0
    out = capsys.readouterr().out
    assert "No changes." in out
    assert "`pulumi preview --diff` on the real stack is the authority" in out


def test_an_invalid_blueprint_exits_1_with_the_validator_lines(tmp_path, capsys, a3mega_plan):
    bad = write(tmp_path, "bad.yaml", A3MEGA.read_text().replace("capacity_gib: 18000",
                                                                "capacity_gib: 20000"))
    assert main(["diff", a3mega_plan, bad]) == 1
    err = capsys.readouterr().err
    assert "error: storage.lustre[0].capacity_gib" in err and "Traceback" not in err
    assert main(["validate", bad]) == 1
    validated = capsys.readouterr()
    assert err == validated.out + validated.err  # the same lines, and the count line last
    assert err.splitlines()[-1] == "1 error"


def storage_edit(name, edits, storages, nodesets, elastic=()):
    """Reference blueprint edits (old, new) that replace ``storages``; what must change with
    them: each nodeset's template (its metadata holds the addresses) replaced, its group moved
    to the new template, the controller and login VMs updated to the new addresses."""
    replaced = sorted(f"{name}-storage-{s}" for s in storages)
    expected = {s: ("replace", []) for s in replaced}
    expected |= {f"{name}-controller-vm": ("update", replaced),
                 f"{name}-login-0": ("update", replaced)}
    for nodeset in nodesets:
        template = f"{name}-nodeset-{nodeset}-template"
        expected[template] = ("replace", replaced)
        expected[f"{name}-nodeset-{nodeset}-group"] = ("update", [template])
        if nodeset in elastic:
            expected[f"{name}-nodeset-{nodeset}-elastic"] = ("update", [template])
    return pytest.param(name, edits, expected, id=f"{name}-{'-'.join(storages)}")


FILESTORE_ZONAL = ("tier: ZONAL", "tier: REGIONAL")
LUSTRE_500 = ("performance_tier: 500", "performance_tier: 1000")


@pytest.mark.parametrize(("name", "edits", "expected"), [
    storage_edit("cpu-small", [("tier: BASIC_HDD", "tier: ZONAL")], ["home"], ["cpu"],
                 elastic=["cpu"]),
    storage_edit("a3mega", [FILESTORE_ZONAL], ["home"], ["a3mega"]),
    storage_edit("a3mega", [LUSTRE_500], ["scratch"], ["a3mega"]),
    storage_edit("a3mega", [FILESTORE_ZONAL, LUSTRE_500], ["home", "scratch"], ["a3mega"]),
    storage_edit("a4", [("performance_tier: 250", "performance_tier: 500")], ["shared"],
                 ["a4", "a4spot"], elastic=["a4spot"]),
])
def test_what_mounts_a_replaced_file_system_is_replaced_or_updated_with_it(
        tmp_path, capsys, name, edits, expected):
    path = BLUEPRINTS / f"{name}.yaml"
    saved = write(tmp_path, "saved.json", plan_of_file(path).json_text())
    text = path.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    code = main(["diff", saved, write(tmp_path, "changed.yaml", text), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3
    assert {c["name"]: (c["action"], c["replacedDependencies"])
            for c in report["changes"]} == expected
    assert sorted(c["name"] for c in report["changes"] if c["dataLoss"]) == [
        n for n, (action, _) in expected.items() if action == "replace" and "-storage-" in n]
    assert report["summary"]["replace"] == sum(a == "replace" for a, _ in expected.values())


def test_a_replaced_file_system_cascades_through_its_template_to_the_group():
    def mount_home(by_name, _):
        by_name["c-gpu-template"]["dependencies"] = ["c-home"]

    def retier(by_name, data):
        mount_home(by_name, data)
        by_name["c-home"]["inputs"]["tier"] = "REGIONAL"

    changes = diff_plans(Plan.from_json(edited(mount_home)),
                         Plan.from_json(edited(retier))).changes
    assert [(c.action, c.name, c.replaced_dependencies) for c in changes] == [
        ("replace", "c-home", ()),
        ("replace", "c-gpu-template", ("c-home",)),
        ("update", "c-gpu-group", ("c-gpu-template",))]


DISK = "gcp:compute/disk:Disk"


@pytest.mark.parametrize(("old", "new", "action"), [
    ({"size": 50, "type": "pd-balanced"}, {"size": 100, "type": "pd-balanced"}, "update"),
    ({"size": 50, "type": "pd-balanced"}, {"size": 40, "type": "pd-balanced"}, "replace"),
    ({"size": 50, "type": "pd-balanced"}, {"size": 50, "type": "pd-ssd"}, "replace"),
])
def test_the_controller_state_disk_grows_in_place_and_losing_it_is_data_loss(old, new, action):
    """The disk holds slurmctld's queue and the accounting database: a replaced one is empty."""
    before = Plan([PlannedResource(DISK, "c-controller-state", None, old)])
    after = Plan([PlannedResource(DISK, "c-controller-state", None, new)])
    diff = diff_plans(before, after)
    assert [c.action for c in diff.changes] == [action]
    assert bool(diff.data_loss) is (action == "replace")
    assert diff_plans(before, Plan([])).data_loss


def test_json_and_another_format_together_are_a_usage_error(tmp_path, capsys):
    """With both, the last flag would win silently: a CI job asking for JSON got markdown."""
    plan = write(tmp_path, "plan.json", saved_plan())
    with pytest.raises(SystemExit) as refused:
        main(["diff", plan, plan, "--json", "--format", "markdown"])
    assert refused.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def nested(levels: int) -> dict:
    """An input value that nests ``levels`` objects deep."""
    value: dict | int = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def with_deep_input(levels: int) -> dict:
    """The saved plan with one input nested so that the whole plan is ``levels`` deep
    (the plan object, its resources list, a resource and its inputs are the first four)."""
    data = saved_plan()
    data["resources"][1]["inputs"]["labels"] = nested(levels - 4)
    return data


def diff_process(old: str, new: str) -> subprocess.CompletedProcess:
    """``clusterprint diff OLD NEW`` as a user runs it, with the interpreter's own stack."""
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", "diff", old, new],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("text", [
    json.dumps(with_deep_input(900)), json.dumps(with_deep_input(65)),
    '{"resources": ' + "[" * 100_000 + "]" * 100_000 + "}",
], ids=["900-levels", "65-levels", "100000-levels"])
def test_a_deeply_nested_saved_plan_is_one_line_and_exit_1(tmp_path, text):
    """Parsed (900) or not (100,000), a deep plan was a RecursionError traceback."""
    good = write(tmp_path, "good.json", saved_plan())
    deep = write(tmp_path, "deep.json", text)
    result = diff_process(good, deep)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", (
        f"{deep}: neither a clusterprint plan nor a blueprint: it nests deeper than 64 "
        "levels\n"))


def test_a_plan_at_the_depth_limit_is_read(tmp_path):
    """64 levels pass, and brackets inside strings (a startup script's) never count."""
    old = write(tmp_path, "old.json", saved_plan())
    data = with_deep_input(64)
    data["resources"][2]["inputs"]["description"] = '[{"\\' * 200
    new = write(tmp_path, "new.json", data)
    result = diff_process(old, new)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert "labels.a.a" in result.stdout and "description" in result.stdout


HOSTILE_NAME = "c-gpu\n\x1b[2J|`x`\x7f\u202e"
ESCAPED_NAME = "c-gpu\\n\\x1b[2J|`x`\\x7f\\u202e"


@pytest.mark.parametrize("form", ["text", "markdown"])
def test_control_characters_in_a_saved_plan_print_escaped(tmp_path, form):
    """A name, an input key and a value from a saved plan never reach the terminal raw."""
    def hostile(by_name, _):
        by_name["c-gpu-group"]["name"] = HOSTILE_NAME
        by_name["c-scratch"]["inputs"]["label\tkey"] = "value\x9b31m"

    old = write(tmp_path, "old.json", saved_plan())
    new = write(tmp_path, "new.json", edited(hostile))
    result = subprocess.run([sys.executable, "-m", "clusterprint.cli", "diff", "--format", form,
                             old, new], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not any(c in result.stdout for c in "\x1b\x7f\x9b\u202e\t\r")
    shown = ESCAPED_NAME.replace("|", "\\|") if form == "markdown" else ESCAPED_NAME
    assert shown in result.stdout
    assert "label\\tkey" in result.stdout and "value\\x9b31m" in result.stdout
    if form == "markdown":  # each table row is one line with its five cells
        rows = [line for line in result.stdout.splitlines() if line.startswith("| + |")]
        assert rows and all(len(re.split(r"(?<!\\)\|", row)) == 7 for row in rows)


def test_the_unchanged_count_leaves_out_deleted_changed_and_created_resources(tmp_path,
                                                                                capsys):
    """Six resources before, seven after: the bucket deleted, the group resized, two
    networks created; the other four are unchanged (a deleted one is no longer there to
    count, and counting from the old plan would say three)."""
    def change(by_name, data):
        data["resources"].remove(by_name["c-ckpts"])
        by_name["c-gpu-group"]["inputs"]["targetSize"] = 32
        data["resources"] += [{"type": "gcp:compute/network:Network", "name": name,
                               "parent": "c", "inputs": {}, "dependencies": []}
                              for name in ("c-net", "c-net-2")]

    code, out = run_diff(tmp_path, capsys, edited(change), "--json", "--allow-data-loss")
    assert code == 0
    assert json.loads(out)["summary"] == {"create": 2, "update": 1, "replace": 0, "delete": 1,
                                          "unchanged": 4}
    code, out = run_diff(tmp_path, capsys, edited(change), "--allow-data-loss")
    assert "2 to create, 1 to update, 0 to replace, 1 to delete, 4 unchanged" in out
    code, out = run_diff(tmp_path, capsys, edited(change), "--format", "markdown",
                         "--allow-data-loss")
    assert "| 2 | 1 | 0 | 1 | 4 |" in out
