"""The login node's MLOps helpers: the exact commands they run and how they refuse.

Each runs as a process, as a user would run it, with a fake ``gcloud`` or ``tb-gcp-uploader``
that records its argv, the metadata server a folder read through file:// and the login
script's configuration a file; and as a module, for the edges of what they accept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.contract import node_metadata
from clusterprint.node import mlops_broker, register_model, tensorboard_sync, tensorboard_upload
from tests.support.paths import STDLIB_ONLY

RESOURCE = "projects/my-project/locations/us-central1/tensorboards/123"
#: Records its argv; as gcloud it lists the model just uploaded and the endpoint once
#: created (the file $RECORDED.endpoint); FAKE_STATUS is every call's status, or only the
#: calls whose words hold FAKE_FAIL.
FAKE = """#!/bin/bash
printf '%s\\0' "$(basename "$0")" "$@" >>"$RECORDED"
[[ -n ${FAKE_FAIL:-} && "$*" != *"$FAKE_FAIL"* ]] && FAKE_STATUS=0
[[ ${FAKE_STATUS:-0} == 0 ]] || exit "$FAKE_STATUS"
case "$*" in
  "ai models list"*) echo "${FAKE_MODEL-projects/p/locations/r/models/456}" ;;
  "ai endpoints list"*) cat "$RECORDED.endpoint" 2>/dev/null || true ;;
  "ai endpoints create"*) echo projects/p/locations/r/endpoints/123 >"$RECORDED.endpoint" ;;
esac
"""


class Helper:
    """A login node in a folder: its PATH, metadata and configuration."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name in ("gcloud", "tb-gcp-uploader"):
            (self.bin / name).write_text(FAKE)
            (self.bin / name).chmod(0o755)
        self.metadata = root / "metadata"
        self.metadata.mkdir()
        self.config = root / "mlops.json"
        self.recorded = root / "recorded"
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "RECORDED": str(self.recorded),
                    "CLUSTERPRINT_METADATA_URL": self.metadata.as_uri() + "/",
                    "CLUSTERPRINT_TB_UPLOADER": str(self.bin / "tb-gcp-uploader"),
                    "CLUSTERPRINT_MLOPS_CONFIG": str(self.config)}

    def run(self, module, *args: str, **env: str) -> subprocess.CompletedProcess:
        """The helper as the login node runs it: its file, executed by python3."""
        return subprocess.run([sys.executable, module.__file__, *args], capture_output=True,
                              text=True, env={**self.env, **env}, cwd=self.root)

    def calls(self) -> list[list[str]]:
        """Every fake's argv, in order."""
        if not self.recorded.exists():
            return []
        calls, current = [], []
        for part in self.recorded.read_text().split("\0")[:-1]:
            if part in ("gcloud", "tb-gcp-uploader") and current:
                calls.append(current)
                current = []
            current.append(part)
        return [*calls, current] if current else calls


def refused(helper: Helper, done: subprocess.CompletedProcess, status: int, says: str) -> None:
    """Refused with ``status``, saying ``says`` in one line (argparse's usage: two), ran nothing."""
    assert done.returncode == status
    assert says in done.stderr
    if status != 2:
        assert len(done.stderr.splitlines()) == 1
    assert helper.calls() == []


@pytest.fixture
def helper(tmp_path) -> Helper:
    return Helper(tmp_path)


def test_the_metadata_key_is_the_one_the_components_set():
    assert tensorboard_upload.METADATA_KEY == node_metadata.TENSORBOARD


def test_upload_runs_the_uploader_once_with_the_clusters_tensorboard(helper):
    (helper.metadata / node_metadata.TENSORBOARD).write_text(RESOURCE)
    logdir = helper.root / "ckpt" / "llama3-8b-pretrain" / "tensorboard"
    logdir.mkdir(parents=True)
    done = helper.run(tensorboard_upload, str(logdir))
    assert done.returncode == 0, done.stderr
    assert helper.calls() == [["tb-gcp-uploader", f"--tensorboard_resource_name={RESOURCE}",
                               f"--logdir={logdir}", "--experiment_name=llama3-8b-pretrain",
                               "--one_shot=True"]]
    assert "--one_shot=True" in done.stderr


def test_upload_watches_under_a_named_experiment_and_passes_the_uploaders_status(helper):
    (helper.metadata / node_metadata.TENSORBOARD).write_text(RESOURCE + "\n")
    done = helper.run(tensorboard_upload, str(helper.root), "--experiment", "run-7", "--watch",
                      FAKE_STATUS="9")
    assert done.returncode == 9
    assert helper.calls() == [["tb-gcp-uploader", f"--tensorboard_resource_name={RESOURCE}",
                               f"--logdir={helper.root}", "--experiment_name=run-7"]]


