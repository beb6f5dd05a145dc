"""The REST API as the controller runs it: slurmrestd with the rendered unit's arguments.

slurmctld reads the rendered slurm.conf with its auth/jwt lines (the key a temp file); the
plugins slurmrestd serves are what the controller script's own ``rest_plugins`` picks from
the real slurmrestd's list (Slurm 26.05, tests/support/slurm_root.py); slurmrestd runs as
``nobody``, as the unit runs it as its own unprivileged user, on a free port of 127.0.0.1
instead of the controller's internal address. A user (``trainer``: 26.05 refuses jobs of
``nobody``) mints a token with ``scontrol token`` and submits over REST.
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
from tests.support.boot_sandbox import REST_PLUGINS
from tests.support.local_slurm import LocalSlurm, free_port, wait_until
from tests.support.paths import blueprint_path
from tests.support.slurm_root import USER

#: The unprivileged user slurmrestd runs as: slurmrestd refuses root and SlurmUser.
AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--")
#: The user who submits.
AS_USER = ("setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--")
#: The OpenAPI version docs/services.md's example uses: the newest 26.05 serves
#: (``slurmrestd -d list``: data_parser/v0.0.42 to v0.0.45).
API = "/slurm/v0.0.45"
JOB = {"script": "#!/bin/bash\necho over REST\n",
       "job": {"name": "rest", "current_working_directory": "/tmp",
               "standard_output": "/dev/null", "environment": ["PATH=/usr/bin:/bin"]}}
def rendered_function(script: str, name: str) -> str:
    """One shell function of a rendered script, whole."""
    match = re.search(rf"^{name}\(\) {{\n.*?^}}\n", script, re.MULTILINE | re.DOTALL)
    assert match, f"the script defines no {name}"
    return match.group(0)


def served_plugins(cluster: LocalSlurm, script: str) -> str:
    """What the controller script's rest_plugins, as rendered, picks from the real slurmrestd
    (which it runs as nobody), for this cluster's slurm.conf (its path made local)."""
    function = rendered_function(script, "rest_plugins").replace(
        "/etc/slurm/slurm.conf", str(cluster.conf))
    shell = (f'fail() {{ echo "$*" >&2; exit 1; }}\n{function}rest_plugins\n'
             'echo "$REST_PLUGINS"')
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
        self.daemon = cluster.daemon("slurmrestd.log", *AS_NOBODY, *argv, env=env)
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
    """A token for the user, minted by the user as on a login node."""
    out = cluster.run(*AS_USER, "scontrol", "token", "lifespan=600")
    match = re.fullmatch(r"SLURM_JWT=(\S+)\n", out)
    assert match, out
    return match[1]


def test_slurmrestd_lists_its_plugins_to_an_unprivileged_user_only(cluster):
    """What the controller's rest_plugins must do on 26.05: as root, even with the user
    check disabled as the rendered function disables it, slurmrestd stops."""
    as_root = subprocess.run(cluster.command("env", "SLURMRESTD_SECURITY=disable_user_check",
                                             "slurmrestd", "-s", "list"),
                             env=cluster.env, capture_output=True, text=True, timeout=30)
    assert as_root.returncode != 0
    assert "SLURMRESTD_SECURITY=disable_user_check should only be used for development" in (
        as_root.stderr)
    listed = cluster.run(*AS_NOBODY, "slurmrestd", "-s", "list").split()
    assert tuple(listed) == REST_PLUGINS  # the boot sandbox's fake lists the same


def test_the_unit_serves_slurmctlds_api_only_and_would_refuse_to_run_as_root(cluster):
    script = rendered_files(cluster.blueprint)["scripts/controller.sh"]
    # This slurm.conf names no slurmdbd: the database's plugin would stop slurmrestd.
    assert served_plugins(cluster, script) == "openapi/slurmctld,openapi/util"
    argv, env = unit_command(cluster, script, free_port())
    assert argv[1:3] == ["-a", "rest_auth/jwt"]
    as_root = subprocess.run(cluster.command(*argv), env=env, capture_output=True, text=True,
                             timeout=30)
    assert as_root.returncode != 0
    assert "slurmrestd should not be run as the root user" in as_root.stderr


def test_a_job_submitted_with_a_token_runs_and_its_state_is_read_back_over_rest(cluster):
    script = rendered_files(cluster.blueprint)["scripts/controller.sh"]
    rest = Rest(cluster, script)
    headers = {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token(cluster)}
    cluster.start_node("cpu-rest", cluster.compute_node_conf("cpu"), 0)

    status, answer = rest.call("POST", f"{API}/job/submit", JOB, headers)
    assert status == 200 and not answer.get("errors"), answer
    job_id = answer["job_id"]

    states = []
    deadline = time.monotonic() + 60
    while ["COMPLETED"] not in states[-1:] and time.monotonic() < deadline:
        status, answer = rest.call("GET", f"{API}/job/{job_id}", headers=headers)
        assert status == 200, answer
        (job,) = answer["jobs"]
        states.append(job["job_state"])
        time.sleep(0.5)
    assert states[-1] == ["COMPLETED"], states
    assert job["user_name"] == USER and job["name"] == "rest"
    assert cluster.run("scontrol", "show", "job", str(job_id)).count("JobState=COMPLETED") == 1


#: A token slurmctld did not sign, or one of another user: slurmrestd passes it on and
#: slurmctld refuses it; 26.05 answers 511 with this error.
DROPPED = (511, 1007, "Protocol authentication error")


@pytest.mark.parametrize(("headers", "refusal"), [
    # No token at all: slurmrestd itself refuses, in plain text.
    pytest.param({}, (401, None, "Authentication failure"), id="no token"),
    pytest.param({"X-SLURM-USER-NAME": USER}, (401, None, "Authentication failure"),
                 id="a user name only"),
    pytest.param({"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": "not.a.token"},
                 DROPPED, id="a forged token"),
    pytest.param({"X-SLURM-USER-NAME": "root"}, DROPPED, id="a user's token for root")])
def test_a_job_without_its_users_token_is_refused_and_never_queued(cluster, headers, refusal):
    rest = Rest(cluster, rendered_files(cluster.blueprint)["scripts/controller.sh"])
    if headers.get("X-SLURM-USER-NAME") == "root":
        headers = {**headers, "X-SLURM-USER-TOKEN": token(cluster)}
    status, answer = rest.call("POST", f"{API}/job/submit", JOB, headers)
    errors = answer.get("errors") or [{"error_number": None, "error": answer.get("text")}]
    assert (status, errors[0]["error_number"], errors[0]["error"]) == refusal, answer
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
