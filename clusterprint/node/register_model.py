"""Register a finished checkpoint in Vertex AI Model Registry, from a login node.

Installed on login nodes as ``clusterprint-register-model`` (standard library only):
``clusterprint-register-model CHECKPOINT_DIR --display-name NAME [--region R]
[--container-image-uri URI] [--dry-run]``. Model Registry reads artifacts from Cloud
Storage only: a checkpoint already in one of the blueprint's buckets (under its Cloud
Storage FUSE mount) is pointed at where it is; one elsewhere (Lustre, /home) is first
copied with ``gcloud storage rsync`` to ``gs://BUCKET/models/NAME`` in the blueprint's first
bucket. Then it runs ``gcloud ai models upload`` and prints the command it runs.

The default serving container is Vertex AI Model Garden's vLLM image, the one Model Garden
deploys Llama and Gemma with: it serves a Hugging Face-format checkpoint (an SFT recipe's
export; a Megatron checkpoint needs converting first), so the model can be deployed to an
endpoint as is. ``--container-image-uri`` names another.

Only root reaches the metadata server (its credentials), so run by a user it copies a
checkpoint outside the buckets itself, as that user, into the first bucket's Cloud Storage
FUSE mount (``MOUNT/models/NAME``), and hands the registration of the folder in the bucket
to the login node's MLOps broker (mlops_broker.py), which runs it as root.

``--deploy`` then serves it: ``--machine-type MT [--accelerator type=T,count=N]
[--min-replica-count N] [--max-replica-count N] [--endpoint-name NAME]``. It finds the new
model's id (``gcloud ai models list --filter=display_name=NAME``, newest first), reuses the
endpoint of that display name or creates it (``gcloud ai endpoints list
--filter=display_name=NAME``, as Vertex AI's "Deploy a model by using the gcloud CLI" page
finds an endpoint's id; ``gcloud ai endpoints create --region --display-name``), and deploys
with autoscaling between the replica counts (``gcloud ai endpoints deploy-model ENDPOINT
--region --model --display-name --machine-type --accelerator=type=T,count=N
--min-replica-count --max-replica-count``, flags as
https://cloud.google.com/sdk/gcloud/reference/ai/endpoints/deploy-model gives them). Every
value is checked before anything runs; each command is printed before it runs, and
--dry-run prints them all with MODEL_ID and ENDPOINT_ID for the ids not known yet.

The login script writes the blueprint's region and buckets to CONFIG. Exit status: 0
registered (and deployed; or, with --dry-run, the commands printed); 2 bad usage (a deploy
flag without --deploy, --deploy without --machine-type); 3 bad input (no such folder, a name
the command cannot carry, a bad machine type, accelerator or replica counts); 4 not
configured (no bucket in the blueprint, no CONFIG); 6 the broker does not answer; 7 gcloud
said it made the model or endpoint but listing finds none; otherwise gcloud's own status.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

if __package__:
    from clusterprint.node import mlops_broker
else:  # run as a file: on a login node it is installed beside this one
    import mlops_broker

CONFIG = mlops_broker.CONFIG
#: Model Garden's vLLM serving image (the tag Google's GKE vLLM guides pin).
VLLM_IMAGE = ("us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/"
              "pytorch-vllm-serve:20250819_0916_RC01")
#: How the vLLM image serves: its API server on 8080, /generate and /health.
VLLM_PORT = 8080
#: Where a checkpoint copied from outside a bucket goes in the first bucket.
MODELS_PREFIX = "models"

BAD_INPUT, NOT_CONFIGURED, NOT_FOUND = 3, 4, 7
Refused = mlops_broker.Refused
#: A Compute Engine machine type (g2-standard-12, a3-highgpu-8g, n1-standard-4).
MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")
#: gcloud's --accelerator value: type=T,count=N in either order (type like nvidia-l4).
ACCELERATOR = re.compile(r"^(type=(?P<t1>[a-z0-9][a-z0-9-]{0,62}),count=(?P<c1>[0-9]{1,2})"
                         r"|count=(?P<c2>[0-9]{1,2}),type=(?P<t2>[a-z0-9][a-z0-9-]{0,62}))$")
#: The most replicas one deployment may scale to (Vertex AI's own limits are per project).
MAX_REPLICAS = 1000
#: Stand-ins, in printed and dry-run commands, for the ids gcloud tells only when they run.
MODEL_ID, ENDPOINT_ID = "MODEL_ID", "ENDPOINT_ID"
VALUE_FLAGS, SWITCHES = mlops_broker.REGISTER_VALUE_FLAGS, mlops_broker.REGISTER_SWITCHES


def slug(name: str) -> str:
    """A display name as an object path part: lower case, letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "model"


