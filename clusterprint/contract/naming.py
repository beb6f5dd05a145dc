"""Every name clusterprint derives from a blueprint's entries, in one place.

The components name their resources with these functions, and the rule
``names.derived-collision`` derives the same names from a blueprint to refuse two
entries that would take one name, so a change of naming changes both at once. Pure
strings: no model, no Pulumi.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The label every resource of a cluster carries; the dashboard selects VMs by it.
CLUSTER_LABEL = "clusterprint-cluster"
#: The label a nodeset's VMs carry besides the cluster's.
NODESET_LABEL = "clusterprint-nodeset"
#: Label keys clusterprint sets itself; a blueprint's own would be overwritten.
RESERVED_LABEL_PREFIX = "clusterprint-"
#: Every label clusterprint adds to one resource, at most: a nodeset's VMs get both.
OWN_LABELS = (CLUSTER_LABEL, NODESET_LABEL)

#: The role of TrainingCluster's SharedStorage, whose children are named after entries.
STORAGE = "storage"
#: SharedStorage's children besides one per Lustre entry and created bucket.
FILESTORE_HOME = "home"
LNET_FIREWALL = "lnet"
#: GpuNodeset's children.
PLACEMENT = "placement"
TEMPLATE = "template"
GROUP = "group"
RESIZE = "resize"
#: The groups of a nodeset's elastic nodes.
ELASTIC_GROUP = "elastic"
#: Service account ids are ``{cluster}-{role}``.
COMPUTE_ACCOUNT = "compute"
LOGIN_ACCOUNT = "login"
CONTROLLER_ACCOUNT = "ctl"
#: The managed API's storage resource id of a Filestore /home.
MANAGED_HOME_ID = "home"


def child(parent: str, role: str) -> str:
    """A child resource's logical name: its parent's, then its role (``demo-storage-home``).

    Pulumi tells resources apart by type and name, but plan and diff match them by
    name, so two children of one parent must never take one role.
    """
    return f"{parent}-{role}"


def numbered(role: str, index: int) -> str:
    """The role of a nodeset's ``index``-th instance group (or its resize request): the
    first keeps the plain role, so a nodeset that grows past one group replaces nothing it
    had; the next are ``group-2``, ``group-3``..."""
    return role if index == 0 else f"{role}-{index + 1}"


def nodeset_component(cluster_component: str, nodeset: str) -> str:
    """A nodeset's GpuNodeset; its children are ``child(this, TEMPLATE)`` and so on."""
    return child(cluster_component, f"nodeset-{nodeset}")


def alert_email_channel(observability_component: str, address: str) -> str:
    """An alert email channel's logical name: named by its address, so a shifted list of
    addresses replaces no channel."""
    return child(observability_component, f"email-{address}")


def peering(network_component: str, peering_name: str) -> str:
    """A VPC peering's logical name."""
    return child(network_component, f"peering-{peering_name}")


def bucket_grant(identity_component: str, bucket: str) -> str:
    """A role's grant on a bucket: named by bucket, so a shifted list replaces nothing."""
    return child(identity_component, f"bucket-{bucket}")


def filestore_instance(cluster: str) -> str:
    """The Filestore /home instance's GCE name."""
    return f"{cluster}-home"


def lustre_instance_id(cluster: str, entry: str) -> str:
    """A Lustre entry's ``instance_id``."""
    return f"{cluster}-{entry}"


def base_instance_name(cluster: str, nodeset: str) -> str:
    """A nodeset's static VMs are named this plus ``-`` and STATIC_SUFFIX."""
    return f"{cluster}-{nodeset}"


#: What a group appends (after a ``-``) to its base instance name: four random lowercase
#: letters or digits (Compute's InstanceGroupManager.baseInstanceName; scale_down.py
#: picks its names from the same characters).
STATIC_SUFFIX = "[a-z0-9]{4}"


#: Digits of an elastic node's number: enough for a nodeset's most nodes (16,384).
ELASTIC_DIGITS = 5


def elastic_nodes(cluster: str, nodeset: str, count: int) -> str:
    """The names of a nodeset's ``count`` elastic nodes, as a Slurm hostlist:
    ``{cluster}-{nodeset}-e[00001-00012]``. Slurm must know them before their VMs exist
    (power saving resumes a node it knows), so unlike the static VMs' random four
    characters they are fixed; the ``e`` and the fifth character keep the two kinds of name
    apart. Empty for none."""
    if count < 1:
        return ""
    base = elastic_base_instance_name(cluster, nodeset)
    last = f"{count:0{ELASTIC_DIGITS}d}"
    if count == 1:
        return base + last
    return f"{base}[{1:0{ELASTIC_DIGITS}d}-{last}]"


def elastic_base_instance_name(cluster: str, nodeset: str) -> str:
    """The base name of the groups of a nodeset's elastic nodes: kept apart from the static
    groups', so the remediation loop and a static group's size never reach them."""
    return f"{base_instance_name(cluster, nodeset)}-e"


def vm_names(cluster: str, nodeset: str) -> str:
    """A regular expression that matches the whole name of each of a nodeset's VMs, static
    (``{cluster}-{nodeset}-ab12``) or elastic (``{cluster}-{nodeset}-e00001``), and of no
    other nodeset's: a prefix would also take nodeset ``gpu-big``'s VMs for ``gpu``'s.
    Fixed-length suffixes keep the two kinds and every nodeset apart, as a suffix holds no
    hyphen. RE2 and Python alike (the Compute API's list filter ``name eq`` is a full RE2
    match); the base is escaped, though the model allows only letters, digits and hyphens
    in it, none of which a regular expression reads outside brackets."""
    base = _literal(base_instance_name(cluster, nodeset))
    return f"{base}-({STATIC_SUFFIX}|e[0-9]{{{ELASTIC_DIGITS}}})"


def _literal(text: str) -> str:
    """``text`` matched as itself: every character but a letter, digit, ``_`` or ``-``
    backslashed, which RE2 and Python read as that character."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else f"\\{c}"
                   for c in text)


def service_account_id(cluster: str, role: str) -> str:
    """The account id of one node role's service account."""
    return f"{cluster}-{role}"


def munge_secret_id(cluster: str) -> str:
    """The Secret Manager secret that holds the cluster's munge key."""
    return f"{cluster}-munge-key"


def jwt_secret_id(cluster: str) -> str:
    """The Secret Manager secret that holds the key of the cluster's REST API tokens."""
    return f"{cluster}-jwt-key"


def db_secret_id(cluster: str) -> str:
    """The Secret Manager secret that holds the accounting database's password."""
    return f"{cluster}-db-password"


def managed_network(cluster: str) -> str:
    """The network the managed API creates for a cluster."""
    return f"{cluster}-net"


def managed_lustre_id(entry: str) -> str:
    """A Lustre entry's managed storage id: its name."""
    return entry


def managed_bucket_id(index: int) -> str:
    """A bucket's managed storage id: by position, as bucket names may hold dots."""
    return f"bucket-{index}"


def cluster_labels(labels: Mapping[str, str], cluster: str) -> dict[str, str]:
    """The blueprint's labels plus the cluster label: what every resource carries."""
    return {**labels, CLUSTER_LABEL: cluster}


def nodeset_labels(labels: Mapping[str, str], nodeset: str) -> dict[str, str]:
    """A nodeset's VMs' labels: the cluster's plus the nodeset label."""
    return {**labels, NODESET_LABEL: nodeset}
