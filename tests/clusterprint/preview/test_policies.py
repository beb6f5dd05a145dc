"""The security policies: each refuses what it is for, none refuses a reference blueprint."""

from __future__ import annotations

import copy

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.cli.commands.plan import EXIT_POLICY
from clusterprint.cli.main import main
from clusterprint.preview import policies
from clusterprint.preview.plan import Plan, PlannedResource
from clusterprint.preview.policies import (
    BUCKET,
    POLICIES,
    STACK_TYPE,
    PolicyResource,
    Settings,
    check_plan,
    evaluate,
)
from tests.support.paths import ROOT, reference_blueprints
from tests.support.plans import plan_of_file
from tests.support.policy_cases import ACCEPTED, CANARY, PUBLIC_IPV4, REFUSED

#: Every blueprint the project ships or tests with: they must all pass the mandatory policies.
BLUEPRINTS = reference_blueprints() + sorted((ROOT / "tests/components/blueprints").glob("*.yaml"))
def violations(typ: str, inputs: dict, protect: bool = False,
               settings: Settings | None = None) -> list[policies.Violation]:
    if typ == STACK_TYPE:
        return evaluate([], inputs, settings)
    return evaluate([PolicyResource(typ, "r", inputs, protect)], {}, settings)


@pytest.mark.parametrize(("name", "typ", "inputs", "protect", "settings", "message"), REFUSED)
def test_each_policy_refuses_what_it_is_for(name, typ, inputs, protect, settings, message):
    found = violations(typ, inputs, protect, settings)
    assert [v.policy.name for v in found] == [name], [v.text() for v in found]
    assert message in found[0].message
    assert found[0].text().endswith(f"[{name}]; fix: {POLICIES[name].fix}")


@pytest.mark.parametrize(("typ", "inputs"), ACCEPTED)
def test_the_edge_of_each_policy_passes(typ, inputs):
    assert violations(typ, inputs, protect=True) == []


def test_every_policy_has_a_refused_case():
    refused = {case.values[0] for case in REFUSED}
    assert refused == set(POLICIES)


def test_the_allowed_roles_are_the_ones_the_components_grant():
    """One table: the components read their grants from it, so the two cannot drift apart."""
    from clusterprint.components import cluster, identity, login, slurm_controller
    from clusterprint.facts import iam

    assert identity.NODE_ROLES is iam.NODE_PROJECT_ROLES
    assert identity.BUCKET_ROLE is iam.BUCKET_ROLE
    assert slurm_controller.MUNGE_WRITER_ROLES is iam.MUNGE_WRITER_ROLES
    assert login.MUNGE_READER_ROLES is cluster.MUNGE_READER_ROLES is iam.MUNGE_READER_ROLES
    # The roles beyond logs and metrics: the login node's, with a TensorBoard, and the
    # controller's, with the accounting database in Cloud SQL.
    assert login.VERTEX_AI_ROLE is iam.VERTEX_AI_ROLE == "roles/aiplatform.user"
    assert (slurm_controller.CLOUD_SQL_VIEWER_ROLE is iam.CLOUD_SQL_VIEWER_ROLE
            == "roles/cloudsql.viewer")
    assert policies.ALLOWED_ROLES[policies.PROJECT_IAM_MEMBER] == {
        *iam.NODE_PROJECT_ROLES, "roles/aiplatform.user", "roles/cloudsql.viewer"}


@pytest.fixture(scope="module")
def plans() -> dict[str, tuple[Plan, Settings]]:
    """Every shipped blueprint's plan (the session's, tests/support/plans.py) with its
    settings."""
    out = {}
    for path in BLUEPRINTS:
        bp = load_checked(str(path))
        out[path.name] = (plan_of_file(path), Settings(storage_protect=bp.storage.protect))
    return out


@pytest.mark.parametrize("path", BLUEPRINTS, ids=lambda p: p.name)
def test_every_shipped_blueprint_passes_every_policy(plans, path):
    """No mandatory violation, and no secret found in any real startup script (no false alarm);
    the only warning is the one a blueprint asks for with `storage.protect: false`."""
    plan, settings = plans[path.name]
    found = check_plan(plan, settings)
    expected = set() if settings.storage_protect else {"storage-unprotected"}
    assert {v.policy.name for v in found} == expected, [v.text() for v in found]
    scripts = [r.inputs["metadata"]["startup-script"] for r in plan.resources
               if "startup-script" in r.inputs.get("metadata", {})]
    assert scripts or path.name == "managed.yaml"


def with_canary(plan: Plan, where: str) -> Plan:
    """The plan with the canary where a user could leak it: a label, a bucket name, a script."""
    resources = []
    for res in plan.resources:
        inputs = copy.deepcopy(res.inputs)
        if where == "label" and "labels" in inputs:
            inputs["labels"]["deploy-token"] = CANARY
        if where == "bucket" and res.type == BUCKET:
            inputs["name"] = CANARY
        if where == "script" and "startup-script" in inputs.get("metadata", {}):
            inputs["metadata"]["startup-script"] += f"\nexport PULUMI_ACCESS_TOKEN={CANARY}\n"
        resources.append(PlannedResource(res.type, res.name, res.parent, inputs,
                                         res.dependencies, res.protect))
    return Plan(resources, plan.outputs)


