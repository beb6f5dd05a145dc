"""The MLOps broker: a user's upload or registration runs as root, with only what the user had.

The broker runs as a process (as its unit runs it) on a socket in a temp folder, with stand-ins
for the commands it runs as root that record their arguments and what the staged logs hold.
The helpers run as processes as user ``nobody`` (setpriv), exactly as a user on the login
node runs them; the module's own functions are tested for the requests a hostile client
could craft by hand.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterprint.node import mlops_broker, register_model, tensorboard_upload
from tests.support.mlops_cluster import NOBODY, Cluster, wait_for
from tests.support.paths import NODE_PYTHON


@pytest.fixture
def cluster(sandbox) -> Iterator[Cluster]:
    """The broker and a home for user nobody; the helpers run as nobody (setpriv, as root)."""
    made = Cluster()
    yield made
    made.stop()


def user_logs(cluster: Cluster) -> Path:
    """A run's TensorBoard folder in nobody's home, two runs of event files."""
    logdir = cluster.home / "llama" / "tensorboard"
    (logdir / "run-2").mkdir(parents=True)
    (logdir / "events.out.tfevents.1").write_bytes(b"\x00event one")
    (logdir / "run-2" / "events.out.tfevents.2").write_bytes(b"event two")
    for path in (logdir.parent, logdir, logdir / "run-2", *logdir.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    return logdir


def test_a_users_upload_runs_as_root_on_a_copy_of_what_the_user_sent(cluster):
    logdir = user_logs(cluster)
    done = cluster.run_as_user(tensorboard_upload, str(logdir))
    assert done.returncode == 0, done.stderr + cluster.log_text()
    # Root ran the helper on the staged copy, with the experiment named from the user's path.
    staged, *args = cluster.argv()
    assert args == ["--experiment", "llama"]
    assert staged.startswith(str(cluster.staging) + f"/{NOBODY}-")
    assert cluster.seen() == {"events.out.tfevents.1": b"\x00event one",
                              "run-2/events.out.tfevents.2": b"event two"}
    assert "root side: uid 0 args" in done.stderr  # the helper's output reaches the user
    assert list(cluster.staging.iterdir()) == []  # the copy is gone
    assert f"uid {NOBODY}: tensorboard-upload" in cluster.log_text()


def test_what_the_user_cannot_read_never_reaches_the_upload(cluster):
    logdir = user_logs(cluster)
    secret = cluster.root / "munge.key"
    secret.write_bytes(b"the cluster's munge key")
    secret.chmod(0o400)
    (logdir / "key-link").symlink_to(secret)
    (logdir / "root-only").write_bytes(b"root's file")
    (logdir / "root-only").chmod(0o600)
    done = cluster.run_as_user(tensorboard_upload, str(logdir))
    assert done.returncode == 0, done.stderr
    assert set(cluster.seen()) == {"events.out.tfevents.1", "run-2/events.out.tfevents.2"}


def test_a_folder_the_user_cannot_read_is_refused_before_the_broker_is_asked(cluster):
    private = cluster.root / "private"
    private.mkdir(mode=0o700)
    (private / "events.out.tfevents.1").write_bytes(b"root's run")
    done = cluster.run_as_user(tensorboard_upload, str(private))
    assert done.returncode == tensorboard_upload.BAD_INPUT
    assert "is not a folder you can read" in done.stderr
    assert not (cluster.record / "argv").exists()
    assert "tensorboard-upload" not in cluster.log_text()


def test_the_root_sides_status_is_the_users(cluster):
    (cluster.record / "status").write_text("9")
    done = cluster.run_as_user(tensorboard_upload, str(user_logs(cluster)), "--experiment", "r1")
    assert done.returncode == 9
    assert cluster.argv()[1:] == ["--experiment", "r1"]


def test_a_watched_upload_follows_the_folder_until_the_user_stops_it(cluster):
    logdir = user_logs(cluster)
    process = cluster.as_user(tensorboard_upload, str(logdir), "--watch",
                              CLUSTERPRINT_WATCH_INTERVAL_S="0.2")
    wait_for(lambda: cluster.seen().get("events.out.tfevents.1") == b"\x00event one")
    assert "--watch" in cluster.argv()
    with (logdir / "events.out.tfevents.1").open("ab") as events:
        events.write(b", event three")
    wait_for(lambda: cluster.seen().get("events.out.tfevents.1")
             == b"\x00event one, event three")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=10)
    wait_for(lambda: list(cluster.staging.iterdir()) == [])  # stopped, the copy removed


def test_a_checkpoint_outside_the_buckets_is_copied_by_the_user_then_registered_by_root(
        cluster):
    checkpoint = cluster.home / "lustre-ckpt"
    (checkpoint / "iter_1").mkdir(parents=True)
    (checkpoint / "iter_1" / "model.safetensors").write_bytes(b"weights")
    for path in (checkpoint, checkpoint / "iter_1", checkpoint / "iter_1" / "model.safetensors"):
        os.chown(path, NOBODY, NOBODY)
    done = cluster.run_as_user(register_model, str(checkpoint), "--display-name", "Llama SFT")
    assert done.returncode == 0, done.stderr + cluster.log_text()
    copied = cluster.bucket / "models" / "llama-sft"
    assert (copied / "iter_1" / "model.safetensors").read_bytes() == b"weights"
    assert (copied / "iter_1" / "model.safetensors").stat().st_uid == NOBODY  # the user's copy
    assert cluster.argv() == [str(copied), "--display-name", "Llama SFT"]


def test_a_registration_outside_the_buckets_is_refused_by_the_broker(cluster):
    answer = raw_request(cluster, {"helper": "register-model",
                                   "args": ["/etc/munge", "--display-name", "m"]})
    assert answer[-1] == {"status": 3}
    assert "inside a bucket mount only" in answer[0]["out"]
    assert not (cluster.record / "argv").exists()


@pytest.mark.parametrize("request_, says", [
    ({"helper": "rm", "args": ["-rf", "/"]}, "unknown helper"),
    ({"helper": "tensorboard-upload", "args": "--watch"}, "refused arguments"),
    ({"helper": "tensorboard-upload", "args": ["a\0b"]}, "refused arguments"),
], ids=["unknown-helper", "args-not-a-list", "nul"])
def test_a_crafted_request_is_refused_and_runs_nothing(cluster, request_, says):
    answer = raw_request(cluster, request_)
    assert answer[-1] == {"status": 2} and says in answer[0]["out"]
    assert not (cluster.record / "argv").exists()


def raw_request(cluster: Cluster, message: dict, then: bytes = b"") -> list[dict]:
    """What the broker answers a request written by hand (as nobody could write one)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(cluster.socket)
        sock.sendall(json.dumps(message).encode() + b"\n" + then)
        sock.shutdown(socket.SHUT_WR)
        return [json.loads(line) for line in sock.makefile("rb")]


