"""security.* rules: settings that hand users more than their own rights on the nodes."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

REFUSED = [
    pytest.param("security.node-credentials", "security.users_get_node_credentials",
                 {"security": {"users_get_node_credentials": Here(True)}}, "warning", 1,
                 id="users-get-node-credentials"),
]

ACCEPTED = [
    pytest.param("security.node-credentials", {}, id="default"),
    pytest.param("security.node-credentials",
                 {"security": {"users_get_node_credentials": False}}, id="explicitly-off"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_the_warning_says_what_users_could_do_and_how_to_stop_it(rules_check):
    hit = rules_check.refused({"security": {"users_get_node_credentials": Here(True)}},
                              "security.node-credentials", "security.users_get_node_credentials",
                              severity="warning")
    assert "any user can then run jobs as root" in hit.finding.message
    assert "single-user cluster" in str(hit.finding.hint)
