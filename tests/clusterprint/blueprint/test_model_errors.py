"""Model errors in words: the key path, what was wrong and what would be right."""

import pytest
from pydantic import BaseModel

from clusterprint.blueprint import model
from clusterprint.blueprint.model_errors import PATTERN_MEANINGS
from tests.support.blueprint_texts import DROP, Here, describe

NS = "slurm.nodesets[0]"

CASES = [
    # (overrides, rule, path, message, hint)
    ({"netwrk": Here({"mtu": 8244})}, "schema.unknown-key", "netwrk", "unknown key",
     "did you mean `network`?"),
    ({"network.mut": Here(8244)}, "schema.unknown-key", "network.mut", "unknown key",
     "did you mean `mtu`?"),
    ({f"{NS}.bogus": Here(1)}, "schema.unknown-key", f"{NS}.bogus", "unknown key",
     "known keys: boot_disk, count, image, machine_type, machine_type_unlisted, "
     "maintenance_reservations, max_count, name, placement, power_saving, provisioning, "
     "reservation, reservation_bound, suspend_time_s"),
    ({f"{NS}.count": Here("2")}, "schema.type", f"{NS}.count",
     'expected an integer, got a string ("2")', None),
    ({f"{NS}.count": Here(2.5)}, "schema.type", f"{NS}.count",
     "expected an integer, got a number (2.5)", None),
    ({f"{NS}.count": Here(True)}, "schema.type", f"{NS}.count",
     "expected an integer, got a boolean (true)", None),
    ({"network.nat": Here("yes")}, "schema.type", "network.nat",
     'expected true or false, got a string ("yes")', None),
    ({"slurm.partitions": Here({"name": "debug", "nodesets": ["cpu"]})}, "schema.type",
     "slurm.partitions", "expected a list, got a mapping", None),
    ({"network.ssh_source_ranges": Here("10.0.0.0/8")}, "schema.type",
     "network.ssh_source_ranges", 'expected a list, got a string ("10.0.0.0/8")', None),
    ({"storage.home": Here(["filestore"])}, "schema.type", "storage.home",
     "expected a mapping, got a list", None),
    ({"slurm.partitions[0].nodesets[0]": Here(7)}, "schema.type",
     "slurm.partitions[0].nodesets[0]", "expected a string, got an integer (7)", None),
    ({"kind": Here("TrainingClustr")}, "schema.enum", "kind",
     '"TrainingClustr" is not one of "TrainingCluster"', "did you mean `TrainingCluster`?"),
    ({"kind": Here("it's a\\b")}, "schema.enum", "kind",
     '"it\'s a\\\\b" is not one of "TrainingCluster"', None),
    ({f"{NS}.provisioning": Here("spott")}, "schema.enum", f"{NS}.provisioning",
     '"spott" is not one of "on-demand", "spot", "flex-start" or "reservation"',
     "did you mean `spot`?"),
    ({"storage.lustre[0]": {"name": "s", "filesystem": "s", "capacity_gib": 18000,
                            "performance_tier": Here("500")}}, "schema.enum",
     "storage.lustre[0].performance_tier", '"500" is not one of 125, 250, 500 or 1000',
     "write 500 without quotes: it is a number"),
    ({"name": Here("Demo_1")}, "schema.pattern", "name", '"Demo_1" is not valid',
     "expected 2 to 20 lowercase letters, digits or hyphens, starting with a letter and not "
     "ending with a hyphen"),
    ({"slurm.partitions[0].name": Here("Debug")}, "schema.pattern",
     "slurm.partitions[0].name", '"Debug" is not valid',
     "expected 1 to 31 lowercase letters, digits or hyphens, starting with a letter and not "
     "ending with a hyphen"),
    ({"slurm.partitions[0].name": Here("debug-")}, "schema.pattern",
     "slurm.partitions[0].name", '"debug-" is not valid',
     "expected 1 to 31 lowercase letters, digits or hyphens, starting with a letter and not "
     "ending with a hyphen"),
    ({"zone": Here("us-central1")}, "schema.pattern", "zone", '"us-central1" is not valid',
     "expected a zone such as us-central1-a"),
    ({f"{NS}.reservation": Here("projects/p/reservations/r")}, "schema.pattern",
     f"{NS}.reservation", '"projects/p/reservations/r" is not valid',
     "expected [projects/P/reservations/]NAME[/reservationBlocks/B[/reservationSubBlocks/S]]"),
    ({"network.subnet_cidr": Here("fd00::/8")}, "schema.pattern", "network.subnet_cidr",
     '"fd00::/8" is not valid', "expected an IPv4 CIDR block such as 10.0.0.0/20"),
    ({"storage.buckets": [{"bucket": "ckpts", "mount": Here("/gcs/$(id)")}]}, "schema.pattern",
     "storage.buckets[0].mount", '"/gcs/$(id)" is not valid',
     "expected a path of letters, digits, ., _, - and / without `..`, such as /lustre/scratch"),
    ({"recipes": [{"name": "llama3-8b-pretrain", "partition": "debug",
                   "data_path": Here("/lustre/" + "d" * 1020)}]}, "schema.length",
     "recipes[0].data_path", "is 1028 characters long", "at most 1024"),
    ({"labels": {"Team": Here("research")}}, "schema.label-key", "labels.Team",
     'label key "Team" is not valid', "a label key: lowercase letters, digits, _ or -, "
                                      "starting with a letter, at most 63"),
    ({f"{NS}.count": Here(-1)}, "schema.range", f"{NS}.count", "-1 is out of range",
     "must be at least 0"),
    ({"slurm.login.count": Here(17)}, "schema.range", "slurm.login.count", "17 is out of range",
     "must be at most 16"),
    ({"slurm.health_checks.interval_s": Here(65536)}, "schema.range",
     "slurm.health_checks.interval_s", "65536 is out of range", "must be at most 65535"),
    ({"slurm.nodesets": Here([])}, "schema.length", "slurm.nodesets", "has 0 items",
     "needs at least 1"),
    ({NS: Here({"name": "cpu", "count": 2})}, "schema.required", f"{NS}.machine_type",
     "required key is missing", None),
]


