"""The security policies: each refuses what it is for, none refuses a reference blueprint."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from clusterprint import policies
from clusterprint.cli import main
from clusterprint.commands.plan import EXIT_POLICY
from clusterprint.plan import Plan, PlannedResource, plan_blueprint
from clusterprint.policies import (
    BUCKET,
    FILESTORE,
    FIREWALL,
    INSTANCE,
    LUSTRE,
    MANAGED_CLUSTER,
    POLICIES,
    PROJECT_IAM_MEMBER,
    SECRET_IAM_MEMBER,
    SECRET_VERSION,
    STACK_TYPE,
    TEMPLATE,
    PolicyResource,
    Settings,
    check_plan,
    evaluate,
)
from clusterprint.validate import load_checked
from tests.paths import ROOT, reference_blueprints

#: Every blueprint the project ships or tests with: they must all pass the mandatory policies.
BLUEPRINTS = reference_blueprints() + sorted((ROOT / "tests/components/blueprints").glob("*.yaml"))
#: A token shaped like a Pulumi access token: lowercase, so it fits a label and a bucket name.
CANARY = "pul-" + "0123456789abcdef" * 2 + "01234567"
NIC = {"subnetwork": "[unknown]"}
SHIELDED_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"


def vm(**inputs: object) -> dict:
    """A VM's inputs as the components give them, with ``inputs`` changed."""
    base = {"machineType": "n2-standard-4", "networkInterfaces": [NIC],
            "serviceAccount": {"email": "[unknown]", "scopes": ["cloud-platform"]},
            "metadata": {"enable-oslogin": "TRUE"},
            "bootDisk": {"initializeParams": {"image": SHIELDED_IMAGE}}}
    return {**base, **inputs}


def firewall(ranges: list[str] | None, ports: list[str] | None = None, **inputs: object) -> dict:
    allow = {"protocol": "tcp", **({"ports": ports} if ports else {})}
    return {"direction": "INGRESS", "allows": [allow],
            **({"sourceRanges": ranges} if ranges is not None else {}), **inputs}


def managed(**login: object) -> dict:
    return {"orchestrator": {"slurm": {"loginNodes": {"enableOsLogin": True,
                                                      "enablePublicIps": False, **login}}}}


BUCKET_OK = {"name": "ckpts", "uniformBucketLevelAccess": True,
             "publicAccessPrevention": "enforced"}
UNPROTECTED = Settings(storage_protect=False)

#: (policy, resource type, inputs, protect, settings, what the message says)


def granted(type_: str, role: str, case: str, said: str | None = None):
    """A refused grant of ``role`` to a service account; the refusal says ``said``, by
    default that the role is not in the allowed table."""
    return pytest.param("least-privilege-identity", type_,
                        {"role": role, "member": "serviceAccount:x"}, False, Settings(),
                        said or f"{role}, which is not in the allowed roles", id=case)


