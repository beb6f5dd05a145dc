"""The REST API as the controller runs it: slurmrestd with the rendered unit's arguments.

slurmctld reads the rendered slurm.conf with its auth/jwt lines (the key a temp file); the
plugins slurmrestd serves are what the controller script's own ``rest_plugins`` picks from
this machine's slurmrestd (Debian's 22.05); slurmrestd runs as ``nobody``, as the unit runs
it as its own unprivileged user, on a free port of 127.0.0.1 instead of the controller's
internal address. A user mints a token with ``scontrol token`` and submits over REST.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.render import rendered_files
from tests.support.local_slurm import Daemon, LocalSlurm, free_port, wait_until
from tests.support.paths import blueprint_path

#: The unprivileged user slurmrestd runs as and the user who submits: slurmrestd refuses
#: root and SlurmUser.
AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--")
#: The OpenAPI version docs/services.md's example uses: served by Slurm 22.05 and by Ubuntu 24.04's
#: 23.11 (deprecated there, beside v0.0.39 and v0.0.40).
API = "/slurm/v0.0.38"
JOB = {"script": "#!/bin/bash\necho over REST\n",
       "job": {"name": "rest", "current_working_directory": "/tmp",
               "standard_output": "/dev/null", "environment": {"PATH": "/usr/bin:/bin"}}}


def rendered_function(script: str, name: str) -> str:
    """One shell function of a rendered script, whole."""
    match = re.search(rf"^{name}\(\) {{\n.*?^}}\n", script, re.MULTILINE | re.DOTALL)
    assert match, f"the script defines no {name}"
    return match.group(0)


def served_plugins(cluster: LocalSlurm, script: str) -> str:
    """What the controller script's rest_plugins picks from this machine's slurmrestd, for
    this cluster's slurm.conf (its path made local)."""
    function = rendered_function(script, "rest_plugins").replace(
        "/etc/slurm/slurm.conf", str(cluster.conf))
    shell = f'fail() {{ echo "$*" >&2; exit 1; }}\n{function}rest_plugins\necho "$REST_PLUGINS"'
    return cluster.run("bash", "-c", shell).strip()


