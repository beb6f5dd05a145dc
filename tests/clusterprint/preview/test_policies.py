"""The security policies: each refuses what it is for, none refuses a reference blueprint."""

from __future__ import annotations

import copy

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.cli.commands.plan import EXIT_POLICY
from clusterprint.cli.main import main
from clusterprint.facts import catalog
from clusterprint.preview import policies
from clusterprint.preview.plan import Plan, PlannedResource, plan_blueprint
from clusterprint.preview.policies import (
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


#: The public IPv4 addresses, IAP's range aside: 2**32 less the IANA blocks that are not
#: globally reachable (0/8, 10/8, 127/8: 3 * 2**24; 100.64/10: 2**22; 240/4: 2**28;
#: 172.16/12: 2**20; 198.18/15: 2**17; 169.254/16, 192.168/16: 2 * 2**16; 192.0.2/24,
#: 198.51.100/24, 203.0.113/24: 3 * 256; 192.0.0/24 but its two anycast addresses: 254)
#: and IAP's 4,096.
PUBLIC_IPV4 = "3,970,690,050"


def firewall_refused(case: str, ranges: object, said: str, ports: list[str] | None = None,
                     name: str = "no-open-firewall"):
    """A firewall rule from ``ranges`` that ``name`` refuses, saying ``said``."""
    return pytest.param(name, FIREWALL, firewall(None, ports, sourceRanges=ranges), False,
                        Settings(), said, id=case)


def wide_ssh(case: str, ranges: list[str], said: str):
    """An SSH rule from ``ranges`` that is wide but within the bound: an advisory only."""
    return firewall_refused(case, ranges, f"SSH is open to {said}", ["22"],
                            "ssh-source-ranges-wide")


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
    firewall_refused("ssh-from-anywhere", ["0.0.0.0/0"],
                     f"sourceRanges admit {PUBLIC_IPV4} public IPv4 addresses, more than a /16 "
                     "holds: 0.0.0.0/0", ["22"]),
    firewall_refused("internet-in-two-halves", ["0.0.0.0/1", "128.0.0.0/1"],
                     f"admit {PUBLIC_IPV4} public IPv4 addresses, more than a /16 holds: "
                     "0.0.0.0/1, 128.0.0.0/1", ["22"]),
    # The ranges that hold no public address (0/8, 10/8, 127/8, 240/4) are not named.
    firewall_refused("internet-in-256-slash-8s", [f"{i}.0.0.0/8" for i in range(256)],
                     f"admit {PUBLIC_IPV4} public IPv4 addresses, more than a /16 holds: "
                     "1.0.0.0/8, 2.0.0.0/8, 3.0.0.0/8, 4.0.0.0/8, 5.0.0.0/8, 6.0.0.0/8, "
                     "7.0.0.0/8, 8.0.0.0/8, 9.0.0.0/8, 11.0.0.0/8,"),
    firewall_refused("a-lone-string", "0.0.0.0/0", f"admit {PUBLIC_IPV4} public IPv4"),
    firewall_refused("one-address-past-a-slash-16", ["8.0.0.0/17", "8.0.128.0/17", "9.9.9.9"],
                     "admit 65,537 public IPv4 addresses, more than a /16 holds: 8.0.0.0/17, "
                     "8.0.128.0/17, 9.9.9.9"),
    firewall_refused("public-beside-private", ["10.0.0.0/8", "172.16.0.0/12", "8.0.0.0/15"],
                     "admit 131,072 public IPv4 addresses, more than a /16 holds: 8.0.0.0/15"),
    firewall_refused("partly-iap", [catalog.IAP_RANGE, "35.234.0.0/15"],
                     "admit 126,976 public IPv4 addresses, more than a /16 holds: 35.234.0.0/15"),
    firewall_refused("host-bits", ["8.0.0.1/15"],
                     "admit 131,072 public IPv4 addresses, more than a /16 holds: 8.0.0.1/15"),
    # 192.0.0.0/24 is IETF protocol space but for PCP and TURN anycast, 192.0.0.9 and .10.
    firewall_refused("registry-exceptions", ["192.0.0.0/24", "8.0.0.0/16"],
                     "admit 65,538 public IPv4 addresses, more than a /16 holds: "
                     "192.0.0.0/24, 8.0.0.0/16"),
    firewall_refused("any-port-ipv6", ["::/0"],
                     "public IPv6 addresses, more than a /40 holds: ::/0", ["8080"]),
    firewall_refused("ipv6-past-a-slash-40", ["2600::/40", "2600:0:100::/48", "fd00::/8"],
                     "admit 310,693,935,640,959,697,899,487,232 public IPv6 addresses, more than "
                     "a /40 holds: 2600::/40, 2600:0:100::/48"),
    *(firewall_refused(f"unreadable-{case}", [catalog.IAP_RANGE, text],
                       f"sourceRanges holds {text!r}, which is not an IP range")
      for case, text in (("space", "0.0.0.0/0 "), ("leading-zero", "010.0.0.0/8"),
                         ("short", "0/0"), ("prefix-33", "8.0.0.0/33"), ("integer", 0),
                         ("word", "everything"))),
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
    wide_ssh("public-slash-16", [catalog.IAP_RANGE, "8.0.0.0/16"],
             "65,536 public IPv4 addresses, more than a /24 holds: 8.0.0.0/16"),
    # Counted once however often and however split: at the bound, so not refused.
    wide_ssh("split-repeated-overlapping",
             ["8.0.0.0/17", "8.0.0.0/17", "8.0.0.0/18", "8.0.128.0/17"],
             "65,536 public IPv4 addresses, more than a /24 holds: 8.0.0.0/17, 8.0.0.0/18, "
             "8.0.128.0/17"),
    wide_ssh("three-slash-25s", ["8.8.4.0/25", "8.8.4.128/25", "8.8.5.0/25"],
             "384 public IPv4 addresses, more than a /24 holds: 8.8.4.0/25, 8.8.4.128/25, "
             "8.8.5.0/25"),
    wide_ssh("iap-in-a-slash-16", ["35.235.0.0/16"],
             "61,440 public IPv4 addresses, more than a /24 holds: 35.235.0.0/16"),
    wide_ssh("ipv6-slash-40", ["2600::/40"], "309,485,009,821,345,068,724,781,056 public IPv6 "
                                             "addresses, more than a /48 holds: 2600::/40"),
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
    pytest.param(FIREWALL, firewall(["35.235.240.0/21", "35.235.248.0/21"], ["22"]),
                 id="iap-in-halves"),
    pytest.param(FIREWALL, firewall(["8.8.4.0/24"], ["22"]), id="public-slash-24-ssh"),
    pytest.param(FIREWALL, firewall(["8.8.4.0/25", "8.8.4.128/25"], ["22"]),
                 id="two-slash-25s-ssh"),
    pytest.param(FIREWALL, firewall(["10.0.0.0/8"], ["22"]), id="private-ssh"),
    pytest.param(FIREWALL, firewall(["100.64.0.0/10"], ["22"]), id="cgnat-ssh"),
    pytest.param(FIREWALL, firewall(["0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16",
                                     "172.16.0.0/12", "192.168.0.0/16", "198.18.0.0/15",
                                     "203.0.113.0/24", "240.0.0.0/4"]),
                 id="special-purpose-ipv4-any-port"),
    pytest.param(FIREWALL, firewall(["::1/128", "::ffff:0:0/96", "2001:db8::/32", "fc00::/7",
                                     "fe80::/10"]), id="special-purpose-ipv6-any-port"),
    pytest.param(FIREWALL, firewall(["2600:1900::/48"], ["22"]), id="ipv6-site-ssh"),
    pytest.param(FIREWALL, firewall(["8.0.0.0/16"], ["443"]), id="wide-but-not-ssh"),
    pytest.param(FIREWALL, firewall(["[unknown]", catalog.IAP_RANGE], ["22"]),
                 id="one-unknown-range"),
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


@pytest.mark.parametrize(("ranges", "code", "line"), [
    pytest.param("[0.0.0.0/1, 128.0.0.0/1]", EXIT_POLICY,
                 f"mandatory: cpu-small-network-ssh: sourceRanges admit {PUBLIC_IPV4} public "
                 "IPv4 addresses, more than a /16 holds: 0.0.0.0/1, 128.0.0.0/1 "
                 "[no-open-firewall]; fix: set `network.ssh_source_ranges` to IAP's",
                 id="internet-in-two-halves"),
    pytest.param("[8.0.0.0/17, 8.0.128.0/17]", 0,
                 "advisory: cpu-small-network-ssh: SSH is open to 65,536 public IPv4 addresses, "
                 "more than a /24 holds: 8.0.0.0/17, 8.0.128.0/17 [ssh-source-ranges-wide]",
                 id="a-slash-16-in-two-halves"),
])
def test_plan_policy_judges_what_the_ssh_sources_admit_together(tmp_path, capsys, ranges, code,
                                                                line):
    """Past a /16's worth of public addresses a blueprint's SSH sources fail the plan (exit 4)
    however they are split; up to it they plan with a warning."""
    path = tmp_path / "ssh.yaml"
    path.write_text((ROOT / "blueprints/cpu-small.yaml").read_text()
                    + f"network:\n  ssh_source_ranges: {ranges}\n")
    assert main(["plan", str(path), "--policy"]) == code
    assert line in capsys.readouterr().err


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
