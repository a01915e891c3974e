"""A real daphne on the test database, for the browser tests' live pages (the ``daphne`` fixture) and for tests of the wire (close codes a real client receives, the server's log)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.support.cluster import test_database_url

ROOT = Path(__file__).resolve().parents[2]
# Ceilings on a loaded machine; the waits end as soon as their condition holds.
START_TIMEOUT_S = 90.0
CLOSE_TIMEOUT_S = 30.0
# The live pages of the browser tests: the embedded poller quick, the safety poll slow (with
# Redis the page must be served by the push path, not the safety poll), and the test tools
# known (runs started from the page are validated in this process).
LIVE_PAGE_ENV = {
    "BALLAST_LOG_LEVEL": "WARNING",
    "BALLAST_LIVE_POLL_SECONDS": "0.2",
    "BALLAST_LIVE_SAFETY_SECONDS": "120",
    "BALLAST_EXTRA_TOOL_MODULES": "tests.support.tools",
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Daphne:
    """``python -m daphne`` serving ballast.asgi on the test database (``BALLAST_DEBUG=1``,
    log level INFO unless ``env`` says otherwise; ``env`` adds or overrides variables) on a
    free port, in its own process group. Its output (the server's log, tracebacks included)
    goes to ``log_path``, or nowhere without one."""

    def __init__(self, log_path: Path | None = None, **env: str) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Daphne:
        """Start the server and return once it accepts connections (fails if it exits first)."""
        env = {**os.environ, "DATABASE_URL": test_database_url(), "BALLAST_DEBUG": "1", "BALLAST_LOG_LEVEL": "INFO", **self.env}
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ballast.asgi:application"]
        if self.log_path is None:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        else:
            with self.log_path.open("wb") as log:
                self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                sock.settimeout(0.2)
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            assert self.proc.poll() is None, f"daphne exited: {self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"daphne did not accept connections within {START_TIMEOUT_S} s")

    def log(self) -> str:
        """What the server wrote to ``log_path`` so far ("" without one)."""
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    def stop(self) -> None:
        """SIGKILL the server's process group (the socket drops at once) and reap it."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


@pytest.fixture
def daphne(transactional_db: None) -> Iterator[Daphne]:
    """A daphne for the browser tests' live pages (:data:`LIVE_PAGE_ENV`) on a free port;
    killed (its process group) at teardown."""
    server = Daphne(**LIVE_PAGE_ENV).start()
    yield server
    server.stop()


def close_code_after_sending(port: int, path: str, payload: bytes | str) -> tuple[int | None, list[Any]]:
    """Open ``ws://127.0.0.1:<port><path>`` with a real client (``websockets``), send
    ``payload`` as one frame (binary for bytes, text for str) and read until the server
    closes: returns (the close code the client received, the messages before it)."""
    received: list[Any] = []
    with connect(f"ws://127.0.0.1:{port}{path}", open_timeout=CLOSE_TIMEOUT_S, close_timeout=CLOSE_TIMEOUT_S) as ws:
        ws.send(payload)
        try:
            while True:
                received.append(ws.recv(timeout=CLOSE_TIMEOUT_S))
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd is not None else None), received
