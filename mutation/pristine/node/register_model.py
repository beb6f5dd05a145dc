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

The login script writes the blueprint's region and buckets to CONFIG. Exit status: 0
registered (or, with --dry-run, the commands printed); 2 bad usage; 3 bad input (no such
folder, a name the command cannot carry); 4 not configured (no bucket in the blueprint, no
CONFIG); 6 the broker does not answer; otherwise gcloud's own status.
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

BAD_INPUT, NOT_CONFIGURED = 3, 4
Refused = mlops_broker.Refused


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
    args = parser.parse_args(argv)
    if not args.checkpoint.is_dir():
        raise Refused(BAD_INPUT, f"{args.checkpoint} is not a folder")
    args.display_name = args.display_name.strip()
    if not args.display_name or len(args.display_name) > 128:
        raise Refused(BAD_INPUT, "--display-name must be 1 to 128 characters")
    args.checkpoint = args.checkpoint.resolve()
    return args


def plan(argv: list[str], environ: dict[str, str]) -> tuple[list[list[str]], bool]:
    """The gcloud commands to run, in order, and whether this is a dry run."""
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
    return ([copy] if copy else []) + [upload], args.dry_run


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
    rest = ["--display-name", args.display_name]
    for flag, value in (("--region", args.region),
                        ("--container-image-uri", args.container_image_uri)):
        rest += [flag, value] if value else []
    rest += ["--dry-run"] if args.dry_run else []
    return mlops_broker.request(socket_path, "register-model", [str(folder), *rest])


def main(argv: list[str]) -> int:
    """Run each command, printing it first; stop at the first that fails, with its status."""
    environ = dict(os.environ)
    try:
        socket_path = mlops_broker.broker_socket(environ)
        if socket_path:
            return through_broker(socket_path, argv, environ)
        commands, dry_run = plan(argv, environ)
    except Refused as exc:
        print(f"clusterprint-register-model: {exc}", file=sys.stderr)
        return exc.status
    except OSError as exc:
        print(f"clusterprint-register-model: copying the checkpoint failed ({exc})",
              file=sys.stderr)
        return BAD_INPUT
    for command in commands:
        print("clusterprint-register-model: " + " ".join(command), file=sys.stderr)
        if dry_run:
            continue
        status = subprocess.run(command).returncode
        if status:
            print(f"clusterprint-register-model: {command[1]} {command[2]} failed "
                  f"(exit {status})", file=sys.stderr)
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
