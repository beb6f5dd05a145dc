"""One local server standing for what ``clusterprint preflight`` asks: Service Usage,
Resource Manager and Compute's reads, in the REST APIs' shapes.

It extends the image build's Compute fake (its images, its token and its record of every
call) with a project's enabled APIs, the permissions the caller holds, each region's quotas,
the machine types of zones, reservations and other projects' images and families, and can
refuse the credentials or have a whole API answer one error. Every request lands in
``calls`` in order, so a test asserts exactly what the command asked.
Service Usage answers under ``/serviceusage/v1``, Resource Manager under
``/cloudresourcemanager/v1``, Compute under ``/compute/v1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from tests.support.image_compute_fake import FakeImageCompute
from tests.support.local_http import send_json


@dataclass
class FakeProject(FakeImageCompute):
    """A project as preflight sees it; every field starts empty (nothing enabled, held,
    granted or found)."""

    enabled: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    #: region -> metric -> (limit, usage)
    quotas: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    #: the project's own quotas (projects.get): metric -> (limit, usage)
    project_quotas: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: (zone, machine type) -> vCPUs
    machine_types: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (project, zone, name) -> the reservation's fields
    reservations: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    #: (project, image name) of images outside the project (public bases, pinned images)
    other_images: set[tuple[str, str]] = field(default_factory=set)
    #: fields an image of ``other_images`` or ``families`` has beyond its name and READY
    #: status (``deprecated``, another ``status``), by (project, name or family)
    image_fields: dict[tuple[str, str], dict] = field(default_factory=dict)
    #: (project, family) that have an image
    families: set[tuple[str, str]] = field(default_factory=set)
    #: API (the path's first word: serviceusage, cloudresourcemanager, compute) -> (HTTP
    #: status, message) that every call to it answers instead of acting, as ``refusals``
    #: does for one verb: 401 for credentials it refuses, 403 for an API disabled, 503 for
    #: one down
    api_refusals: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: False: the project does not exist, and the APIs answer as Google's do
    exists: bool = True
    #: the token endpoint refuses the credentials (a key revoked, a login expired)
    token_refused: bool = False

    def base(self, api: str) -> str:
        """The endpoint of ``api`` (serviceusage, cloudresourcemanager, compute) here."""
        return f"http://127.0.0.1:{self.server.server_port}/{api}/v1"

    def requests(self) -> list[str]:
        """Every request as ``METHOD /path?query``, in order."""
        return [f"{c.method} {c.path}" for c in self.calls]

    def _answer(self, handler, method: str) -> None:
        if handler.path == "/token" and self.token_refused:
            handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            return send_json(handler, 400, {"error": "invalid_grant",
                                            "error_description": "Invalid JWT Signature."})
        return super()._answer(handler, method)

    def _act(self, method: str, url, body: dict | None) -> tuple[int, dict]:
        path, query = url.path, parse_qs(url.query)
        if refusal := self.api_refusals.get(path.split("/")[1]):
            return refusal[0], {"error": {"code": refusal[0], "message": refusal[1]}}
        if not self.exists and re.search(rf"/projects/{self.project}(/|:|$)", path):
            return self._no_project(path)
        if path == f"/cloudresourcemanager/v1/projects/{self.project}" and method == "GET":
            return 200, {"projectId": self.project, "lifecycleState": "ACTIVE"}
        if match := re.fullmatch(r"/serviceusage/v1/projects/([^/]+)/services:batchGet", path):
            assert method == "GET" and match[1] == self.project, path
            return 200, {"services": [
                {"name": name, "config": {"name": name.rsplit("/", 1)[-1]},
                 "state": "ENABLED" if name.rsplit("/", 1)[-1] in self.enabled else "DISABLED"}
                for name in query["names"]]}
        if match := re.fullmatch(r"/cloudresourcemanager/v1/projects/([^/:]+):testIamPermissions",
                                 path):
            assert method == "POST" and match[1] == self.project and body is not None, path
            return 200, {"permissions": [p for p in body["permissions"] if p in self.held]}
        if path == f"/compute/v1/projects/{self.project}" and method == "GET":
            return 200, {"name": self.project, "quotas": [
                {"metric": metric, "limit": limit, "usage": usage}
                for metric, (limit, usage) in sorted(self.project_quotas.items())]}
        match = re.fullmatch(r"/compute/v1/projects/([^/]+)/(.+)", path)
        assert match, path
        project, rest = match[1], match[2]
        if region := re.fullmatch(r"regions/([^/]+)", rest):
            if region[1] not in self.quotas:
                return self._missing(region[1])
            return 200, {"name": region[1], "quotas": [
                {"metric": metric, "limit": limit, "usage": usage}
                for metric, (limit, usage) in sorted(self.quotas[region[1]].items())]}
        if found := re.fullmatch(r"zones/([^/]+)/machineTypes/([^/]+)", rest):
            vcpus = self.machine_types.get((found[1], found[2]))
            return ((200, {"name": found[2], "guestCpus": vcpus}) if vcpus is not None
                    else self._missing(found[2]))
        if found := re.fullmatch(r"zones/([^/]+)/reservations/([^/]+)", rest):
            reservation = self.reservations.get((project, found[1], found[2]))
            return ((200, {"name": found[2], **reservation}) if reservation is not None
                    else self._missing(found[2]))
        if found := re.fullmatch(r"global/images/family/([^/]+)", rest):
            return ((200, {"name": f"{found[1]}-1", "family": found[1], "status": "READY",
                           **self.image_fields.get((project, found[1]), {})})
                    if (project, found[1]) in self.families else self._missing(found[1]))
        if project != self.project and (found := re.fullmatch(r"global/images/([^/]+)", rest)):
            return ((200, {"name": found[1], "status": "READY",
                           **self.image_fields.get((project, found[1]), {})})
                    if (project, found[1]) in self.other_images else self._missing(found[1]))
        return super()._act(method, url, body)

    def _no_project(self, path: str) -> tuple[int, dict]:
        """What Google's APIs answer of a project that does not exist: Compute 404, Resource
        Manager and Service Usage 403, as for one the caller may not see."""
        if path.startswith("/compute/"):
            return 404, {"error": {"code": 404, "message":
                                   f"The resource 'projects/{self.project}' was not found"}}
        return 403, {"error": {"code": 403, "message": "The caller does not have permission"}}
