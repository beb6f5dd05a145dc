"""Which interface is which NIC: the metadata server's order, matched to the kernel by MAC.

The listings are public samples or made from them (tests/clusterprint/render/fixtures/nics,
see its README); /sys/class/net is a folder made from each sample's ``ip -o link``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.node import nics

NICS = Path(__file__).parents[1] / "render" / "fixtures" / "nics"
A3MEGA_GPU = ["enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0",
              "enp142s0"]


def sysfs(tmp_path: Path, fixture: str) -> Path:
    """A /sys/class/net with the interfaces of ``fixture``'s ``ip -o link`` listing."""
    root = tmp_path / "net"
    for line in (NICS / f"{fixture}-ip-link.txt").read_text().splitlines():
        name, mac = re.match(r"\d+: (\S+): .*link/\S+ (\S+)", line).groups()
        (root / name).mkdir(parents=True)
        (root / name / "address").write_text(mac + "\n")
    return root


def listing(fixture: str) -> list[dict]:
    return json.loads((NICS / f"{fixture}-network-interfaces.json").read_text())


def test_a3mega_names_come_in_the_metadata_order(tmp_path):
    system, gpu = nics.interface_names(listing("a3mega"), 1, 8, sysfs(tmp_path, "a3mega"))
    assert (system, gpu) == (["enp0s12"], A3MEGA_GPU)


def test_a4_names_follow_the_metadata_even_where_the_kernel_lists_nics_otherwise(tmp_path):
    system, gpu = nics.interface_names(listing("a4"), 2, 8, sysfs(tmp_path, "a4"))
    assert system == ["enp0s19", "enp192s20"]
    assert gpu == [f"gpu{i}rdma0" for i in range(8)]


def test_the_public_sample_of_a_five_nic_vm_maps_by_mac(tmp_path):
    # The published sample came without interface names: give them in reverse to prove
    # that the kernel's own order does not matter.
    sample = listing("dranet-5nic")
    root = tmp_path / "net"
    for index, nic in enumerate(reversed(sample)):
        (root / f"eth{index}").mkdir(parents=True)
        (root / f"eth{index}" / "address").write_text(nic["mac"].upper() + "\n")
    (root / "lo").mkdir()
    (root / "lo" / "address").write_text("00:00:00:00:00:00\n")
    assert nics.interface_names(sample, 1, 4, root) == (["eth4"], ["eth3", "eth2", "eth1", "eth0"])


def test_a_nic_without_its_interface_yet_is_named(tmp_path):
    root = sysfs(tmp_path, "a3mega")
    (root / "enp141s0" / "address").unlink()
    with pytest.raises(nics.Mismatch, match=r"^nic7 \(MAC 42:01:0a:80:c0:02\) has no interface"):
        nics.interface_names(listing("a3mega"), 1, 8, root)


def test_a_listing_of_another_shape_is_refused(tmp_path):
    with pytest.raises(nics.Mismatch, match="lists 9 NICs; this machine type has 2 system and 8"):
        nics.interface_names(listing("a3mega"), 2, 8, sysfs(tmp_path, "a3mega"))


def run(*args: str) -> subprocess.CompletedProcess:
    """nics.py as the compute script runs it: its source on python3's stdin."""
    return subprocess.run([sys.executable, "-", *args], input=Path(nics.__file__).read_text(),
                          capture_output=True, text=True, timeout=30)


def test_as_a_process_it_prints_the_names_for_the_script(tmp_path):
    done = run(str(NICS / "a3mega-network-interfaces.json"), "1", "8",
               str(sysfs(tmp_path, "a3mega")))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"socket=enp0s12\ngpu={','.join(A3MEGA_GPU)}\n"


@pytest.mark.parametrize(("listing_text", "said"), [
    ("{not json", "NICs: Expecting property name"),
    ('{"mac": "42:01:0a:00:00:02"}', "NICs: the metadata's network-interfaces is not a list"),
])
def test_as_a_process_a_bad_listing_fails_saying_why(tmp_path, listing_text, said):
    path = tmp_path / "listing.json"
    path.write_text(listing_text)
    done = run(str(path), "1", "8", str(sysfs(tmp_path, "a3mega")))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(said)


def test_as_a_process_it_refuses_bad_usage():
    done = run("only-one-argument")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: nics.py LISTING SYSTEM_NICS GPU_NICS")
