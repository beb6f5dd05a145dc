"""security.* rules: settings that hand users more than their own rights on the nodes."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

#: Shaped like a Pulumi access token, lowercase so it fits a label's value.
TOKEN = "pul-" + "0123456789abcdef" * 2 + "01234567"

REFUSED = [
    pytest.param("security.node-credentials", "security.users_get_node_credentials",
                 {"security": {"users_get_node_credentials": Here(True)}}, "warning", 1,
                 id="users-get-node-credentials"),
    pytest.param("security.plaintext-secret", "labels.munge-key",
                 {"labels": {"munge-key": Here("abc")}}, "error", 1, id="label-named-munge-key"),
    pytest.param("security.plaintext-secret", "labels.team",
                 {"labels": {"team": Here(TOKEN)}}, "error", 1, id="token-in-a-label"),
    pytest.param("security.plaintext-secret", "name", {"name": Here("xoxb-1234567890")},
                 "error", 1, id="name-shaped-like-a-slack-token"),
    pytest.param("security.plaintext-secret", "storage.buckets[0].bucket",
                 {"storage.buckets": [{"bucket": Here("ghp_" + "a1" * 18)}]}, "error", 1,
                 id="bucket-named-like-a-github-token"),
    pytest.param("security.plaintext-secret", "storage.lustre[0].mount",
                 {"storage.lustre": [{"name": "s", "filesystem": "s", "capacity_gib": 18000,
                                      "mount": Here("/" + "Ab0" * 90)}]}, "error", 1,
                 id="mount-as-long-as-a-munge-key"),
]

ACCEPTED = [
    pytest.param("security.node-credentials", {}, id="default"),
    pytest.param("security.node-credentials",
                 {"security": {"users_get_node_credentials": False}}, id="explicitly-off"),
    pytest.param("security.plaintext-secret",
                 {"labels": {"team": "ml", "monkey": "x"}, "name": "xox-cluster",
                  "storage.buckets": [{"bucket": "pul-data"}]}, id="words-near-the-shapes"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_the_warning_says_what_users_could_do_and_how_to_stop_it(rules_check):
    hit = rules_check.refused({"security": {"users_get_node_credentials": Here(True)}},
                              "security.node-credentials", "security.users_get_node_credentials",
                              severity="warning")
    assert "any user can then run jobs as root" in hit.finding.message
    assert "single-user cluster" in str(hit.finding.hint)


def test_a_secret_in_the_file_names_the_policy_and_where_it_would_land(rules_check):
    hit = rules_check.refused({"labels": {"team": Here(TOKEN)}}, "security.plaintext-secret",
                              "labels.team")
    assert hit.finding.message == (
        "it holds a Pulumi access token, which the policy no-plaintext-secret refuses: it would "
        "land in Pulumi's state, the plan and the nodes' metadata")
    assert hit.finding.hint == "keep secrets in Secret Manager; a blueprint never needs one"