@pytest.mark.parametrize("name", ["../escape", "/etc/cron.d/x", "a/../../b", "", "a//b",
                                  "ok/\x1b[2J", 42])
def test_a_sent_file_may_only_land_inside_its_staging_folder(tmp_path, name):
    with pytest.raises(mlops_broker.Refused, match="refused file name"):
        mlops_broker.staged_path(tmp_path, name)


def test_a_file_sent_outside_the_staging_folder_is_refused_whole(cluster):
    header = {"file": "../../escape", "offset": 0, "size": 4}
    answer = raw_request(cluster, {"helper": "tensorboard-upload", "args": []},
                         json.dumps(header).encode() + b"\nboom")
    assert answer[-1] == {"status": 3}
    assert not list(cluster.root.rglob("escape"))


def test_more_than_the_staging_budget_is_refused(cluster):
    header = {"file": "big", "offset": 0, "size": mlops_broker.MAX_STAGED_BYTES + 1}
    answer = raw_request(cluster, {"helper": "tensorboard-upload", "args": []},
                         json.dumps(header).encode() + b"\n")
    assert answer[-1] == {"status": 3} and "over" in answer[0]["out"]


def test_a_broker_that_does_not_answer_is_said_so(cluster):
    cluster.broker.terminate()
    cluster.broker.wait(10)
    done = cluster.run_as_user(tensorboard_upload, str(user_logs(cluster)))
    assert done.returncode == mlops_broker.UNAVAILABLE
    assert "the MLOps broker at" in done.stderr
    assert "journalctl -u clusterprint-mlops" in done.stderr


def test_root_and_clusters_without_a_broker_run_the_command_themselves(cluster):
    config = cluster.root / "plain.json"
    config.write_text(json.dumps({"region": "r", "buckets": []}))
    assert mlops_broker.broker_socket({"CLUSTERPRINT_MLOPS_CONFIG": str(config)}) is None
    config.write_text(json.dumps({"region": "r", "buckets": [], "broker": "/run/x.sock"}))
    # This test runs as root, which holds the node's credentials: no broker for it.
    assert os.geteuid() == 0
    assert mlops_broker.broker_socket({"CLUSTERPRINT_MLOPS_CONFIG": str(config)}) is None
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         NODE_PYTHON, "-c",
         f"import sys; sys.path.insert(0, {str(Path(mlops_broker.__file__).parent)!r}); "
         f"import mlops_broker; print(mlops_broker.broker_socket("
         f"{{'CLUSTERPRINT_MLOPS_CONFIG': {str(config)!r}}}))"],
        capture_output=True, text=True, cwd="/")
    assert done.stdout.strip() == "/run/x.sock", done.stderr


def test_a_users_deploy_flags_reach_root_checked_and_nothing_else_does(cluster):
    (cluster.bucket / "ckpt").mkdir()
    done = cluster.run_as_user(register_model, str(cluster.bucket / "ckpt"), "--display-name",
                               "m", "--deploy", "--machine-type", "g2-standard-12",
                               "--accelerator", "count=1,type=nvidia-l4",
                               "--max-replica-count", "4")
    assert done.returncode == 0, done.stderr + cluster.log_text()
    assert cluster.argv() == [str(cluster.bucket / "ckpt"), "--display-name", "m",
                              "--machine-type", "g2-standard-12", "--accelerator",
                              "type=nvidia-l4,count=1", "--min-replica-count", "1",
                              "--max-replica-count", "4", "--endpoint-name", "m", "--deploy"]


@pytest.mark.parametrize("rest", [["--project", "other"], ["--display-name"],
                                  ["--region", "--impersonate-service-account=x"]],
                         ids=["unknown-flag", "no-value", "flag-as-value"])
def test_a_crafted_registration_flag_is_refused_and_runs_nothing(cluster, rest):
    answer = raw_request(cluster, {"helper": "register-model",
                                   "args": [str(cluster.bucket), *rest]})
    assert answer[-1] == {"status": 2} and "refused register-model flag" in answer[0]["out"]
    assert not (cluster.record / "argv").exists()
