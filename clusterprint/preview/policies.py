"""Security policies over planned resources: the one implementation of the policy pack.

Each policy is a small function over one resource as the engine sees it (type token,
logical name, camelCase inputs, the ``protect`` option), yielding a message per problem.
Two callers run the same functions: the Pulumi policy pack in ``policy/`` (during
``pulumi preview`` and ``pulumi up``) and ``clusterprint plan --policy`` (offline, over the
mocked plan). A mandatory violation fails both; an advisory one only warns.

Values only the cloud knows are the string ``[unknown]`` in both callers (the pack maps
Pulumi's unknown sentinels to it), and a policy never refuses what it cannot see.

No Pulumi import here: the offline runner stays fast and the pack imports only this.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from clusterprint.facts import catalog
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

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Blocks whose addresses are not public: those the IANA IPv4 and IPv6 Special-Purpose
#: Address Registries mark not "Globally Reachable" (iana.org/assignments/
#: iana-ipv4-special-registry, .../iana-ipv6-special-registry), as CPython 3.13's ipaddress
#: lists them for ``is_global``. Kept here, not read from ``is_global``, because the Python
#: that runs the pack may be older and disagree: 3.11's tables predate CPython's 2024
#: correction (gh-113171), and a network's ``is_global`` looks at its first and last
#: address only. Unlike CPython, a block IANA marks N/A (2002::/16 6to4) counts as public:
#: its hosts are anywhere on the internet, and a firewall errs on the side of counting.
NOT_PUBLIC: tuple[Network, ...] = tuple(ipaddress.ip_network(block) for block in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
    "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
    "2001:db8::/32", "3fff::/20", "fc00::/7", "fe80::/10"))
#: The blocks inside NOT_PUBLIC that the registries mark globally reachable (PCP and TURN
#: anycast, AMT, AS112, ORCHIDv2, DRIP) or N/A (Teredo, the retired ORCHID): public.
PUBLIC_EXCEPTIONS: tuple[Network, ...] = tuple(ipaddress.ip_network(block) for block in (
    "192.0.0.9/32", "192.0.0.10/32", "2001::/32", "2001:1::1/128", "2001:1::2/128",
    "2001:3::/32", "2001:4:112::/48", "2001:10::/28", "2001:20::/28", "2001:30::/28"))
#: The bound of `no-open-firewall`: the most public addresses one rule's source ranges may
#: admit together, IAP's range aside, given as the prefix length of a block that holds as
#: many, by IP version. A /24 (IPv4) and a /48 (IPv6) are the smallest blocks routed on the
#: internet, so one is at most one organisation's site; the bound is 256 of them, a /16's
#: worth of IPv4 (65,536 addresses) and a /40's of IPv6. Past it a rule lets a whole
#: provider's customers in, however its ranges are split, and the policy refuses it.
OPEN_PREFIX = {4: 16, 6: 40}
#: SSH from more public addresses than one routed site's block holds (a /24, a /48), IAP's
#: range aside, is "wide": advisory, for a rule within OPEN_PREFIX.
WIDE_SSH_PREFIX = {4: 24, 6: 48}
#: Address bits by IP version, for the size of a block of a given prefix length.
ADDRESS_BITS = {4: ipaddress.IPV4LENGTH, 6: ipaddress.IPV6LENGTH}
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

#: What the detector looks for in every string a resource carries: credential formats
#: whose shape alone gives them away, so an ordinary script line never matches.
SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "a private key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    "a service account key": re.compile(r'"private_key(?:_id)?"\s*:\s*"'),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
    "a Google OAuth access token": re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"),
    "a Pulumi access token": re.compile(r"\bpul-[0-9a-f]{40}\b"),
    "an AWS access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a Slack token": re.compile(r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),
    # A munge key is 32 to 1024 random bytes (mungekey(8)); as text it is a long base64 or
    # hex run. 256 base64 characters is 192 bytes: longer than any word, hash or name.
    "a munge key (a long base64 blob)": re.compile(r"[A-Za-z0-9+/]{256,}={0,2}"),
    # A literal key echoed into munge.key: the literal is echo's argument, piped or
    # redirected on the same line, so a long path elsewhere on the line never matches.
    "a munge key written from the script": re.compile(
        r"\b(?:echo|printf)\s+(?:\S+\s+)*?['\"]?[A-Za-z0-9+/]{32,}={0,2}['\"]?\s*[|>]"
        r"[^\n]*munge\.key"),
}
#: A metadata key or label that says it holds the munge key.
MUNGE_KEY_NAME = re.compile(r"munge[-_.]?key", re.IGNORECASE)
#: What such a key may hold: the Secret Manager secret's name, never the key.
SECRET_REFERENCE = re.compile(
    r"projects/[^/\s]+/secrets/[^/\s]+|\[(?:id of [^\]]+|unknown|secret)\]")


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


def policy(name: str, level: Level, checks: str, fix: str, *,
           stack: bool = False) -> Callable[[Check], Check]:
    """Register a check as the policy ``name``; the pack and the offline runner read POLICIES."""
    def register(check: Check) -> Check:
        if name in POLICIES:
            raise ValueError(f"policy {name} is registered twice")
        POLICIES[name] = Policy(name, level, checks, fix, check, stack)
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


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a value with its path, dict keys included (a label's key can leak)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub, str(key)
            yield from _strings(item, sub)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


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
        "through IAP (`gcloud compute ssh --tunnel-through-iap`)")
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


def _source_ranges(res: PolicyResource) -> tuple[list[tuple[str, Network]], list[Any]]:
    """The rule's known source ranges: those that parse, with their text, and those that do not.

    A range with host bits set reads as the block it lies in: whatever the API makes of it,
    it admits no more. A lone value reads as a list of one.
    """
    ranges = res.inputs.get("sourceRanges")
    items = ranges if isinstance(ranges, list | tuple) else [ranges]
    parsed: list[tuple[str, Network]] = []
    unreadable: list[Any] = []
    for item in filter(_known, items):
        try:
            if not isinstance(item, str):  # ip_network would read an integer as an address
                raise ValueError(item)
            parsed.append((item, ipaddress.ip_network(item, strict=False)))
        except ValueError:
            unreadable.append(item)
    return parsed, unreadable


def _without(networks: Iterable[Network], holes: Iterable[Network]) -> list[Network]:
    """The addresses of ``networks`` that are in none of ``holes``, as disjoint blocks."""
    left = list(networks)
    for hole in holes:
        left = [piece for network in left for piece in _cut(network, hole)]
    return left


def _cut(network: Network, hole: Network) -> Iterable[Network]:
    """``network`` less ``hole``: two blocks are disjoint or one holds the other."""
    if network.version != hole.version or not network.overlaps(hole):
        return [network]
    if network.subnet_of(hole):
        return []
    return network.address_exclude(hole)


#: Every address a firewall need not count: the special-purpose blocks less their public
#: exceptions, and IAP's range, which every cluster admits SSH from.
UNCOUNTED: tuple[Network, ...] = (*_without(NOT_PUBLIC, PUBLIC_EXCEPTIONS),
                                  ipaddress.ip_network(catalog.IAP_RANGE))


@dataclass(frozen=True)
class PublicSources:
    """The public addresses a rule's source ranges of one IP version admit, IAP's aside."""

    version: int
    count: int
    #: The ranges as written that hold any of them, each once.
    ranges: tuple[str, ...]

    def exceed(self, prefixes: Mapping[int, int]) -> bool:
        """Whether they outnumber a block of this version's prefix length in ``prefixes``."""
        return self.count > 2 ** (ADDRESS_BITS[self.version] - prefixes[self.version])

    def text(self, prefixes: Mapping[int, int]) -> str:
        """How many they are, the bound they pass and the ranges that hold them."""
        return (f"{self.count:,} public IPv{self.version} addresses, more than a "
                f"/{prefixes[self.version]} holds: {', '.join(self.ranges)}")


