"""A fake Compute API on 127.0.0.1 for image builds: images, instances, their disks and
operations, guest attributes and the serial console, in the REST API's shapes.

It keeps the project's images and the zone's instances and disks, and records every call;
it also hands out the access token of the credentials file it writes (``/token``).
An instance insert runs the test's ``install`` in place of the builder's startup script:
what it prints on the serial console, and what it writes to the guest attribute
``clusterprint/build`` (done, failed, or nothing: a script that never ends), after how many
looks. A test can make a verb answer an HTTP error or leave its operation with errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.support.compute_fake import Call, service_account_file
from tests.support.local_http import send_bytes, send_json, serve

#: The token the tests' credentials carry (google.oauth2.credentials.Credentials("fake")).
TOKEN = "fake"
#: The project and zone the build tests build in.
PROJECT, ZONE = "demo-project", "us-central1-a"


@dataclass(frozen=True)
class Install:
    """What a builder's startup script does: its serial console lines, then the value it
    writes to the guest attribute (None: never), visible from the ``after``-th look on."""

    lines: tuple[str, ...] = ()
    result: str | None = "done"
    after: int = 2


def installs(*steps: str, result: str | None = "done", failure: str | None = None,
             after: int = 2) -> Install:
    """An install that starts ``steps`` in turn, as the install script logs them on the
    serial console (after the guest agent's prefix), and ends with ``result``; a failed one
    ends with the startup script's own line, as builder.STARTUP_SCRIPT prints it."""
    prefix = "Jun 01 12:00:00 builder google_metadata_script_runner[812]: startup-script: "
    lines = [f"{prefix}step: {step}" for step in steps]
    if failure:
        lines.append(f"{prefix}<3>FAILED: {failure}")
    if result == "failed":
        lines.append(f"{prefix}<3>FAILED: the install script ended with status 1")
    return Install(tuple(lines), result, after)


@dataclass
class FakeImageCompute:
    """One project's images and one zone's VMs behind a local server."""

    project: str
    zone: str
    #: What each builder does, by the image its name is for (``NAME-builder``).
    install: Callable[[str], Install] = lambda image: installs("base", "slurm")
    images: dict[str, dict] = field(default_factory=dict)
    instances: dict[str, dict] = field(default_factory=dict)
    disks: dict[str, dict] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    #: ``METHOD verb`` (as ``verbs()`` lists calls) -> (HTTP status, message) answered instead
    #: of acting; a message in bytes is the whole body, as a proxy or a broken API may answer
    refusals: dict[str, tuple[int, str | bytes]] = field(default_factory=dict)
    #: API method (``instances.insert``) -> message of its operation, which ends in that
    #: error (after acting, as the API may)
    operation_errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._operations: dict[str, dict] = {}
        self._looks: dict[str, int] = {}
        self.server = serve(self._answer)

    @property
    def url(self) -> str:
        """The base URL the ComputeApi takes."""
        return f"http://127.0.0.1:{self.server.server_port}/compute/v1"

    def verbs(self) -> list[str]:
        """Every call as ``METHOD verb``, in order."""
        return [f"{c.method} {c.verb}" for c in self.calls]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def credentials_file(self, folder: Path) -> Path:
        """Application Default Credentials whose token this fake hands out, for the CLI as
        a process."""
        return service_account_file(folder, self.project,
                                    f"http://127.0.0.1:{self.server.server_port}/token")

    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if handler.path == "/token":
            return send_json(handler, 200, {"access_token": TOKEN, "expires_in": 3600,
                                            "token_type": "Bearer"})
        assert handler.headers.get("Authorization") == f"Bearer {TOKEN}", handler.path
        call = Call(method, handler.path, json.loads(raw) if raw else None,
                    handler.headers.get("Content-Type"), raw)
        self.calls.append(call)
        if f"{method} {call.verb}" in self.refusals:
            status, message = self.refusals[f"{method} {call.verb}"]
            if isinstance(message, bytes):
                return send_bytes(handler, status, message)
            return send_json(handler, status, {"error": {"code": status, "message": message}})
        status, body = self._act(method, urlsplit(handler.path), call.body)
        return send_json(handler, status, body)

    def _act(self, method: str, url, body: dict | None) -> tuple[int, dict]:
        prefix = f"/compute/v1/projects/{self.project}/"
        assert url.path.startswith(prefix), url.path
        rest, query = url.path[len(prefix):], parse_qs(url.query)
        zonal = f"zones/{self.zone}/"
        if rest.startswith("global/images"):
            return self._images(method, rest.removeprefix("global/images").strip("/"), body)
        if match := re.fullmatch(r"(?:global|zones/[^/]+)/operations/([^/]+)(/wait)?", rest):
            return 200, self._operations[match[1]]
        assert rest.startswith(zonal), rest
        return self._instances(method, rest[len(zonal):], query, body)

    def _images(self, method: str, name: str, body: dict | None) -> tuple[int, dict]:
        if method == "GET":
            return (200, self.images[name]) if name in self.images else self._missing(name)
        assert body is not None
        if body["name"] in self.images:
            return 409, {"error": {"message": f"image {body['name']} already exists"}}
        disk = body["sourceDisk"].rsplit("/", 1)[-1]
        assert disk in self.disks, f"no disk {disk}"
        owner = self.instances.get(self.disks[disk]["users"][0], {})
        assert owner.get("status") == "TERMINATED", "an image of a running VM's disk"
        self.images[body["name"]] = {**body, "status": "READY"}
        return 200, self._operation("images.insert")

    def _instances(self, method: str, rest: str, query: dict, body: dict | None
                   ) -> tuple[int, dict]:
        if rest == "instances" and method == "POST":
            assert body is not None
            return self._create(body)
        name, _, verb = rest.removeprefix("instances/").partition("/")
        if name not in self.instances:
            return self._missing(name)
        vm = self.instances[name]
        if not verb and method == "GET":
            return 200, {"name": name, "status": vm["status"]}
        if not verb and method == "DELETE":
            del self.instances[name]
            for disk in [d for d, v in self.disks.items() if v["users"] == [name]]:
                del self.disks[disk]
            return 200, self._operation("instances.delete")
        if verb == "stop":
            vm["status"] = "TERMINATED"
            return 200, self._operation("instances.stop")
        if verb == "getGuestAttributes":
            return self._guest_attribute(name, query["variableKey"][0])
        if verb == "serialPort":
            start = int(query["start"][0])
            text = "".join(f"{line}\n" for line in vm["install"].lines)
            return 200, {"contents": text[start:], "start": start, "next": len(text)}
        return 404, {"error": {"message": f"no {method} {rest}"}}

    def _create(self, body: dict) -> tuple[int, dict]:
        name = body["name"]
        if name in self.instances:
            return 409, {"error": {"message": f"The resource '{name}' already exists"}}
        image = name.removesuffix("-builder")
        self.instances[name] = {"status": "RUNNING", "body": body,
                                "install": self.install(image)}
        (boot,) = body["disks"]
        self.disks[boot["initializeParams"]["diskName"]] = {"users": [name],
                                                            "autoDelete": boot["autoDelete"]}
        return 200, self._operation("instances.insert")

    def _guest_attribute(self, name: str, key: str) -> tuple[int, dict]:
        assert key == "clusterprint/build", key
        vm = self.instances[name]
        self._looks[name] = self._looks.get(name, 0) + 1
        result = vm["install"].result
        if result is None or self._looks[name] < vm["install"].after:
            return 404, {"error": {"message": "The resource guest attribute was not found"}}
        return 200, {"kind": "compute#guestAttributes", "variableKey": key,
                     "variableValue": result}

    def _operation(self, method: str) -> dict:
        """An operation of ``method`` (``instances.insert``): running when it is answered,
        done at its first wait, with the test's error if it set one."""
        name = f"operation-{len(self._operations) + 1}"
        done: dict = {"kind": "compute#operation", "name": name, "operationType": method,
                      "status": "DONE"}
        if method.startswith("instances."):
            done["zone"] = (f"https://www.googleapis.com/compute/v1/projects/{self.project}"
                            f"/zones/{self.zone}")
        if method in self.operation_errors:
            done["error"] = {"errors": [{"code": "FAKE", "message":
                                         self.operation_errors[method]}]}
            done["httpErrorStatusCode"] = 400
        self._operations[name] = done
        return {**done, "status": "RUNNING"}

    @staticmethod
    def _missing(name: str) -> tuple[int, dict]:
        return 404, {"error": {"message": f"The resource '{name}' was not found"}}


def reach_in_process(fake: FakeImageCompute, monkeypatch) -> None:
    """Point this process's Compute calls (``compute_url``, ``authorized_session``) at
    ``fake``, with credentials that hold its token."""
    from google.auth.transport.requests import AuthorizedSession
    from google.oauth2.credentials import Credentials

    from clusterprint.build import compute

    monkeypatch.setenv(compute.API_VARIABLE, fake.url)
    monkeypatch.setattr(compute, "authorized_session",
                        lambda: (AuthorizedSession(Credentials(TOKEN)), None))