@pytest.mark.parametrize(("overrides", "rule", "path", "message", "hint"), CASES,
                         ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_model_errors_say_what_is_wrong_at_the_right_line(rules_check, overrides, rule, path,
                                                          message, hint):
    hit = rules_check.refused(overrides, rule, path)
    assert (hit.finding.message, hit.finding.hint) == (message, hint)


def test_unknown_key_is_reported_at_the_key_not_its_value(make_text, check):
    text = make_text({"network": {"mtu": 8244, "mut": {"nested": 1}}})
    [found] = check(text).findings
    assert text.splitlines()[found.line - 1] == "  mut:"
    assert found.column == 3


def test_missing_required_top_level_key_points_at_the_start(make_text, check):
    [found] = check(make_text({"region": DROP})).findings
    assert (found.line, found.finding.path, found.finding.rule) == (1, ("region",),
                                                                     "schema.required")


def test_every_problem_in_one_run_in_line_order(make_text, check):
    text = make_text({"kind": "Cluster", f"{NS}.count": "2", "network.mut": 1,
                      "storage.home": []})
    checked = check(text)
    assert checked.exit_code == 1
    assert [f.finding.rule for f in checked.findings] == [
        "schema.enum", "schema.type", "schema.unknown-key", "schema.type"], describe(checked)
    lines = [f.line for f in checked.findings]
    assert lines == sorted(lines)


def test_valid_minimal_blueprint_has_no_findings(make_text, check):
    checked = check(make_text())
    assert (checked.exit_code, checked.findings) == (0, [])


@pytest.mark.parametrize("name", ["a", "a1", "a--b", "p" * 30 + "1"])
def test_partition_names_up_to_31_not_ending_in_a_hyphen_are_valid(make_text, check, name):
    checked = check(make_text({"slurm.partitions[0].name": name}))
    assert (checked.exit_code, checked.findings) == (0, []), describe(checked)


@pytest.mark.parametrize("name", ["a-", "p" * 31 + "1", "1a"])
def test_other_partition_names_are_refused_by_the_model(rules_check, name):
    rules_check.refused({"slurm.partitions[0].name": Here(name)}, "schema.pattern",
                        "slurm.partitions[0].name")


def test_every_model_pattern_is_explained_in_words():
    patterns = {m.pattern for cls in vars(model).values()
                if isinstance(cls, type) and issubclass(cls, BaseModel)
                for f in cls.model_fields.values() for m in f.metadata if hasattr(m, "pattern")}
    patterns |= {model.LABEL_KEY_PATTERN, model.LABEL_VALUE_PATTERN}
    assert patterns - set(PATTERN_MEANINGS) == set()


def test_json_lone_surrogate_is_named(check):
    text = '{"apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "\\ud800"}'
    found = [f for f in check(text, is_json=True).findings if f.finding.path == ("name",)]
    assert [(f.finding.rule, f.line_text()) for f in found] == [(
        "schema.type", "bp.json:1:70: error: name: is not valid Unicode text "
                       "(remove the unpaired \\uD800-\\uDFFF escape)")]
