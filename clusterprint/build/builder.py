"""Building one node image: a builder VM runs its install script, and its disk becomes the image.

A build is a small state machine (``Phase``) over a ``ComputeApi``: CHECK (an image of that
exact name already in the project is kept as it is), CREATE the builder VM from the dated base
image with the install script in its metadata, INSTALL (wait until the startup script says
done or failed in the guest attribute ``clusterprint/build``, following the serial console for
the step it is at), STOP it, CAPTURE its boot disk as the image, DONE. Once the builder is
asked for, it is deleted with its disk before the build returns or raises, whatever ended it:
success, a failed step, a timeout, an API error or Ctrl-C. A builder whose process is killed
outright deletes itself when its run time runs out (``scheduling.maxRunDuration``).

``clusterprint image build`` and ``pulumi up`` (``components/node_image.py``) run this code.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from importlib import metadata
from typing import Any

from clusterprint.build.compute import ComputeApi, ComputeError
from clusterprint.contract import node_metadata
from clusterprint.facts import images as image_facts
from clusterprint.facts import slurm
from clusterprint.render.images import NodeImage

#: The instance metadata key that carries the install script to the builder.
INSTALL_SCRIPT_KEY = "clusterprint-install-script"
#: The guest attribute (namespace/key) the builder's startup script sets to done or failed.
BUILD_ATTRIBUTE = "clusterprint/build"
#: The builder's startup script: the install script runs once, from the metadata; its output
#: is the serial console's (the guest agent copies a startup script's lines there).
STARTUP_SCRIPT = f"""\
#!/bin/bash
# Startup script of a clusterprint image builder: runs the image's install script once, then
# writes done or failed to the guest attribute {BUILD_ATTRIBUTE}, which the build polls.
set -uo pipefail
metadata=http://metadata.google.internal/computeMetadata/v1/instance
report() {{
  curl -fsS --retry 10 --retry-connrefused -X PUT -H 'Metadata-Flavor: Google' \\
    --data "$1" "$metadata/guest-attributes/{BUILD_ATTRIBUTE}"
}}
script=$(mktemp)
if curl -fsS --retry 10 --retry-connrefused -H 'Metadata-Flavor: Google' -o "$script" \\
    "$metadata/attributes/{INSTALL_SCRIPT_KEY}" && bash "$script"; then
  rm -f "$script"
  sync
  report "done"
else
  echo "<3>FAILED: the install script ended with status $?"
  rm -f "$script"
  report "failed"
fi
"""
#: A step line of the install script, as the serial console shows it (after the guest
#: agent's prefix ``... startup-script: ``).
STEP_LINE = re.compile(r"(?:^|: )step: ([A-Za-z0-9_.-]+)\s*$")
FAILED_LINE = re.compile(r"FAILED: (.*\S)")
#: Lines of the serial console a failure shows.
TAIL_LINES = 30
#: The API's architecture names (Image.architecture).
ARCHITECTURES = {"x86_64": "X86_64", "arm64": "ARM64"}
#: Instance states in which the builder will never finish its script.
GONE_STATES = frozenset({"STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED", "TERMINATED"})


@dataclass(frozen=True)
class BuildSite:
    """Where builders run: the project that gets the images, a zone, and the network.

    ``subnetwork`` None is the project's ``default`` network. Without an external IP the
    builder reaches the package archives through the subnetwork's Cloud NAT, which the
    cluster's own network has.
    """

    project: str
    zone: str
    subnetwork: str | None = None
    external_ip: bool = False


@dataclass(frozen=True)
class Timing:
    """How long a build waits for what, in seconds."""

    #: Between two looks at the builder (guest attributes allow 10 queries a minute).
    poll_s: float = 30.0
    #: The install script's time: Slurm from source and the GPU stack take under an hour
    #: on the builder machines; what runs longer is stuck.
    build_timeout_s: float = 2 * 3600.0
    #: One operation (create, stop, capture, delete).
    operation_timeout_s: float = 20 * 60.0

    @property
    def max_run_s(self) -> int:
        """The builder's own run-time limit: the build's, with room for stopping it."""
        return int(self.build_timeout_s + self.operation_timeout_s)


class Outcome(Enum):
    """How a build ended when it did not fail."""

    EXISTS = "exists"
    BUILT = "built"


class Phase(Enum):
    """Where a build is."""

    CHECK = "check"
    CREATE = "create"
    INSTALL = "install"
    STOP = "stop"
    CAPTURE = "capture"
    DONE = "done"


class BuildFailed(Exception):
    """A build that did not produce its image; the builder is gone when this is raised. Its
    message is ``text()``: where it failed and the serial console's end (what `pulumi up`
    shows of a failed NodeImage)."""

    def __init__(self, image: str, reason: str, step: str | None = None,
                 tail: list[str] | None = None) -> None:
        self.image, self.reason, self.step, self.tail = image, reason, step, tail or []
        super().__init__(self.text())

    @property
    def summary(self) -> str:
        """One line: the image, the step it failed at (when known) and why."""
        at = f" at step {self.step}" if self.step else ""
        return f"{self.image}: failed{at}: {self.reason}"

    def text(self) -> str:
        """The summary, then the serial console's last lines, indented."""
        if not self.tail:
            return self.summary
        lines = [f"{self.image}: the builder's serial console ended with:"]
        return "\n".join([self.summary, *lines, *(f"  {line}" for line in self.tail)])


