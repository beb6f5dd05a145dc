"""Which kernel interface is which NIC of this VM: the names NCCL's environment needs.

Interface names (enp0s12, enp6s0, ...) follow the PCI layout, which differs between machine
families and images, so they are found at boot instead of written down: the metadata
server lists the VM's NICs in the order the instance template gives them (the system gVNICs
first, then one NIC per GPU network, as components/nodeset.py builds them), each with its
MAC, and /sys/class/net/<name>/address gives each kernel interface's MAC.

The compute script runs this file with the VM's python3 (standard library only) and reads
its output; run by hand it is ``python3 nics.py LISTING SYSTEM_NICS GPU_NICS [SYSFS_NET]``.
It prints ``socket=<names>`` and ``gpu=<names>`` (comma-separated, in metadata order), or
says on stderr what does not match and exits 1 (a NIC whose interface is not up yet makes
the boot retry).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: Interface names the environment file may carry unquoted (the kernel allows more).
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


class Mismatch(Exception):
    """The metadata's NICs and the kernel's interfaces do not (yet) correspond."""


def kernel_interfaces(sysfs_net: Path) -> dict[str, str]:
    """MAC (lower case) -> interface name, for every interface that has a MAC."""
    found: dict[str, str] = {}
    for entry in sorted(sysfs_net.iterdir()):
        address = entry / "address"
        if address.is_file():
            mac = address.read_text().strip().lower()
            if mac and mac != "00:00:00:00:00:00":
                found.setdefault(mac, entry.name)
    return found


def interface_names(listing: list[dict], system_nics: int, gpu_nics: int,
                    sysfs_net: Path) -> tuple[list[str], list[str]]:
    """The system (socket) and GPU interface names, each in the metadata's NIC order."""
    if len(listing) != system_nics + gpu_nics:
        raise Mismatch(f"the metadata server lists {len(listing)} NICs; this machine type has "
                       f"{system_nics} system and {gpu_nics} GPU NICs")
    by_mac = kernel_interfaces(sysfs_net)
    names = []
    for index, nic in enumerate(listing):
        mac = str(nic.get("mac", "")).lower()
        name = by_mac.get(mac)
        if name is None:
            raise Mismatch(f"nic{index} (MAC {mac or '?'}) has no interface in {sysfs_net} yet")
        if not _NAME.match(name):
            raise Mismatch(f"nic{index}: interface name {name!r} is not a plain name")
        names.append(name)
    return names[:system_nics], names[system_nics:]


def main(argv: list[str]) -> int:
    """Print ``socket=`` and ``gpu=`` lines; 1 with the reason on stderr, 2 on bad usage."""
    if len(argv) not in (3, 4):
        print("usage: nics.py LISTING SYSTEM_NICS GPU_NICS [SYSFS_NET]", file=sys.stderr)
        return 2
    sysfs_net = Path(argv[3] if len(argv) == 4 else "/sys/class/net")
    try:
        listing = json.loads(Path(argv[0]).read_text())
        if not isinstance(listing, list):
            raise Mismatch("the metadata's network-interfaces is not a list")
        system, gpu = interface_names(listing, int(argv[1]), int(argv[2]), sysfs_net)
    except (Mismatch, OSError, ValueError) as exc:
        print(f"NICs: {exc}", file=sys.stderr)
        return 1
    print(f"socket={','.join(system)}")
    print(f"gpu={','.join(gpu)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
