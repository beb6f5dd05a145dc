"""Policy cases the plan-time policies (tests/clusterprint/preview/test_policies.py) and the
policy pack under Pulumi (tests/policy/test_pack.py) both judge: what each policy refuses,
with what it says, and what is right at its edge and passes."""

from __future__ import annotations

import pytest

from clusterprint.facts import catalog
from clusterprint.preview.policies import (
    BUCKET,
    BUCKET_IAM_MEMBER,
    DISK,
    FILESTORE,
    FIREWALL,
    INSTANCE,
    LUSTRE,
    MANAGED_CLUSTER,
    PROJECT_IAM_BINDING,
    PROJECT_IAM_MEMBER,
    SECRET_IAM_MEMBER,
    SECRET_VERSION,
    STACK_TYPE,
    TEMPLATE,
    Settings,
)

#: A token shaped like a Pulumi access token: lowercase, so it fits a label and a bucket name.
CANARY = "pul-" + "0123456789abcdef" * 2 + "01234567"
NIC = {"subnetwork": "[unknown]"}
SHIELDED_IMAGE = "projects/ubuntu-os-cloud/global/images/ubuntu-2404-noble-amd64-v20260517"


def vm(**inputs: object) -> dict:
    """A VM's inputs as the components give them, with ``inputs`` changed."""
    base = {"machineType": "n2-standard-4", "networkInterfaces": [NIC],
            "serviceAccount": {"email": "[unknown]", "scopes": ["cloud-platform"]},
            "metadata": {"enable-oslogin": "TRUE"},
            "bootDisk": {"initializeParams": {"image": SHIELDED_IMAGE}}}
    return {**base, **inputs}


def firewall(ranges: list[str] | None, ports: list[str] | None = None, protocol: str = "tcp",
             **inputs: object) -> dict:
    allow = {"protocol": protocol, **({"ports": ports} if ports else {})}
    return {"direction": "INGRESS", "allows": [allow],
            **({"sourceRanges": ranges} if ranges is not None else {}), **inputs}


#: The public IPv4 addresses, IAP's range aside: 2**32 less the IANA blocks that are not
#: globally reachable (0/8, 10/8, 127/8: 3 * 2**24; 100.64/10: 2**22; 240/4: 2**28;
#: 172.16/12: 2**20; 198.18/15: 2**17; 169.254/16, 192.168/16: 2 * 2**16; 192.0.2/24,
#: 198.51.100/24, 203.0.113/24: 3 * 256; 192.0.0/24 but its two anycast addresses: 254)
#: and IAP's 4,096.
PUBLIC_IPV4 = "3,970,690,050"


def firewall_refused(case: str, ranges: object, said: str, ports: list[str] | None = None,
                     name: str = "no-open-firewall", protocol: str = "tcp"):
    """A firewall rule from ``ranges`` that ``name`` refuses, saying ``said``."""
    return pytest.param(name, FIREWALL, firewall(None, ports, protocol, sourceRanges=ranges),
                        False, Settings(), said, id=case)


def wide_ssh(case: str, ranges: list[str], said: str, ports: list[str] | None = None,
             protocol: str = "tcp"):
    """An SSH rule from ``ranges`` that is wide but within the bound: an advisory only."""
    return firewall_refused(case, ranges, f"SSH is open to {said}",
                            ["22"] if ports is None else ports, "ssh-source-ranges-wide",
                            protocol)


#: A public /24 (Google's 8.8.4.0/24) and /48: exactly at the bound of a wide SSH rule, so
#: one address more, however it comes in, makes the rule wide.
PUBLIC_24, PUBLIC_48 = "8.8.4.0/24", "2600:1900::/48"
WIDE_16 = "8.0.0.0/16"
#: Blocks that are not public, written from the IANA special-purpose registries (not from
#: the policy's table), each with no globally reachable address inside: beside a public /24
#: or /48, an SSH rule from one stays at the bound. Where a registry block holds a globally
#: reachable exception, the part without it: 192.0.0.0/29 (PCP and TURN anycast are .9 and
#: .10), 2001:2::/48 (benchmarking) of 2001::/23.
NOT_PUBLIC_BLOCKS = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8",
                     "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/29", "192.0.2.0/24",
                     "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
                     "240.0.0.0/4", "255.255.255.255/32",
                     "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64",
                     "2001:2::/48", "2001:db8::/32", "3fff::/20", "fc00::/7", "fe80::/10"]
