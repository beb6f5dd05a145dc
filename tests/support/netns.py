"""A network namespace of the test's own, with the metadata server's addresses on loopback.

The metadata guard is an nftables rule; loading it in this machine's own namespace would
change the machine. Inside ``metadata_namespace()`` the test process (its calling thread, and
every thread and process it starts from there) is in a fresh namespace whose loopback also
carries 169.254.169.254 and fd20:ce::254, so a fake metadata server listens where the real
one does and the rule applies to it exactly as on a VM; on leaving, the thread returns to the
namespace it came from, and the new one goes when nothing is left in it.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from clusterprint.render import metadata_guard

CLONE_NEWNET = 0x40000000


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


@contextmanager
def metadata_namespace() -> Iterator[None]:
    """Run the block in a new network namespace with the metadata addresses on loopback."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            for command in (["ip", "link", "set", "lo", "up"],
                            ["ip", "addr", "add", f"{metadata_guard.METADATA_IPV4}/32",
                             "dev", "lo"],
                            # nodad: usable at once, not "tentative" while DAD runs
                            ["ip", "-6", "addr", "add", f"{metadata_guard.METADATA_IPV6}/128",
                             "dev", "lo", "nodad"]):
                subprocess.run(command, check=True, capture_output=True)
            yield
        finally:
            _check(libc.setns(home, CLONE_NEWNET), "setns back")
    finally:
        os.close(home)