def _public_sources(res: PolicyResource) -> list[PublicSources]:
    """What the union of the rule's source ranges admits, by IP version: an address counts
    once however many ranges hold it, so splitting or repeating a range changes nothing."""
    parsed, _ = _source_ranges(res)
    found = []
    for version in sorted({network.version for _, network in parsed}):
        mine = [(text, network) for text, network in parsed if network.version == version]
        union = ipaddress.collapse_addresses(network for _, network in mine)
        count = sum(block.num_addresses for block in _without(union, UNCOUNTED))
        ranges = dict.fromkeys(text for text, network in mine if _without([network], UNCOUNTED))
        if count:
            found.append(PublicSources(version, count, tuple(ranges)))
    return found


@policy("no-open-firewall", "mandatory",
        "no firewall rule admits any port from more than a /16's worth of public IPv4 "
        "addresses (a /40's of IPv6), counted over all its source ranges together, IAP's "
        "range aside; nor from a source range that is not an IP range, nor from no source",
        f"set `network.ssh_source_ranges` to IAP's {catalog.IAP_RANGE} or the ranges your "
        "users come from, a /16's worth of public addresses at most in all; a rule needs "
        "source ranges, tags or service accounts")
def no_open_firewall(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """An ingress rule from a large share of the internet opens the cluster to it, whether
    it says 0.0.0.0/0 or 0.0.0.0/1 and 128.0.0.0/1. A range that does not parse is refused:
    the policy cannot tell what it admits, and the API may read it more loosely than Python."""
    if not _ingress(res) or not _allows(res, None):
        return
    _, unreadable = _source_ranges(res)
    for item in unreadable:
        yield f"sourceRanges holds {item!r}, which is not an IP range: what it admits is unknown"
    for admitted in _public_sources(res):
        if admitted.exceed(OPEN_PREFIX):
            yield f"sourceRanges admit {admitted.text(OPEN_PREFIX)}"
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
        "clusterprint.preview.policies.ALLOWED_ROLES")
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
        "(the controller writes the munge and JWT keys on first boot)")
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
        "export the secret's name, never its value", stack=True)