@dataclass
class SerialConsole:
    """What the builder's serial port has printed, read a piece at a time: the last step
    started, the first FAILED line and the tail."""

    next: int = 0
    step: str | None = None
    failure: str | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    _partial: str = ""

    def feed(self, contents: str, next_start: int) -> list[str]:
        """Take the text read from ``self.next`` on; the steps that started in it."""
        self.next = next_start
        lines = (self._partial + contents).split("\n")
        self._partial = lines.pop()
        started = []
        for line in (line.rstrip("\r") for line in lines):
            self.tail.append(line)
            if (step := STEP_LINE.search(line)) is not None:
                self.step = step[1]
                started.append(step[1])
            # The first: the install script's own, before the startup script's "ended with".
            if self.failure is None and (failed := FAILED_LINE.search(line)) is not None:
                self.failure = failed[1]
        return started

    def lines(self) -> list[str]:
        """The tail, with a last line not yet ended."""
        return [*self.tail, *([self._partial] if self._partial else [])][-TAIL_LINES:]


def builder_name(image: NodeImage) -> str:
    """The builder VM's name: one per image and zone, so a second build of the same image
    in the same zone is refused while the first runs."""
    return f"{image.name}-builder"


def clusterprint_version() -> str:
    """The installed clusterprint's version, which the image's labels name."""
    try:
        return metadata.version("clusterprint")
    except metadata.PackageNotFoundError:
        return "unknown"


def label_value(text: str) -> str:
    """``text`` as a label value: lowercase letters, digits, ``_`` and ``-``, at most 63
    (cloud.google.com/compute/docs/labeling-resources#requirements)."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def image_labels(image: NodeImage, version: str) -> dict[str, str]:
    """What an image says of itself in labels: its kind, Slurm, its base, who built it."""
    return {"clusterprint-kind": image.kind,
            "clusterprint-slurm": label_value(slurm.SLURM_VERSION),
            "clusterprint-base": label_value(image.base.name),
            "clusterprint-version": label_value(version)}


def image_description(image: NodeImage, version: str) -> str:
    """The image's description: what is in it, on what, from which script."""
    return (f"clusterprint {image.kind} image: Slurm {slurm.SLURM_VERSION} and "
            f"{', '.join(image.parts)} on {image.base.path}; built by clusterprint {version} "
            f"from {image.script_path}")


def instance_body(image: NodeImage, site: BuildSite, timing: Timing) -> dict[str, Any]:
    """The builder VM: the base image on a disk the size of the image's, the install script
    in its metadata, no service account (the script needs no Google API), and a run-time
    limit after which it deletes itself."""
    zone, name = site.zone, builder_name(image)
    interface: dict[str, Any] = (
        {"subnetwork": site.subnetwork} if site.subnetwork
        else {"network": f"projects/{site.project}/global/networks/default"})
    if site.external_ip:
        interface["accessConfigs"] = [{"type": "ONE_TO_ONE_NAT", "name": "external-nat"}]
    items = {"startup-script": STARTUP_SCRIPT, INSTALL_SCRIPT_KEY: image.script,
             node_metadata.GUEST_ATTRIBUTES: "TRUE", "enable-oslogin": "TRUE"}
    return {
        "name": name,
        "description": f"clusterprint builder of image {image.name}: deleted when the build "
                       "ends",
        "machineType": f"zones/{zone}/machineTypes/{image.builder_machine_type}",
        "labels": {"clusterprint-builder": image.kind},
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
            "diskName": name, "sourceImage": image.base.path,
            "diskSizeGb": str(image_facts.BUILDER_DISK_GB),
            "diskType": f"zones/{zone}/diskTypes/{image_facts.BUILDER_DISK_TYPES[image.arch]}"}}],
        "networkInterfaces": [interface],
        "metadata": {"items": [{"key": k, "value": v} for k, v in items.items()]},
        "serviceAccounts": [],
        "scheduling": {"maxRunDuration": {"seconds": str(timing.max_run_s)},
                       "instanceTerminationAction": "DELETE"},
    }


def image_body(image: NodeImage, site: BuildSite, version: str) -> dict[str, Any]:
    """The image made of the stopped builder's boot disk, in the image's family."""
    return {"name": image.name, "family": image.family,
            "sourceDisk": f"projects/{site.project}/zones/{site.zone}/disks/"
                          f"{builder_name(image)}",
            "architecture": ARCHITECTURES[image.arch],
            "labels": image_labels(image, version),
            "description": image_description(image, version)}