@pytest.mark.parametrize("args, metadata, status, says", [
    (["missing"], RESOURCE, 3, "missing is not a folder"),
    ([".", "--experiment", "Run_7"], RESOURCE, 3, "experiment 'Run_7' is not"),
    (["."], None, 4, "this cluster has no Vertex AI TensorBoard"),
    (["."], "tensorboards/123", 4, "not projects/P/locations/R/tensorboards/ID"),
    ([], RESOURCE, 2, "usage: clusterprint-tensorboard-upload"),
], ids=["no-folder", "bad-experiment", "no-tensorboard", "bad-resource", "usage"])
def test_upload_refuses_in_one_line_with_its_documented_status(helper, args, metadata, status,
                                                               says):
    if metadata is not None:
        (helper.metadata / node_metadata.TENSORBOARD).write_text(metadata)
    refused(helper, helper.run(tensorboard_upload, *args), status, says)


def test_upload_without_the_uploader_names_the_package(helper):
    (helper.metadata / node_metadata.TENSORBOARD).write_text(RESOURCE)
    done = helper.run(tensorboard_upload, ".", CLUSTERPRINT_TB_UPLOADER="/nowhere/tb")
    assert done.returncode == 5
    assert "google-cloud-aiplatform[tensorboard]" in done.stderr


@pytest.mark.parametrize("folder, expected", [
    ("runs/Gemma3-27B_SFT/tensorboard", "gemma3-27b-sft"),
    ("runs/job-41/TB", "job-41"),
    ("runs/job-41/events", "events"),
    ("___", "run"),
    ("x" * 200, "x" * 128),
])
def test_the_default_experiment_is_the_runs_folder_as_an_id(tmp_path, folder, expected):
    name = tensorboard_upload.default_experiment(tmp_path / folder)
    assert name == expected and tensorboard_upload.EXPERIMENT.match(name)


def configure(helper: Helper, buckets: list[dict], region: str = "us-central1") -> None:
    helper.config.write_text(json.dumps({"region": region, "buckets": buckets}))


def vllm_upload(uri: str, name: str = "llama-sft", region: str = "us-central1") -> list[str]:
    return ["gcloud", "ai", "models", "upload", f"--region={region}", f"--display-name={name}",
            f"--artifact-uri={uri}",
            f"--container-image-uri={register_model.VLLM_IMAGE}",
            "--container-args=python,-m,vllm.entrypoints.api_server,--host=0.0.0.0,"
            f"--port=8080,--model={uri}",
            "--container-ports=8080", "--container-predict-route=/generate",
            "--container-health-route=/health"]


def test_a_checkpoint_in_a_bucket_is_registered_where_it_is(helper):
    mount = helper.root / "data"
    (mount / "ckpt" / "iter_0001000").mkdir(parents=True)
    configure(helper, [{"name": "other", "mount": str(helper.root / "other")},
                       {"name": "my-data", "mount": str(mount)}])
    done = helper.run(register_model, str(mount / "ckpt" / "iter_0001000"),
                      "--display-name", "llama-sft")
    assert done.returncode == 0, done.stderr
    uri = "gs://my-data/ckpt/iter_0001000"
    assert helper.calls() == [vllm_upload(uri)]
    assert " ".join(vllm_upload(uri)) in done.stderr


def test_a_checkpoint_on_lustre_is_copied_to_the_first_bucket_then_registered(helper):
    checkpoint = helper.root / "lustre" / "ckpt"
    checkpoint.mkdir(parents=True)
    configure(helper, [{"name": "my-data", "mount": "/data"}, {"name": "b2", "mount": "/b2"}])
    done = helper.run(register_model, str(checkpoint), "--display-name", "Gemma 3 SFT",
                      "--region", "europe-west4", "--container-image-uri", "example/serve:1")
    assert done.returncode == 0, done.stderr
    uri = "gs://my-data/models/gemma-3-sft"
    assert helper.calls() == [
        ["gcloud", "storage", "rsync", "--recursive", str(checkpoint), uri],
        ["gcloud", "ai", "models", "upload", "--region=europe-west4",
         "--display-name=Gemma 3 SFT", f"--artifact-uri={uri}",
         "--container-image-uri=example/serve:1"]]


def test_a_failed_copy_stops_before_the_upload_with_gclouds_status(helper):
    (helper.root / "ckpt").mkdir()
    configure(helper, [{"name": "my-data", "mount": "/data"}])
    done = helper.run(register_model, "ckpt", "--display-name", "m", FAKE_STATUS="7")
    assert done.returncode == 7
    assert [call[1] for call in helper.calls()] == ["storage"]
    assert done.stderr.splitlines()[-1] == "clusterprint-register-model: storage rsync failed " \
                                           "(exit 7)"