def unit_command(cluster: LocalSlurm, script: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The rendered unit's ExecStart, listening on ``port`` of 127.0.0.1, and its environment."""
    exec_start = re.search(r"^ExecStart=(/usr/sbin/slurmrestd .+)$", script, re.MULTILINE)
    environment = re.findall(r"^Environment=(\w+)=(\S+)$", script, re.MULTILINE)
    assert exec_start and environment == [("SLURM_JWT", "daemon")]
    argv = shlex.split(exec_start[1].replace("$REST_PLUGINS", served_plugins(cluster, script))
                       .replace("$address", "127.0.0.1"))
    assert argv[-1] == "127.0.0.1:6820"
    return [*argv[:-1], f"127.0.0.1:{port}"], {**cluster.env, **dict(environment)}


class Rest:
    """slurmrestd started with the rendered unit's environment and arguments."""

    def __init__(self, cluster: LocalSlurm, script: str) -> None:
        self.port = free_port()
        argv, env = unit_command(cluster, script, self.port)
        self.daemon = Daemon([*AS_NOBODY, *argv], cluster.root / "slurmrestd.log", env)
        cluster.daemons.append(self.daemon)
        wait_until(lambda: self.daemon.running() and self.listening(), "slurmrestd listening",
                   self.daemon.log)

    def listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def call(self, method: str, path: str, body: dict | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict]:
        """One request; its HTTP status and JSON answer (its text as ``{"text": ...}`` when
        it is not JSON: slurmrestd refuses in plain text)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, {"text": text.decode(errors="replace")}


@pytest.fixture
def cluster(local_slurm) -> LocalSlurm:
    return local_slurm(load_checked(blueprint_path("cpu-small")))


def token(cluster: LocalSlurm) -> str:
    """A token for ``nobody``, minted by nobody as a login node's user would."""
    out = cluster.run(*AS_NOBODY, "scontrol", "token", "lifespan=600")
    match = re.fullmatch(r"SLURM_JWT=(\S+)\n", out)
    assert match, out
    return match[1]


def test_the_unit_serves_slurmctlds_api_only_and_would_refuse_to_run_as_root(cluster):
    script = rendered_files(cluster.blueprint)["scripts/controller.sh"]
    # This slurm.conf names no slurmdbd: the database's plugins would stop slurmrestd.
    assert served_plugins(cluster, script) == "openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38"
    argv, env = unit_command(cluster, script, free_port())
    assert argv[1:3] == ["-a", "rest_auth/jwt"]
    as_root = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert as_root.returncode != 0
    assert "slurmrestd should not be run as the root user" in as_root.stderr


def test_a_job_submitted_with_a_token_runs_and_its_state_is_read_back_over_rest(cluster):
    script = rendered_files(cluster.blueprint)["scripts/controller.sh"]
    rest = Rest(cluster, script)
    headers = {"X-SLURM-USER-NAME": "nobody", "X-SLURM-USER-TOKEN": token(cluster)}
    cluster.start_node("cpu-rest", cluster.compute_node_conf("cpu"), 0)

    status, answer = rest.call("POST", f"{API}/job/submit", JOB, headers)
    assert status == 200 and not answer.get("errors"), answer
    job_id = answer["job_id"]

    states = []
    deadline = time.monotonic() + 60
    while "COMPLETED" not in states[-1:] and time.monotonic() < deadline:
        status, answer = rest.call("GET", f"{API}/job/{job_id}", headers=headers)
        assert status == 200, answer
        (job,) = answer["jobs"]
        states.append(job["job_state"])
        time.sleep(0.5)
    assert states[-1] == "COMPLETED", states
    assert job["user_name"] == "nobody" and job["name"] == "rest"
    assert cluster.run("scontrol", "show", "job", str(job_id)).count("JobState=COMPLETED") == 1


#: A token slurmctld did not sign, or one of another user: slurmrestd passes it on and
#: slurmctld drops the connection; 22.05 answers 500 with this error.
DROPPED = (500, 5005, "Zero Bytes were transmitted or received")


@pytest.mark.parametrize(("headers", "refusal"), [
    # No token at all: slurmrestd itself refuses, in plain text.
    pytest.param({}, (401, None, "Authentication failure"), id="no token"),
    pytest.param({"X-SLURM-USER-NAME": "nobody"}, (401, None, "Authentication failure"),
                 id="a user name only"),
    pytest.param({"X-SLURM-USER-NAME": "nobody", "X-SLURM-USER-TOKEN": "not.a.token"},
                 DROPPED, id="a forged token"),
    pytest.param({"X-SLURM-USER-NAME": "root"}, DROPPED, id="nobody's token for root")])
def test_a_job_without_its_users_token_is_refused_and_never_queued(cluster, headers, refusal):
    rest = Rest(cluster, rendered_files(cluster.blueprint)["scripts/controller.sh"])
    if headers.get("X-SLURM-USER-NAME") == "root":
        headers = {**headers, "X-SLURM-USER-TOKEN": token(cluster)}
    status, answer = rest.call("POST", f"{API}/job/submit", JOB, headers)
    errors = answer.get("errors") or [{"error_code": None, "error": answer.get("text")}]
    assert (status, errors[0]["error_code"], errors[0]["error"]) == refusal, answer
    assert cluster.run("squeue", "-h", "-o", "%i") == ""


def test_nodes_without_the_key_run_jobs_and_users_mint_tokens(cluster):
    """Only the controller holds the JWT key: a compute node and a login node read a
    slurm.conf whose jwt_key file they lack, as on the VMs, and still work."""
    conf = cluster.root / "without-key.conf"
    conf.write_text(re.sub(r"^AuthAltParameters=jwt_key=.*$",
                           f"AuthAltParameters=jwt_key={cluster.root / 'absent.key'}",
                           cluster.conf.read_text(), flags=re.MULTILINE))
    cluster.conf = conf
    cluster.env = {**cluster.env, "SLURM_CONF": str(conf)}
    cluster.start_node("cpu-nokey", cluster.compute_node_conf("cpu"), 0)
    assert cluster.run("srun", "-N1", "-w", "cpu-nokey", "hostname").strip()
    assert token(cluster).count(".") == 2
    assert not (cluster.root / "absent.key").exists()
