"""The APIs and roles a deploy needs come from what the stack really creates.

Every reference blueprint (and a variant that turns on what none of them uses: a VPC
peering, compact placement, a flex-start nodeset) is planned under mocks; each cloud
resource type in those plans must have an API and a deployer role, and every row of
the table must be a type some plan creates, so the table is neither short nor padded.
"""

from __future__ import annotations

import re

import pytest

from clusterprint.facts import prerequisites
from tests.support.plans import PLANNED, planned_types


@pytest.mark.parametrize("name", PLANNED)
def test_every_cloud_resource_a_plan_creates_has_an_api_and_a_deployer_role(name):
    types = planned_types(name)
    cloud = {t for t in types if not t.startswith("clusterprint:")}
    assert cloud, f"{name} planned no cloud resource"
    assert sorted(cloud - prerequisites.RESOURCE_SERVICES.keys()) == []
    apis, roles = prerequisites.required_apis(types), prerequisites.deployer_roles(types)
    assert all(prerequisites.RESOURCE_SERVICES[t].api in apis for t in cloud)
    assert all(prerequisites.RESOURCE_SERVICES[t].deployer_role in roles for t in cloud)


def test_every_row_of_the_table_is_a_type_some_plan_creates():
    created = set().union(*(planned_types(name) for name in PLANNED))
    assert sorted(prerequisites.RESOURCE_SERVICES.keys() - created) == []


def test_a_resource_type_the_table_does_not_know_is_refused_by_name():
    with pytest.raises(KeyError, match="gcp:sql/databaseInstance:DatabaseInstance"):
        prerequisites.required_apis(["gcp:compute/network:Network",
                                     "gcp:sql/databaseInstance:DatabaseInstance"])


def test_what_each_blueprint_needs_follows_what_it_creates():
    """Lustre only where a blueprint has Lustre, the managed API only for managed."""
    apis = {name: prerequisites.required_apis(planned_types(name)) for name in PLANNED}
    assert "lustre.googleapis.com" not in apis["cpu-small"]
    assert "file.googleapis.com" in apis["cpu-small"]
    assert "lustre.googleapis.com" in apis["a3mega"]
    assert "hypercomputecluster.googleapis.com" in apis["managed"]
    # The managed service builds the network and VMs itself: their APIs must be on too.
    assert {"compute.googleapis.com", "servicenetworking.googleapis.com"} <= set(apis["managed"])
    assert not any("hypercomputecluster.googleapis.com" in apis[n] for n in PLANNED
                   if n != "managed")
    # What the running cluster calls is needed whatever the stack creates.
    assert all(set(prerequisites.RUNTIME_APIS) <= set(found) for found in apis.values())
    roles = prerequisites.deployer_roles(planned_types("cpu-small"))
    assert "roles/iam.serviceAccountUser" in roles and "roles/lustre.admin" not in roles


def test_the_names_have_the_form_gcloud_takes():
    services = prerequisites.RESOURCE_SERVICES.values()
    apis = ({api for s in services for api in (s.api, *s.uses)}
            | prerequisites.RUNTIME_APIS.keys())
    assert all(re.fullmatch(r"[a-z]+\.googleapis\.com", api) for api in apis)
    roles = ({s.deployer_role for s in services} | prerequisites.DEPLOYER_EXTRA_ROLES.keys()
             | prerequisites.USER_ROLES.keys())
    assert all(re.fullmatch(r"roles/[a-z]+\.[A-Za-z.]+", role) for role in roles)


def test_preflight_asks_for_permissions_of_every_deployer_role_and_of_no_other():
    roles = ({s.deployer_role for s in prerequisites.RESOURCE_SERVICES.values()}
             | prerequisites.DEPLOYER_EXTRA_ROLES.keys())
    asked = prerequisites.ROLE_PERMISSIONS.keys()
    assert sorted(roles - asked - prerequisites.UNCHECKED_ROLES) == []
    assert sorted(asked - roles) == []
    permissions = [p for ps in prerequisites.ROLE_PERMISSIONS.values() for p in ps]
    assert all(re.fullmatch(r"[a-z]+\.[a-zA-Z]+\.[a-zA-Z]+", p) for p in permissions)
    small = prerequisites.deployer_permissions(planned_types("cpu-small"))
    assert small["file.instances.create"] == "roles/file.editor"
    assert "lustre.instances.create" not in small