def artifact_location(checkpoint: Path, name: str,
                      buckets: list[dict]) -> tuple[str, list[str] | None]:
    """The checkpoint's gs:// URI and, when it is outside every bucket, the copy to make."""
    for bucket in buckets:
        mount = Path(bucket["mount"]).resolve()
        if checkpoint == mount or mount in checkpoint.parents:
            inside = checkpoint.relative_to(mount).as_posix()
            return f"gs://{bucket['name']}/{inside}".rstrip("/").removesuffix("/."), None
    if not buckets:
        raise Refused(NOT_CONFIGURED, "no bucket configured: Model Registry reads artifacts "
                      "from Cloud Storage; add one to storage.buckets in the blueprint")
    uri = f"gs://{buckets[0]['name']}/{MODELS_PREFIX}/{slug(name)}"
    return uri, ["gcloud", "storage", "rsync", "--recursive", str(checkpoint), uri]


def upload_command(name: str, region: str, artifact_uri: str, image: str | None) -> list[str]:
    """The exact ``gcloud ai models upload`` call (flags as gcloud's reference gives them)."""
    command = ["gcloud", "ai", "models", "upload", f"--region={region}",
               f"--display-name={name}", f"--artifact-uri={artifact_uri}"]
    if image:
        return [*command, f"--container-image-uri={image}"]
    return [*command, f"--container-image-uri={VLLM_IMAGE}",
            "--container-args=python,-m,vllm.entrypoints.api_server,--host=0.0.0.0,"
            f"--port={VLLM_PORT},--model={artifact_uri}",
            f"--container-ports={VLLM_PORT}", "--container-predict-route=/generate",
            "--container-health-route=/health"]


def display_name(value: str, flag: str) -> str:
    """A display name stripped, 1 to 128 characters (Vertex AI's limit); Refused if not."""
    value = value.strip()
    if not value or len(value) > 128:
        raise Refused(BAD_INPUT, f"{flag} must be 1 to 128 characters")
    return value


def accelerator_value(value: str) -> str:
    """``type=T,count=N`` with N from 1 to 16, written type first; Refused if not."""
    match = ACCELERATOR.match(value)
    count = int(match["c1"] or match["c2"]) if match else 0
    if not match or not 1 <= count <= 16:
        raise Refused(BAD_INPUT, f"--accelerator {value!r} is not type=TYPE,count=N "
                      "(N from 1 to 16), as gcloud takes it")
    return f"type={match['t1'] or match['t2']},count={count}"