def test_dry_run_prints_the_commands_and_runs_none(helper):
    (helper.root / "data").mkdir()
    configure(helper, [{"name": "my-data", "mount": str(helper.root / "data")}])
    done = helper.run(register_model, "data", "--display-name", "llama-sft", "--dry-run")
    assert done.returncode == 0 and helper.calls() == []
    assert done.stderr.strip() == "clusterprint-register-model: " + " ".join(
        vllm_upload("gs://my-data"))


@pytest.mark.parametrize("args, buckets, status, says", [
    (["missing", "--display-name", "m"], [{"name": "b", "mount": "/b"}], 3,
     "missing is not a folder"),
    ([".", "--display-name", " "], [{"name": "b", "mount": "/b"}], 3,
     "--display-name must be 1 to 128 characters"),
    ([".", "--display-name", "x" * 129], [{"name": "b", "mount": "/b"}], 3,
     "--display-name must be 1 to 128 characters"),
    ([".", "--display-name", "m"], [], 4, "no bucket configured"),
    ([".", "--display-name", "m"], None, 4, "the login script writes it at boot"),
    (["."], [{"name": "b", "mount": "/b"}], 2, "the following arguments are required"),
], ids=["no-folder", "blank-name", "long-name", "no-bucket", "no-config", "usage"])
def test_register_refuses_in_one_line_with_its_documented_status(helper, args, buckets,
                                                                 status, says):
    if buckets is not None:
        configure(helper, buckets)
    refused(helper, helper.run(register_model, *args), status, says)


def test_a_name_of_128_characters_is_accepted(tmp_path):
    config = tmp_path / "mlops.json"
    config.write_text(json.dumps({"region": "r", "buckets": [{"name": "b", "mount": "/b"}]}))
    commands, _ = register_model.plan([str(tmp_path), "--display-name", "x" * 128],
                                      {"CLUSTERPRINT_MLOPS_CONFIG": str(config)})
    assert commands[-1][5] == "--display-name=" + "x" * 128


def test_a_bucket_path_with_a_comma_is_refused_for_the_default_container(tmp_path):
    folder = tmp_path / "a,b"
    folder.mkdir()
    config = tmp_path / "mlops.json"
    config.write_text(json.dumps({"region": "r", "buckets": [{"name": "b",
                                                              "mount": str(tmp_path)}]}))
    with pytest.raises(register_model.Refused, match="holds a comma"):
        register_model.plan([str(folder), "--display-name", "m"],
                            {"CLUSTERPRINT_MLOPS_CONFIG": str(config)})


DEPLOY = ["--deploy", "--machine-type", "g2-standard-12", "--accelerator",
          "count=1,type=nvidia-l4", "--min-replica-count", "1", "--max-replica-count", "3"]


def deploy_calls(endpoint: str = "123", created: bool = True) -> list[list[str]]:
    """The deploy's gcloud calls after the upload, endpoint Llama SFT serving llama-sft."""
    find = ["gcloud", "ai", "endpoints", "list", "--region=us-central1",
            "--filter=display_name=Llama SFT", "--sort-by=~createTime", "--limit=1",
            "--format=value(name)"]
    create = [["gcloud", "ai", "endpoints", "create", "--region=us-central1",
               "--display-name=Llama SFT"], find] if created else []
    return [["gcloud", "ai", "models", "list", "--region=us-central1",
             "--filter=display_name=llama-sft", "--sort-by=~createTime", "--limit=1",
             "--format=value(name)"], find, *create,
            ["gcloud", "ai", "endpoints", "deploy-model", endpoint, "--region=us-central1",
             "--model=456", "--display-name=llama-sft", "--machine-type=g2-standard-12",
             "--accelerator=type=nvidia-l4,count=1", "--min-replica-count=1",
             "--max-replica-count=3"]]


@pytest.fixture
def in_bucket(helper) -> str:
    (helper.root / "data").mkdir()
    configure(helper, [{"name": "my-data", "mount": str(helper.root / "data")}])
    return "data"


def test_deploy_registers_then_makes_the_endpoint_and_serves_the_model_with_autoscaling(
        helper, in_bucket):
    done = helper.run(register_model, in_bucket, "--display-name", "llama-sft", *DEPLOY,
                      "--endpoint-name", "Llama SFT")
    assert done.returncode == 0, done.stderr
    assert helper.calls() == [vllm_upload("gs://my-data"), *deploy_calls()]
    # Each command printed before it ran, the ids gcloud told put in.
    printed = [line.removeprefix("clusterprint-register-model: ")
               for line in done.stderr.splitlines()]
    assert printed == [" ".join(call) for call in helper.calls()]


def test_deploy_reuses_the_endpoint_of_that_name(helper, in_bucket):
    Path(f"{helper.recorded}.endpoint").write_text("projects/p/locations/r/endpoints/77\n")
    done = helper.run(register_model, in_bucket, "--display-name", "llama-sft", *DEPLOY,
                      "--endpoint-name", "Llama SFT")
    assert done.returncode == 0, done.stderr
    assert helper.calls()[1:] == deploy_calls("77", created=False)


