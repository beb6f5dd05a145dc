"""Security policies over planned resources: the one implementation of the policy pack.

Each policy is a small function over one resource as the engine sees it (type token,
logical name, camelCase inputs, the ``protect`` option), yielding a message per problem.
Two callers run the same functions: the Pulumi policy pack in ``policy/`` (during
``pulumi preview`` and ``pulumi up``) and ``clusterprint plan --policy`` (offline, over the
mocked plan). A mandatory violation fails both; an advisory one only warns.

Values only the cloud knows are the string ``[unknown]`` in both callers (the pack maps
Pulumi's unknown sentinels to it), and a policy never refuses what it cannot see.

What a mandatory policy refuses that a blueprint alone can cause, `validate` refuses too,
so a `pulumi up` without the pack (whose stack program refuses an invalid blueprint)
refuses it as well: each such policy names that rule (``rule``) and shares its judgement
through ``clusterprint.facts`` (``addresses`` for `no-open-firewall`, ``credentials`` for
`no-plaintext-secret` and `no-secret-in-outputs`). The others need the planned resources,
as no blueprint key leads to a break (``plan_only`` says why for each): `no-external-ip`
(no key gives a node an address), `least-privilege-identity` (no key names an account or
a role), `bucket-access` (a bucket's settings are the component's) and `storage-protected`
(``protect`` is a resource option; `storage.protect: false` is the advisory
`storage-unprotected`).

No Pulumi import here: the offline runner stays fast and the pack imports only this.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from clusterprint.facts import addresses, catalog, credentials
from clusterprint.facts.iam import (
    BUCKET_ROLE,
    CLOUD_SQL_VIEWER_ROLE,
    MUNGE_READER_ROLES,
    MUNGE_WRITER_ROLES,
    NODE_PROJECT_ROLES,
    VERTEX_AI_ROLE,
)

Level = Literal["mandatory", "advisory"]

#: How a value only the cloud knows reads (clusterprint.preview.plan.UNKNOWN, the pack's mapping).
UNKNOWN = "[unknown]"
#: The type token of the stack itself, whose outputs a stack policy checks.
STACK_TYPE = "pulumi:pulumi:Stack"

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
MANAGED_CLUSTER = "gcp:hypercomputecluster/cluster:Cluster"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
FILESTORE = "gcp:filestore/instance:Instance"
LUSTRE = "gcp:lustre/instance:Instance"
#: A persistent disk: the controller's state disk (slurmctld's queue, the accounting database).
DISK = "gcp:compute/disk:Disk"
SECRET_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
SECRET_IAM_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"
BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
#: Resources that are VMs or make VMs.
VM_TYPES = (INSTANCE, TEMPLATE)
#: Resources that hold a cluster's data: protected while ``storage.protect`` is true. The
#: managed cluster creates and holds its file systems itself. The same types the diff flags
#: as data loss when replaced or deleted (clusterprint.preview.replacements).
DATA_TYPES = (FILESTORE, LUSTRE, BUCKET, MANAGED_CLUSTER, DISK)

#: The keys the controller generates on first boot, by the end of their secrets' ids
#: (clusterprint.contract.naming): Pulumi never gives them a version.
GENERATED_KEYS = {"munge": "-munge-key", "JWT": "-jwt-key", "database password": "-db-password"}
#: The one table of roles a node account may hold, by the IAM resource that grants it:
#: what the components grant and nothing else (both read the roles from
#: clusterprint.facts.iam). Project-wide grants are the logging and
#: monitoring roles, Vertex AI User for a login node of a cluster with a TensorBoard and
#: Cloud SQL Viewer for the controller of one whose accounting database is in Cloud SQL;
#: secret and bucket roles are granted on that secret or bucket.
ALLOWED_ROLES: dict[str, frozenset[str]] = {
    PROJECT_IAM_MEMBER: frozenset(NODE_PROJECT_ROLES + (VERTEX_AI_ROLE, CLOUD_SQL_VIEWER_ROLE)),
    PROJECT_IAM_BINDING: frozenset(NODE_PROJECT_ROLES + (VERTEX_AI_ROLE, CLOUD_SQL_VIEWER_ROLE)),
    SECRET_IAM_MEMBER: frozenset(MUNGE_WRITER_ROLES + MUNGE_READER_ROLES),
    BUCKET_IAM_MEMBER: frozenset({BUCKET_ROLE}),
}
#: Basic roles that hold every permission of a project's resources, refused anywhere.
BASIC_ROLES = frozenset({"roles/owner", "roles/editor"})
#: Compute Engine's default service account, ``PROJECT_NUMBER-compute@...``
#: (cloud.google.com/compute/docs/access/service-accounts#default_service_account).
DEFAULT_COMPUTE_ACCOUNT = re.compile(r"\d+-compute@developer\.gserviceaccount\.com")

#: Public image projects whose images support Shielded VM's vTPM and integrity monitoring
#: ("By default, Shielded VM supports Container-Optimized OS, various distributions of
#: Linux, and multiple versions of Windows Server", cloud.google.com/security/
#: shielded-cloud/creating-shielded-images); a custom image may lack UEFI support.
SHIELDED_IMAGE_PROJECTS = ("ubuntu-os-cloud", "ubuntu-os-accelerator-images", "debian-cloud",
                           "rocky-linux-cloud", "centos-cloud", "cos-cloud",
                           "rhel-cloud", "suse-cloud")
#: clusterprint's own images (clusterprint/render/images.py) are made from the boot disk of
#: a VM booted from one of those projects' images, and an image made from a disk keeps the
#: disk's guest OS features (UEFI_COMPATIBLE among them: Compute docs "Create custom images").
SHIELDED_IMAGE_PREFIX = "clusterprint-"
#: How an image path names a family rather than an image.
FAMILY_PATH = re.compile(r"(?:.*/)?projects/[^/]+/global/images/family/[^/]+$")

@dataclass(frozen=True)
class PolicyResource:
    """One resource as a policy sees it, whether from the engine or from the mocked plan."""

    type: str
    name: str
    inputs: Mapping[str, Any]
    protect: bool = False


@dataclass(frozen=True)
class Settings:
    """What the blueprint says that no single resource shows."""

    #: ``storage.protect``: whether the data resources must be ``protect``-ed.
    storage_protect: bool = True


Check = Callable[[PolicyResource, Settings], Iterable[str]]


@dataclass(frozen=True)
class Policy:
    """One named policy: its level, what it checks, how to fix it, and the check itself."""

    name: str
    level: Level
    checks: str
    fix: str
    check: Check
    #: A stack policy checks the stack's outputs instead of each resource's inputs.
    stack: bool = False
    #: The validate rule that refuses, from the blueprint alone, what would break this
    #: policy (clusterprint.blueprint.rules): `pulumi up` without the pack refuses it too.
    rule: str | None = None
    #: Why only the planned resources can show a break of this policy: no blueprint key
    #: leads to one. A mandatory policy names its rule or says this.
    plan_only: str | None = None


@dataclass(frozen=True)
class Violation:
    """One problem of one resource under one policy."""

    policy: Policy
    resource: str
    message: str

    def text(self) -> str:
        """One line: level, resource, policy, what is wrong and the fix."""
        return (f"{self.policy.level}: {self.resource}: {self.message} "
                f"[{self.policy.name}]; fix: {self.policy.fix}")


#: Every policy by name, in the order docs/security.md's table lists them.
POLICIES: dict[str, Policy] = {}


def policy(name: str, level: Level, checks: str, fix: str, *, stack: bool = False,
           rule: str | None = None, plan_only: str | None = None) -> Callable[[Check], Check]:
    """Register a check as the policy ``name``; the pack and the offline runner read POLICIES."""
    def register(check: Check) -> Check:
        if name in POLICIES:
            raise ValueError(f"policy {name} is registered twice")
        POLICIES[name] = Policy(name, level, checks, fix, check, stack, rule, plan_only)
        return check
    return register


def evaluate(resources: Iterable[PolicyResource], outputs: Mapping[str, Any] | None = None,
             settings: Settings | None = None, stack_name: str = "stack outputs",
             ) -> list[Violation]:
    """Every violation of every policy: resource policies per resource, stack ones on outputs."""
    settings = settings or Settings()
    stack = PolicyResource(STACK_TYPE, stack_name, dict(outputs or {}))
    found: list[Violation] = []
    for res in resources:
        for pol in POLICIES.values():
            if not pol.stack:
                found += [Violation(pol, res.name, m) for m in pol.check(res, settings)]
    for pol in POLICIES.values():
        if pol.stack:
            found += [Violation(pol, stack.name, m) for m in pol.check(stack, settings)]
    return found


def _known(value: Any) -> bool:
    return value is not None and value != UNKNOWN


def _interfaces(res: PolicyResource) -> list[Mapping[str, Any]]:
    nics = res.inputs.get("networkInterfaces")
    return [n for n in nics if isinstance(n, Mapping)] if isinstance(nics, list) else []


def _login_nodes(res: PolicyResource) -> Mapping[str, Any]:
    orchestrator = res.inputs.get("orchestrator")
    slurm = orchestrator.get("slurm") if isinstance(orchestrator, Mapping) else None
    login = slurm.get("loginNodes") if isinstance(slurm, Mapping) else None
    return login if isinstance(login, Mapping) else {}


@policy("no-external-ip", "mandatory",
        "no VM, instance template or managed cluster node has an external IP",
        "remove the access config; nodes reach the internet through Cloud NAT and users "
        "through IAP (`gcloud compute ssh --tunnel-through-iap`)",
        plan_only="no blueprint key gives a node an address: every VM, template and managed "
                  "login node is made without an access config whatever the blueprint says "
                  "(`network.nat` only adds Cloud NAT); only a change to the components could "
                  "break it")
def no_external_ip(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """A node with a public address is reachable from the internet past every firewall intent."""
    if res.type in VM_TYPES:
        for index, nic in enumerate(_interfaces(res)):
            for key in ("accessConfigs", "ipv6AccessConfigs"):
                if nic.get(key):
                    yield f"networkInterfaces[{index}].{key} gives it an external IP"
    if res.type == MANAGED_CLUSTER and _login_nodes(res).get("enablePublicIps") is True:
        yield "orchestrator.slurm.loginNodes.enablePublicIps gives login nodes external IPs"


def _admits_port(allow: Mapping[str, Any], port: int | None) -> bool:
    """Whether one ``allows`` entry admits ``port`` (None: any port at all)."""
    protocol = str(allow.get("protocol", "")).lower()
    if port is not None and protocol not in ("tcp", "all", "6"):
        return False
    ports = allow.get("ports") or []
    if port is None or not ports:
        return True
    for item in ports:
        low, _, high = str(item).partition("-")
        if low.isdigit() and int(low) <= port <= int(high or low):
            return True
    return False


def _ingress(res: PolicyResource) -> bool:
    return res.type == FIREWALL and str(res.inputs.get("direction") or "INGRESS") == "INGRESS"


def _allows(res: PolicyResource, port: int | None) -> bool:
    allows = res.inputs.get("allows") or []
    return any(isinstance(a, Mapping) and _admits_port(a, port) for a in allows)


def _source_ranges(res: PolicyResource) -> tuple[list[str], list[Any]]:
    """The rule's known source ranges: those that parse, and those that do not.

    A range with host bits set parses (addresses.public_sources reads it as the block it
    lies in). A lone value reads as a list of one.
    """
    ranges = res.inputs.get("sourceRanges")
    items = ranges if isinstance(ranges, list | tuple) else [ranges]
    parsed: list[str] = []
    unreadable: list[Any] = []
    for item in filter(_known, items):
        try:
            if not isinstance(item, str):  # ip_network would read an integer as an address
                raise ValueError(item)
            ipaddress.ip_network(item, strict=False)
            parsed.append(item)
        except ValueError:
            unreadable.append(item)
    return parsed, unreadable


@policy("no-open-firewall", "mandatory",
        "no firewall rule admits any port from more than a /16's worth of public IPv4 "
        "addresses (a /40's of IPv6), counted over all its source ranges together, IAP's "
        "range aside; nor from a source range that is not an IP range, nor from no source",
        f"set `network.ssh_source_ranges` to IAP's {catalog.IAP_RANGE} or the ranges your "
        "users come from, a /16's worth of public addresses at most in all; a rule needs "
        "source ranges, tags or service accounts", rule="network.open-firewall")
def no_open_firewall(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """An ingress rule from a large share of the internet opens the cluster to it, whether
    it says 0.0.0.0/0 or 0.0.0.0/1 and 128.0.0.0/1. A range that does not parse is refused:
    the policy cannot tell what it admits, and the API may read it more loosely than Python."""
    if not _ingress(res) or not _allows(res, None):
        return
    _, unreadable = _source_ranges(res)
    for item in unreadable:
        yield f"sourceRanges holds {item!r}, which is not an IP range: what it admits is unknown"
    for admitted in addresses.open_to_internet(_source_ranges(res)[0]):
        yield f"sourceRanges admit {admitted.text(addresses.OPEN_PREFIX)}"
    sources = ("sourceRanges", "sourceTags", "sourceServiceAccounts")
    if not any(res.inputs.get(key) for key in sources):
        # The API treats a rule without sources as 0.0.0.0/0
        # (hashicorp/terraform-provider-google#6789).
        yield "it names no source, which the API reads as 0.0.0.0/0"


def _roles(res: PolicyResource) -> list[str]:
    role = res.inputs.get("role")
    return [role] if isinstance(role, str) and _known(role) else []


@policy("least-privilege-identity", "mandatory",
        "no VM runs as the default compute service account; no owner or editor role; node "
        "accounts hold only the roles of the allowed table (logging, monitoring, the munge "
        "secret's and the mounted buckets' roles)",
        "give each VM its own service account "
        "(clusterprint.components.identity.NodeServiceAccount) and grant only the roles in "
        "clusterprint.preview.policies.ALLOWED_ROLES",
        plan_only="no blueprint key names a service account or a role: the components make "
                  "each node's account and grant it the roles of clusterprint.facts.iam")
def least_privilege_identity(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """The default account is Editor on the project in many projects; roles beyond the table
    let one compromised node act on the whole project."""
    accounts = res.inputs.get("serviceAccount")
    if res.type in VM_TYPES and accounts != UNKNOWN:
        if not isinstance(accounts, Mapping) or not accounts:
            # Terraform's google provider attaches the default account when no email is given.
            yield "it names no service account, so it runs as the default compute account"
        else:
            email = accounts.get("email")
            if email in (None, "", "default") or (
                    isinstance(email, str) and DEFAULT_COMPUTE_ACCOUNT.fullmatch(email)):
                yield f"serviceAccount.email {email or '(none)'} is the default compute account"
    for role in _roles(res):
        if role in BASIC_ROLES:
            yield f"it grants {role}, which holds every permission of the project"
        elif res.type in ALLOWED_ROLES and role not in ALLOWED_ROLES[res.type]:
            yield f"it grants {role}, which is not in the allowed roles of {res.type}"


@policy("no-plaintext-secret", "mandatory",
        "no munge key, private key or token in metadata, labels, startup scripts, bucket "
        "names or any other input; the munge and JWT secrets get no version from Pulumi",
        "keep secrets in Secret Manager and pass only the secret's name "
        "(the controller writes the munge and JWT keys on first boot)",
        rule="security.plaintext-secret")
def no_plaintext_secret(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """Inputs land in Pulumi state, plans, the console and CI logs: a secret there is leaked."""
    yield from _secrets_in(res.inputs)
    if res.type == SECRET_VERSION:
        secret = res.inputs.get("secret")
        kind = next((k for k, id_ in GENERATED_KEYS.items() if id_ in str(secret)), None)
        if not _known(secret) or kind:
            yield (f"a SecretVersion of the {kind or 'munge'} secret puts the key in Pulumi "
                   "state; the controller generates it on first boot")


@policy("no-secret-in-outputs", "mandatory",
        "no munge key, private key or token in the stack's outputs",
        "export the secret's name, never its value", stack=True,
        rule="security.plaintext-secret")
def no_secret_in_outputs(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """`pulumi stack output` prints outputs to anyone who can read the stack."""
    yield from _secrets_in(res.inputs)


def _secrets_in(inputs: Mapping[str, Any]) -> Iterator[str]:
    for path, problem in credentials.leaks(inputs):
        yield f"{credentials.dotted(path)} {problem}"


@policy("bucket-access", "mandatory",
        "every bucket has uniform bucket-level access and enforced public access prevention",
        "set uniform_bucket_level_access=True and public_access_prevention=\"enforced\"",
        plan_only="a bucket's access settings are the component's, not the blueprint's: "
                  "`storage.buckets[]` names a bucket and whether to create it, and an existing "
                  "one is no resource of the plan")
def bucket_access(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """Per-object ACLs and public access are how bucket data leaks."""
    if res.type != BUCKET:
        return
    uniform, prevention = (res.inputs.get(k) for k in ("uniformBucketLevelAccess",
                                                        "publicAccessPrevention"))
    if uniform is not True and uniform != UNKNOWN:
        yield "uniformBucketLevelAccess is not true: object ACLs can grant access"
    if prevention not in ("enforced", UNKNOWN):
        yield "publicAccessPrevention is not \"enforced\": the bucket can be made public"


@policy("storage-protected", "mandatory",
        "Filestore, Lustre, buckets, persistent disks (the controller's state) and the "
        "managed cluster are `protect`-ed while `storage.protect` is true",
        "create them with pulumi.ResourceOptions(protect=True), as SharedStorage does",
        plan_only="`protect` is a resource option the components set from `storage.protect`; "
                  "a blueprint that turns it off meets the advisory storage-unprotected "
                  "instead")
def storage_protected(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """An unprotected data resource is one `pulumi destroy` or replacing diff from data loss."""
    if settings.storage_protect and res.type in DATA_TYPES and not res.protect:
        yield "it holds data but is not protected while storage.protect is true"


@policy("ssh-source-ranges-wide", "advisory",
        "SSH is admitted from more public addresses than a /24 holds (a /48 of IPv6), counted "
        "over all the rule's source ranges together, IAP's range aside",
        f"narrow `network.ssh_source_ranges` to IAP's {catalog.IAP_RANGE} or your offices' "
        "ranges", rule="network.ssh-wide")
def ssh_source_ranges_wide(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """A wide public range lets far more hosts than your users try SSH on every node; past
    OPEN_PREFIX `no-open-firewall` refuses the rule instead."""
    if not _ingress(res) or not _allows(res, 22):
        return
    for admitted in addresses.wide_ssh(_source_ranges(res)[0]):
        yield f"SSH is open to {admitted.text(addresses.WIDE_SSH_PREFIX)}"


@policy("storage-unprotected", "advisory",
        "`storage.protect: false` leaves Filestore, Lustre, buckets and persistent disks "
        "unprotected",
        "set `storage.protect: true` unless the data is disposable")
def storage_unprotected(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """Allowed for throwaway clusters, but worth a line in every plan that has it."""
    if not settings.storage_protect and res.type in DATA_TYPES and not res.protect:
        yield "storage.protect is false: `pulumi destroy` deletes this data"


def _image(res: PolicyResource) -> str:
    if res.type == INSTANCE:
        disk = res.inputs.get("bootDisk")
        params = disk.get("initializeParams") if isinstance(disk, Mapping) else None
        image = params.get("image") if isinstance(params, Mapping) else None
        return image if isinstance(image, str) else ""
    disks = res.inputs.get("disks")
    boot = [d for d in disks if isinstance(d, Mapping) and d.get("boot")] if isinstance(
        disks, list) else []
    image = boot[0].get("sourceImage") if boot else None
    return image if isinstance(image, str) else ""


@policy("shielded-vm", "advisory",
        "vTPM and integrity monitoring stay on for VMs booting a public image that supports "
        "Shielded VM, or clusterprint's image made from one",
        "drop enable_vtpm=False / enable_integrity_monitoring=False from "
        "shielded_instance_config (both default to on)")
def shielded_vm(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """Integrity monitoring reports a tampered boot chain; it costs nothing where supported.

    Secure Boot is not asked for: it refuses kernel modules without a trusted signature,
    and the nodes load the Lustre client's modules from Google's package repository, for
    which no Secure Boot support is documented (Managed Lustre's DKMS build "is not
    supported on Shielded VMs", docs.cloud.google.com/managed-lustre/docs/dkms).
    """
    if res.type not in VM_TYPES:
        return
    match = re.match(r"(?:.*/)?projects/([^/]+)/global/images/(?:family/)?([^/]+)$", _image(res))
    if match is None or (match.group(1) not in SHIELDED_IMAGE_PROJECTS
                         and not match.group(2).startswith(SHIELDED_IMAGE_PREFIX)):
        return
    config = res.inputs.get("shieldedInstanceConfig")
    if not isinstance(config, Mapping):
        return
    for key in ("enableVtpm", "enableIntegrityMonitoring"):
        if config.get(key) is False:
            yield f"shieldedInstanceConfig.{key} is false on an image that supports it"


@policy("exact-boot-image", "advisory",
        "VMs and instance templates boot an exact image, never an image family",
        "name the image (`image: {project, name}`), or drop `image` to boot clusterprint's "
        "built one")
def exact_boot_image(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """A family's newest image changes when its publisher adds one: two nodes made on
    different days then run different software (and a new kernel may lack its modules).
    Advisory: a blueprint may name a family on purpose."""
    if res.type in VM_TYPES and FAMILY_PATH.match(_image(res)):
        yield f"it boots the image family {_image(res)}: each new VM gets the family's newest"


@policy("os-login", "advisory",
        "VMs and managed login nodes use OS Login (metadata enable-oslogin TRUE)",
        "set metadata enable-oslogin=TRUE (TrainingCluster does) or enable_os_login=True")
def os_login(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """OS Login ties SSH to IAM identities; metadata SSH keys outlive the people who added them.

    Advisory: project metadata can enable OS Login for VMs that do not say.
    """
    metadata = res.inputs.get("metadata")
    if res.type in VM_TYPES and metadata != UNKNOWN:
        value = metadata.get("enable-oslogin") if isinstance(metadata, Mapping) else None
        if value is None or (_known(value) and str(value).upper() != "TRUE"):
            yield f"metadata enable-oslogin is {value or 'not set'}, not TRUE"
    if res.type == MANAGED_CLUSTER and _login_nodes(res).get("enableOsLogin") is False:
        yield "orchestrator.slurm.loginNodes.enableOsLogin is false"


def check_plan(plan: Any, settings: Settings) -> list[Violation]:
    """Every violation in a ``clusterprint.preview.plan.Plan``: what ``plan --policy`` reports."""
    resources = [PolicyResource(r.type, r.name, r.inputs, r.protect) for r in plan.resources]
    return evaluate(resources, plan.outputs, settings)
