"""clusterprint diff says which changes reach the running VMs by themselves and which wait
for a reboot or a recreated VM, and how to get them there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import check_text
from clusterprint.cli.main import main
from clusterprint.preview.diff import diff_plans
from clusterprint.preview.diff_report import markdown_report, text_report
from clusterprint.preview.plan import Plan, plan_blueprint
from clusterprint.render.images import node_image
from tests.support.paths import BLUEPRINTS
from tests.support.plans import plan_of_file

CPU_SMALL = BLUEPRINTS / "cpu-small.yaml"
EXTRA_PARTITION = "  partitions:\n    - name: extra\n      nodesets: [cpu]\n"


@pytest.fixture(scope="module")
def cpu_small_plan(tmp_path_factory) -> str:
    """The reference blueprint's plan, saved as `plan --json` writes it."""
    saved = tmp_path_factory.mktemp("plans") / "cpu-small.json"
    saved.write_text(plan_of_file(CPU_SMALL).json_text())
    return str(saved)


def rollouts(tmp_path, capsys, plan: str, *edits: tuple[str, str]) -> list[dict]:
    """``diff --json`` of the saved plan against cpu-small with ``edits``: its rollouts."""
    text = CPU_SMALL.read_text()
    for old, new in edits:
        edited = re.sub(old, new, text, count=1)
        assert edited != text, f"{old!r} is not in the blueprint"
        text = edited
    changed = tmp_path / "changed.yaml"
    changed.write_text(text)
    assert main(["diff", plan, str(changed), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["rollouts"]


def kinds(found: list[dict]) -> list[tuple[str, str, list[str]]]:
    """The rollouts but cpu-small's elastic nodes' group (whose VMs take a new template on
    their own: test_an_elastic_group_s_vms_take_a_new_template_as_they_are_created)."""
    return [(r["kind"], r["name"], r["inputs"]) for r in found
            if r["name"] != "cpu-small-nodeset-cpu-elastic"]


def test_a_new_partition_reaches_the_running_controller_and_login_node_by_itself(
        tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan, ("  partitions:\n", EXTRA_PARTITION))
    assert kinds(found) == [
        ("live", "cpu-small-controller-vm", ["metadata.clusterprint-slurm-config"]),
        ("live", "cpu-small-login-0", ["metadata.clusterprint-slurm-config"])]
    controller, login = (r["how"] for r in found)
    assert ("clusterprint-config-sync service installs the new Slurm files and reconfigures "
            "slurmctld") in controller and "configless" in controller
    assert "client commands read them from their next run" in login


def test_a_larger_max_count_is_live_in_slurm_but_the_remediation_config_waits_for_a_boot(
        tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan, ("max_count: 4", "max_count: 8"))
    assert kinds(found) == [
        ("next-boot", "cpu-small-controller-vm", ["metadata.startup-script"]),
        ("live", "cpu-small-controller-vm", ["metadata.clusterprint-slurm-config"]),
        ("live", "cpu-small-login-0", ["metadata.clusterprint-slurm-config"])]
    assert found[0]["how"] == (
        "read at boot only: reboot the VM (`gcloud compute instances reset "
        "cpu-small-controller --zone us-central1-c`) or rerun its startup script on it "
        "(`sudo google_metadata_script_runner startup`)")


def test_a_changed_nodeset_template_reaches_only_vms_recreated_from_it(
        tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan,
                     ("provisioning: spot", "provisioning: spot\n      boot_disk: {size_gb: 300}"))
    assert kinds(found) == [("recreate", "cpu-small-nodeset-cpu-group",
                             ["cpu-small-nodeset-cpu-template"])]
    (group,) = [r for r in found if r["name"] == "cpu-small-nodeset-cpu-group"]
    assert group["how"] == (
        "its running VMs keep the old instance template until they are recreated (the "
        "update policy is OPPORTUNISTIC): drain their Slurm nodes, then `gcloud compute "
        "instance-groups managed rolling-action replace $(gcloud compute instance-groups "
        "managed list --filter='name~^cpu-small-nodeset-cpu-group-' --format='value(name)') "
        "--zone us-central1-c`")


def test_an_elastic_group_s_vms_take_a_new_template_as_they_are_created(
        tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan,
                     ("provisioning: spot", "provisioning: spot\n      boot_disk: {size_gb: 300}"))
    (elastic,) = [r for r in found if r["name"] == "cpu-small-nodeset-cpu-elastic"]
    assert elastic["kind"] == "recreate" and "rolling-action" not in elastic["how"]
    assert "as power saving creates them" in elastic["how"]


def test_resizing_a_nodeset_needs_no_recreated_vm(tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan, ("count: 2", "count: 3"))
    # One elastic node fewer: gres.conf names them (config-sync swaps it in live), and power
    # saving's config is in the controller's startup script (read at its next boot).
    assert sorted((r["kind"], r["name"], tuple(r["inputs"])) for r in found) == [
        ("live", "cpu-small-controller-vm", ("metadata.clusterprint-nodeset-sizes",)),
        ("live", "cpu-small-controller-vm", ("metadata.clusterprint-slurm-config",)),
        ("next-boot", "cpu-small-controller-vm", ("metadata.startup-script",))]
    sizes = next(r for r in found if r["inputs"] == ["metadata.clusterprint-nodeset-sizes"])
    assert "drains the surplus" in sizes["how"] and "once their jobs end" in sizes["how"]


def test_both_reports_list_them_after_the_changes():
    old = plan_of_file(CPU_SMALL)
    new_text = CPU_SMALL.read_text().replace("max_count: 4", "max_count: 8")
    diff = diff_plans(old, plan_of(new_text))
    text = text_report(diff, "old", "new", False)
    assert text.index("~ update   cpu-small-controller-vm") < text.index(
        "How the changes reach the running VMs:")
    assert ("\n  next-boot cpu-small-controller-vm (metadata.startup-script): read at boot "
            "only: ") in text
    assert ("\n  live      cpu-small-login-0 (metadata.clusterprint-slurm-config): its "
            "clusterprint-config-sync") in text
    markdown = markdown_report(diff, "old", "new", False)
    assert ("\n- **live** `cpu-small-login-0` (`metadata.clusterprint-slurm-config`): its "
            "clusterprint-config-sync") in markdown
    assert "#### How the changes reach the running VMs" in markdown


def plan_of(text: str) -> Plan:
    """The plan of a blueprint text."""
    checked = check_text("changed.yaml", text)
    assert checked.ok and checked.blueprint is not None
    return plan_blueprint(checked.blueprint)


def test_metadata_read_at_each_use_is_live_and_the_rest_waits_for_a_boot():
    old = plan_of_file(CPU_SMALL)
    new = Plan.from_json(json.loads(old.json_text()))
    login = next(r for r in new.resources if r.name == "cpu-small-login-0")
    login.inputs["metadata"]["clusterprint-tensorboard"] = "projects/p/locations/r/tensorboards/7"
    login.inputs["metadata"]["clusterprint-home-source"] = "nfs:10.9.9.9:/home"
    found = diff_plans(old, new).rollouts
    assert [(r.kind, r.inputs) for r in found] == [
        ("next-boot", ("metadata.clusterprint-home-source",)),
        ("live", ("metadata.clusterprint-tensorboard",))]
    assert found[1].how.startswith("clusterprint-tensorboard-upload reads it")


def test_a_replaced_vm_comes_up_with_everything_and_needs_only_its_new_image_said():
    """A new boot image replaces the login VM: its new startup script and Slurm files come
    with the new VM, so only its new image is listed for it; the controller, only updated,
    gets its rollouts."""
    old = plan_of_file(CPU_SMALL)
    new = Plan.from_json(json.loads(old.json_text()))
    by_name = {r.name: r for r in new.resources}
    login, controller = by_name["cpu-small-login-0"], by_name["cpu-small-controller-vm"]
    login.inputs["bootDisk"]["initializeParams"]["image"] = "projects/p/global/images/new"
    for vm in (login, controller):
        vm.inputs["metadata"]["startup-script"] += "\n# changed\n"
        vm.inputs["metadata"]["clusterprint-slurm-config"] += "\n# changed\n"
    diff = diff_plans(old, new)
    actions = {c.name: c.action for c in diff.changes}
    assert (actions["cpu-small-login-0"], actions["cpu-small-controller-vm"]) == (
        "replace", "update")
    assert {(r.kind, r.name) for r in diff.rollouts} == {
        ("new-image", "cpu-small-login-0"),
        ("next-boot", "cpu-small-controller-vm"), ("live", "cpu-small-controller-vm")}


def test_a_nodeset_s_pinned_image_is_a_recreate_that_names_both_images(
        tmp_path, capsys, cpu_small_plan):
    found = rollouts(tmp_path, capsys, cpu_small_plan, (
        "      count: 2\n",
        "      count: 2\n      image: {project: my-images, name: slurm-cpu-v2}\n"))
    assert kinds(found) == [("recreate", "cpu-small-nodeset-cpu-group",
                             ["cpu-small-nodeset-cpu-template"])]
    built = node_image("cpu").path("my-project")
    assert found[0]["how"].startswith(
        "its template boots a new image, projects/my-images/global/images/slurm-cpu-v2 "
        f"(was {built}); ")


def test_a_new_built_image_replaces_the_controller_and_login_vms_and_recreates_nodes(
        tmp_path, capsys, cpu_small_plan):
    """Other software is another content name: the saved plan booted an older image."""
    current = node_image("cpu").path("my-project")
    older = current[:-12] + "0" * 12
    saved = tmp_path / "older.json"
    saved.write_text(Path(cpu_small_plan).read_text().replace(current, older))
    assert main(["diff", str(saved), str(CPU_SMALL), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["rollouts"]
    assert kinds(found) == [
        ("new-image", "cpu-small-controller-vm", ["bootDisk.initializeParams.image"]),
        ("new-image", "cpu-small-login-0", ["bootDisk.initializeParams.image"]),
        ("recreate", "cpu-small-nodeset-cpu-group", ["cpu-small-nodeset-cpu-template"])]
    controller, login, group = (r["how"] for r in found
                                if r["name"] != "cpu-small-nodeset-cpu-elastic")
    moved = f"a new image, {current} (was {older})"
    assert controller.startswith(f"boots {moved}: `pulumi up` replaces this VM; ")
    assert "state disk" in controller and "sessions on it end" in login
    assert group.startswith(f"its template boots {moved}; ")
