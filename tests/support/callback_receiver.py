"""A real HTTP receiver of completion callbacks on 127.0.0.1 (a ThreadingHTTPServer in a thread): scripted answers, every request recorded, and a hold to catch a sender mid-delivery."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Receiver:
    """What the server got and how it answers: ``answers`` is a list of status codes used
    in order (then 200); ``hold`` set: each request waits for ``release`` (or 120 s) before
    it is answered, after it is recorded in ``received``."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.answers: list[int] = []
        self.hold = False
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.url = ""

    def next_status(self) -> int:
        with self.lock:
            return self.answers.pop(0) if self.answers else 200

    def ids(self) -> list[str]:
        """The ``webhook-id`` of each request, in arrival order."""
        return [r["headers"].get("webhook-id", "") for r in self.received]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            receiver.received.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
            if receiver.hold:
                receiver.release.wait(120)
            code = receiver.next_status()
            payload = b'{"ok": true}' if code < 300 else b'{"error": "receiver says no"}'
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the sender is gone (a killed worker)

    return Handler


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1, which the outbound guard is told to allow (as
    the http tool's tests do); stopped at teardown."""
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    state = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/ballast"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
