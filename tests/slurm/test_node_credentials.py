"""Real Slurm behind the metadata guard: a user's job gets no node token and reads no secret.

slurmctld and slurmd run in a network namespace of the test's own (tests/support/netns.py) where a
fake metadata server answers on 169.254.169.254 port 80 and the rendered guard
(clusterprint/render/metadata_guard.py) is loaded with the real nft. A job submitted by an
unprivileged user runs as that user on the node, as on a VM: it is refused the token at once
and cannot read the munge key or the REST API's JWT key; a job of root's (which is what the
prolog, the epilog and clusterprint's services run as) still gets the token.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.render import metadata_guard
from tests.support.metadata_fake import FakeMetadata
from tests.support.netns import metadata_namespace
from tests.support.paths import blueprint_path

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
NOBODY = 65534
#: What a job runs: asks for the node's token, then tries to read each file named.
JOB = (f"import os, sys, urllib.request as u\n"
       f"print('uid', os.getuid())\n"
       f"r = u.Request('http://{metadata_guard.METADATA_IPV4}{TOKEN_PATH}',"
       f" headers={{'Metadata-Flavor': 'Google'}})\n"
       f"try:\n"
       f"    print('token:', u.urlopen(r, timeout=10).read().decode())\n"
       f"except OSError as exc:\n"
       f"    print('token refused:', exc)\n"
       f"for path in sys.argv[1:]:\n"
       f"    try:\n"
       f"        print('read', path, open(path, 'rb').read().hex())\n"
       f"    except OSError as exc:\n"
       f"        print('unreadable', path, type(exc).__name__)\n")


@pytest.fixture
def guarded_cluster(local_slurm, munge_socket):
    """cpu-small on real daemons in a namespace whose metadata server is behind the guard."""
    with metadata_namespace():
        fake = FakeMetadata(address=(metadata_guard.METADATA_IPV4, 80))
        fake.set(TOKEN_PATH, '{"access_token": "ya29.node-token"}')
        with tempfile.NamedTemporaryFile("w", suffix=".nft") as ruleset:
            ruleset.write(metadata_guard.ruleset())
            ruleset.flush()
            subprocess.run(["nft", "-f", ruleset.name], check=True)
        try:
            cluster = local_slurm(load_checked(blueprint_path("cpu-small")))
            cluster.start_node("cpu-vm", cluster.compute_node_conf("cpu"), 0)
            yield cluster
        finally:
            fake.stop()


def job_output(cluster, uid: int | None, secrets: list[Path]) -> str:
    """What a job on the node prints, submitted by ``uid`` (None: root)."""
    prefix = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                     "--clear-groups"]
    done = subprocess.run(cluster.command(*prefix, "srun", "-p", "debug", "-w", "cpu-vm", "-N1",
                                          "/usr/bin/python3", "-I", "-c", JOB,
                                          *map(str, secrets)),
                          env=cluster.env, capture_output=True, text=True, timeout=60,
                          cwd="/tmp")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_users_job_gets_no_token_and_reads_no_secret(guarded_cluster, munge_socket):
    cluster = guarded_cluster
    munge_key = munge_socket.parent / "munge.key"
    jwt_key = cluster.root / "jwt_hs256.key"
    secrets = [munge_key, *([jwt_key] if jwt_key.exists() else [])]
    out = job_output(cluster, NOBODY, secrets)
    assert "token refused:" in out and "Connection refused" in out
    assert "ya29" not in out
    for secret in secrets:
        assert f"unreadable {secret} PermissionError" in out
        assert secret.read_bytes().hex() not in out
    assert f"uid {NOBODY}\n" in out  # the job ran as the user who submitted it


def test_a_job_of_roots_still_gets_the_token(guarded_cluster):
    out = job_output(guarded_cluster, None, [])
    assert "uid 0\n" in out and "token: " in out and "ya29.node-token" in out