def check_deploy(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The deploy flags checked together, before anything runs."""
    given = [flag for flag in VALUE_FLAGS[3:]
             if getattr(args, flag[2:].replace("-", "_")) is not None]
    if not args.deploy:
        if given:
            parser.error(f"{given[0]} needs --deploy")
        return
    if args.machine_type is None:
        parser.error("--deploy needs --machine-type")
    if not MACHINE_TYPE.match(args.machine_type):
        raise Refused(BAD_INPUT, f"--machine-type {args.machine_type!r} is not a machine "
                      "type such as g2-standard-12")
    if args.accelerator is not None:
        args.accelerator = accelerator_value(args.accelerator)
    low = 1 if args.min_replica_count is None else args.min_replica_count
    high = low if args.max_replica_count is None else args.max_replica_count
    if not 1 <= low <= high <= MAX_REPLICAS:
        raise Refused(BAD_INPUT, "replica counts must be 1 <= --min-replica-count <= "
                      f"--max-replica-count <= {MAX_REPLICAS}")
    args.min_replica_count, args.max_replica_count = low, high
    args.endpoint_name = display_name(args.endpoint_name or args.display_name,
                                      "--endpoint-name")


def arguments(argv: list[str]) -> argparse.Namespace:
    """The parsed arguments, the folder and the name checked; Refused naming what is wrong."""
    parser = argparse.ArgumentParser(
        prog="clusterprint-register-model",
        description="Register a finished checkpoint in Vertex AI Model Registry.")
    parser.add_argument("checkpoint", type=Path, help="the checkpoint's folder")
    parser.add_argument("--display-name", required=True, help="the model's name in the registry")
    parser.add_argument("--region", help="Vertex AI region (default: the blueprint's)")
    parser.add_argument("--container-image-uri",
                        help="serving container (default: Model Garden's vLLM image)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument("--deploy", action="store_true",
                        help="then deploy it to a Vertex AI endpoint, with autoscaling")
    parser.add_argument("--machine-type", help="the serving VMs' machine type (with --deploy)")
    parser.add_argument("--accelerator", help="type=TYPE,count=N, as gcloud takes it")
    parser.add_argument("--min-replica-count", type=int, help="fewest replicas (default 1)")
    parser.add_argument("--max-replica-count", type=int,
                        help="most replicas (default: the minimum)")
    parser.add_argument("--endpoint-name",
                        help="the endpoint's display name (default: --display-name)")
    args = parser.parse_args(argv)
    if not args.checkpoint.is_dir():
        raise Refused(BAD_INPUT, f"{args.checkpoint} is not a folder")
    args.display_name = display_name(args.display_name, "--display-name")
    check_deploy(parser, args)
    args.checkpoint = args.checkpoint.resolve()
    return args


def listing(noun: str, region: str, name: str) -> list[str]:
    """The newest model or endpoint of a display name, its resource name only."""
    return ["gcloud", "ai", noun, "list", f"--region={region}",
            f"--filter=display_name={name}", "--sort-by=~createTime", "--limit=1",
            "--format=value(name)"]


def deploy_steps(args: argparse.Namespace, region: str) -> list[tuple[str, list[str]]]:
    """The deploy's commands by what each is for: ``model`` and ``endpoint`` print an id
    (MODEL_ID, ENDPOINT_ID in the later ones), ``create`` runs when no endpoint has the
    name, ``deploy`` serves the model on it."""
    deploy = ["gcloud", "ai", "endpoints", "deploy-model", ENDPOINT_ID, f"--region={region}",
              f"--model={MODEL_ID}", f"--display-name={args.display_name}",
              f"--machine-type={args.machine_type}"]
    deploy += [f"--accelerator={args.accelerator}"] if args.accelerator else []
    deploy += [f"--min-replica-count={args.min_replica_count}",
               f"--max-replica-count={args.max_replica_count}"]
    return [("model", listing("models", region, args.display_name)),
            ("endpoint", listing("endpoints", region, args.endpoint_name)),
            ("create", ["gcloud", "ai", "endpoints", "create", f"--region={region}",
                        f"--display-name={args.endpoint_name}"]),
            ("deploy", deploy)]


def plan(argv: list[str], environ: dict[str, str]) -> tuple[list[list[str]], bool]:
    """The registration's gcloud commands, in order, and whether this is a dry run."""
    commands, _, dry_run = full_plan(argv, environ)
    return commands, dry_run


def full_plan(argv: list[str], environ: dict[str, str]
              ) -> tuple[list[list[str]], list[tuple[str, list[str]]], bool]:
    """The registration's commands, the deploy's steps (none without --deploy) and whether
    this is a dry run."""
    args = arguments(argv)
    name = args.display_name
    config = mlops_broker.read_config(environ.get("CLUSTERPRINT_MLOPS_CONFIG", CONFIG),
                                      NOT_CONFIGURED)
    uri, copy = artifact_location(args.checkpoint, name, config["buckets"])
    if "," in uri and not args.container_image_uri:
        raise Refused(BAD_INPUT, f"{uri} holds a comma, which --container-args cannot carry")
    region = args.region or config.get("region")
    if not region:
        raise Refused(NOT_CONFIGURED, "no region: pass --region")
    upload = upload_command(name, region, uri, args.container_image_uri)
    steps = deploy_steps(args, region) if args.deploy else []
    return ([copy] if copy else []) + [upload], steps, args.dry_run


def through_broker(socket_path: str, argv: list[str], environ: dict[str, str]) -> int:
    """A user's registration: a checkpoint outside the buckets is copied here, as the user,
    into the first bucket's mount; the broker registers the folder in the bucket as root."""
    plan(argv, environ)  # every refusal as the user sees it, before anything is copied
    args = arguments(argv)
    config = mlops_broker.read_config(environ.get("CLUSTERPRINT_MLOPS_CONFIG", CONFIG),
                                      NOT_CONFIGURED)
    folder = args.checkpoint
    _, copy = artifact_location(folder, args.display_name, config["buckets"])
    if copy:
        folder = Path(config["buckets"][0]["mount"]) / MODELS_PREFIX / slug(args.display_name)
        print(f"clusterprint-register-model: copy {args.checkpoint} to {folder}",
              file=sys.stderr)
        if not args.dry_run:
            shutil.copytree(args.checkpoint, folder, symlinks=True, dirs_exist_ok=True)
    rest = []
    for flag in VALUE_FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"))
        rest += [flag, str(value)] if value is not None else []
    rest += [flag for flag in SWITCHES if getattr(args, flag[2:].replace("-", "_"))]
    return mlops_broker.request(socket_path, "register-model", [str(folder), *rest])


def say(command: list[str], note: str = "") -> None:
    print(f"clusterprint-register-model: {note}" + " ".join(command), file=sys.stderr)


def run(command: list[str], ids: dict[str, str], capture: bool = False
        ) -> tuple[int, str]:
    """One command with the ids known so far put in, printed first; its status and (with
    ``capture``) the last path part of the first line it prints: a resource's id."""
    command = [ids.get(part, part) for part in command]
    for placeholder, value in ids.items():
        command = [part.replace(f"={placeholder}", f"={value}") for part in command]
    say(command)
    done = subprocess.run(command, stdout=subprocess.PIPE if capture else None, text=True)
    if done.returncode:
        what = " ".join(part for part in command[1:4] if not part.startswith("-"))
        print(f"clusterprint-register-model: {what} failed (exit {done.returncode})",
              file=sys.stderr)
    lines = (done.stdout or "").split()
    return done.returncode, lines[0].rsplit("/", 1)[-1] if lines else ""


def deploy(steps: list[tuple[str, list[str]]]) -> int:
    """Find the model, find or make the endpoint, deploy: gcloud's status where one fails."""
    step = dict(steps)
    ids: dict[str, str] = {}
    for kind, placeholder in (("model", MODEL_ID), ("endpoint", ENDPOINT_ID)):
        status, found = run(step[kind], ids, capture=True)
        if status:
            return status
        if not found and kind == "endpoint":
            status, _ = run(step["create"], ids)
            if status:
                return status
            status, found = run(step[kind], ids, capture=True)
            if status:
                return status
        if not found:
            print(f"clusterprint-register-model: no {kind} is named as the one just made: "
                  f"see {' '.join(step[kind][:4])}", file=sys.stderr)
            return NOT_FOUND
        ids[placeholder] = found
    return run(step["deploy"], ids)[0]


def main(argv: list[str]) -> int:
    """Run each command, printing it first; stop at the first that fails, with its status."""
    environ = dict(os.environ)
    try:
        socket_path = mlops_broker.broker_socket(environ)
        if socket_path:
            return through_broker(socket_path, argv, environ)
        commands, steps, dry_run = full_plan(argv, environ)
    except Refused as exc:
        print(f"clusterprint-register-model: {exc}", file=sys.stderr)
        return exc.status
    except OSError as exc:
        print(f"clusterprint-register-model: copying the checkpoint failed ({exc})",
              file=sys.stderr)
        return BAD_INPUT
    if dry_run:
        for command in commands:
            say(command)
        for kind, command in steps:
            say(command, "(when no endpoint has that name) " if kind == "create" else "")
        return 0
    for command in commands:
        status = run(command, {})[0]
        if status:
            return status
    return deploy(steps) if steps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
