"""The metadata guard on a booted login or compute node: root gets a token, nobody else does.

Each test boots the rendered script in the boot sandbox (test_node_scripts_boot.Node) inside a
network namespace of its own (tests/support/netns.py) where a fake metadata server listens on
169.254.169.254 port 80, as Compute Engine's does, and the script's nft is the real one: the
rule the boot loads is the rule that judges the requests. A DNS listener on the same address
(port 53) stands for the resolver that must stay open to everyone.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from ruamel.yaml import YAML

from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.render import metadata_guard, rendered_files
from tests.support.boot_sandbox import Node
from tests.support.metadata_fake import FakeMetadata
from tests.support.netns import metadata_namespace
from tests.support.paths import blueprint_path

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
TOKEN = '{"access_token": "ya29.node-token", "expires_in": 3599, "token_type": "Bearer"}'
NOBODY = 65534
#: A request for the node's token, as any program (gcloud, a client library) makes it.
FETCH = (f"import sys, urllib.request as u\n"
         f"r = u.Request('http://{metadata_guard.METADATA_IPV4}{TOKEN_PATH}',"
         f" headers={{'Metadata-Flavor': 'Google'}})\n"
         f"print(u.urlopen(r, timeout=10).read().decode())\n")


def as_uid(uid: int, *argv: str) -> subprocess.CompletedProcess:
    """Run argv as ``uid`` (root: as it is), in this namespace."""
    prefix = [] if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                  "--clear-groups"]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=30,
                          cwd="/")


def token_for(uid: int) -> tuple[subprocess.CompletedProcess, float]:
    """``uid``'s request for the node's token, and how long the answer took."""
    start = time.monotonic()
    done = as_uid(uid, "/usr/bin/python3", "-I", "-c", FETCH)
    return done, time.monotonic() - start


#: A connection to the metadata server's IPv6 address, port 80.
CONNECT_IPV6 = (f"import socket; socket.create_connection(('{metadata_guard.METADATA_IPV6}',"
                f" 80), 5)")


def assert_guarded() -> None:
    """Root gets the token; an unprivileged uid is refused at once, not left hanging; the
    IPv6 address likewise."""
    done, _ = token_for(0)
    assert done.returncode == 0 and "ya29.node-token" in done.stdout, done.stderr
    done, took = token_for(NOBODY)
    assert done.returncode != 0 and "ya29" not in done.stdout
    assert "Connection refused" in done.stderr
    assert took < 5
    assert as_uid(0, "/usr/bin/python3", "-I", "-c", CONNECT_IPV6).returncode == 0
    ipv6 = as_uid(NOBODY, "/usr/bin/python3", "-I", "-c", CONNECT_IPV6)
    assert ipv6.returncode != 0 and "ConnectionRefusedError" in ipv6.stderr
    # Root in a user namespace of the user's own (as enroot makes one) is still the user to
    # the kernel; an IPv4-mapped IPv6 address still sends IPv4.
    for tricked in (["unshare", "--user", "--map-root-user", "/usr/bin/python3", "-I", "-c",
                     FETCH],
                    ["/usr/bin/python3", "-I", "-c", FETCH.replace(
                        f"http://{metadata_guard.METADATA_IPV4}",
                        f"http://[::ffff:{metadata_guard.METADATA_IPV4}]")]):
        assert "ya29.node-token" in as_uid(0, *tricked).stdout, tricked  # the way is open
        done = as_uid(NOBODY, *tricked)
        assert done.returncode != 0 and "ya29" not in done.stdout, tricked
        assert "Connection refused" in done.stderr, done.stderr


@pytest.fixture
def metadata_server(sandbox) -> Iterator[FakeMetadata]:
    """In a namespace of the test's own: the metadata server (a token), DNS on its address,
    and a listener on its IPv6 address."""
    with metadata_namespace():
        fake = FakeMetadata(address=(metadata_guard.METADATA_IPV4, 80))
        fake.set(TOKEN_PATH, TOKEN)
        dns = socket.create_server((metadata_guard.METADATA_IPV4, metadata_guard.DNS_PORT))
        ipv6 = socket.create_server((metadata_guard.METADATA_IPV6, 80),
                                    family=socket.AF_INET6)
        for listener in (dns, ipv6):
            threading.Thread(target=_accept_forever, args=(listener,), daemon=True).start()
        try:
            yield fake
        finally:
            fake.stop()
            dns.close()
            ipv6.close()


def _accept_forever(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        conn.close()


@pytest.fixture
def vm(sandbox, tmp_path) -> Node:
    """A fresh VM in the boot sandbox, its munge key's secret already made."""
    node = Node(tmp_path)
    (node.fake / "secret" / "1").write_text("key from the controller")
    return node


@pytest.fixture
def guarded_node(vm: Node, metadata_server) -> Node:
    """A node whose image's nft is the real one (in this namespace only)."""
    node = vm
    node.image_lacks("nft")
    node.fake_command("nft", 'exec /usr/sbin/nft "$@"')
    return node


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    """The cpu-small blueprint's rendered files."""
    return rendered_files(load_checked(blueprint_path("cpu-small")))


def run_on_node(node: Node, command: str) -> None:
    """A command as root on the booted node, in its sandboxed folders (a unit's ExecStart)."""
    done = node.boot(f"#!/bin/bash\nset -e\n{command}\necho 'is up' >>\"$FAKE/journal\"\n")
    assert done.returncode == 0, done.stderr


def unit_lines(node: Node, path: str, key: str) -> list[str]:
    """The values of ``key=`` lines of a unit file the boot wrote."""
    return re.findall(rf"^{key}=(.+)$", node.file(path).read_text(), re.MULTILINE)


