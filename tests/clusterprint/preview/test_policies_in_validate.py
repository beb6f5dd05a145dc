"""What the mandatory policies refuse from a blueprint, `validate` refuses: so a `pulumi up`
without the policy pack (whose stack program refuses an invalid blueprint) refuses it too.

Each case is planned without validation, as if validate had let it through, to show the
policy would refuse that plan, and validated, to show the rule refuses the file first.
"""

from __future__ import annotations

import pytest

from clusterprint.blueprint.findings import format_path
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules import RULES
from clusterprint.blueprint.validate import check_text
from clusterprint.preview.plan import plan_blueprint
from clusterprint.preview.policies import POLICIES, Settings, check_plan
from tests.support.blueprint_texts import MINIMAL, apply_overrides, blueprint_text

MANDATORY = [p for p in POLICIES.values() if p.level == "mandatory"]
MEGA = {"slurm.nodesets[0].machine_type": "a3-megagpu-8g", "zone": "us-central1-a"}
LUSTRE = {"storage.lustre": [{"name": "scratch", "filesystem": "scratch",
                              "capacity_gib": 18000}]}
#: A token shaped like a Pulumi access token: lowercase, so it fits a label.
TOKEN = "pul-" + "0123456789abcdef" * 2 + "01234567"

#: Blueprints that break a mandatory policy, by the policy, its rule and the key it names.
CASES = [
    pytest.param("no-open-firewall", {"network.ssh_source_ranges": ["0.0.0.0/0"]},
                 "network.ssh_source_ranges[0]", id="ssh-from-anywhere"),
    pytest.param("no-open-firewall",
                 {"network.ssh_source_ranges": ["35.235.240.0/20", "0.0.0.0/1", "128.0.0.0/1"]},
                 "network.ssh_source_ranges[1]", id="ssh-from-anywhere-split-in-two"),
    pytest.param("no-open-firewall", {"network.ssh_source_ranges": ["8.0.0.0/15"]},
                 "network.ssh_source_ranges[0]", id="ssh-from-two-16s"),
    pytest.param("no-open-firewall", {**MEGA, "network.gpu_subnets_cidr": "8.0.0.0/8"},
                 "network.gpu_subnets_cidr", id="gpu-subnets-of-public-addresses"),
    pytest.param("no-open-firewall",
                 {**LUSTRE, "network.private_service_access.range": "8.0.0.0/12"},
                 "network.private_service_access.range", id="lustre-psa-range-public"),
    pytest.param("no-plaintext-secret", {"labels": {"munge-key": "abc"}}, "labels.munge-key",
                 id="label-named-as-the-munge-key"),
    pytest.param("no-plaintext-secret", {"labels": {"team": TOKEN}}, "labels.team",
                 id="token-in-a-label"),
    pytest.param("no-plaintext-secret", {"name": "xoxb-1234567890"}, "name",
                 id="cluster-named-like-a-slack-token"),
    pytest.param("no-secret-in-outputs", {"name": "xoxb-1234567890"}, "name",
                 id="cluster-name-in-the-outputs"),
]


def test_every_mandatory_policy_names_its_rule_or_why_only_the_plan_shows_it():
    """A new mandatory policy fails here until it names the validate rule that refuses the
    same from the file, or says why no blueprint key can break it."""
    rule_ids = {r.id for r in RULES}
    unsettled = [p.name for p in MANDATORY if (p.rule is None) == (p.plan_only is None)]
    assert unsettled == []
    assert {p.rule for p in POLICIES.values() if p.rule} <= rule_ids
    assert {p.name for p in MANDATORY if p.plan_only} == {
        "no-external-ip", "least-privilege-identity", "bucket-access", "storage-protected"}


def test_every_mandatory_policy_with_a_rule_has_a_blueprint_that_breaks_it():
    assert {case.values[0] for case in CASES} == {p.name for p in MANDATORY if p.rule}


@pytest.mark.parametrize(("name", "overrides", "path"), CASES)
def test_what_the_policy_would_refuse_validate_refuses_first(name, overrides, path):
    unchecked = Blueprint.model_validate(apply_overrides(MINIMAL, overrides))
    refused = [v for v in check_plan(plan_blueprint(unchecked), Settings())
               if v.policy.level == "mandatory"]
    assert name in {v.policy.name for v in refused}, [v.text() for v in refused]
    checked = check_text("bp.yaml", blueprint_text(overrides))
    errors = [(f.finding.rule, format_path(f.finding.path)) for f in checked.findings
              if f.finding.severity == "error"]
    assert checked.exit_code == 1
    assert [rule for rule, at in errors if at == path] == [POLICIES[name].rule], errors


def test_the_rule_and_the_policy_count_the_same_public_addresses():
    """Two /16s in two ranges, with IAP's and a private range beside them: both say 131,072."""
    overrides = {"network.ssh_source_ranges": ["35.235.240.0/20", "8.8.0.0/16", "10.0.0.0/8",
                                               "9.9.0.0/16"]}
    checked = check_text("bp.yaml", blueprint_text(overrides))
    rule = next(f.finding for f in checked.findings if f.finding.rule == "network.open-firewall")
    plan = plan_blueprint(Blueprint.model_validate(apply_overrides(MINIMAL, overrides)))
    policy = next(v for v in check_plan(plan, Settings()) if v.policy.name == "no-open-firewall")
    counted = "131,072 public IPv4 addresses, more than a /16 holds: 8.8.0.0/16, 9.9.0.0/16"
    assert counted in rule.message and counted in policy.message
    assert format_path(rule.path) == "network.ssh_source_ranges[1]"


@pytest.mark.parametrize("ranges", [["35.235.240.0/20"], ["8.8.0.0/16"], ["10.0.0.0/8"],
                                    ["8.8.0.0/17", "8.8.128.0/17", "10.0.0.0/8"]])
def test_up_to_the_bound_both_let_ssh_through(ranges):
    overrides = {"network.ssh_source_ranges": ranges}
    checked = check_text("bp.yaml", blueprint_text(overrides))
    assert checked.exit_code == 0, checked.lines()
    plan = plan_blueprint(Blueprint.model_validate(apply_overrides(MINIMAL, overrides)))
    assert [v.text() for v in check_plan(plan, Settings()) if v.policy.level == "mandatory"] == []
