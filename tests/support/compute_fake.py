"""A fake Compute API on 127.0.0.1 for the controller's programs: it records every call.

It answers the metadata server's token request and the Compute calls the remediation loop
and power saving make (list groups, listManagedInstances a page at a time, instances.reset,
recreateInstances, reportHostAsFaulty, createInstances, deleteInstances) in the REST API's
shapes, and those `clusterprint status` makes as a process (a service account key's token,
instances.get, getGuestAttributes, listErrors); it keeps each group's VMs, and runs a test's
callback where a real VM would boot, reboot, be recreated or deleted (starting, restarting
or stopping that node's slurmd). A create the test makes fail (``create_errors``: a
stockout, a quota) leaves the VM as the API does: CREATING, with no status, the error in its
``lastAttempt``, retried for ever. A flex-start resize request (insert, list, cancel,
delete) creates its named VMs at once while ``flex_capacity`` holds, else it waits ACCEPTED
until ``provide_flex``; with ``request_error`` set it FAILED with that error, as the API
says of a quota.
A test can make a verb slow (it acts, then answers late) or answer what the API should
not (HTML, a wrong shape, a page token that repeats).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.local_http import send_bytes, send_json, serve


def service_account_file(folder: Path, project: str, token_url: str) -> Path:
    """Application Default Credentials for the CLI as a process: a service account key (its
    own, new) whose ``token_uri`` is a fake's (google-auth keeps a key file's token_uri; a
    user's file always gets Google's)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = folder / "service-account.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": project, "private_key_id": "1",
        "private_key": pem, "client_email": f"cli@{project}.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_url}))
    return path


@dataclass
class Call:
    """One request: what the loop asked for."""

    method: str
    path: str
    body: dict | None
    #: the request's Content-Type header and whether it carried a body at all
    content_type: str | None = None
    raw: bytes = b""

    @property
    def verb(self) -> str:
        """The API method's last word: reset, recreateInstances, reportHostAsFaulty..."""
        return self.path.split("?")[0].rsplit("/", 1)[-1]


