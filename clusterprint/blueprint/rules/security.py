"""Security rules: settings that give users more than their own rights on the nodes."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule


@rule("security.node-credentials")
def check_node_credentials(bp: Blueprint) -> Iterator[Finding]:
    """Node credentials for every user read the munge key, and the munge key runs jobs as
    root: fine for a cluster of one user, never for a shared one."""
    if bp.security.users_get_node_credentials:
        yield warning(("security", "users_get_node_credentials"),
                      "every user's processes may take the node's access token, which reads "
                      "the munge key: any user can then run jobs as root",
                      "use it only on a single-user cluster; remove it to let only root "
                      "reach the metadata server")
