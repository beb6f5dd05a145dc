"""Rendering what the nodes run from a checked blueprint (jinja2, pure: same bytes every time).

INTERFACE STUB: the node-software work replaces this module's body; the components
depend only on ``NodeScripts`` and ``node_scripts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterprint.model import Blueprint


@dataclass(frozen=True)
class NodeScripts:
    """The startup script of each role: what the components put in VM metadata."""

    controller: str
    login: str
    #: nodeset name -> its compute nodes' startup script
    compute: dict[str, str]


def node_scripts(blueprint: Blueprint) -> NodeScripts:
    """Startup scripts for every role of the blueprint's cluster."""
    stub = "#!/bin/bash\nset -euo pipefail\n"
    return NodeScripts(stub, stub, {n.name: stub for n in blueprint.slurm.nodesets})