@dataclass
class FakeCompute:
    """Groups of VMs ({group: (base instance name, {vm: status})}) behind a local server."""

    project: str
    zone: str
    groups: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    #: verbs that answer HTTP 500
    failing: set[str] = field(default_factory=set)
    #: verb -> seconds it waits, after acting, before it answers
    delay: dict[str, float] = field(default_factory=dict)
    #: verb ("token" for the token) -> (status, body) answered instead, or a function of
    #: the call giving them
    answers: dict[str, tuple[int, bytes] | Callable[[Call], tuple[int, bytes]]] = field(
        default_factory=dict)
    #: VMs per page of listManagedInstances
    page_size: int = 500
    on_reset: Callable[[str], None] | None = None
    on_recreate: Callable[[str], None] | None = None
    #: a VM created (its slurmd may start) and a VM deleted (its slurmd stops)
    on_create: Callable[[str], None] | None = None
    on_delete: Callable[[str], None] | None = None
    #: (code, message) every create fails with while set: the VM stays CREATING
    create_errors: tuple[str, str] | None = None
    #: machine type -> (vCPUs, MiB of memory) machineTypes.get answers
    machine_types: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the last create error of each VM still CREATING
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: token requests answered
    tokens: int = 0
    #: host events: per VM, what instances.list adds to its name and status
    #: (``scheduling``, ``resourceStatus``), and VMs per page of that list
    vm_details: dict[str, dict] = field(default_factory=dict)
    vms_page_size: int = 500
    #: resize requests: {group: {name: {"state", "instances", "error", "seconds"}}}; one
    #: made by Pulumi for ``count`` has ``resize_by`` instead of ``instances``, and any may
    #: have ``created`` (its creationTimestamp)
    resize_requests: dict[str, dict[str, dict]] = field(default_factory=dict)
    #: whether Dynamic Workload Scheduler has the capacity a resize request asks for now
    flex_capacity: bool = True
    #: (code, message) a resize request fails with while set
    request_error: tuple[str, str] | None = None
    #: `clusterprint status`: VMs outside the groups (controller, login nodes) by name: their
    #: status; each VM's guest attributes (namespace/key -> value); each group's listErrors
    #: items, a page of ``page_size`` at a time
    standalone: dict[str, str] = field(default_factory=dict)
    guest_attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    group_errors: dict[str, list[dict]] = field(default_factory=dict)
    #: what a group does to a VM (its currentAction: DELETING, RECREATING...) where it is not
    #: the one its status implies (CREATING without one, else NONE)
    actions: dict[str, str] = field(default_factory=dict)
    #: groups the zone's list still names (group -> base instance name) that are gone by the
    #: time they are read: their own calls answer 404, as after a delete between the two
    vanished: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.server = serve(self._answer)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def credentials_file(self, folder: Path) -> Path:
        """Application Default Credentials whose token this fake hands out."""
        return service_account_file(folder, self.project, f"{self.url}/token")

    def config(self) -> dict[str, str]:
        """The remediation config's API keys pointing here."""
        return {"api": f"{self.url}/compute/v1", "token_url": f"{self.url}/token"}

    def verbs(self, verb: str) -> list[Call]:
        return [c for c in self.calls if c.verb == verb]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path
        if path == "/token" and method == "POST":  # a service account key's grant (the CLI)
            return send_json(handler, 200, {"access_token": "fake", "expires_in": 3600,
                                            "token_type": "Bearer"})
        if path == "/token":
            assert handler.headers.get("Metadata-Flavor") == "Google"
            self.tokens += 1
            if "token" in self.answers:
                return send_bytes(handler, *self._instead(Call(method, path, None)))
            return send_json(handler, 200, {"access_token": "fake", "expires_in": 3600})
        assert handler.headers.get("Authorization") == "Bearer fake", path
        call = Call(method, path, json.loads(raw) if raw else None,
                    handler.headers.get("Content-Type"), raw)
        self.calls.append(call)
        if call.verb in self.failing:
            return send_json(handler, 500, {"error": {"message": "injected"}})
        if call.verb in self.answers:
            return send_bytes(handler, *self._instead(call))
        if call.verb in self.delay:
            # It acts at once, as the API does; only the answer is late.
            threading.Thread(target=self._act, args=(call, method, path), daemon=True).start()
            time.sleep(self.delay[call.verb])
            return send_json(handler, 200, {"kind": "compute#operation", "status": "DONE"})
        status, body = self._act(call, method, path)
        return send_json(handler, status, body)

    def _managed(self, vm: str, status: str) -> dict:
        """A listManagedInstances entry: a VM still being created has no status yet and,
        after a failed try, the try's error."""
        entry = {"name": vm, "instance": f"https://www.googleapis.com/compute/v1/projects/"
                                         f"{self.project}/zones/{self.zone}/instances/{vm}",
                 "currentAction": self.actions.get(vm) or ("CREATING" if status == ""
                                                           else "NONE")}
        if status:
            entry["instanceStatus"] = status
        if vm in self.failed:
            code, message = self.failed[vm]
            entry["lastAttempt"] = {"errors": {"errors": [{"code": code, "message": message}]}}
        return entry

    def _create(self, group: str, vm: str) -> None:
        """A VM of the group: running at once (and its callback run), or, while creates
        fail, CREATING with the error."""
        if self.create_errors:
            self.groups[group][1][vm] = ""
            self.failed[vm] = self.create_errors
            return
        self.groups[group][1][vm] = "RUNNING"
        self.failed.pop(vm, None)
        if self.on_create:
            self.on_create(vm)

    def provide_flex(self) -> None:
        """Capacity found: every waiting resize request creates its VMs and succeeds."""
        self.flex_capacity = True
        for group, requests in self.resize_requests.items():
            for request in requests.values():
                if request["state"] == "ACCEPTED":
                    self._fulfil(group, request)

    def _fulfil(self, group: str, request: dict) -> None:
        for vm in request["instances"]:
            self._create(group, vm)
        request["state"] = "SUCCEEDED"

    def _resize_request(self, call: Call, method: str, group: str,
                        rest: str) -> tuple[int, dict]:
        """instanceGroupManagerResizeRequests: insert and list on the group, cancel and
        delete on a request."""
        requests = self.resize_requests.setdefault(group, {})
        if not rest and method == "GET":
            return 200, {"items": [
                {"name": name, "state": r["state"],
                 **({"instances": [{"name": vm} for vm in r["instances"]]}
                    if r.get("instances") else {"resizeBy": r.get("resize_by", 0)}),
                 **({"creationTimestamp": r["created"]} if r.get("created") else {}),
                 **({"status": {"error": {"errors": [
                     {"code": r["error"][0], "message": r["error"][1]}]}}}
                    if r["error"] else {})} for name, r in requests.items()]}
        if not rest and method == "POST":
            body = call.body
            assert set(body) == {"name", "instances", "requestedRunDuration"}, body
            request = {"state": "ACCEPTED", "error": self.request_error,
                       "instances": [i["name"] for i in body["instances"]],
                       "seconds": body["requestedRunDuration"]["seconds"]}
            requests[body["name"]] = request
            if self.request_error:
                request["state"] = "FAILED"
            elif self.flex_capacity:
                self._fulfil(group, request)
            return 200, {"kind": "compute#operation", "status": "DONE"}
        name, _, verb = rest.partition("/")
        if name not in requests:
            return 404, {"error": {"message": f"no resize request {name}"}}
        if verb == "cancel" and method == "POST":
            if requests[name]["state"] != "ACCEPTED":
                return 400, {"error": {"message": f"{name} is {requests[name]['state']}"}}
            requests[name]["state"] = "CANCELLED"
            return 200, {"kind": "compute#operation", "status": "DONE"}
        if not verb and method == "DELETE":
            if requests[name]["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return 400, {"error": {"message": f"{name} is {requests[name]['state']}"}}
            del requests[name]
            return 200, {"kind": "compute#operation", "status": "DONE"}
        return 404, {"error": {"message": f"no {method} resizeRequests/{rest}"}}

    def retry_creates(self) -> None:
        """What the group does on its own while a create fails: try again, now with the
        current ``create_errors``."""
        for group, (_, vms) in self.groups.items():
            for vm, status in list(vms.items()):
                if status == "":
                    self._create(group, vm)

    def _instead(self, call: Call) -> tuple[int, bytes]:
        answer = self.answers[call.verb if call.path != "/token" else "token"]
        return answer(call) if callable(answer) else answer

    def _act(self, call: Call, method: str, path: str) -> tuple[int, dict]:
        prefix = f"/compute/v1/projects/{self.project}/zones/{self.zone}/"
        assert path.startswith(prefix), path
        rest, _, query = path[len(prefix):].partition("?")
        if rest == "instanceGroupManagers" and method == "GET":
            return 200, {"items": [
                {"name": g, "baseInstanceName": base} for g, base in
                [*((g, base) for g, (base, _) in self.groups.items()), *self.vanished.items()]]}
        if (gone := re.match(r"instanceGroupManagers/([^/]+)/", rest)) and gone[1] in self.vanished:
            return 404, {"error": {"message": f"instance group manager {gone[1]} not found"}}
        if rest == "instances" and method == "GET":
            return 200, self._instances_page(query)
        if rest.startswith("machineTypes/") and method == "GET":
            cpus, memory = self.machine_types[rest.split("/", 1)[1]]
            return 200, {"name": rest.split("/", 1)[1], "guestCpus": cpus, "memoryMb": memory}
        resize = re.fullmatch(r"instanceGroupManagers/([^/]+)/resizeRequests/?(.*)", rest)
        if resize:
            return self._resize_request(call, method, resize[1], resize[2])
        match = re.fullmatch(r"instanceGroupManagers/([^/]+)/(\w+)", rest)
        if match and match[2] == "listManagedInstances":
            vms = list(self.groups[match[1]][1].items())
            return 200, self._page(query, "managedInstances",
                                   [self._managed(vm, status) for vm, status in vms])
        if match and match[2] == "listErrors" and method == "GET":
            return 200, self._page(query, "items", self.group_errors.get(match[1], []))
        if match and match[2] == "recreateInstances":
            for instance in call.body["instances"]:
                vm = instance.rsplit("/", 1)[-1]
                assert vm in self.groups[match[1]][1], vm
                if self.on_recreate:
                    self.on_recreate(vm)
            return 200, {"kind": "compute#operation", "status": "DONE"}
        if match and match[2] == "createInstances":
            for instance in call.body["instances"]:
                self._create(match[1], instance["name"])
            return 200, {"kind": "compute#operation", "status": "DONE"}
        if match and match[2] == "deleteInstances":
            for instance in call.body["instances"]:
                vm = instance.rsplit("/", 1)[-1]
                if self.groups[match[1]][1].pop(vm, None) is not None or vm in self.failed:
                    self.failed.pop(vm, None)
                    if self.on_delete:
                        self.on_delete(vm)
            return 200, {"kind": "compute#operation", "status": "DONE"}
        if (match := re.fullmatch(r"instances/([^/?]+)", rest)) and method == "GET":
            if match[1] not in self.standalone:
                return 404, {"error": {"message": f"instance {match[1]} not found"}}
            return 200, {"name": match[1], "status": self.standalone[match[1]]}
        match = re.fullmatch(r"instances/([^/]+)/(\w+)", rest)
        if match and match[2] == "getGuestAttributes" and method == "GET":
            return self._guest_attributes(match[1], urllib.parse.parse_qs(query))
        if match and match[2] == "reset":
            if self.on_reset:
                self.on_reset(match[1])
            return 200, {"kind": "compute#operation", "status": "RUNNING"}
        if match and match[2] == "reportHostAsFaulty":
            return 200, {"kind": "compute#operation", "status": "RUNNING"}
        return 404, {"error": {"message": f"no {method} {rest}"}}

    def _page(self, query: str, key: str, items: list[dict]) -> dict:
        """One page of a list, ``page_size`` items from ``pageToken`` (a position) on."""
        start = int(urllib.parse.parse_qs(query).get("pageToken", ["0"])[0])
        page: dict = {key: items[start:start + self.page_size]}
        if start + self.page_size < len(items):
            page["nextPageToken"] = str(start + self.page_size)
        return page

    def _guest_attributes(self, vm: str, asked: dict[str, list[str]]) -> tuple[int, dict]:
        """getGuestAttributes?queryPath=NAMESPACE/: every key the VM wrote there; 404 for
        none, as the API answers a path nothing was written to."""
        namespace = asked["queryPath"][0].removesuffix("/")
        items = [{"namespace": namespace, "key": key.split("/", 1)[1], "value": value}
                 for key, value in self.guest_attributes.get(vm, {}).items()
                 if key.split("/", 1)[0] == namespace]
        if not items:
            return 404, {"error": {"message": f"no guest attributes under {namespace}/"}}
        return 200, {"kind": "compute#guestAttributes", "queryPath": f"{namespace}/",
                     "queryValue": {"items": items}}

    # --- Host events: instances.list (its own block) --------------------------------------

    def _instances_page(self, query: str) -> dict:
        """instances.list as the host-event watch calls it: ``filter=name eq "RE"`` (RE2
        matched against the whole name), ``fields`` and ``maxResults`` given, a page at a
        time; each VM of every group with its status and its ``vm_details``."""
        asked = urllib.parse.parse_qs(query)
        match = re.fullmatch(r'name eq "(.+)"', asked["filter"][0])
        assert match and asked["fields"] and asked["maxResults"], query
        vms = [{"name": vm, "status": status, **self.vm_details.get(vm, {})}
               for _, (_, group) in self.groups.items() for vm, status in group.items()
               if status and re.fullmatch(match[1], vm)]
        start = int(asked.get("pageToken", ["0"])[0])
        page = {"items": vms[start:start + self.vms_page_size]}
        if start + self.vms_page_size < len(vms):
            page["nextPageToken"] = str(start + self.vms_page_size)
        return page
