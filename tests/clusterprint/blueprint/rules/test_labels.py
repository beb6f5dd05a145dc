"""labels.* rules and the label count: GCE's 64 per resource, clusterprint's included."""

import pytest

from clusterprint.contract import naming
from clusterprint.facts import catalog
from tests.support.blueprint_texts import Here, table_tests

REFUSED = [
    pytest.param("labels.reserved", "labels.clusterprint-cluster",
                 {"labels": {"clusterprint-cluster": Here("mine")}}, "error", 1,
                 id="cluster-label"),
    pytest.param("labels.reserved", "labels.clusterprint-nodeset",
                 {"labels": {"team": "ml", "clusterprint-nodeset": Here("gpu"),
                             "clusterprint-": "x"}}, "error", 2,
                 id="two-reserved-keys"),
]

ACCEPTED = [
    pytest.param("labels.reserved", {"labels": {"clusterprint": "x", "clusterprint_team": "y",
                                                "my-clusterprint-cluster": "z"}},
                 id="prefix-without-hyphen-or-not-leading"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)

def test_a_reserved_key_is_pointed_at_itself(rules_check):
    hit = rules_check.refused({"labels": {"clusterprint-cluster": Here("mine")}},
                              "labels.reserved", "labels.clusterprint-cluster")
    assert hit.column == 3  # the key, indented under labels:, not its value
    assert hit.finding.hint == "use a key of your own, e.g. cluster"


#: The most user labels: the rest of GCE's 64 go to the cluster and nodeset labels.
MOST = catalog.MAX_LABELS - len(naming.OWN_LABELS)


def _labels(count: int) -> dict[str, str]:
    return {f"k{i}": "v" for i in range(count)}


def test_most_labels_leave_room_for_clusterprints(make_text, check):
    assert MOST == 62
    assert check(make_text({"labels": _labels(MOST)})).exit_code == 0


def test_one_label_more_is_refused(make_text, check):
    checked = check(make_text({"labels": _labels(MOST + 1)}))
    assert checked.exit_code == 1
    [hit] = checked.findings
    assert hit.finding.rule == "schema.length"
    assert hit.line_text().endswith("labels: has 63 items (needs at most 62)")