@pytest.mark.parametrize("where", ["label", "bucket", "script"])
def test_a_canary_token_is_caught_where_a_user_could_leak_it(plans, where):
    plan, settings = plans["a3mega.yaml"]
    found = [v for v in check_plan(with_canary(plan, where), settings)
             if v.policy.name == "no-plaintext-secret"]
    assert found and all("holds a Pulumi access token" in v.message for v in found)
    names = {v.resource for v in found}
    assert {"label": "a3mega-controller-vm", "bucket": "a3mega-storage-my-project-a3mega-ckpts",
            "script": "a3mega-login-0"}[where] in names


def test_a_canary_in_the_blueprint_is_refused_before_any_plan(tmp_path, capsys):
    """A user's label reaches every resource, so validate refuses it as the policy would
    (tests/clusterprint/preview/test_policies_in_validate.py): plan --policy exits 1."""
    text = (ROOT / "blueprints/cpu-small.yaml").read_text()
    path = tmp_path / "leaky.yaml"
    path.write_text(text + f"labels:\n  deploy-token: {CANARY}\n")
    assert main(["plan", str(path), "--policy"]) == 1
    err = capsys.readouterr().err
    assert (f"{path}:35:17: error: labels.deploy-token: it holds a Pulumi access token, which "
            "the policy no-plaintext-secret refuses") in err


@pytest.mark.parametrize(("ranges", "code", "line"), [
    pytest.param("[0.0.0.0/1, 128.0.0.0/1]", 1,
                 f"error: network.ssh_source_ranges[0]: SSH would be open to {PUBLIC_IPV4} "
                 "public IPv4 addresses, more than a /16 holds: 0.0.0.0/1, 128.0.0.0/1, which "
                 "the policy no-open-firewall refuses",
                 id="internet-in-two-halves"),
    pytest.param("[8.0.0.0/17, 8.0.128.0/17]", 0,
                 "advisory: cpu-small-network-ssh: SSH is open to 65,536 public IPv4 addresses, "
                 "more than a /24 holds: 8.0.0.0/17, 8.0.128.0/17 [ssh-source-ranges-wide]",
                 id="a-slash-16-in-two-halves"),
])
def test_plan_policy_judges_what_the_ssh_sources_admit_together(tmp_path, capsys, ranges, code,
                                                                line):
    """Past a /16's worth of public addresses a blueprint's SSH sources fail validate (exit
    1) however they are split, as no-open-firewall would fail the plan; up to it they plan
    with a warning."""
    path = tmp_path / "ssh.yaml"
    path.write_text((ROOT / "blueprints/cpu-small.yaml").read_text()
                    + f"network:\n  ssh_source_ranges: {ranges}\n")
    assert main(["plan", str(path), "--policy"]) == code
    assert line in capsys.readouterr().err


def test_a_plan_that_breaks_a_plan_only_policy_fails_plan_policy_with_exit_4(monkeypatch, capsys):
    """What no blueprint can cause (a component giving a VM an external IP) only the plan
    shows: plan --policy names it and exits 4."""
    from clusterprint.preview import plan as planning

    planned = planning.plan_blueprint

    def with_external_ip(blueprint):
        plan = planned(blueprint)
        plan.resources.append(PlannedResource(
            policies.INSTANCE, "stray-vm", None,
            {"networkInterfaces": [{"accessConfigs": [{}]}],
             "serviceAccount": {"email": "[unknown]"}, "metadata": {"enable-oslogin": "TRUE"}}))
        return plan

    monkeypatch.setattr(planning, "plan_blueprint", with_external_ip)
    assert main(["plan", str(ROOT / "blueprints/cpu-small.yaml"), "--policy"]) == EXIT_POLICY
    assert ("mandatory: stray-vm: networkInterfaces[0].accessConfigs gives it an external IP "
            "[no-external-ip]") in capsys.readouterr().err


def test_plan_policy_passes_a_reference_blueprint_and_prints_the_plan(capsys):
    assert main(["plan", str(ROOT / "blueprints/a4.yaml"), "--policy"]) == 0
    out, err = capsys.readouterr()
    assert "resources to create" in out
    assert err.splitlines()[-1] == "policy: 0 mandatory, 0 advisory violations"


def test_an_invalid_blueprint_stays_exit_1_with_policy(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: clusterprint/v1\nkind: TrainingCluster\nname: X\n")
    assert main(["plan", str(path), "--policy"]) == 1


def test_policies_import_no_pulumi():
    """The offline runner and the pack import this module; it must stay pure."""
    import subprocess
    import sys

    code = ("import sys, clusterprint.preview.policies; "
            "assert not any(m.startswith('pulumi') for m in sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_every_data_bearing_type_of_the_diff_must_be_protected():
    """What the diff calls data loss when replaced is what storage-protected guards: the
    controller's state disk (its queue and accounting database) was missing here."""
    from clusterprint.preview.replacements import RULES

    assert set(policies.DATA_TYPES) == {t for t, rule in RULES.items() if rule.data_bearing}
    refused = {case.values[1] for case in REFUSED if case.values[0] == "storage-protected"}
    unprotected = {case.values[1] for case in REFUSED if case.values[0] == "storage-unprotected"}
    assert refused == unprotected == set(policies.DATA_TYPES)


def test_the_state_disk_of_a_protected_blueprint_is_protected(plans):
    plan, settings = plans["a4.yaml"]
    disks = [r for r in plan.resources if r.type == policies.DISK]
    assert settings.storage_protect and disks and all(r.protect for r in disks)
