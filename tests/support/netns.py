"""Network namespaces of the tests' own: one with the metadata server's addresses on
loopback, and one for a cluster whose nodes each have a namespace of their own.

The metadata guard is an nftables rule; loading it in this machine's own namespace would
change the machine. Inside ``metadata_namespace()`` the test process (its calling thread, and
every thread and process it starts from there) is in a fresh namespace whose loopback also
carries 169.254.169.254 and fd20:ce::254, so a fake metadata server listens where the real
one does and the rule applies to it exactly as on a VM; on leaving, the thread returns to the
namespace it came from, and the new one goes when nothing is left in it.

Inside ``cluster_namespace()`` the same holds for a namespace with a bridge: slurmctld and
the test run there, and each node's slurmd in a namespace of its own joined to the bridge
by a veth pair, at an address of its own (dynamic slurmds all listen on SlurmdPort, so on
one namespace only one can run).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from clusterprint.render import metadata_guard

CLONE_NEWNET = 0x40000000


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


@contextmanager
def _own_namespace(commands: list[list[str]]) -> Iterator[None]:
    """The block in a new network namespace set up by ``commands``; back home after."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            for command in [["ip", "link", "set", "lo", "up"], *commands]:
                subprocess.run(command, check=True, capture_output=True)
            yield
        finally:
            _check(libc.setns(home, CLONE_NEWNET), "setns back")
    finally:
        os.close(home)


@contextmanager
def metadata_namespace() -> Iterator[None]:
    """Run the block in a new network namespace with the metadata addresses on loopback."""
    with _own_namespace([
            ["ip", "addr", "add", f"{metadata_guard.METADATA_IPV4}/32", "dev", "lo"],
            # nodad: usable at once, not "tentative" while DAD runs
            ["ip", "-6", "addr", "add", f"{metadata_guard.METADATA_IPV6}/128", "dev", "lo",
             "nodad"]]):
        yield


#: The cluster namespace's bridge, its address (the controller's) and the nodes' subnet.
BRIDGE, SUBNET = "cp0", "10.77.0"
CONTROLLER_ADDRESS = f"{SUBNET}.1"


@contextmanager
def cluster_namespace() -> Iterator[NodeNetworks]:
    """Run the block in a new network namespace with a bridge the nodes' namespaces join:
    slurmctld and the test stay here, each slurmd gets a namespace (and address) of its
    own, so several dynamic nodes run at once on one SlurmdPort, as VMs do."""
    with _own_namespace([["ip", "link", "add", BRIDGE, "type", "bridge"],
                         ["ip", "addr", "add", f"{CONTROLLER_ADDRESS}/24", "dev", BRIDGE],
                         ["ip", "link", "set", BRIDGE, "up"]]):
        networks = NodeNetworks()
        try:
            yield networks
        finally:
            networks.stop()


class NodeNetworks:
    """A network namespace per node on the cluster namespace's bridge, each held by a
    sleeping process (the namespace, its veth and its address go with it)."""

    def __init__(self) -> None:
        self.holders: dict[str, subprocess.Popen] = {}
        self.addresses: dict[str, str] = {}

    def enter(self, node: str) -> list[str]:
        """The command prefix that runs a command in ``node``'s namespace, made on first
        use with the next free address."""
        if node not in self.holders:
            self._make(node)
        return ["nsenter", f"--net=/proc/{self.holders[node].pid}/ns/net"]

    def _make(self, node: str) -> None:
        index = len(self.addresses) + 2
        assert index < 255, "one /24 of node addresses"
        home = os.readlink("/proc/thread-self/ns/net")
        holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
        self.holders[node] = holder
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{holder.pid}/ns/net") == home:
            assert time.monotonic() < deadline, "unshare --net did not start"
            time.sleep(0.01)
        veth, address = f"cpv{index}", f"{SUBNET}.{index}"
        inside = ["nsenter", f"--net=/proc/{holder.pid}/ns/net"]
        for command in (["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                         "netns", str(holder.pid)],
                        ["ip", "link", "set", veth, "master", BRIDGE, "up"],
                        [*inside, "ip", "link", "set", "lo", "up"],
                        [*inside, "ip", "addr", "add", f"{address}/24", "dev", "eth0"],
                        [*inside, "ip", "link", "set", "eth0", "up"]):
            subprocess.run(command, check=True, capture_output=True)
        self.addresses[node] = address

    def stop(self) -> None:
        for holder in self.holders.values():
            holder.kill()
            holder.wait()
