"""The instance metadata keys that carry runtime facts from Pulumi to the node scripts.

Scripts are rendered from the blueprint alone, so what is only known once resources
exist (a Filestore IP, a Lustre mount point) reaches the nodes as metadata: the
components write these keys, the scripts read them from the metadata server.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Compute API ``Metadata.items``: each value at most 262144 bytes (256 KiB), and "the
#: total size of all keys and values must be less than 512 KB".
VALUE_LIMIT_BYTES = 262_144
TOTAL_LIMIT_BYTES = 512 * 1024

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
#: The Slurm files of the controller or a login node, one JSON object of file name to text
#: (clusterprint/render/config_sync.py): their one source. The boot installs them, and the
#: clusterprint-config-sync service installs every change to it on the running VM.
SLURM_CONFIG = "clusterprint-slurm-config"
#: Each nodeset's desired count of static nodes, one JSON object of nodeset to count, on the
#: controller only: its remediation loop reads it every pass and resizes the static groups
#: (clusterprint/node/scale_down.py), which Pulumi creates and then leaves alone.
NODESET_SIZES = "clusterprint-nodeset-sizes"
#: Lets the VM write guest attributes, where its boot script publishes its progress: set on
#: every node (Compute docs "Setting and querying guest attributes").
GUEST_ATTRIBUTES = "enable-guest-attributes"
#: The guest attributes' namespace of a boot (``clusterprint status`` reads it whole, the
#: image builder's ``clusterprint/build`` beside it), and its two keys: BOOT_STATE is
#: ``booting STEP``, ``ready`` or ``failed STEP``; BOOT_LOG the last lines of this boot's log
#: when a step failed.
BOOT_NAMESPACE = "clusterprint"
BOOT_STATE = "boot"
BOOT_LOG = "boot-log"
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


class MetadataTooLarge(ValueError):
    """A VM's metadata Compute Engine would refuse: the message names the key and sizes."""


def check_size(vm: str, metadata: Mapping[str, object]) -> None:
    """MetadataTooLarge where a value, or all of them with their keys, is over the Compute
    API's limits; only the values known now (strings) count, since an address that only
    the cloud knows is short. Raised before ``pulumi up`` asks for the VM, and failing."""
    sizes = {key: len(value.encode()) for key, value in metadata.items()
             if isinstance(value, str)}
    over = {key: size for key, size in sizes.items() if size > VALUE_LIMIT_BYTES}
    if over:
        key, size = max(over.items(), key=lambda item: item[1])
        raise MetadataTooLarge(f"{vm}: metadata {key} is {size} bytes; Compute Engine takes "
                               f"at most {VALUE_LIMIT_BYTES} bytes per value")
    total = sum(sizes.values()) + sum(len(key.encode()) for key in metadata)
    if total >= TOTAL_LIMIT_BYTES:
        raise MetadataTooLarge(f"{vm}: its metadata is {total} bytes in all; Compute Engine "
                               f"takes less than {TOTAL_LIMIT_BYTES}")