def guard_rules() -> list[str]:
    """The rules of the guard's table as the kernel holds them."""
    listed = subprocess.run(["nft", "list", "table", "inet", metadata_guard.TABLE],
                            capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in listed.splitlines() if "reject" in line]


@pytest.mark.parametrize("role", ["login", "compute-cpu"])
def test_after_boot_only_root_gets_the_nodes_token_and_dns_stays_open(guarded_node, files,
                                                                      role):
    node = guarded_node
    node.booted_from(files, role)
    assert_guarded()
    # The resolver on the same address answers everyone.
    assert as_uid(NOBODY, "/usr/bin/python3", "-I", "-c",
                  "import socket; socket.create_connection(('169.254.169.254', 53), 5)"
                  ).returncode == 0
    # The guard is the boot's first step: before software, storage, munge and slurmd.
    calls = node.calls()
    first = next(i for i, c in enumerate(calls) if c.startswith("systemctl enable "
                                                                + metadata_guard.UNIT))
    assert not [c for c in calls[:first] if c.startswith(("mount", "gcloud", "apt-get"))]
    assert [c for c in calls if "slurmd" in c or "munge" in c][0] in calls[first:]


def test_a_second_boot_and_a_restart_of_the_unit_keep_one_copy_of_the_rule(guarded_node,
                                                                           files):
    node = guarded_node
    node.booted_from(files, "login")
    rules = guard_rules()
    assert len(rules) == 2  # IPv4 and IPv6
    node.booted_from(files, "login")
    assert guard_rules() == rules
    assert_guarded()
    unit = f"/etc/systemd/system/{metadata_guard.UNIT}"
    for command in unit_lines(node, unit, "ExecStart") + unit_lines(node, unit, "ExecReload"):
        run_on_node(node, command)
        assert guard_rules() == rules
    assert_guarded()


@pytest.mark.parametrize("step", ["ExecStartPost", "ExecReload", "ExecStopPost"])
def test_nftables_flushing_the_ruleset_loads_the_guard_again(guarded_node, files, step):
    node = guarded_node
    node.booted_from(files, "compute-cpu")
    drop_in = (f"/etc/systemd/system/{metadata_guard.NFTABLES_UNIT}.d/"
               f"{metadata_guard.DROP_IN}")
    # What nftables.service does when it loads /etc/nftables.conf or stops: flush ruleset.
    subprocess.run(["nft", "flush", "ruleset"], check=True)
    done, _ = token_for(NOBODY)
    assert "ya29.node-token" in done.stdout  # without the guard, anyone gets the token
    (command,) = unit_lines(node, drop_in, step)
    run_on_node(node, command)
    assert_guarded()


@pytest.mark.parametrize("role, units", [
    ("login", ["systemd-user-sessions.service"]),
    ("compute-cpu", ["systemd-user-sessions.service", "slurmd.service"]),
])
def test_logins_and_jobs_require_the_guard_at_every_later_boot(guarded_node, files, role,
                                                               units):
    node = guarded_node
    node.booted_from(files, role)
    unit = f"/etc/systemd/system/{metadata_guard.UNIT}"
    before = unit_lines(node, unit, "Before")[0].split()
    assert set(units) <= set(before) and "network-pre.target" in before
    assert unit_lines(node, unit, "WantedBy") == ["sysinit.target"]
    assert unit_lines(node, unit, "DefaultDependencies") == ["no"]
    for guarded in units:
        drop_in = f"/etc/systemd/system/{guarded}.d/{metadata_guard.DROP_IN}"
        # Requires: a guard that fails to load keeps /run/nologin (logins) and slurmd out.
        assert unit_lines(node, drop_in, "Requires") == [metadata_guard.UNIT]
        assert unit_lines(node, drop_in, "After") == [metadata_guard.UNIT]


def test_a_guard_that_does_not_load_fails_the_boot_before_anything_starts(guarded_node, files):
    node = guarded_node
    node.fake_command("nft", "exit 1")
    done = node.boot_from(files, "login")
    assert done.returncode != 0
    assert "FAILED: metadata guard: nft could not load" in node.journal()
    assert not [c for c in node.calls() if c.startswith(("mount", "systemctl start"))]


def test_a_single_user_cluster_that_asks_for_it_has_no_guard(vm, metadata_server, make_text):
    node = vm
    text = make_text({"security": {"users_get_node_credentials": True}})
    checked = check_text("bp.yaml", text, False)
    files = rendered_files(checked.blueprint)
    assert "guard_metadata_server" not in files["scripts/login.sh"]
    assert "guard_metadata_server" not in files["scripts/compute-cpu.sh"]
    node.booted_from(files, "login")
    assert not [c for c in node.calls() if c.startswith("nft")]
    done, _ = token_for(NOBODY)
    assert "ya29.node-token" in done.stdout


def test_cloud_inits_bootcmd_loads_the_same_rule_before_logins(metadata_server):
    config = YAML(typ="safe", pure=True).load(metadata_guard.cloud_config())
    assert metadata_guard.cloud_config().startswith("#cloud-config\n")
    assert list(config) == ["bootcmd"]
    (command,) = config["bootcmd"]
    # Run as cloud-init runs a list: argv, no shell of its own around it.
    subprocess.run(command, check=True, timeout=30)
    assert len(guard_rules()) == 2
    assert_guarded()
    subprocess.run(command, check=True, timeout=30)  # every boot: still one copy
    assert len(guard_rules()) == 2
