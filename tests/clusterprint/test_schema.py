"""The committed JSON Schema is the model's, a valid 2020-12 schema, and agrees with it."""

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from clusterprint.loader import parse
from clusterprint.schema import blueprint_schema, schema_text
from tests.clusterprint.blueprint_texts import DROP, MINIMAL, apply_overrides, blueprint_text

ROOT = Path(__file__).resolve().parents[2]
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
