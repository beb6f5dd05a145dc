"""The Ops Agent configuration a rendered boot script writes, parsed as the agent reads it
(its YAML; clusterprint writes JSON, which is YAML): what the schema, the GPU and the
dashboard tests read."""

from __future__ import annotations

import re

from ruamel.yaml import YAML

from clusterprint.facts import ops_agent


def written_config(script: str) -> dict:
    """The Ops Agent configuration ``script`` writes to config.yaml."""
    found = re.search(rf"install_text {re.escape(ops_agent.CONFIG)} 0644 "
                      r"<<'(CLUSTERPRINT_EOF\w*)'\n(.*?)\n\1\n", script, re.S)
    assert found, "the script writes no Ops Agent configuration"
    return YAML(typ="safe").load(found[2])
