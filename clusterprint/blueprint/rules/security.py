"""Security rules: settings that give users more than their own rights on the nodes."""

from __future__ import annotations

from collections.abc import Iterator

from clusterprint.blueprint.findings import Finding, error, warning
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.rules.registry import rule
from clusterprint.facts import credentials


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


@rule("security.plaintext-secret")
def check_plaintext_secret(bp: Blueprint) -> Iterator[Finding]:
    """No credential in the file: every string of a blueprint reaches some resource's inputs
    or the stack's outputs (names, labels, metadata, boot scripts), where the mandatory
    policies `no-plaintext-secret` and `no-secret-in-outputs` refuse it with the same
    detector (clusterprint.facts.credentials); a blueprint holds no secret by design."""
    for path, problem in credentials.leaks(bp.model_dump(mode="json", by_alias=True)):
        yield error(path, f"it {problem}, which the policy no-plaintext-secret refuses: "
                          "it would land in Pulumi's state, the plan and the nodes' metadata",
                    "keep secrets in Secret Manager; a blueprint never needs one")
