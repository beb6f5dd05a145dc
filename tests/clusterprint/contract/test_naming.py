"""Every name clusterprint derives meets the cloud's limits for every legal blueprint.

The model's patterns bound what a blueprint names (cluster 2 to 20 characters, list
entries 1 to 16), so the shortest and the longest legal names are the cases to check:
a longer pattern or a longer derivation fails here, before a `pulumi up` does.
"""

from __future__ import annotations

import re

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text
from clusterprint.contract import naming, node_metadata
from clusterprint.preview.plan import plan_program
from tests.support.blueprint_texts import blueprint_text

LONGEST_CLUSTER = "c" * 20
LONGEST_ENTRY = "e" * 16
SHORTEST_CLUSTER = "cc"
#: RFC 1035 names of at most 63 characters: instances, Filestore, Lustre, networks.
RFC1035 = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
#: Service account ids: 6 to 30 characters (cloud.google.com/iam/docs/service-accounts-create).
ACCOUNT_ID = re.compile(r"^[a-z](?:[-a-z0-9]{4,28}[a-z0-9])$")
#: A MIG appends "-" and 4 characters to its base instance name, which may have 58
#: (compute API, InstanceGroupManager.baseInstanceName).
BASE_INSTANCE_MAX = 58
#: pulumi-gcp auto-names a resource "LOGICAL-" plus 7 random characters, and refuses a
#: result over 63 (its resources.go lowercaseAutoName: Maxlen 63, Randlen 7).
AUTONAME_SUFFIX = 8
#: Types whose GCE name clusterprint leaves to auto-naming.
AUTONAMED = {"gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork",
             "gcp:compute/firewall:Firewall", "gcp:compute/router:Router",
             "gcp:compute/routerNat:RouterNat", "gcp:compute/networkPeering:NetworkPeering",
             "gcp:compute/globalAddress:GlobalAddress",
             "gcp:compute/resourcePolicy:ResourcePolicy",
             "gcp:compute/instanceTemplate:InstanceTemplate",
             "gcp:compute/instanceGroupManager:InstanceGroupManager"}


@pytest.mark.parametrize("cluster", [SHORTEST_CLUSTER, LONGEST_CLUSTER])
def test_explicit_names_fit_their_limits(cluster):
    entry = LONGEST_ENTRY
    for name in (naming.filestore_instance(cluster), naming.lustre_instance_id(cluster, entry),
                 naming.managed_network(cluster), node_metadata.controller_hostname(cluster),
                 node_metadata.login_hostname(cluster, 15)):
        assert RFC1035.match(name), name
    assert len(naming.base_instance_name(cluster, entry)) <= BASE_INSTANCE_MAX
    assert RFC1035.match(naming.base_instance_name(cluster, entry) + "-abcd")
    for role in (naming.COMPUTE_ACCOUNT, naming.LOGIN_ACCOUNT, naming.CONTROLLER_ACCOUNT):
        assert ACCOUNT_ID.match(naming.service_account_id(cluster, role)), role


def longest_blueprint() -> Blueprint:
    """Every list entry at its longest name, on the machine with the most networks."""
    text = blueprint_text({
        "name": LONGEST_CLUSTER, "project": "my-project", "zone": "us-central1-b",
        "slurm.nodesets[0]": {"name": LONGEST_ENTRY, "machine_type": "a3-ultragpu-8g",
                              "count": 2, "placement": "compact"},
        "slurm.partitions[0].nodesets": [LONGEST_ENTRY],
        "network.peerings": [{"name": LONGEST_ENTRY,
                              "peer_network": "projects/other-proj/global/networks/n"}],
        "storage.lustre": [{"name": LONGEST_ENTRY, "filesystem": "fs", "capacity_gib": 18000}],
    })
    checked = check_text("bp.yaml", text)
    assert checked.ok, [f.line_text() for f in checked.findings]
    return checked.blueprint


def test_auto_names_of_the_longest_blueprint_fit_63_characters():
    from clusterprint.components.cluster import TrainingCluster

    bp = longest_blueprint()
    plan = plan_program(lambda: TrainingCluster(bp.name, bp))
    autonamed = [r.name for r in plan.resources if r.type in AUTONAMED]
    assert len({r.type for r in plan.resources if r.type in AUTONAMED}) == len(AUTONAMED)
    longest = max(autonamed, key=len)
    assert len(longest) + AUTONAME_SUFFIX <= 63, longest


#: Nodesets whose names start alike, each with a static and an elastic VM.
ALIKE = ("gpu", "gpu-e", "gpu-big")


def vms_of(nodeset: str) -> set[str]:
    """A static VM as a group names it and the first elastic node, of cluster ``c``."""
    return {f"{naming.base_instance_name('c', nodeset)}-ab12",
            naming.elastic_nodes("c", nodeset, 1)}


@pytest.mark.parametrize("nodeset", ALIKE)
def test_a_nodesets_vm_pattern_matches_its_own_vms_and_no_other_nodesets(nodeset):
    everyone = set().union(*map(vms_of, ALIKE))
    pattern = naming.vm_names("c", nodeset)
    assert {vm for vm in everyone if re.fullmatch(pattern, vm)} == vms_of(nodeset)


def test_the_vm_pattern_takes_no_longer_suffix_nor_another_elastic_number():
    pattern = naming.vm_names("c", "gpu")
    for name in ("c-gpu-ab12x", "c-gpu-e0001", "c-gpu-e000001", "c-gpu-AB12", "c-gpu-e-ab12"):
        assert not re.fullmatch(pattern, name), name


def test_the_vm_pattern_reads_the_base_as_itself():
    """Only letters, digits and hyphens reach it (the model), and those stay as they are;
    anything else would be backslashed, which RE2 reads as itself too."""
    assert naming.vm_names("my-cluster", "a4") == "my-cluster-a4-([a-z0-9]{4}|e[0-9]{5})"
    assert re.fullmatch(naming.vm_names("c.x", "a"), "c.x-a-ab12")
    assert not re.fullmatch(naming.vm_names("c.x", "a"), "cyx-a-ab12")


def test_the_names_scale_down_gives_new_vms_are_its_nodesets_static_names():
    """scale_down.py (a node program: it cannot import the contract) names the VMs it creates
    in a static group itself: host events and status must find them as that nodeset's."""
    from clusterprint.node import scale_down

    base = naming.base_instance_name("c", "gpu")
    names = scale_down.new_names(base, set(), 500, "seed")
    pattern = re.compile(naming.vm_names("c", "gpu"))
    assert all(pattern.fullmatch(name) for name in names)
    assert set("".join(name.rsplit("-", 1)[1] for name in names)) == set(scale_down.NAME_CHARS)
    # the suffix the contract matches is of exactly the characters scale-down draws from
    assert {c for c in map(chr, range(128)) if re.fullmatch(naming.STATIC_SUFFIX, c * 4)} == set(
        scale_down.NAME_CHARS)
