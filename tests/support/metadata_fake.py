"""A fake metadata server on 127.0.0.1 that waits for changes as Compute Engine's does.

It serves ``/computeMetadata/v1/instance/attributes/KEY`` with the value's ETag, only
with ``Metadata-Flavor: Google`` (else 403). ``?wait_for_change=true&last_etag=E&
timeout_sec=N`` answers at once when the value's ETag is not E, else when the value
changes or after N seconds with the value as it is. A key not set is 404. A test can
queue failures (HTTP statuses, or ``"drop"``: the connection closed without an answer)
that the next requests get instead of the value, and reads every request made.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.support.local_http import serve

PREFIX = "/computeMetadata/v1/instance/attributes/"


def etag_of(value: str) -> str:
    """An ETag as the server gives one: the same for the same value."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


@dataclass
class FakeMetadata:
    """Instance attributes behind a local server."""

    values: dict[str, str] = field(default_factory=dict)
    #: The next requests' answers instead of the value: HTTP statuses or "drop".
    failures: list[int | str] = field(default_factory=list)
    #: Every request: its path and query, and when it arrived (time.monotonic()).
    requests: list[tuple[str, dict[str, list[str]], float]] = field(default_factory=list)
    #: Where it listens: 127.0.0.1 on a free port, or (in a network namespace of a test's own)
    #: the real server's address, 169.254.169.254 port 80.
    address: tuple[str, int] = ("127.0.0.1", 0)

    def __post_init__(self) -> None:
        self.changed = threading.Condition()
        self.server = serve(self._answer, self.address)

    @property
    def url(self) -> str:
        """What the program takes as ``--metadata-url``."""
        return f"http://127.0.0.1:{self.server.server_port}{PREFIX}"

    def set(self, key: str, value: str) -> None:
        """Set (or change) a value, as ``pulumi up`` updating the VM's metadata does."""
        with self.changed:
            self.values[key] = value
            self.changed.notify_all()

    def waits(self) -> list[dict[str, list[str]]]:
        """The queries of the requests that asked to wait for a change."""
        return [query for _, query, _ in self.requests if "wait_for_change" in query]

    def stop(self) -> None:
        """Stop serving; waiting requests get their answer first."""
        with self.changed:
            self.changed.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, verb: str) -> None:
        if verb != "GET":  # the metadata server's attributes are read-only
            handler.send_error(405)
            return
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        self.requests.append((parts.path, query, time.monotonic()))
        if handler.headers.get("Metadata-Flavor") != "Google":
            return self._send(handler, 403, "Missing Metadata-Flavor:Google header.")
        if self.failures:
            failure = self.failures.pop(0)
            if failure == "drop":
                handler.close_connection = True
                return None
            return self._send(handler, int(failure), "failing as the test asked")
        # An attribute by its key; any other path (the token's) by the whole path.
        key = parts.path.removeprefix(PREFIX)
        if query.get("wait_for_change") == ["true"]:
            last = query.get("last_etag", [""])[0]
            deadline = time.monotonic() + float(query.get("timeout_sec", ["3600"])[0])
            with self.changed:
                while (key in self.values and etag_of(self.values[key]) == last
                       and time.monotonic() < deadline):
                    self.changed.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        if key not in self.values:
            return self._send(handler, 404, "not found")
        return self._send(handler, 200, self.values[key], etag_of(self.values[key]))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: str,
              etag: str | None = None) -> None:
        data = body.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/text")
        handler.send_header("Content-Length", str(len(data)))
        if etag:
            handler.send_header("ETag", etag)
        handler.end_headers()
        try:
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (stopped)
            handler.close_connection = True