#: The globally reachable blocks inside not-public ones: each adds its addresses to a public
#: /24 or /48, so the rule is wide, or open past the bound of no-open-firewall.
PUBLIC_EXCEPTIONS = {"192.0.0.9/32": "ssh-source-ranges-wide",
                     "192.0.0.10/32": "ssh-source-ranges-wide",
                     "2001:1::1/128": "ssh-source-ranges-wide",
                     "2001:1::2/128": "ssh-source-ranges-wide",
                     "2001:4:112::/48": "ssh-source-ranges-wide",
                     "2001::/32": "no-open-firewall", "2001:3::/32": "no-open-firewall",
                     "2001:10::/28": "no-open-firewall", "2001:20::/28": "no-open-firewall",
                     "2001:30::/28": "no-open-firewall", "2002::/16": "no-open-firewall"}


def public_exception(block: str, name: str):
    public = PUBLIC_48 if ":" in block else PUBLIC_24
    bound = {"no-open-firewall": "/40", "ssh-source-ranges-wide": "/48" if ":" in block
             else "/24"}[name]
    return firewall_refused(f"exception-{block}", [block, public],
                            f"more than a {bound} holds: {block}, {public}", ["22"], name)


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
    granted(PROJECT_IAM_BINDING, "roles/owner", "binding-owner",
            "it grants roles/owner, which holds every permission"),
    granted(PROJECT_IAM_BINDING, "roles/iam.serviceAccountUser", "binding-beyond-table"),
    granted(BUCKET_IAM_MEMBER, "roles/storage.admin", "bucket-admin"),
    granted(BUCKET_IAM_MEMBER, "roles/editor", "bucket-editor",
            "it grants roles/editor, which holds every permission"),
    # A basic role is refused on any resource that grants it, in the table or not.
    granted("gcp:organizations/iAMMember:IAMMember", "roles/owner", "org-owner",
            "it grants roles/owner"),
    pytest.param("least-privilege-identity", INSTANCE,
                 vm(serviceAccount={"email": "default", "scopes": ["cloud-platform"]}),
                 False, Settings(), "serviceAccount.email default is the default compute "
                 "account", id="email-default"),
    pytest.param("least-privilege-identity", TEMPLATE,
                 vm(serviceAccount={"scopes": ["cloud-platform"]}), False, Settings(),
                 "serviceAccount.email (none) is the default compute account", id="no-email"),
    pytest.param("least-privilege-identity", INSTANCE, vm(serviceAccount={"email": ""}),
                 False, Settings(), "serviceAccount.email (none) is the default", id="empty-email"),
    pytest.param("least-privilege-identity", INSTANCE, vm(serviceAccount={}), False,
                 Settings(), "it names no service account", id="empty-account"),
    pytest.param("least-privilege-identity", TEMPLATE,
                 vm(serviceAccount={"email": "7-compute@developer.gserviceaccount.com"}),
                 False, Settings(), "is the default compute account",
                 id="default-account-template"),
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
    pytest.param("bucket-access", BUCKET, {"name": "ckpts", "uniformBucketLevelAccess": True},
                 True, Settings(), "publicAccessPrevention is not \"enforced\"",
                 id="prevention-unset"),
    pytest.param("bucket-access", BUCKET, {"name": "ckpts", "publicAccessPrevention": "enforced"},
                 True, Settings(), "uniformBucketLevelAccess is not true", id="uniform-unset"),
    pytest.param("storage-protected", LUSTRE, {"capacityGib": "18000"}, False, Settings(),
                 "it holds data but is not protected while storage.protect is true",
                 id="lustre-unprotected"),
    *(pytest.param("storage-protected", typ, BUCKET_OK if typ == BUCKET else {}, False,
                   Settings(),
                   "it holds data but is not protected while storage.protect is true",
                   id=f"unprotected-{typ}")
      for typ in (FILESTORE, BUCKET, MANAGED_CLUSTER, DISK)),
    *(pytest.param("storage-unprotected", typ, {}, False, UNPROTECTED,
                   "storage.protect is false", id=f"protect-false-{typ}")
      for typ in (FILESTORE, LUSTRE, MANAGED_CLUSTER, DISK)),
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
    # Every way an allow entry can admit port 22: a range that covers it, a range ending or
    # starting at it, no ports at all, protocol `all`, TCP by number or in capitals.
    *(wide_ssh(f"ssh-in-{case}", [WIDE_16], "65,536 public IPv4 addresses", ports, protocol)
      for case, ports, protocol in (("20-30", ["20-30"], "tcp"), ("1-22", ["1-22"], "tcp"),
                                    ("22-65535", ["22-65535"], "tcp"),
                                    ("22-22", ["22-22"], "tcp"),
                                    ("a-later-entry", ["80", "443", "22"], "tcp"),
                                    ("no-ports", [], "tcp"), ("all", [], "all"),
                                    ("all-with-ports", ["22"], "all"),
                                    ("protocol-6", ["22"], "6"), ("TCP", ["22"], "TCP"))),
    # Any port and any protocol count for the open bound, UDP too.
    firewall_refused("udp-from-anywhere", ["0.0.0.0/0"], f"admit {PUBLIC_IPV4} public IPv4",
                     ["53"], protocol="udp"),
    firewall_refused("all-from-anywhere", ["0.0.0.0/0"], f"admit {PUBLIC_IPV4} public IPv4",
                     protocol="all"),
    *(public_exception(block, name) for block, name in PUBLIC_EXCEPTIONS.items()),
    pytest.param("storage-unprotected", BUCKET, BUCKET_OK, False, UNPROTECTED,
                 "storage.protect is false: `pulumi destroy` deletes this data",
                 id="protect-false"),
    pytest.param("shielded-vm", INSTANCE, vm(shieldedInstanceConfig={"enableVtpm": False}),
                 False, Settings(), "shieldedInstanceConfig.enableVtpm is false on an image "
                 "that supports it", id="vtpm-off"),
    pytest.param("shielded-vm", INSTANCE, vm(shieldedInstanceConfig={
        "enableIntegrityMonitoring": False}, bootDisk={"initializeParams": {
            "image": "projects/my-project/global/images/clusterprint-cpu-0123456789ab"}}),
                 False, Settings(), "shieldedInstanceConfig.enableIntegrityMonitoring is false",
                 id="integrity-off-on-clusterprint-image"),
    pytest.param("exact-boot-image", INSTANCE, vm(bootDisk={"initializeParams": {
        "image": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"}}),
                 False, Settings(), "it boots the image family projects/ubuntu-os-cloud/global/"
                 "images/family/ubuntu-2404-lts-amd64", id="vm-boots-a-family"),
    pytest.param("exact-boot-image", TEMPLATE, vm(disks=[{"boot": True, "sourceImage":
                                                          "projects/me/global/images/family/f"}]),
                 False, Settings(), "it boots the image family projects/me/global/images/family/f",
                 id="template-boots-a-family"),
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
    *(pytest.param(FIREWALL, firewall([WIDE_16], ports, protocol), id=f"wide-{case}")
      for case, ports, protocol in (("1-21", ["1-21"], "tcp"), ("23-65535", ["23-65535"], "tcp"),
                                    ("udp-22", ["22"], "udp"), ("icmp", [], "icmp"),
                                    ("protocol-17", ["22"], "17"))),
    pytest.param(FIREWALL, firewall(["0.0.0.0/0"], direction="EGRESS"), id="egress-anywhere"),
    # Each block that is not public, beside a public /24 or /48, keeps an SSH rule at the
    # bound: counted as public, any of them would make it wide.
    *(pytest.param(FIREWALL, firewall([block, PUBLIC_48 if ":" in block else PUBLIC_24],
                                      ["22"]), id=f"not-public-{block}")
      for block in NOT_PUBLIC_BLOCKS),
    # The components' own accounts are named CLUSTER-compute: not the default account.
    pytest.param(INSTANCE, vm(serviceAccount={
        "email": "cpu-small-compute@my-project.iam.gserviceaccount.com"}),
                 id="own-compute-account"),
    pytest.param(INSTANCE, vm(serviceAccount={
        "email": "x123-compute@developer.gserviceaccount.com"}), id="not-a-project-number"),
    pytest.param(PROJECT_IAM_BINDING, {"role": "roles/logging.logWriter"}, id="binding-logging"),
    pytest.param(BUCKET_IAM_MEMBER, {"role": "roles/storage.objectUser"}, id="bucket-role"),
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