REFUSED = [
    pytest.param("no-external-ip", INSTANCE, vm(networkInterfaces=[{**NIC, "accessConfigs": [{}]}]),
                 False, Settings(), "networkInterfaces[0].accessConfigs gives it an external IP",
                 id="vm-access-config"),
    pytest.param("no-external-ip", TEMPLATE,
                 vm(networkInterfaces=[NIC, {**NIC, "ipv6AccessConfigs": [{"networkTier": "X"}]}]),
                 False, Settings(), "networkInterfaces[1].ipv6AccessConfigs", id="template-ipv6"),
    pytest.param("no-external-ip", MANAGED_CLUSTER, managed(enablePublicIps=True), True,
                 Settings(), "loginNodes.enablePublicIps gives login nodes external IPs",
                 id="managed-public-ips"),
    pytest.param("no-open-firewall", FIREWALL, firewall(["0.0.0.0/0"], ["22"]), False,
                 Settings(), "sourceRanges holds 0.0.0.0/0: it admits the whole internet",
                 id="ssh-from-anywhere"),
    pytest.param("no-open-firewall", FIREWALL, firewall(["::/0"], ["8080"]), False, Settings(),
                 "sourceRanges holds ::/0", id="any-port-ipv6"),
    pytest.param("no-open-firewall", FIREWALL, firewall(None), False, Settings(),
                 "it names no source, which the API reads as 0.0.0.0/0", id="no-source"),
    pytest.param("least-privilege-identity", INSTANCE,
                 vm(serviceAccount={"email": "123456789-compute@developer.gserviceaccount.com"}),
                 False, Settings(), "is the default compute account", id="default-account"),
    pytest.param("least-privilege-identity", TEMPLATE, {**vm(), "serviceAccount": None}, False,
                 Settings(), "it names no service account", id="no-account"),
    granted(PROJECT_IAM_MEMBER, "roles/editor", "editor",
            "it grants roles/editor, which holds every permission"),
    granted(PROJECT_IAM_MEMBER, "roles/compute.instanceAdmin.v1", "project-role-beyond-table"),
    granted(PROJECT_IAM_MEMBER, "roles/aiplatform.admin", "vertex-ai-admin"),
    granted(SECRET_IAM_MEMBER, "roles/secretmanager.admin", "secret-admin"),
    pytest.param("no-plaintext-secret", INSTANCE,
                 vm(metadata={"enable-oslogin": "TRUE", "startup-script":
                              "#!/bin/bash\ncat > /root/id <<EOF\n"
                              "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\nEOF\n"}),
                 False, Settings(), "metadata.startup-script holds a private key",
                 id="private-key-in-script"),
    pytest.param("no-plaintext-secret", TEMPLATE,
                 vm(metadata={"enable-oslogin": "TRUE", "munge-key": "c2VjcmV0LW11bmdlLWtleQ=="}),
                 False, Settings(), "metadata.munge-key is named as the munge key but holds a "
                 "value", id="munge-key-metadata"),
    pytest.param("no-plaintext-secret", INSTANCE,
                 vm(metadata={"enable-oslogin": "TRUE", "startup-script":
                              "echo 'A" + "b9" * 20 + "' | base64 -d > /etc/munge/munge.key"}),
                 False, Settings(), "holds a munge key written from the script",
                 id="munge-key-echoed"),
    pytest.param("no-plaintext-secret", TEMPLATE,
                 vm(metadata={"enable-oslogin": "TRUE", "startup-script":
                              "printf %s QWxhZGRpbjpvcGVuIHNlc2FtZQ0123456789ab >munge.key"}),
                 False, Settings(), "holds a munge key written from the script",
                 id="munge-key-printf"),
    pytest.param("no-plaintext-secret", SECRET_VERSION,
                 {"secret": "[id of c-controller-munge-key]", "secretData": "[secret]"}, False,
                 Settings(), "a SecretVersion of the munge secret puts the key in Pulumi state",
                 id="munge-secret-version"),
    pytest.param("no-plaintext-secret", SECRET_VERSION,
                 {"secret": "projects/p/secrets/c-jwt-key", "secretData": "[secret]"}, False,
                 Settings(), "a SecretVersion of the JWT secret puts the key in Pulumi state",
                 id="jwt-secret-version"),
    pytest.param("no-secret-in-outputs", STACK_TYPE, {"token": "ghp_" + "A1" * 18}, False,
                 Settings(), "token holds a GitHub token", id="output-token"),
    pytest.param("bucket-access", BUCKET, {**BUCKET_OK, "uniformBucketLevelAccess": False},
                 True, Settings(), "uniformBucketLevelAccess is not true", id="object-acls"),
    pytest.param("bucket-access", BUCKET, {**BUCKET_OK, "publicAccessPrevention": "inherited"},
                 True, Settings(), "publicAccessPrevention is not \"enforced\"", id="public"),
    pytest.param("storage-protected", LUSTRE, {"capacityGib": "18000"}, False, Settings(),
                 "it holds data but is not protected while storage.protect is true",
                 id="lustre-unprotected"),
    pytest.param("storage-protected", FILESTORE, {"tier": "BASIC_SSD"}, False, Settings(),
                 "not protected", id="filestore-unprotected"),
    pytest.param("ssh-source-ranges-wide", FIREWALL, firewall(["35.235.240.0/20", "8.0.0.0/16"],
                                                              ["22"]),
                 False, Settings(), "SSH is open to 8.0.0.0/16, 65536 public addresses",
                 id="public-slash-16"),
    pytest.param("storage-unprotected", BUCKET, BUCKET_OK, False, UNPROTECTED,
                 "storage.protect is false: `pulumi destroy` deletes this data",
                 id="protect-false"),
    pytest.param("shielded-vm", INSTANCE, vm(shieldedInstanceConfig={"enableVtpm": False}),
                 False, Settings(), "shieldedInstanceConfig.enableVtpm is false on an image "
                 "that supports it", id="vtpm-off"),
    pytest.param("os-login", INSTANCE, vm(metadata={"enable-oslogin": "FALSE"}), False,
                 Settings(), "metadata enable-oslogin is FALSE, not TRUE", id="os-login-off"),
    pytest.param("os-login", MANAGED_CLUSTER, managed(enableOsLogin=False), True, Settings(),
                 "loginNodes.enableOsLogin is false", id="managed-os-login-off"),
]

