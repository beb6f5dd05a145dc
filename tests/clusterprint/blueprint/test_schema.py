"""The committed JSON Schema is the model's, a valid 2020-12 schema, and agrees with it."""

import json
from collections.abc import Iterator

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from clusterprint.blueprint import model
from clusterprint.blueprint.loader import parse
from clusterprint.blueprint.schema import blueprint_schema, schema_text
from tests.support.blueprint_texts import DROP, MINIMAL, apply_overrides, blueprint_text
from tests.support.paths import ROOT

COMMITTED = ROOT / "schemas" / "blueprint.schema.json"
BLUEPRINTS = sorted((ROOT / "blueprints").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator():
    """A validator of the committed schema."""
    return Draft202012Validator(json.loads(COMMITTED.read_text()))


def test_committed_schema_matches_the_model():
    assert COMMITTED.read_text() == schema_text(), (
        "schemas/blueprint.schema.json drifted from the model: "
        "run `clusterprint schema > schemas/blueprint.schema.json`")


def test_schema_is_valid_draft_2020_12():
    schema = blueprint_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_schema_describes_keys_for_editors():
    schema = blueprint_schema()
    assert set(schema["required"]) == {"apiVersion", "kind", "name", "region", "zone", "slurm"}
    assert schema["additionalProperties"] is False
    assert schema["properties"]["zone"]["description"]
    mtu = schema["$defs"]["Network"]["properties"]["mtu"]
    assert (mtu["anyOf"][0]["minimum"], mtu["anyOf"][0]["maximum"]) == (1300, 8896)


@pytest.mark.parametrize("path", BLUEPRINTS, ids=lambda p: p.name)
def test_reference_blueprints_follow_the_schema(validator, path):
    data = parse(path.read_text(), is_json=False).data
    assert list(validator.iter_errors(data)) == []


def test_minimal_blueprint_follows_the_schema(validator):
    assert list(validator.iter_errors(MINIMAL)) == []


@pytest.mark.parametrize("overrides", [
    {"netwrk": {}},
    {"slurm.nodesets[0].count": "2"},
    {"slurm.nodesets[0].count": True},
    {"kind": "Cluster"},
    {"name": "Demo_1"},
    {"network.mtu": 9000},
    {"network.mtu": 1299},
    {"region": DROP},
    {"slurm.nodesets": []},
    {"slurm.partitions": {"name": "debug", "nodesets": ["cpu"]}},
    {"storage.lustre[0]": {"name": "s", "filesystem": "toolongname", "capacity_gib": 18000}},
    {"slurm.nodesets[0].provisioning": "preemptible"},
    {"labels": {"Team": "x"}},
], ids=str)
def test_model_and_schema_refuse_the_same_mistakes(validator, check, overrides):
    data = apply_overrides(MINIMAL, overrides)
    assert list(validator.iter_errors(data)), "the JSON Schema accepts it"
    assert check(blueprint_text(overrides)).exit_code == 1, "the model accepts it"


def undescribed(node, where: str = "#") -> Iterator[str]:
    """Every property, anywhere in ``node`` (defs, items, anyOf branches), without a description."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from undescribed(item, f"{where}/{index}")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.get("properties", {}).items():
        if not (isinstance(value, dict) and str(value.get("description", "")).strip()):
            yield f"{where}/properties/{key}"
    for key, value in node.items():
        yield from undescribed(value, f"{where}/{key}")


def properties(node) -> int:
    """How many properties ``node`` declares, anywhere in it."""
    if isinstance(node, list):
        return sum(properties(item) for item in node)
    if not isinstance(node, dict):
        return 0
    return len(node.get("properties", {})) + sum(properties(v) for v in node.values())


def test_every_key_of_the_schema_has_a_description():
    schema = blueprint_schema()
    assert list(undescribed(schema)) == []
    # The walk reached every key: one property for each field of each model class.
    fields = sum(len(cls.model_fields) for cls in vars(model).values()
                 if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel)
    assert properties(schema) == fields


def test_the_description_walk_reaches_defs_items_and_any_of_branches():
    schema = {"properties": {"a": {"description": "top", "type": "array",
                                   "items": {"properties": {"b": {"type": "string"}}}},
                             "c": {"anyOf": [{"type": "null"},
                                             {"properties": {"d": {"description": " "}}}]}},
              "$defs": {"E": {"properties": {"f": {"$ref": "#/$defs/E"},
                                             "g": {"description": "fine"}}}}}
    assert sorted(undescribed(schema)) == [
        "#/$defs/E/properties/f", "#/properties/a/items/properties/b",
        "#/properties/c", "#/properties/c/anyOf/1/properties/d"]
