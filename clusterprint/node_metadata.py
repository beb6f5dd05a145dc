"""The instance metadata keys that carry runtime facts from Pulumi to the node scripts.

Scripts are rendered from the blueprint alone, so what is only known once resources
exist (a Filestore IP, a Lustre mount point) reaches the nodes as metadata: the
components write these keys, the scripts read them from the metadata server.
"""

from __future__ import annotations

#: controller | login | compute
ROLE = "clusterprint-role"
#: The nodeset a compute VM belongs to.
NODESET = "clusterprint-nodeset"
#: What /home mounts: ``nfs:IP:/SHARE`` (Filestore) or ``lustre:IP@tcp:/FS`` (Lustre).
HOME_SOURCE = "clusterprint-home-source"
#: Secret Manager secret (projects/P/secrets/S) holding the munge key; never the key itself.
MUNGE_SECRET = "clusterprint-munge-secret"
#: Secret Manager secret holding the key slurmctld signs REST API tokens with (controller only).
JWT_SECRET = "clusterprint-jwt-secret"
#: The cluster's Vertex AI TensorBoard (projects/P/locations/R/tensorboards/ID), set on login
#: nodes only with ``observability.tensorboard``: clusterprint-tensorboard-upload reads it.
TENSORBOARD = "clusterprint-tensorboard"
#: Secret Manager secret (projects/P/secrets/S) holding the accounting database's password.
DB_SECRET = "clusterprint-db-secret"
#: The device name the controller's state disk is attached under (/dev/disk/by-id/google-...).
STATE_DISK_DEVICE = "clusterprint-state"


def lustre_source(name: str) -> str:
    """Key of a Lustre entry's mount source, ``IP@tcp:/FS``."""
    return f"clusterprint-lustre-{name}"


def controller_hostname(cluster: str) -> str:
    """The controller VM's name, which is also its hostname: slurm.conf's SlurmctldHost."""
    return f"{cluster}-controller"


def login_hostname(cluster: str, index: int) -> str:
    """The name (and hostname) of login node ``index``, counted from 0."""
    return f"{cluster}-login-{index}"
