"""Pulumi mocks that record every registered resource, for the component tests.

The recording monitor sees what ``MockResourceArgs`` does not carry: each resource's
parent, its ``protect`` option and what it waits for; the engine's log records what the
program's ``pulumi.log`` calls sent (the mock engine hands each ``LogRequest`` to a logger at
its severity, as the real engine shows it in the diagnostics). Outputs a test needs are
resolved inside the same ``pulumi.runtime.test`` run that declares the resources, so one
event loop serves the whole test and no SDK thread outlives it (pulumi/pulumi#7663).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from tests.support.paths import blueprint_path

PROJECT = "test-project"


def reference_blueprint(name: str) -> Blueprint:
    """A reference blueprint from ``blueprints/``, checked as ``pulumi up`` would."""
    return load_checked(blueprint_path(name))


@dataclass
class Registered:
    """One resource as the engine would see it."""

    typ: str
    name: str
    inputs: dict[str, Any]
    parent: str
    protect: bool
    custom: bool
    #: Input names the engine keeps from the program's values (``ignore_changes``).
    ignore_changes: tuple[str, ...] = ()
    #: The logical names of the resources it waits for (``depends_on`` and its inputs').
    dependencies: tuple[str, ...] = ()


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if urn else ""


def _computed(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """What the provider would compute for the resources whose outputs the code reads."""
    if typ == "gcp:compute/network:Network":
        return {"id": f"projects/{inputs['project']}/global/networks/{name}"}
    if typ == "gcp:compute/subnetwork:Subnetwork":
        return {"id": f"projects/{inputs['project']}/regions/{inputs['region']}/subnetworks/{name}"}
    if typ == "gcp:compute/globalAddress:GlobalAddress":
        return {"address": inputs.get("address", "10.200.0.0")}
    if typ == "gcp:filestore/instance:Instance":
        network = {**inputs["networks"][0], "ipAddresses": ["10.200.0.2"]}
        return {"networks": [network]}
    if typ == "gcp:lustre/instance:Instance":
        return {"mountPoint": f"10.200.0.3@tcp:/{inputs['filesystem']}"}
    if typ == "gcp:compute/instanceGroupManager:InstanceGroupManager":
        return {"name": inputs.get("name", f"{name}-auto")}  # the engine's auto-name
    if typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
        return {"email": email, "member": f"serviceAccount:{email}"}
    if typ == "gcp:vertex/aiTensorboard:AiTensorboard":
        return {"id": f"projects/{inputs['project']}/locations/{inputs['region']}"
                      f"/tensorboards/{name}"}
    if typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
        return {"name": f"projects/{inputs['project']}/roles/{inputs['roleId']}"}
    if typ == "gcp:monitoring/notificationChannel:NotificationChannel":
        return {"name": f"projects/{inputs['project']}/notificationChannels/{name}"}
    if typ == "gcp:secretmanager/secret:Secret":
        return {"id": f"projects/{PROJECT}/secrets/{inputs['secretId']}"}
    return {}


class RecordingMocks(pulumi.runtime.Mocks):
    """Echoes inputs as state, adds computed outputs, and keeps every resource's inputs."""

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.inputs[(args.typ, args.name)] = args.inputs
        computed = _computed(args.typ, args.name, args.inputs)
        resource_id = computed.pop("id", f"{args.name}-id")
        link = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/x/{args.name}"
        return resource_id, {**args.inputs, "selfLink": link, "selfLinkUnique": f"{link}?id=1",
                             **computed}

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


class RecordingMonitor(MockMonitor):
    """A mock monitor that also records each registration's parent and protect flag."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks
        self.registered: list[Registered] = []

    def RegisterResource(self, request):  # noqa: N802 - the gRPC method's name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registered.append(Registered(
                request.type, request.name, self.recording.inputs.get((request.type,
                                                                        request.name), {}),
                _urn_name(request.parent), request.protect, request.custom,
                tuple(request.ignoreChanges),
                tuple(sorted({_urn_name(urn) for urn in request.dependencies}))))
        return response


class EngineLog(logging.Handler):
    """Every message the program logged through the engine, with its severity."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append((record.levelname.lower(), record.getMessage()))


def engine_logger(log: EngineLog) -> logging.Logger:
    """A logger of its own (not in logging's registry) that only ``log`` hears."""
    logger = logging.Logger("pulumi-engine")
    logger.addHandler(log)
    return logger


class Cloud:
    """The recorded resources of one test, with the lookups the tests need."""

    def __init__(self, monitor: RecordingMonitor, log: EngineLog) -> None:
        self._monitor = monitor
        self._log = log

    def logged(self, severity: str) -> list[str]:
        """The messages logged at ``severity`` ("warning", "error", ...), in order."""
        return [message for level, message in self._log.messages if level == severity]

    @property
    def resources(self) -> list[Registered]:
        """Every resource and component registered so far, in registration order."""
        return list(self._monitor.registered)

    def run(self, program: Callable[[], Any]) -> Any:
        """Run ``program`` under the mocks; return what its returned Outputs resolve to."""
        result: dict[str, Any] = {}

        @pulumi.runtime.test
        def declared() -> pulumi.Output[Any]:
            return pulumi.Output.from_input(program()).apply(
                lambda value: result.setdefault("value", value))

        declared()
        return result.get("value")

    def of_type(self, token: str) -> list[Registered]:
        """The custom resources of one type token, e.g. ``gcp:compute/network:Network``."""
        return [r for r in self.resources if r.typ == token]

    def one(self, token: str) -> Registered:
        """The single resource of a type; fails when there is not exactly one."""
        found = self.of_type(token)
        assert len(found) == 1, f"expected one {token}, got {[r.name for r in found]}"
        return found[0]
