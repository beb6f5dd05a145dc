"""Names and references: every list's names are unique and every reference resolves."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from clusterprint.blueprint.findings import Finding, KeyPath, error, format_path, warning
from clusterprint.blueprint.model import Blueprint, Nodeset
from clusterprint.blueprint.rules.registry import rule
from clusterprint.contract import naming


def duplicates(list_path: KeyPath, names: list[str], key: str) -> Iterator[Finding]:
    """A finding at each repeat of a name in a list, naming the first occurrence."""
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in first:
            yield error((*list_path, index, key),
                        f"{name!r} is already used by {list_path[-1]}[{first[name]}]",
                        "names must be unique")
        else:
            first[name] = index


def unknown_reference(path: KeyPath, name: str, known: list[str], what: str,
                      plural: str) -> Finding:
    """A reference to a missing entry, with the closest existing name as a hint."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else (
        f"listed {plural}: {', '.join(known)}" if known else f"no {plural} are listed")
    return error(path, f"{name!r} is not a listed {what}", hint)


@rule("names.unique")
def check_unique_names(bp: Blueprint) -> Iterator[Finding]:
    """Names become resource names and Slurm names: two of one kind cannot share one."""
    yield from duplicates(("slurm", "nodesets"), [n.name for n in bp.slurm.nodesets], "name")
    yield from duplicates(("slurm", "partitions"), [p.name for p in bp.slurm.partitions], "name")
    yield from duplicates(("storage", "lustre"), [x.name for x in bp.storage.lustre], "name")
    yield from duplicates(("storage", "buckets"), [b.bucket for b in bp.storage.buckets],
                          "bucket")
    yield from duplicates(("network", "peerings"), [p.name for p in bp.network.peerings], "name")
    yield from duplicates(("recipes",), [r.name for r in bp.recipes], "name")


@dataclass(frozen=True)
class DerivedName:
    """A name clusterprint gives a resource, and the blueprint entry it comes from."""

    name: str
    #: What carries the name, in words: "Lustre instance".
    what: str
    #: The entry (or section) the name derives from, and the key in it that names it.
    entry: KeyPath
    key: str | None = None

    @property
    def path(self) -> KeyPath:
        """Where a collision is reported: the naming key of the entry."""
        return (*self.entry, self.key) if self.key else self.entry


def nodeset_children(nodeset: Nodeset) -> dict[str, str]:
    """The roles of a nodeset's GpuNodeset children, each in words."""
    children = {naming.TEMPLATE: "instance template"}
    if nodeset.compact_policy:
        children[naming.PLACEMENT] = "placement policy"
    for index, count in enumerate(nodeset.group_counts):
        children[naming.numbered(naming.GROUP, index)] = "instance group"
        if nodeset.provisioning == "flex-start" and count:
            children[naming.numbered(naming.RESIZE, index)] = "resize request"
    for index in range(nodeset.elastic_groups):
        children[naming.numbered(naming.ELASTIC_GROUP, index)] = "elastic nodes' group"
    return children


def stack_names(bp: Blueprint) -> list[DerivedName]:
    """The logical names blueprint entries derive in a self-managed stack, with the fixed
    names beside them, as TrainingCluster (named ``bp.name`` by the stack program) gives
    them; fixed names first, then entries in file order.
    """
    storage = naming.child(bp.name, naming.STORAGE)
    home = bp.storage.home
    names: list[DerivedName] = []
    if home.uses_filestore and home.filestore is not None:
        names.append(DerivedName(naming.child(storage, naming.FILESTORE_HOME),
                                 "Filestore instance", ("storage", "home")))
    if bp.storage.lustre:
        names.append(DerivedName(naming.child(storage, naming.LNET_FIREWALL),
                                 "LNet firewall", ("storage", "lustre")))
    names += [DerivedName(naming.child(storage, x.name), "Lustre instance",
                          ("storage", "lustre", i), "name")
              for i, x in enumerate(bp.storage.lustre)]
    names += [DerivedName(naming.child(storage, b.bucket), "bucket",
                          ("storage", "buckets", i), "bucket")
              for i, b in enumerate(bp.storage.buckets) if b.create]
    for i, ns in enumerate(bp.slurm.nodesets):
        entry = ("slurm", "nodesets", i)
        component = naming.nodeset_component(bp.name, ns.name)
        names.append(DerivedName(component, "nodeset component", entry, "name"))
        names += [DerivedName(naming.child(component, role), words, entry, "name")
                  for role, words in nodeset_children(ns).items()]
    return names


def group_base_names(bp: Blueprint) -> list[DerivedName]:
    """The base instance names of the nodesets' groups, static and elastic. The remediation
    loop, power saving and ``clusterprint status`` find a nodeset's groups by this name
    alone (Pulumi auto-names the groups), and an elastic group's (``c-gpu-e`` of nodeset
    ``gpu``) is nodeset ``gpu-e``'s static one: power saving would create gpu's nodes in
    gpu-e's groups, of gpu-e's template, and scale-down count them as gpu-e's."""
    names: list[DerivedName] = []
    for i, ns in enumerate(bp.slurm.nodesets):
        entry = ("slurm", "nodesets", i)
        names.append(DerivedName(naming.base_instance_name(bp.name, ns.name),
                                 "static groups' base instance name", entry, "name"))
        if ns.elastic_groups:
            names.append(DerivedName(naming.elastic_base_instance_name(bp.name, ns.name),
                                     "elastic groups' base instance name", entry, "name"))
    return names


