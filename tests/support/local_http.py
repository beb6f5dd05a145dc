"""A local HTTP server for the tests' fakes of Google's APIs, quiet and on a free port.

The Compute API fake and the metadata server fake differ in what they answer, not in how
they listen: each hands every request, with its verb, to one function.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[BaseHTTPRequestHandler, str], None]


def serve(answer: Answer, address: tuple[str, int] = ("127.0.0.1", 0)) -> ThreadingHTTPServer:
    """Serve GET, POST and DELETE on ``address`` (127.0.0.1, a free port) from a daemon
    thread, each request to ``answer``.

    Request threads are daemons too, so a request a fake holds open (a metadata wait)
    never keeps the test process alive; ``shutdown()`` and ``server_close()`` stop it.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            answer(self, "GET")

        def do_POST(self) -> None:  # noqa: N802
            answer(self, "POST")

        def do_DELETE(self) -> None:  # noqa: N802
            answer(self, "DELETE")

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def send_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    """Answer ``body`` as JSON, as Google's REST APIs do."""
    send_bytes(handler, status, json.dumps(body).encode())


def send_bytes(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    """Answer ``data`` (labelled JSON, whatever it holds: a fake may answer what the API
    should not)."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    with contextlib.suppress(OSError):  # the client gave up waiting on a slow answer
        handler.wfile.write(data)