def test_a_failed_endpoint_creation_stops_before_the_deploy_with_gclouds_status(
        helper, in_bucket):
    done = helper.run(register_model, in_bucket, "--display-name", "llama-sft", *DEPLOY,
                      "--endpoint-name", "Llama SFT", FAKE_STATUS="5",
                      FAKE_FAIL="endpoints create")
    assert done.returncode == 5
    assert [call[1:4] for call in helper.calls()] == [
        ["ai", "models", "upload"], ["ai", "models", "list"], ["ai", "endpoints", "list"],
        ["ai", "endpoints", "create"]]
    assert done.stderr.splitlines()[-1] == ("clusterprint-register-model: ai endpoints "
                                            "create failed (exit 5)")


def test_a_model_that_listing_does_not_find_is_not_deployed(helper, in_bucket):
    done = helper.run(register_model, in_bucket, "--display-name", "llama-sft", *DEPLOY,
                      FAKE_MODEL="")
    assert done.returncode == register_model.NOT_FOUND
    assert [call[1:4] for call in helper.calls()][-1] == ["ai", "models", "list"]


def test_a_dry_run_deploy_prints_every_command_with_placeholders_and_runs_none(
        helper, in_bucket):
    done = helper.run(register_model, in_bucket, "--display-name", "llama-sft", *DEPLOY,
                      "--dry-run")
    assert done.returncode == 0 and helper.calls() == []
    lines = done.stderr.splitlines()
    assert len(lines) == 5
    assert lines[3].startswith("clusterprint-register-model: (when no endpoint has that name) "
                               "gcloud ai endpoints create")
    assert lines[4].startswith("clusterprint-register-model: gcloud ai endpoints deploy-model "
                               "ENDPOINT_ID --region=us-central1 --model=MODEL_ID")


@pytest.mark.parametrize("args, status, says", [
    (["--deploy"], 2, "--deploy needs --machine-type"),
    (["--machine-type", "g2-standard-12"], 2, "--machine-type needs --deploy"),
    (["--deploy", "--machine-type", "G2 standard"], 3, "is not a machine type"),
    (["--deploy", "--machine-type", "g2-standard-12", "--accelerator", "nvidia-l4"], 3,
     "is not type=TYPE,count=N"),
    (["--deploy", "--machine-type", "g2-standard-12", "--accelerator",
      "type=nvidia-l4,count=0"], 3, "is not type=TYPE,count=N"),
    (["--deploy", "--machine-type", "g2-standard-12", "--accelerator",
      "type=x,count=1,y=2"], 3, "is not type=TYPE,count=N"),
    (["--deploy", "--machine-type", "g2-standard-12", "--min-replica-count", "3",
      "--max-replica-count", "2"], 3, "replica counts must be"),
    (["--deploy", "--machine-type", "g2-standard-12", "--min-replica-count", "0"], 3,
     "replica counts must be"),
    (["--deploy", "--machine-type", "g2-standard-12", "--endpoint-name", " "], 3,
     "--endpoint-name must be 1 to 128 characters"),
], ids=["no-machine-type", "flag-without-deploy", "bad-machine-type", "bare-accelerator",
        "zero-gpus", "extra-key", "min-over-max", "zero-replicas", "blank-endpoint"])
def test_deploy_refuses_bad_values_before_anything_runs(helper, in_bucket, args, status, says):
    refused(helper, helper.run(register_model, in_bucket, "--display-name", "m", *args),
            status, says)


def test_the_replica_counts_default_to_one_and_the_minimum(tmp_path):
    config = tmp_path / "mlops.json"
    config.write_text(json.dumps({"region": "r", "buckets": [{"name": "b",
                                                              "mount": str(tmp_path)}]}))
    _, steps, _ = register_model.full_plan(
        [str(tmp_path), "--display-name", "m", "--deploy", "--machine-type", "n1-standard-4",
         "--min-replica-count", "2"], {"CLUSTERPRINT_MLOPS_CONFIG": str(config)})
    deploy = dict(steps)["deploy"]
    assert deploy[-2:] == ["--min-replica-count=2", "--max-replica-count=2"]
    assert not any(part.startswith("--accelerator") for part in deploy)


def test_the_helpers_need_only_the_standard_library():
    # No site-packages and no environment; the script's own folder stays on the path, as
    # the login node installs the helpers beside the broker they import.
    for module in (register_model, tensorboard_upload, mlops_broker, tensorboard_sync):
        done = subprocess.run([*STDLIB_ONLY, module.__file__, "--help"],
                              capture_output=True, text=True, env={"PATH": os.defpath})
        assert done.returncode == 0, done.stderr
