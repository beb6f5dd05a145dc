"""load_checked: what the stack program and plan use, refusing exactly as validate does."""

import json
import re
from collections.abc import Iterator
from typing import get_origin

import pytest
from pydantic import BaseModel

from clusterprint.blueprint.findings import format_path
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.model_errors import model_at
from clusterprint.blueprint.validate import (
    InvalidBlueprint,
    check_file,
    check_text,
    load_checked,
    printable,
)
from tests.support.blueprint_texts import (
    DROP,
    MINIMAL,
    Here,
    apply_overrides,
    blueprint_text,
)
from tests.support.paths import blueprint_path

A3MEGA = blueprint_path("a3mega")


def test_valid_file_gives_the_blueprint():
    bp = load_checked(A3MEGA)
    assert (bp.name, bp.zone, bp.mtu) == ("a3mega", "us-central1-a", 8244)


def test_invalid_file_raises_with_the_validators_lines(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(blueprint_text({"zone": "us-east1-b", "network.mtu": 9000}))
    with pytest.raises(InvalidBlueprint) as exc:
        load_checked(str(path))
    assert str(exc.value) == "\n".join(f.line_text() for f in check_file(str(path)).findings)
    assert str(exc.value).splitlines() == [
        f"{path}:5:7: error: zone: zone us-east1-b is not in region us-central1 "
        "(try us-central1-a, or region us-east1)",
        f"{path}:16:8: error: network.mtu: 9000 is out of range (must be at most 8896)"]


def test_model_errors_and_rule_errors_show_in_one_run(tmp_path):
    text = blueprint_text({"network.mtux": 8244, "zone": "us-east1-b",
                           "storage.lustre": [{"name": "scratch", "filesystem": "scratch",
                                               "capacity_gib": 20000}]})
    rules = [f.finding.rule for f in check_text("bp.yaml", text).findings]
    assert sorted(rules) == ["location.zone-in-region", "schema.unknown-key",
                             "storage.lustre-capacity"]


def test_rules_next_to_a_refused_value_stay_quiet():
    # provisioning falls back to on-demand while it is broken; "reservation only with
    # provisioning reservation" would blame the wrong key.
    text = blueprint_text({"slurm.nodesets[0].provisioning": "reserved",
                           "slurm.nodesets[0].reservation": "projects/my-project/reservations/r"})
    assert [f.finding.rule for f in check_text("bp.yaml", text).findings] == ["schema.enum"]


RECIPE = [{"name": "gemma-2b-sft", "partition": "debug", "nodes": 4}]
LUSTRE = [{"name": "scratch", "filesystem": "scratch", "capacity_gib": 20000}]


@pytest.mark.parametrize(("key", "value", "refused", "others", "said"), [
    # Refused for its GPUs, not for 4 nodes against a count nobody could read.
    ("slurm.nodesets[0].count", "2", "schema.type", {"recipes": RECIPE},
     ("recipes.partition", "gemma-2b-sft needs at least 1 GPU(s) per node")),
    ("slurm.nodesets[0].machine_type", "N2", "schema.pattern", {"storage.lustre": LUSTRE},
     ("storage.lustre-capacity", "20000 is not a multiple of")),
], ids=["integer", "string"])
def test_a_refused_required_value_still_lets_the_rules_run(key, value, refused, others, said):
    text = blueprint_text({key: value, "zone": "us-east1-b", **others})
    found = {f.finding.rule: f.finding.message for f in check_text("bp.yaml", text).findings}
    assert sorted(found) == sorted(["location.zone-in-region", said[0], refused])
    assert found[said[0]].startswith(said[1])


def rules_found(overrides: dict) -> list[str]:
    return sorted(f.finding.rule for f in check_text("bp.yaml", blueprint_text(overrides)).findings)


@pytest.mark.parametrize(("overrides", "refused"), [
    ({"slurm.nodesets[0].machine_type": DROP}, "schema.required"),
    ({"slurm": DROP}, "schema.required"),
    ({"slurm.nodesets[1]": "gpu"}, "schema.type"),
    ({"slurm.nodesets": []}, "schema.length"),
    ({"name": "Demo_1"}, "schema.pattern"),
    ({"recipes": [{"name": "gemma", "partition": "debug"}]}, "schema.enum"),
    ({"labels": {"team": "ML"}}, "schema.pattern"),
], ids=["missing-key", "missing-section", "bad-list-item", "empty-list", "bad-name",
        "bad-recipe-name", "bad-label-value"])
def test_one_bad_value_does_not_hide_the_other_problems(overrides, refused):
    assert rules_found({**overrides, "zone": "us-east1-b"}) == sorted(
        ["location.zone-in-region", refused])


def test_a_refused_zone_hides_only_what_depends_on_it():
    assert rules_found({"zone": "us-central1", "storage.lustre": LUSTRE}) == [
        "schema.pattern", "storage.lustre-capacity"]


def test_no_finding_comes_from_a_stand_in():
    # The MTU recommendation follows the GPU family of a machine type nobody can read.
    assert rules_found({"slurm.nodesets[0].machine_type": DROP, "network.mtu": 8000}) == [
        "schema.required"]
    # A region stand-in would put the written zone outside it.
    assert rules_found({"region": "US"}) == ["schema.pattern"]
    # Whether the partition has the recipe's GPUs depends on the machine type.
    assert rules_found({"slurm.nodesets[0].machine_type": "N2", "recipes": RECIPE}) == [
        "schema.pattern"]


def test_warnings_do_not_stop_a_program(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(blueprint_text({"slurm.nodesets[1]": {
        "name": "spare", "machine_type": "n2-standard-4", "count": 1}}))
    assert load_checked(str(path)).slurm.nodesets[1].name == "spare"


def test_unreadable_file_raises_too(tmp_path):
    with pytest.raises(InvalidBlueprint, match="no such file"):
        load_checked(str(tmp_path / "missing.yaml"))


def test_every_required_string_pattern_has_two_stand_ins_that_match_it():
    from pydantic import BaseModel

    from clusterprint.blueprint import model
    from clusterprint.blueprint.validate import STAND_INS

    required = {m.pattern for cls in vars(model).values()
                if isinstance(cls, type) and issubclass(cls, BaseModel)
                for f in cls.model_fields.values() if f.is_required() and f.annotation is str
                for m in f.metadata if hasattr(m, "pattern")}
    assert required - set(STAND_INS) == set()
    for pattern, values in STAND_INS.items():
        assert len(set(values)) == 2
        assert pattern is None or all(re.match(pattern, v) for v in values), pattern


#: The minimal blueprint with every optional mapping that has required keys of its own
#: present once, so that each required key of the model can be removed from it.
EVERY_SECTION = apply_overrides(MINIMAL, {
    "network.peerings": [{"name": "hub",
                          "peer_network": "projects/other-project/global/networks/hub"}],
    "storage.lustre": [{"name": "scratch", "filesystem": "scratch", "capacity_gib": 18000}],
    "storage.buckets": [{"bucket": "my-ckpts"}],
    "slurm.nodesets[0].image": {"project": "my-images", "family": "slurm-cpu"},
    "slurm.nodesets[1]": {"name": "gpu", "machine_type": "a3-megagpu-8g", "count": 2},
    "slurm.partitions[1]": {"name": "train", "nodesets": ["gpu"]},
    "slurm.accounting.cloud_sql": {"instance": "projects/my-project/instances/acct"},
    "recipes": [{"name": "gemma-2b-sft", "partition": "train"}],
})

#: One rule finding planted in each section, in entries of their own.
PLANTED = apply_overrides(EVERY_SECTION, {
    "labels": {"clusterprint-team": "ml"},
    "network.private_service_access": {"prefix_length": 20, "range": "10.200.0.0/20"},
    "storage.lustre[1]": {"name": "big", "filesystem": "big", "capacity_gib": 20000},
    "slurm.nodesets[2]": {"name": "spare", "machine_type": "n2-standard-4", "count": 4,
                          "max_count": 2},
    "slurm.partitions[0].nodesets[1]": "spare",
    "recipes[1]": {"name": "gemma3-1b-sft", "partition": "train", "data_path": "/lustre/x"},
})
PLANTED_FINDINGS = {
    ("labels.reserved", "labels.clusterprint-team"),
    ("network.psa", "network.private_service_access"),
    ("storage.lustre-capacity", "storage.lustre[1].capacity_gib"),
    ("slurm.max-count", "slurm.nodesets[2].max_count"),
    ("recipes.data-path", "recipes[1].data_path"),
}

#: What the removal itself makes true of the file, beyond the missing key.
CONSEQUENCES = {
    # The partition still lists `cpu`, and no nodeset is called that any more.
    "slurm.nodesets[0].name": {("names.partition-nodesets", "slurm.partitions[0].nodesets[0]")},
    # Without partitions (or the first one's nodesets) a nodeset is in no partition.
    "slurm.partitions": {("names.unused-nodeset", f"slurm.nodesets[{i}].name") for i in range(3)},
    "slurm.partitions[0].nodesets": {("names.unused-nodeset", "slurm.nodesets[0].name"),
                                     ("names.unused-nodeset", "slurm.nodesets[2].name")},
}


def required_keys(cls: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every required key of ``cls`` as a dotted path, nested models and list items too."""
    for name, field in cls.model_fields.items():
        key = f"{prefix}.{field.alias or name}" if prefix else field.alias or name
        if field.is_required():
            yield key
        inner = model_at(tuple(re.findall(r"[^.\[\]]+", key.replace("[0]", ""))))
        if inner is not None:
            yield from required_keys(inner, key + ("[0]" if get_origin(field.annotation) is list
                                                   else ""))


def test_every_required_key_is_in_the_blueprint_with_every_section():
    text = blueprint_text(base=PLANTED)
    found = {(f.finding.rule, format_path(f.finding.path))
             for f in check_text("bp.yaml", text).findings}
    assert found == PLANTED_FINDINGS
    assert "slurm.nodesets[0].image.project" in set(required_keys(Blueprint))


@pytest.mark.parametrize("key", list(required_keys(Blueprint)))
def test_a_missing_required_key_hides_no_other_problem(key):
    """The removed key is reported, and every planted problem outside it still is."""
    text = blueprint_text({key: DROP}, base=PLANTED)
    found = {(f.finding.rule, format_path(f.finding.path))
             for f in check_text("bp.yaml", text).findings}
    outside = {p for p in PLANTED_FINDINGS if not re.match(rf"{re.escape(key)}(?:[.\[]|$)", p[1])}
    assert found == {("schema.required", key)} | outside | CONSEQUENCES.get(key, set())


#: Control characters of every kind: C0 (tab too), DEL, C1, the Unicode line separators and
#: invisible format characters (a bidi override, a byte-order mark).
CONTROLS = ["\0", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029",
            "\u202e", "\ufeff"]
BUCKET = {"bucket": "ckpts", "mount": "/gcs/ckpts"}


def _with(char: str) -> list[tuple[dict, str]]:
    """Overrides that put ``char`` in one string or key, and the key path to blame."""
    return [
        ({"name": Here(f"de{char}mo")}, "name"),  # a pattern
        ({"kind": Here(f"TrainingCluster{char}")}, "kind"),  # an enum
        ({"storage.buckets": [{**BUCKET, "mount": Here(f"/gcs/a{char}b")}]},
         "storage.buckets[0].mount"),
        ({"slurm.partitions[0].nodesets": [Here(f"cpu{char}")]},
         "slurm.partitions[0].nodesets[0]"),  # a list item
        ({"labels": {"team": Here(f"{char}x")}}, "labels.team"),  # a mapping's value
        ({"network": {json.dumps(f"mt{char}u"): Here(8244)}}, f"network.mt{char}u"),  # a key
        ({"labels": {json.dumps(f"te{char}am"): Here("x")}}, f"labels.te{char}am"),
    ]


@pytest.mark.parametrize("char", CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_control_character_in_any_string_or_key_is_refused_naming_the_key(rules_check, char):
    for overrides, path in _with(char):
        hit = rules_check.refused(overrides, "schema.control-character", path)
        assert f"U+{ord(char):04X}" in hit.finding.message
        assert printable(hit.line_text()).isprintable()


def test_every_control_character_is_reported_in_one_run_each_once():
    overrides = {}
    for overrides_one, _ in _with("\n"):
        overrides = {**overrides, **overrides_one}
    overrides["network"] = {json.dumps("mt\nu"): 8244, json.dumps("nat\x1b"): True}
    overrides["labels"] = {json.dumps("te\nam"): "x", "team": "\0"}
    checked = check_text("bp.yaml", blueprint_text(overrides))
    errors = [f.finding for f in checked.findings if f.finding.severity == "error"]
    assert sorted(format_path(f.path) for f in errors) == sorted([
        "name", "kind", "storage.buckets[0].mount", "slurm.partitions[0].nodesets[0]",
        "labels.te\nam", "labels.team", "network.mt\nu", "network.nat\x1b"]), checked.lines()
    assert {f.rule for f in errors} == {"schema.control-character"}
    assert all(len(line.splitlines()) == 1 for line in checked.lines())
    assert checked.exit_code == 1


def test_an_escaped_control_character_in_json_is_refused_too():
    text = json.dumps({**MINIMAL, "name": "demo\u0000"}, ensure_ascii=True)
    [found] = check_text("bp.json", text, is_json=True).findings
    assert (format_path(found.finding.path), found.finding.rule) == (
        "name", "schema.control-character")
    assert found.finding.message == "the value holds a control character U+0000 (NUL)"


def test_printable_unicode_is_no_control_character():
    # Letters and spaces are the patterns' to refuse, with their own words.
    checked = check_text("bp.yaml", blueprint_text({"name": "dé mo\u00a0"}))
    assert [f.finding.rule for f in checked.findings] == ["schema.pattern"]