class ImageBuild:
    """One image's build, phase by phase; ``run`` drives it to the end."""

    def __init__(self, api: ComputeApi, image: NodeImage, site: BuildSite,
                 timing: Timing | None = None, report: Callable[[str], None] = lambda line: None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 version: str | None = None) -> None:
        self.api, self.image, self.site = api, image, site
        self.timing = timing or Timing()
        self.report, self._clock, self._sleep = report, clock, sleep
        self.version = version or clusterprint_version()
        self.builder = builder_name(image)
        self.console = SerialConsole()
        self.outcome = Outcome.EXISTS
        self._asked_for_builder = False
        self._phases: dict[Phase, Callable[[], Phase]] = {
            Phase.CHECK: self._check, Phase.CREATE: self._create,
            Phase.INSTALL: self._install, Phase.STOP: self._stop,
            Phase.CAPTURE: self._capture}

    def run(self) -> Outcome:
        """Build the image unless it exists; BuildFailed (the builder deleted) when not."""
        phase = Phase.CHECK
        try:
            while phase is not Phase.DONE:
                phase = self._phases[phase]()
        except ComputeError as exc:
            raise BuildFailed(self.image.name, str(exc), self.console.step,
                              self.console.lines()) from exc
        finally:
            if self._asked_for_builder:
                self._delete_builder()
        return self.outcome

    def _check(self) -> Phase:
        return Phase.DONE if self.api.image(self.image.name) is not None else Phase.CREATE

    def _create(self) -> Phase:
        body = instance_body(self.image, self.site, self.timing)
        try:
            operation = self.api.insert_instance(self.site.zone, body)
        except ComputeError as exc:
            if exc.status == 409:  # not ours: never delete another build's builder
                raise BuildFailed(self.image.name, self._builder_exists()) from exc
            raise
        self._asked_for_builder = True
        self.api.wait(operation, self.timing.operation_timeout_s)
        self.report(f"{self.image.name}: builder {self.builder} started in {self.site.zone} "
                    f"({self.image.builder_machine_type}, from {self.image.base.path})")
        return Phase.INSTALL

    def _builder_exists(self) -> str:
        return (f"a builder {self.builder} already exists in {self.site.zone}: another build "
                "of this image is running, or one was killed before it could delete it; "
                f"delete it (gcloud compute instances delete {self.builder} --zone "
                f"{self.site.zone} --project {self.site.project}) and build again")

    def _install(self) -> Phase:
        deadline = self._clock() + self.timing.build_timeout_s
        while True:
            self._read_console()
            state = self.api.guest_attribute(self.site.zone, self.builder, BUILD_ATTRIBUTE)
            if state == "done":
                self._read_console()
                return Phase.STOP
            if state == "failed":
                self._read_console()
                raise self._failed(self.console.failure or "the install script failed")
            status = (self.api.instance(self.site.zone, self.builder) or {}).get("status")
            if status in GONE_STATES or status is None:
                raise self._failed(f"the builder is {status or 'gone'} before the install "
                                   "script finished")
            if self._clock() >= deadline:
                raise self._failed(f"the install script did not finish within "
                                   f"{self.timing.build_timeout_s / 60:.0f} minutes")
            self._sleep(self.timing.poll_s)

    def _read_console(self) -> None:
        """Read what the serial console printed since the last read; report new steps. The
        console is a help, not a signal: a read that fails is tried again at the next look."""
        try:
            contents, next_start = self.api.serial_output(self.site.zone, self.builder,
                                                          self.console.next)
        except ComputeError:
            return
        for step in self.console.feed(contents, next_start):
            self.report(f"{self.image.name}: step: {step}")

    def _failed(self, reason: str) -> BuildFailed:
        return BuildFailed(self.image.name, reason, self.console.step, self.console.lines())

    def _stop(self) -> Phase:
        self.report(f"{self.image.name}: installed; stopping the builder")
        self.api.wait(self.api.stop_instance(self.site.zone, self.builder),
                      self.timing.operation_timeout_s)
        return Phase.CAPTURE

    def _capture(self) -> Phase:
        self.report(f"{self.image.name}: creating the image in family {self.image.family}")
        try:
            operation = self.api.insert_image(image_body(self.image, self.site, self.version))
        except ComputeError as exc:
            if exc.status != 409:
                raise
            self.report(f"{self.image.name}: another build created it meanwhile")
            return Phase.DONE  # the same content name is the same content
        self.api.wait(operation, self.timing.operation_timeout_s)
        self.outcome = Outcome.BUILT
        return Phase.DONE

    def _delete_builder(self) -> None:
        """Delete the builder and its disk; a deletion that fails says how to do it by hand
        rather than hide why the build ended."""
        try:
            operation = self.api.delete_instance(self.site.zone, self.builder)
            if operation is not None:
                self.api.wait(operation, self.timing.operation_timeout_s)
        except ComputeError as exc:
            self.report(f"{self.image.name}: could not delete the builder ({exc}); delete it: "
                        f"gcloud compute instances delete {self.builder} --zone "
                        f"{self.site.zone} --project {self.site.project}")
            return
        self.report(f"{self.image.name}: builder {self.builder} deleted")


def build_image(api: ComputeApi, image: NodeImage, site: BuildSite, **options: Any) -> Outcome:
    """Build ``image`` in ``site`` unless it exists (see ImageBuild for ``options``)."""
    return ImageBuild(api, image, site, **options).run()
