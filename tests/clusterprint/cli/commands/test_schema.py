"""clusterprint schema prints the committed schema."""

import json

import pytest

from clusterprint.cli.main import main
from tests.support.paths import ROOT

COMMITTED = ROOT / "schemas" / "blueprint.schema.json"


def test_schema_command_prints_the_committed_schema(capsys):
    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert out == COMMITTED.read_text()
    assert json.loads(out)["title"] == "clusterprint blueprint v1"


def test_schema_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["schema", "--help"])
    assert exc.value.code == 0
    assert "JSON Schema" in capsys.readouterr().out
