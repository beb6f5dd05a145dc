"""The metadata guard: on login and compute nodes only root reaches the metadata server.

Any process on a Compute Engine VM may ask the metadata server for an access token of the
VM's service account, and the login and compute accounts may read the munge key in Secret
Manager: a user with that key runs Slurm jobs as root. So an nftables rule refuses every
TCP connection to the metadata server's addresses from a socket whose owner is not root;
DNS (port 53 on the same address) stays open to everyone, and the refusal is a TCP reset,
so a user's request fails at once ("connection refused") instead of hanging.

The rule is one table of its own, replaced whole in one nft transaction (never a moment
without it), loaded by a unit that runs before networking and before logins or slurmd may
start (both require it: a guard that fails to load keeps logins and jobs out), and again
whenever nftables.service loads, reloads or stops, which would flush it. The startup script,
which installs that unit, runs only once the network is up, after SSH logins open: so on
every boot, the first one too, cloud-init (on the default Ubuntu images) loads the same rule
from the VM's ``user-data`` first, in its network stage, which systemd orders before sshd
and systemd-user-sessions (cloud-init's systemd/cloud-init-network.service.tmpl).
"""

from __future__ import annotations

import json

from clusterprint.blueprint.model import Blueprint

#: The metadata server: metadata.google.internal, and its IPv6 address on IPv6 VMs.
METADATA_IPV4 = "169.254.169.254"
METADATA_IPV6 = "fd20:ce::254"
#: The only socket owner that may reach it: root, which every clusterprint service, the guest
#: agent, the Ops Agent, gcsfuse mounts and slurmd run as. Jobs and users never do.
ROOT_UID = 0
#: The port of the DNS resolver that answers on the same address, open to everyone.
DNS_PORT = 53
TABLE = "clusterprint_metadata"
RULESET = "/etc/clusterprint/metadata-guard.nft"
UNIT = "clusterprint-metadata-guard.service"
#: Units that must never run without the guard: logins (systemd-user-sessions removes
#: /run/nologin) and, on compute nodes, slurmd, which starts users' jobs.
GUARDED_UNITS = ("systemd-user-sessions.service",)
COMPUTE_GUARDED_UNITS = ("slurmd.service",)
#: nftables.service flushes the whole ruleset when it loads /etc/nftables.conf or stops.
NFTABLES_UNIT = "nftables.service"
DROP_IN = "clusterprint-metadata-guard.conf"


def ruleset() -> str:
    """The nft script: creates the table if missing, deletes it and defines it anew, all in
    one transaction, so a second load replaces the rule instead of adding a copy."""
    rules = "\n".join(
        f"\t\t{family} daddr {address} tcp dport != {DNS_PORT} meta skuid != {ROOT_UID} "
        "reject with tcp reset"
        for family, address in (("ip", METADATA_IPV4), ("ip6", METADATA_IPV6)))
    return (f"# Rendered by clusterprint: only root reaches the metadata server (its HTTP\n"
            f"# endpoints hand out this VM's credentials); DNS on port {DNS_PORT} stays open.\n"
            f"table inet {TABLE}\n"
            f"delete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n"
            f"\tchain output {{\n"
            f"\t\ttype filter hook output priority filter; policy accept;\n"
            f"{rules}\n"
            f"\t}}\n"
            f"}}\n")


def cloud_config() -> str:
    """The VM's ``user-data``: a cloud-config whose bootcmd (run at every boot, before sshd
    and logins) loads the ruleset. The ruleset is the command's own argument ($0 of sh -c),
    so no character of it is ever read as shell; JSON quotes it for YAML."""
    command = ["sh", "-c", 'printf %s "$0" | nft -f -', ruleset()]
    return ("#cloud-config\n"
            "# Rendered by clusterprint: only root reaches the metadata server, from before\n"
            "# sshd and logins start, at every boot (the startup script keeps it so).\n"
            f"bootcmd:\n  - {json.dumps(command)}\n")


def script_context(blueprint: Blueprint, role: str) -> dict[str, object] | None:
    """What a login or compute script needs to install the guard, or None when the blueprint
    lets users have the node's credentials (``security.users_get_node_credentials``)."""
    if blueprint.security.users_get_node_credentials:
        return None
    guarded = GUARDED_UNITS + (COMPUTE_GUARDED_UNITS if role == "compute" else ())
    return {"ruleset": ruleset(), "path": RULESET, "table": TABLE, "unit": UNIT,
            "guarded": guarded, "nftables": NFTABLES_UNIT, "drop_in": DROP_IN}
