"""Build the node images a blueprint's VMs boot: `clusterprint image build FILE`.

An image is named clusterprint-<kind>-<digest>, the digest of its install script (which
`clusterprint render` writes as images/NAME.sh), in the family clusterprint-<kind>. An image
of that exact name already in the project is kept as it is; a missing one is built: a builder
VM in the blueprint's zone (n2-standard-16; c4a-highcpu-16 for arm64) boots the dated base
image and runs the install script as its startup script, is stopped, and its boot disk
becomes the image. The builder and its disk are deleted however the build ends: done, a
failed step, a timeout (--timeout), an API error, Ctrl-C or SIGTERM. Images are built one
after the other; `pulumi up` builds the missing ones the same way, in the cluster's network.

The project: --project, else the blueprint's, else the credentials' (Application Default
Credentials: `gcloud auth application-default login`). The builders run in --subnetwork,
else in the blueprint's network.existing_subnetwork, without an external IP (the subnetwork
needs Cloud NAT); else in the project's default network with an external IP.
CLUSTERPRINT_COMPUTE_API, when set, is the Compute API's endpoint instead of Google's
(https://compute.googleapis.com/compute/v1).

stdout has one line per image the blueprint's VMs boot, by name, as each is settled:
  NAME: exists in project P
  NAME: built in project P (family F, M min)
  NAME: failed at step STEP: REASON      (or "NAME: failed: REASON" before any step)
--dry-run prints, offline (no credentials, no network), the images and how each is made:
  NAME: would be built unless it exists in project P (family F, base B, builder M in Z)
stderr has the progress (the builder started, each step the install script starts, the
image created, the builder deleted) and, for a failure, the end of the builder's serial
console. A managed cluster's blueprint has nothing built (its VMs boot Cluster Director's
images): stdout stays empty.

Exit status: 0 every image exists or was built (with --dry-run: listed), 1 invalid
blueprint (the validator's lines on stderr), 2 usage error, unreadable file, no project or
no credentials, 3 an image failed to build (the others are still built), 130 interrupted
(after the builder of the image being built is deleted).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from typing import TYPE_CHECKING, NoReturn

from clusterprint.cli.commands import file_argument, project_argument
from clusterprint.cli.main import EXIT_USAGE

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint
    from clusterprint.build.builder import BuildSite, Timing
    from clusterprint.build.compute import ComputeApi
    from clusterprint.render.images import NodeImage

#: Exit status when an image failed to build.
EXIT_BUILD_FAILED = 3
WHO = "clusterprint image build"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """image build FILE [--project P] [--subnetwork S] [--dry-run] [--timeout MINUTES]."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build the images the blueprint boots and the "
                                             "project lacks", description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("file", metavar="FILE", type=file_argument,
                       help="blueprint file (.yaml or .json)")
    build.add_argument("--project", metavar="P", type=project_argument,
                       help="the project that gets the images (default: the blueprint's)")
    build.add_argument("--subnetwork", metavar="S", type=subnetwork_argument,
                       help="projects/P/regions/R/subnetworks/S to run the builders in, "
                            "with Cloud NAT")
    build.add_argument("--dry-run", action="store_true",
                       help="list the images and how each would be made; offline")
    build.add_argument("--timeout", metavar="MINUTES", type=minutes_argument, default=120,
                       help="fail a build whose install script runs longer (default 120)")


def subnetwork_argument(text: str) -> str:
    """A subnetwork path, as the blueprint's ``network.existing_subnetwork`` takes one."""
    from clusterprint.blueprint.model import SUBNETWORK_PATTERN

    if not re.fullmatch(SUBNETWORK_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{text!r} is not projects/P/regions/R/subnetworks/S")
    return text


def minutes_argument(text: str) -> int:
    """A whole number of minutes, at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of minutes")
    return int(text)


def run(args: argparse.Namespace) -> int:
    """Check the blueprint, then list (--dry-run) or build what it boots."""
    from clusterprint.cli.commands import checked_blueprint
    from clusterprint.render.images import needed_images

    blueprint, status = checked_blueprint(args.file)
    if blueprint is None:
        return status
    images = needed_images(blueprint)
    if args.dry_run:
        return dry_run(images, args.project or blueprint.project, blueprint)
    return build_all(images, blueprint, args) if images else 0


def dry_run(images: list[NodeImage], project: str | None, blueprint: Blueprint) -> int:
    """What would be built, offline: whether an image exists is the project's to say."""
    where = f"project {project}" if project else "the credentials' project"
    for image in images:
        print(f"{image.name}: would be built unless it exists in {where} (family "
              f"{image.family}, base {image.base.path}, builder {image.builder_machine_type}"
              f" in {blueprint.zone})")
    return 0


def build_all(images: list[NodeImage], blueprint: Blueprint, args: argparse.Namespace) -> int:
    """Build each missing image in turn; 3 when one failed."""
    from clusterprint.build.builder import Timing
    from clusterprint.build.site import command_site, network_words
    from clusterprint.cli.commands import compute_api

    api = compute_api(WHO, args.project, blueprint,
                      offline_hint=", or use --dry-run to list the images offline")
    if api is None:
        return EXIT_USAGE
    site = command_site(blueprint, api.project, args.subnetwork)
    print(f"{WHO}: builders run in {blueprint.zone}, in {network_words(site)}",
          file=sys.stderr)
    timing = Timing(build_timeout_s=args.timeout * 60.0)
    # A cancelled CI job (SIGTERM) deletes its builder as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        failed = [image for image in images if not built(api, image, site, timing)]
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_BUILD_FAILED if failed else 0


def built(api: ComputeApi, image: NodeImage, site: BuildSite, timing: Timing) -> bool:
    """Build one image unless it exists; its line on stdout; False when it failed."""
    from clusterprint.build.builder import BuildFailed, ImageBuild, Outcome

    started = time.monotonic()
    try:
        outcome = ImageBuild(api, image, site, timing, report=_progress_line).run()
    except BuildFailed as exc:
        print(exc.text(), file=sys.stderr)
        print(exc.summary)
        return False
    if outcome is Outcome.EXISTS:
        print(f"{image.name}: exists in project {site.project}")
    else:
        minutes = (time.monotonic() - started) / 60
        print(f"{image.name}: built in project {site.project} (family {image.family}, "
              f"{minutes:.0f} min)")
    sys.stdout.flush()
    return True


def _progress_line(line: str) -> None:
    """A build's progress, on stderr at once: a build takes minutes between lines."""
    print(line, file=sys.stderr, flush=True)


def _interrupted(signum: int, frame: object) -> NoReturn:
    """SIGTERM as Ctrl-C: the build deletes its builder, the command exits 130."""
    raise KeyboardInterrupt
