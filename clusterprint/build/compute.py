"""The Compute Engine REST calls an image build makes, over one authorized HTTP session.

REST with google-auth's ``AuthorizedSession`` rather than the google-cloud-compute client: a
build makes ten calls, and the generated client brings gRPC, proto-plus types and
google-api-core with it (tens of MB and a slow import) for what is JSON over HTTPS; google-auth
reads the same Application Default Credentials as Pulumi's Google provider and gcloud. The
base URL is a parameter, so tests point it at a local fake (tests/support/image_compute_fake.py)
over real HTTP. The shapes are the Compute Engine API v1 reference's (images, instances,
zoneOperations, globalOperations: cloud.google.com/compute/docs/reference/rest/v1).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

#: Google's endpoint of the Compute Engine API, version 1.
COMPUTE_URL = "https://compute.googleapis.com/compute/v1"
#: The environment variable naming another endpoint (a Private Service Connect one, or a
#: test's fake), for `clusterprint image build` and `pulumi up` alike.
API_VARIABLE = "CLUSTERPRINT_COMPUTE_API"
#: The OAuth scope the calls need (the Compute API accepts cloud-platform for all of them).
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
#: Seconds one HTTP request may take: an operation's ``wait`` answers within two minutes
#: (zoneOperations.wait: "returns ... or after two minutes").
REQUEST_TIMEOUT_S = 150.0
#: Statuses worth asking again: quota pressure and the API's own passing failures.
RETRIED = frozenset({429, 500, 502, 503, 504})
#: How often an idempotent call is asked in all before its error stands.
ATTEMPTS = 4


class Session(Protocol):
    """What the client needs of ``requests.Session`` (and so of ``AuthorizedSession``)."""

    def request(self, method: str, url: str, **kwargs: Any) -> Any: ...


class ComputeError(Exception):
    """A Google API refused a call, or a Compute operation ended in errors; ``status`` its
    HTTP status (0 where no answer came, or for an operation's own errors)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class CredentialsRefused(ComputeError):
    """The API refused the credentials (HTTP 401), or no token could be had for them (expired,
    revoked): every other call with them would fail alike, so a caller that makes many may
    stop at the first."""


class NoAnswer(ComputeError):
    """A call asked ATTEMPTS times that failed each time for a passing reason (no answer,
    429, 5xx): the API is down, out of reach or throttling the project, and every other call
    to it would wait out its retries alike, so a caller that makes many may stop at the
    first."""


class NoCredentials(Exception):
    """No Application Default Credentials on this machine: the message says how to get them."""


def authorized_session() -> tuple[Session, str | None]:
    """A session carrying the Application Default Credentials, and their project if any.

    google-auth is imported here, so commands that never call the API (``--dry-run``,
    ``plan``) never load it, and never probe the metadata server for credentials.
    """
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, project = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise NoCredentials(
            f"no Google credentials ({exc}); run `gcloud auth application-default login`"
            ) from None
    return AuthorizedSession(credentials), project


def compute_url() -> str:
    """The Compute API's endpoint: ``CLUSTERPRINT_COMPUTE_API`` when set, else Google's."""
    return os.environ.get(API_VARIABLE) or COMPUTE_URL


class RestApi:
    """One project's calls to one Google REST API: ``{base}/projects/{project}/{path}``, or
    ``{base}/projects/{project}:{verb}`` for a path that starts with ``:``; every answer is
    the API's JSON. The Compute calls below and preflight's Service Usage and Resource
    Manager calls (clusterprint/build/project_apis.py) share it."""

    def __init__(self, session: Session, project: str, base_url: str,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.session, self.project = session, project
        self.base_url = base_url.rstrip("/")
        self._sleep = sleep

    def _required(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        answer = self._call(method, path, **kwargs)
        assert answer is not None  # only missing_ok calls answer None
        return answer

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None, missing_ok: bool = False
              ) -> dict[str, Any] | None:
        """One call, asked again on a passing failure where asking twice does no harm (a
        read, a wait, a delete); 404 is None where ``missing_ok``."""
        import requests
        from google.auth import exceptions

        separator = "" if not path or path.startswith(":") else "/"
        url = f"{self.base_url}/projects/{self.project}{separator}{path}"
        # listManagedInstances is a POST that only reads.
        repeatable = (method in ("GET", "DELETE")
                      or path.endswith(("/wait", "/listManagedInstances")))
        attempt = 1
        while True:
            last = attempt == ATTEMPTS or not repeatable
            try:
                response = self.session.request(method, url, json=body, params=params,
                                                timeout=REQUEST_TIMEOUT_S)
            except (requests.RequestException, exceptions.TransportError) as exc:
                if last:
                    raise _error_of(0, repeatable)(f"{method} {url}: {exc}") from None
            except exceptions.GoogleAuthError as exc:  # expired or revoked credentials
                raise CredentialsRefused(f"{method} {url}: the credentials were refused: "
                                         f"{exc}") from None
            else:
                if response.status_code == 404 and missing_ok:
                    return None
                if response.status_code < 400:
                    return _json_object(response, f"{method} {url}")
                if last or response.status_code not in RETRIED:
                    raise _error_of(response.status_code, repeatable)(
                        f"{method} {url}: HTTP {response.status_code}: "
                        f"{_error_message(response)}", response.status_code)
            self._sleep(2.0 ** attempt)
            attempt += 1


class ComputeApi(RestApi):
    """The Compute calls of one project's image builds, of its preflight and of
    ``clusterprint status`` (reads only)."""

    def __init__(self, session: Session, project: str, base_url: str = COMPUTE_URL,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(session, project, base_url, sleep)

    # what preflight reads
    def region(self, region: str) -> dict[str, Any] | None:
        """The region, with its ``quotas`` (metric, limit, usage); None when there is none."""
        return self._call("GET", f"regions/{region}", missing_ok=True)

    def project_info(self) -> dict[str, Any]:
        """The project, with its project-wide ``quotas`` (CPUS_ALL_REGIONS and GPUS_ALL_REGIONS
        among them)."""
        return self._required("GET", "")

    def machine_type(self, zone: str, name: str) -> dict[str, Any] | None:
        """The machine type in ``zone`` (``guestCpus``); None where the zone has none."""
        return self._call("GET", f"zones/{zone}/machineTypes/{name}", missing_ok=True)

    def reservation(self, zone: str, name: str) -> dict[str, Any] | None:
        """The reservation ``name`` in ``zone``; None when there is none."""
        return self._call("GET", f"zones/{zone}/reservations/{name}", missing_ok=True)

    def image_from_family(self, family: str) -> dict[str, Any] | None:
        """The newest image of ``family`` that is not deprecated; None when there is none."""
        return self._call("GET", f"global/images/family/{family}", missing_ok=True)

    # images
    def image(self, name: str) -> dict[str, Any] | None:
        """The image ``name`` of the project; None when there is none."""
        return self._call("GET", f"global/images/{name}", missing_ok=True)

    def insert_image(self, body: dict[str, Any]) -> dict[str, Any]:
        """Start creating an image; the operation to wait for."""
        return self._required("POST", "global/images", body=body)

    # instances
    def instance(self, zone: str, name: str) -> dict[str, Any] | None:
        """The instance ``name`` in ``zone``; None when there is none."""
        return self._call("GET", f"zones/{zone}/instances/{name}", missing_ok=True)

    def insert_instance(self, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start creating an instance; the operation to wait for."""
        return self._required("POST", f"zones/{zone}/instances", body=body)

    def stop_instance(self, zone: str, name: str) -> dict[str, Any]:
        """Start stopping an instance; the operation to wait for."""
        return self._required("POST", f"zones/{zone}/instances/{name}/stop")

    def delete_instance(self, zone: str, name: str) -> dict[str, Any] | None:
        """Start deleting an instance (its auto-delete disks go with it); None when it is
        already gone."""
        return self._call("DELETE", f"zones/{zone}/instances/{name}", missing_ok=True)

    def guest_attribute(self, zone: str, name: str, key: str) -> str | None:
        """The guest attribute ``key`` (``namespace/key``) the VM wrote; None while it has
        written none (the API answers 404 for a key not set)."""
        answer = self._call("GET", f"zones/{zone}/instances/{name}/getGuestAttributes",
                            params={"variableKey": key}, missing_ok=True)
        return None if answer is None else answer.get("variableValue")

    def serial_output(self, zone: str, name: str, start: int) -> tuple[str, int]:
        """Serial port 1's text from byte ``start`` on, and where the next read starts (the
        API keeps the last MB: an older ``start`` gets what is left)."""
        answer = self._required("GET", f"zones/{zone}/instances/{name}/serialPort",
                                params={"port": 1, "start": start})
        return str(answer.get("contents", "")), int(answer.get("next", start))

    # what `clusterprint status` reads
    def groups(self, zone: str) -> list[dict[str, Any]]:
        """Every managed instance group of the zone (instanceGroupManagers.list)."""
        return self._pages("GET", f"zones/{zone}/instanceGroupManagers", "items")

    def managed_instances(self, zone: str, group: str) -> list[dict[str, Any]]:
        """The group's VMs, those still being created too (listManagedInstances)."""
        return self._pages("POST", f"zones/{zone}/instanceGroupManagers/{group}"
                                   "/listManagedInstances", "managedInstances", missing_ok=True)

    def group_errors(self, zone: str, group: str) -> list[dict[str, Any]]:
        """What the group's actions on its VMs failed with, a stockout or a quota among them
        (listErrors)."""
        return self._pages("GET", f"zones/{zone}/instanceGroupManagers/{group}/listErrors",
                           "items", missing_ok=True)

    def resize_requests(self, zone: str, group: str) -> list[dict[str, Any]]:
        """The group's resize requests, a flex-start group's way to get VMs
        (instanceGroupManagerResizeRequests.list)."""
        return self._pages("GET", f"zones/{zone}/instanceGroupManagers/{group}/resizeRequests",
                           "items", missing_ok=True)

    def guest_attributes(self, zone: str, name: str, namespace: str) -> dict[str, str]:
        """The guest attributes the VM wrote under ``namespace``, by key; none while it has
        written none there (404)."""
        answer = self._call("GET", f"zones/{zone}/instances/{name}/getGuestAttributes",
                            params={"queryPath": f"{namespace}/"}, missing_ok=True)
        items = object_of(object_of(answer).get("queryValue")).get("items")
        return {str(i.get("key")): str(i.get("value", "")) for i in
                (items if isinstance(items, list) else []) if isinstance(i, dict)}

    def _pages(self, method: str, path: str, key: str,
               missing_ok: bool = False) -> list[dict[str, Any]]:
        """Every item of a list, a page at a time; a page token seen twice is an error. Where
        ``missing_ok``, a 404 ends the list (a group's list, for a group deleted since the
        zone's list named it)."""
        items: list[dict[str, Any]] = []
        token, seen = "", set()
        while True:
            page = self._call(method, path, params={"pageToken": token} if token else None,
                              missing_ok=missing_ok)
            if page is None:
                return items
            items.extend(i for i in page.get(key) or [] if isinstance(i, dict))
            token = str(page.get("nextPageToken") or "")
            if not token:
                return items
            if token in seen:
                raise ComputeError(f"{method} {path}: nextPageToken {token[:40]} repeats")
            seen.add(token)

    # operations
    def wait(self, operation: dict[str, Any], timeout_s: float) -> None:
        """Wait until ``operation`` is DONE; ComputeError with its errors when it failed, or
        when it is not done within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        scope = _operation_scope(operation)
        while operation.get("status") != "DONE":
            if time.monotonic() >= deadline:
                raise ComputeError(f"operation {operation.get('name')} "
                                   f"({operation.get('operationType')}) not done after "
                                   f"{timeout_s:.0f}s")
            operation = self._required("POST", f"{scope}/operations/{operation['name']}/wait")
        errors = (operation.get("error") or {}).get("errors") or []
        if errors:
            raise ComputeError("; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors),
                               int(operation.get("httpErrorStatusCode") or 0))


def _error_of(status: int, repeatable: bool) -> type[ComputeError]:
    """What a call's last failure raises, by its status (0: no answer): CredentialsRefused for
    a 401, NoAnswer where a passing failure outlasted every try, else ComputeError."""
    if status == 401:
        return CredentialsRefused
    if repeatable and (status == 0 or status in RETRIED):
        return NoAnswer
    return ComputeError


def _operation_scope(operation: dict[str, Any]) -> str:
    """``zones/Z`` for a zonal operation, ``global`` for the others (an image's)."""
    zone = operation.get("zone")
    return f"zones/{zone.rsplit('/', 1)[-1]}" if zone else "global"


def object_of(value: Any) -> dict[str, Any]:
    """``value`` where an answer holds an object, else an empty one: a field of the wrong
    shape reads as absent, so a reader fails closed instead of crashing on it."""
    return value if isinstance(value, dict) else {}


def number_of(value: Any) -> float | None:
    """A figure as an answer writes it (a number, or a string of one: the APIs write int64
    fields as strings); None for anything else, "NaN" and "Infinity" too."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _json_object(response: Any, call: str) -> dict[str, Any]:
    """A success's body as the JSON object every answer of these APIs is (``{}`` for none);
    anything else (a proxy's sign-in page, a cut-off body, a bare list) is a ComputeError,
    so callers that read fields of it report one line instead of crashing on it."""
    if not response.content:
        return {}
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ComputeError(f"{call}: HTTP {response.status_code} but not a JSON object: "
                           f"{response.text[:200]}", response.status_code)
    return answer


def _error_message(response: Any) -> str:
    """The API's own message (``{"error": {"message": ...}}``), else the start of the body."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
