"""Upload a training run's TensorBoard logs to the cluster's Vertex AI TensorBoard.

Installed on login nodes as ``clusterprint-tensorboard-upload`` (standard library only):
``clusterprint-tensorboard-upload LOGDIR [--experiment NAME] [--watch]``. The TensorBoard's
resource name (projects/P/locations/R/tensorboards/ID) is instance metadata that the
components set when ``observability.tensorboard`` is true; the uploader is Google's
``tb-gcp-uploader`` from ``google-cloud-aiplatform[tensorboard]``, which the login script
installs in its own venv. By default it uploads what LOGDIR holds once and exits (run it
after the job, or as the job's last step); ``--watch`` keeps uploading new events until
stopped.

Only root reaches the metadata server (its credentials), so run by a user it reads LOGDIR as
that user and hands the upload to the login node's MLOps broker (mlops_broker.py), which
uploads those files as root.

Exit status: 0 uploaded; 2 bad usage; 3 bad input (LOGDIR is not a folder, a bad
experiment name); 4 this cluster has no TensorBoard (the metadata key is not set);
5 the uploader is not installed; 6 the broker does not answer; otherwise the uploader's own
status.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

if __package__:
    from clusterprint.node import mlops_broker
else:  # run as a file: on a login node it is installed beside this one
    import mlops_broker

#: The metadata key clusterprint/node_metadata.py names TENSORBOARD.
METADATA_KEY = "clusterprint-tensorboard"
METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
#: Where the login script installs the uploader.
UPLOADER = "/opt/clusterprint/venv/bin/tb-gcp-uploader"
#: A Vertex AI TensorBoard experiment id: lower-case letters, digits and hyphens, at most 128.
EXPERIMENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
#: Folder names that say only "logs": the experiment is named after the folder above.
GENERIC_NAMES = frozenset({"tensorboard", "tb", "logs"})
RESOURCE = re.compile(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$")

BAD_INPUT, NOT_CONFIGURED, NO_UPLOADER = 3, 4, 5
Refused = mlops_broker.Refused


def default_experiment(logdir: Path) -> str:
    """An experiment id from the run's folder: its name, or its parent's when the folder is
    only called ``tensorboard`` (the recipes' log folder beside their checkpoints)."""
    folder = logdir.resolve()
    if folder.name.lower() in GENERIC_NAMES and folder.parent.name:
        folder = folder.parent
    return re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:128] or "run"


def tensorboard_resource(base_url: str) -> str:
    """The cluster's TensorBoard resource name from the metadata server."""
    request = urllib.request.Request(base_url + METADATA_KEY,
                                     headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            value = answer.read().decode().strip()
    except (urllib.error.URLError, OSError) as exc:
        raise Refused(NOT_CONFIGURED, f"metadata {METADATA_KEY} is not set on this VM ({exc}): "
                      "this cluster has no Vertex AI TensorBoard; set "
                      "observability.tensorboard: true and run pulumi up") from exc
    if not RESOURCE.match(value):
        raise Refused(NOT_CONFIGURED, f"metadata {METADATA_KEY} is {value!r}, not "
                      "projects/P/locations/R/tensorboards/ID")
    return value


def uploader_command(uploader: str, resource: str, logdir: Path, experiment: str,
                     watch: bool) -> list[str]:
    """The exact ``tb-gcp-uploader`` call (its flags as Vertex AI's docs give them)."""
    command = [uploader, f"--tensorboard_resource_name={resource}", f"--logdir={logdir}",
               f"--experiment_name={experiment}"]
    return command if watch else [*command, "--one_shot=True"]


def arguments(argv: list[str]) -> tuple[Path, str, bool]:
    """LOGDIR, the experiment and whether to watch, checked; Refused naming what is wrong."""
    parser = argparse.ArgumentParser(
        prog="clusterprint-tensorboard-upload",
        description="Upload a run's TensorBoard logs to the cluster's Vertex AI TensorBoard.")
    parser.add_argument("logdir", type=Path, help="the run's TensorBoard log folder")
    parser.add_argument("--experiment", help="experiment id (default: from the folder's name)")
    parser.add_argument("--watch", action="store_true",
                        help="keep uploading new events until stopped (default: upload once)")
    args = parser.parse_args(argv)
    if not args.logdir.is_dir():
        raise Refused(BAD_INPUT, f"{args.logdir} is not a folder")
    if not os.access(args.logdir, os.R_OK | os.X_OK):
        raise Refused(BAD_INPUT, f"{args.logdir} is not a folder you can read")
    experiment = args.experiment or default_experiment(args.logdir)
    if not EXPERIMENT.match(experiment):
        raise Refused(BAD_INPUT, f"experiment {experiment!r} is not 1 to 128 lower-case "
                      "letters, digits and hyphens")
    return args.logdir.resolve(), experiment, args.watch


def plan(argv: list[str], environ: dict[str, str]) -> list[str]:
    """The uploader command for these arguments, or Refused naming what is wrong."""
    logdir, experiment, watch = arguments(argv)
    uploader = environ.get("CLUSTERPRINT_TB_UPLOADER", UPLOADER)
    if not os.access(uploader, os.X_OK):
        raise Refused(NO_UPLOADER, f"{uploader} is not installed: the login script installs "
                      "google-cloud-aiplatform[tensorboard] there (see its journal, "
                      "journalctl -t clusterprint-login)")
    resource = tensorboard_resource(environ.get("CLUSTERPRINT_METADATA_URL", METADATA_URL))
    return uploader_command(uploader, resource, logdir, experiment, watch)


def through_broker(socket_path: str, argv: list[str]) -> int:
    """A user's upload: LOGDIR read here, as the user, and uploaded by the broker as root."""
    logdir, experiment, watch = arguments(argv)
    args = ["--experiment", experiment, *(["--watch"] if watch else [])]
    return mlops_broker.request(socket_path, "tensorboard-upload", args, upload=logdir,
                                watch=watch)


def main(argv: list[str]) -> int:
    """Run the uploader; one line on stderr and the documented status when refused."""
    environ = dict(os.environ)
    try:
        socket_path = mlops_broker.broker_socket(environ)
        if socket_path:
            return through_broker(socket_path, argv)
        command = plan(argv, environ)
    except Refused as exc:
        print(f"clusterprint-tensorboard-upload: {exc}", file=sys.stderr)
        return exc.status
    print("clusterprint-tensorboard-upload: " + " ".join(command), file=sys.stderr)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
