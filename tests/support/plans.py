"""One plan per blueprint file for the session (each xdist worker plans its own).

Planning runs the whole program under Pulumi's mocks, and the plan, policy, diff and
prerequisite tests plan the same reference blueprints again and again: they share these.
A plan here is shared by every test that asks for it, so a test that changes one changes a
copy (``copy.deepcopy``), never the cached plan.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ruamel.yaml import YAML

from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.preview.plan import Plan, plan_blueprint
from tests.support.blueprint_texts import apply_overrides, to_yaml
from tests.support.paths import ROOT, blueprint_path, reference_blueprints


@cache
def _planned(path: str) -> Plan:
    return plan_blueprint(load_checked(path))


def plan_of_file(path: str | Path) -> Plan:
    """The plan of the blueprint file at ``path`` (which ``clusterprint validate`` accepts),
    planned once per session."""
    return _planned(str(Path(path).resolve()))


def reference_plan(name: str) -> Plan:
    """The plan of the reference blueprint ``name`` (``a4`` is ``blueprints/a4.yaml``)."""
    return plan_of_file(blueprint_path(name))


MANAGED = ROOT / "tests" / "components" / "blueprints" / "managed.yaml"
#: What no reference blueprint turns on but a user's can: each adds a resource type.
VARIANT = {
    "network.peerings": [{"name": "hub",
                          "peer_network": "projects/hub-project/global/networks/hub"}],
    "slurm.nodesets[0].provisioning": "flex-start",
    "slurm.nodesets[0].placement": "compact",
    "observability.alert_emails": ["oncall@example.com"],
}
#: What the prerequisite tests plan: every reference blueprint, the managed one, the variant.
PLANNED = [*(p.stem for p in reference_blueprints()), "managed", "cpu-small+variant"]


@cache
def planned_types(name: str) -> frozenset[str]:
    """The resource types the plan of one blueprint registers."""
    if name == "managed":
        plan = plan_of_file(MANAGED)
    elif name == "cpu-small+variant":
        data = YAML(typ="safe").load(Path(blueprint_path("cpu-small")).read_text())
        checked = check_text("variant.yaml", to_yaml(apply_overrides(data, VARIANT)))
        assert checked.ok, checked.lines()
        plan = plan_blueprint(checked.blueprint)
    else:
        plan = reference_plan(name)
    return frozenset(r.type for r in plan.resources)
