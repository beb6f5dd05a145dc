"""The blueprint JSON Schema, generated from the model and committed in ``schemas/``."""

from __future__ import annotations

import json
from typing import Any


def blueprint_schema() -> dict[str, Any]:
    """The schema as a dict: draft 2020-12, with descriptions, enums and defaults."""
    from clusterprint.blueprint.model import Blueprint

    schema = Blueprint.model_json_schema(by_alias=True, mode="validation")
    ordered = {"$schema": schema.pop("$schema"), "$id": schema.pop("$id")}
    ordered.update(schema)
    return ordered


def schema_text() -> str:
    """The schema as the exact bytes committed in ``schemas/blueprint.schema.json``."""
    return json.dumps(blueprint_schema(), indent=2, sort_keys=False) + "\n"