#: Right at the edge of what a policy refuses: each passes every policy.
ACCEPTED = [
    pytest.param(FIREWALL, firewall(["35.235.240.0/20"], ["22"]), id="iap-ssh"),
    pytest.param(FIREWALL, firewall(["203.0.113.0/24"], ["22"]), id="public-slash-24-ssh"),
    pytest.param(FIREWALL, firewall(["10.0.0.0/8"], ["22"]), id="private-ssh"),
    pytest.param(FIREWALL, firewall(["8.0.0.0/16"], ["443"]), id="wide-but-not-ssh"),
    pytest.param(FIREWALL, firewall(None, sourceTags=["c"]), id="tag-source"),
    pytest.param(INSTANCE, vm(shieldedInstanceConfig={"enableSecureBoot": False}),
                 id="secure-boot-off"),
    pytest.param(INSTANCE, vm(shieldedInstanceConfig={"enableVtpm": False},
                              bootDisk={"initializeParams": {"image": "projects/me/global/"
                                                                      "images/custom"}}),
                 id="vtpm-off-custom-image"),
    pytest.param(INSTANCE, vm(metadata={"enable-oslogin": "[unknown]"}), id="os-login-unknown"),
    pytest.param(TEMPLATE, vm(metadata={"enable-oslogin": "TRUE",
                                        "clusterprint-munge-secret": "projects/p/secrets/m"}),
                 id="munge-secret-name"),
    pytest.param(SECRET_IAM_MEMBER, {"role": "roles/secretmanager.secretVersionAdder"},
                 id="munge-writer"),
    pytest.param(PROJECT_IAM_MEMBER, {"role": "roles/monitoring.metricWriter"}, id="metrics"),
    pytest.param(PROJECT_IAM_MEMBER, {"role": "roles/aiplatform.user"}, id="vertex-ai-user"),
    pytest.param(INSTANCE, vm(metadata={"enable-oslogin": "TRUE", "startup-script": (
        'echo "installing" >/var/log/clusterprintsetupfromthemungekeysecret/munge.key.log\n'
        "head -c 768 /dev/urandom | base64 -w0 >/etc/munge/munge.key\n")}),
                 id="script-writes-munge-key-without-a-literal"),
    pytest.param(SECRET_VERSION, {"secret": "projects/p/secrets/app-config"},
                 id="other-secret-version"),
    # In `pulumi preview` a whole input can be unknown: a policy never refuses what it
    # cannot see.
    pytest.param(INSTANCE, vm(serviceAccount="[unknown]", metadata="[unknown]"),
                 id="unknown-account-and-metadata"),
    pytest.param(FIREWALL, firewall(None, ["22"], sourceRanges="[unknown]"),
                 id="unknown-source-ranges"),
    pytest.param(BUCKET, {"uniformBucketLevelAccess": "[unknown]",
                          "publicAccessPrevention": "[unknown]"}, id="unknown-bucket-access"),
]


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

    assert identity.NODE_ROLES is policies.NODE_PROJECT_ROLES
    assert identity.BUCKET_ROLE is policies.BUCKET_ROLE
    assert slurm_controller.MUNGE_WRITER_ROLES is policies.MUNGE_WRITER_ROLES
    assert login.MUNGE_READER_ROLES is cluster.MUNGE_READER_ROLES is policies.MUNGE_READER_ROLES
    # The roles beyond logs and metrics: the login node's, with a TensorBoard, and the
    # controller's, with the accounting database in Cloud SQL.
    assert login.VERTEX_AI_ROLE is policies.VERTEX_AI_ROLE == "roles/aiplatform.user"
    assert (slurm_controller.CLOUD_SQL_VIEWER_ROLE is policies.CLOUD_SQL_VIEWER_ROLE
            == "roles/cloudsql.viewer")
    assert policies.ALLOWED_ROLES[policies.PROJECT_IAM_MEMBER] == {
        *policies.NODE_PROJECT_ROLES, "roles/aiplatform.user", "roles/cloudsql.viewer"}


@pytest.fixture(scope="module")
def plans() -> dict[str, tuple[Plan, Settings]]:
    """Every shipped blueprint's plan with its settings, planned once for the module."""
    out = {}
    for path in BLUEPRINTS:
        bp = load_checked(str(path))
        out[path.name] = (plan_blueprint(bp), Settings(storage_protect=bp.storage.protect))
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


def test_a_canary_in_the_blueprint_fails_plan_policy_with_exit_4(tmp_path, capsys):
    """A user's label reaches every resource: plan --policy names each and exits 4."""
    text = (ROOT / "blueprints/cpu-small.yaml").read_text()
    path = tmp_path / "leaky.yaml"
    path.write_text(text + f"labels:\n  deploy-token: {CANARY}\n")
    assert main(["plan", str(path), "--policy"]) == EXIT_POLICY
    err = capsys.readouterr().err.splitlines()
    assert ("mandatory: cpu-small-controller-vm: labels.deploy-token holds a Pulumi access "
            "token [no-plaintext-secret]; fix: keep secrets in Secret Manager") in "\n".join(err)
    assert err[-1].startswith("policy: ") and "advisory violations" in err[-1]


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

    code = ("import sys, clusterprint.policies; "
            "assert not any(m.startswith('pulumi') for m in sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
