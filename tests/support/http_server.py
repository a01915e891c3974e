"""A local HTTP server on 127.0.0.1 for the http_request tool's tests: scripted answers by path, and every request it received and answered."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest


class Handler(BaseHTTPRequestHandler):
    """Answers by path: /json echoes the request, /text, /status/<code> (a 429 with
    Retry-After), /slow (answers after 2 s), /hold (answers once the test sets ``release``,
    or after 60 s), /redirect. ``received`` lists each request as it arrives; ``answered``
    the same records once their answer is sent."""

    received: list = []
    answered: list = []
    # /hold's answer waits for this: a client's read timeout then fires however long the
    # machine keeps the client from a core (a fixed delay such as /slow's could pass first).
    release = threading.Event()

    def log_message(self, *args):  # keep test output clean
        pass

    def _handle(self):
        url = urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        record = {"method": self.command, "path": url.path, "headers": dict(self.headers), "body": body}
        Handler.received.append(record)
        try:
            self._answer(url, body)
        finally:
            Handler.answered.append(record)

    def _answer(self, url, body):
        if url.path == "/json":
            payload = {
                "method": self.command,
                "query": parse_qs(url.query),
                "body": json.loads(body) if body else None,
                "idempotency_key": self.headers.get("Idempotency-Key"),
            }
            self._send(200, json.dumps(payload).encode(), "application/json", {"X-Request-Id": "abc", "X-Noise": "1"})
        elif url.path == "/text":
            self._send(200, ("é" * 50).encode(), "text/plain; charset=utf-8")
        elif url.path.startswith("/status/"):
            status = int(url.path.rsplit("/", 1)[1])
            extra = {"Retry-After": parse_qs(url.query).get("retry_after", ["7"])[0]} if status == 429 else {}
            self._send(status, b'{"error": "nope"}', "application/json", extra)
        elif url.path == "/slow":
            time.sleep(2)  # slower than the timeouts the tests set
            self._send(200, b"late", "text/plain")
        elif url.path == "/hold":
            Handler.release.wait(60)
            self._send(200, b"released", "text/plain")
        elif url.path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": "/json"})
        else:
            self._send(404, b"not found", "text/plain")

    def _send(self, status, body, content_type, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _handle


@pytest.fixture
def server(settings):
    """A local HTTP server on 127.0.0.1, which tools may reach only because the
    allow-list names it (loopback is refused by default)."""
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    Handler.received, Handler.answered, Handler.release = [], [], threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    Handler.release.set()
    httpd.shutdown()
    httpd.server_close()