def no_secret_in_outputs(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """`pulumi stack output` prints outputs to anyone who can read the stack."""
    yield from _secrets_in(res.inputs)


def _secrets_in(inputs: Mapping[str, Any]) -> Iterator[str]:
    for path, text in _strings(inputs):
        for kind, pattern in SECRET_PATTERNS.items():
            if pattern.search(text):
                yield f"{path} holds {kind}"
    for path, value in _munge_named(inputs):
        if not SECRET_REFERENCE.fullmatch(value):
            yield f"{path} is named as the munge key but holds a value, not a secret's name"


def _munge_named(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """String values under a key that says it is the munge key, anywhere in the inputs."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(item, str) and MUNGE_KEY_NAME.search(str(key)):
                yield sub, item
            else:
                yield from _munge_named(item, sub)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _munge_named(item, f"{path}[{index}]")


@policy("bucket-access", "mandatory",
        "every bucket has uniform bucket-level access and enforced public access prevention",
        "set uniform_bucket_level_access=True and public_access_prevention=\"enforced\"")
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
        "create them with pulumi.ResourceOptions(protect=True), as SharedStorage does")
def storage_protected(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """An unprotected data resource is one `pulumi destroy` or replacing diff from data loss."""
    if settings.storage_protect and res.type in DATA_TYPES and not res.protect:
        yield "it holds data but is not protected while storage.protect is true"


@policy("ssh-source-ranges-wide", "advisory",
        "SSH is admitted from more public addresses than a /24 holds (a /48 of IPv6), counted "
        "over all the rule's source ranges together, IAP's range aside",
        f"narrow `network.ssh_source_ranges` to IAP's {catalog.IAP_RANGE} or your offices' "
        "ranges")
def ssh_source_ranges_wide(res: PolicyResource, settings: Settings) -> Iterator[str]:
    """A wide public range lets far more hosts than your users try SSH on every node; past
    OPEN_PREFIX `no-open-firewall` refuses the rule instead."""
    if not _ingress(res) or not _allows(res, 22):
        return
    for admitted in _public_sources(res):
        if admitted.exceed(WIDE_SSH_PREFIX) and not admitted.exceed(OPEN_PREFIX):
            yield f"SSH is open to {admitted.text(WIDE_SSH_PREFIX)}"


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