def managed_storage_ids(bp: Blueprint) -> list[DerivedName]:
    """The managed API's storage resource ids; the positional bucket ids come before the
    Lustre entries, so a collision is reported where a rename helps.
    """
    home = bp.storage.home
    ids: list[DerivedName] = []
    if home.uses_filestore and home.filestore is not None:
        ids.append(DerivedName(naming.MANAGED_HOME_ID, "Filestore /home", ("storage", "home")))
    ids += [DerivedName(naming.managed_bucket_id(i), "bucket", ("storage", "buckets", i),
                        "bucket")
            for i in range(len(bp.storage.buckets))]
    ids += [DerivedName(naming.managed_lustre_id(x.name), "Lustre instance",
                        ("storage", "lustre", i), "name")
            for i, x in enumerate(bp.storage.lustre)]
    return ids


@rule("names.derived-collision")
def check_derived_collisions(bp: Blueprint) -> Iterator[Finding]:
    """Entries of different lists (or different roles of one list) can derive one name.

    The plan would then show children under the wrong parent and diff false
    replacements; in managed mode the API keeps one storage resource per id, and the
    mount of the other (perhaps /home) is lost; two groups of one base instance name are
    taken for one nodeset's (``group_base_names``). A repeat within one list is
    ``names.unique``'s. Each kind of name is checked apart: a base instance name and a
    logical name may be equal.
    """
    managed = bp.orchestrator == "managed"
    kinds = [managed_storage_ids(bp)] if managed else [stack_names(bp), group_base_names(bp)]
    for names in kinds:
        yield from _collisions(names, "have the managed storage id" if managed else "be named")


def _collisions(names: list[DerivedName], taken: str) -> Iterator[Finding]:
    """An error at each name that an earlier one of another kind already took."""
    first: dict[str, DerivedName] = {}
    for item in names:
        earlier = first.setdefault(item.name, item)
        if earlier is item or earlier.what == item.what:
            continue
        yield error(item.path,
                    f"its {item.what} would clash with the {earlier.what} of "
                    f"{format_path(earlier.entry)}: both would {taken} {item.name!r}",
                    "rename one of the two: each derived name must name one resource")



#: Words slurm.conf reads as keywords where a partition or nodeset name stands:
#: ``PartitionName=DEFAULT`` sets defaults for the lines after it (the partition
#: vanishes), ``Nodes=ALL`` means every node.
SLURM_KEYWORDS = frozenset({"default", "all"})


@rule("names.slurm-keyword")
def check_slurm_keywords(bp: Blueprint) -> Iterator[Finding]:
    """A partition or nodeset named like a slurm.conf keyword silently changes meaning."""
    for kind, items in (("nodesets", bp.slurm.nodesets), ("partitions", bp.slurm.partitions)):
        for index, item in enumerate(items):
            if item.name in SLURM_KEYWORDS:
                yield error(("slurm", kind, index, "name"),
                            f"{item.name!r} is a slurm.conf keyword, not a usable name",
                            f"choose another name, e.g. {item.name}-{kind[:-1]}")


@rule("names.partition-nodesets")
def check_partition_nodesets(bp: Blueprint) -> Iterator[Finding]:
    """A partition names each nodeset once, and only nodesets under slurm.nodesets.

    slurm.conf's ``Nodes=a,a`` swaps only the first ``a`` for the nodeset's nodes; the
    second is taken for a node name, and slurmctld 22.05 crashes on it.
    """
    known = [n.name for n in bp.slurm.nodesets]
    for p_index, partition in enumerate(bp.slurm.partitions):
        first: dict[str, int] = {}
        for n_index, name in enumerate(partition.nodesets):
            path = ("slurm", "partitions", p_index, "nodesets", n_index)
            if name in first:
                yield error(path, f"{name!r} is already listed at nodesets[{first[name]}]",
                            "list each nodeset once: slurmctld does not start on a repeat")
            elif name not in known:
                yield unknown_reference(path, name, known, "nodeset", "nodesets")
            first.setdefault(name, n_index)


@rule("names.default-partition")
def check_one_default_partition(bp: Blueprint) -> Iterator[Finding]:
    """Slurm has one default partition: at most one may be marked."""
    marked = [i for i, p in enumerate(bp.slurm.partitions) if p.default]
    for index in marked[1:]:
        yield error(("slurm", "partitions", index, "default"),
                    f"partitions[{marked[0]}] is already the default partition",
                    "mark one partition default: true")


@rule("names.unused-nodeset")
def check_nodesets_used(bp: Blueprint) -> Iterator[Finding]:
    """A nodeset in no partition would boot VMs no job can use."""
    used = {name for p in bp.slurm.partitions for name in p.nodesets}
    for index, nodeset in enumerate(bp.slurm.nodesets):
        if nodeset.name not in used:
            yield warning(("slurm", "nodesets", index, "name"),
                          f"nodeset {nodeset.name!r} is in no partition",
                          "add it to a partition's nodesets, or remove it")
