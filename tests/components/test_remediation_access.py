"""What the controller may do in the Compute API for its remediation loop, and no more.

The loop and the RebootProgram need: to find the nodesets' groups and list their VMs
(read), to reset a VM, and with ``on_failure: replace`` to recreate one through its group
and report a reservation-bound A3 Ultra/A4 host. The acting grant holds only on this
cluster's VMs and groups; and no group repairs a VM on its own.
"""

from __future__ import annotations

import json

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.components.cluster import TrainingCluster
from tests.support.pulumi_mocks import reference_blueprint

MEMBER = "gcp:projects/iAMMember:IAMMember"
ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
ZONE = "projects/my-project/zones/us-central1-b"


def declared(cloud, blueprint: Blueprint) -> None:
    cloud.run(lambda: TrainingCluster(blueprint.name, blueprint).exports)


def with_checks(blueprint: Blueprint, reservation_bound: bool = False, **checks) -> Blueprint:
    data = blueprint.model_dump(by_alias=True)
    data["slurm"]["health_checks"].update(checks)
    data["slurm"]["nodesets"][0]["reservation_bound"] = reservation_bound
    return Blueprint.model_validate_json(json.dumps(data))


def remediation_grants(cloud) -> dict[str, tuple[list[str], str | None]]:
    """role id -> (its exact permissions, the condition its grant carries)."""
    roles = {r.inputs["roleId"]: r.inputs for r in cloud.of_type(ROLE)}
    grants = {}
    for member in cloud.of_type(MEMBER):
        role_id = member.inputs["role"].rsplit("/", 1)[-1]
        if role_id in roles:
            assert member.inputs["member"].startswith("serviceAccount:a4-ctl@")
            condition = member.inputs.get("condition")
            grants[role_id] = (roles[role_id]["permissions"],
                               condition["expression"] if condition else None)
    return grants


ACTED_ON = (f'resource.name.startsWith("{ZONE}/instances/a4-a4-") || '
            f'resource.name.startsWith("{ZONE}/instanceGroupManagers/a4-nodeset-a4-group-") || '
            f'resource.name.startsWith("{ZONE}/instances/a4-a4spot-") || '
            f'resource.name.startsWith("{ZONE}/instanceGroupManagers/a4-nodeset-a4spot-group-") || '
            f'resource.name.startsWith("{ZONE}/instanceGroupManagers/a4-nodeset-a4spot-elastic-")')
#: instances.list: the host-event watch's one list per nodeset per pass.
READ = (["compute.instanceGroupManagers.get", "compute.instanceGroupManagers.list",
         "compute.instances.list", "compute.machineTypes.get"], None)
#: a4's spot nodeset has elastic nodes: power saving creates and deletes their VMs.
ELASTIC = "compute.instanceGroupManagers.update"


@pytest.mark.parametrize(("checks", "bound", "act"), [
    ({"on_failure": "drain"}, False, [ELASTIC, "compute.instances.reset"]),
    ({"on_failure": "reboot"}, True, [ELASTIC, "compute.instances.reset"]),
    ({"on_failure": "replace"}, False,
     ["compute.instanceGroupManagers.update", "compute.instances.reset"]),
    ({"on_failure": "replace"}, True,
     ["compute.instanceGroupManagers.update", "compute.instances.reportHostAsFaulty",
      "compute.instances.reset"]),
], ids=["drain", "reboot", "replace", "replace-reporting-hosts"])
def test_the_controller_holds_exactly_what_its_loop_calls(cloud, checks, bound, act):
    declared(cloud, with_checks(reference_blueprint("a4"), bound, **checks))
    assert remediation_grants(cloud) == {"a4_remediation_read": READ,
                                         "a4_remediation_act": (act, ACTED_ON)}


@pytest.mark.parametrize("name", ["a3mega", "a3ultra", "a4", "cpu-small"])
def test_no_group_repairs_a_vm_on_its_own(cloud, name):
    declared(cloud, reference_blueprint(name))
    groups = cloud.of_type(GROUP)
    assert groups
    assert all(g.inputs["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "DO_NOTHING"}
               for g in groups)
