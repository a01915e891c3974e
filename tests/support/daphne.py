"""A real daphne serving ballast.asgi on the test database, and a real WebSocket client
(``websockets``) for tests that need the wire: close codes as a client receives them, and
the server's own log."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.support.cluster import test_database_url

ROOT = Path(__file__).resolve().parents[2]
# Ceilings on a loaded machine; the waits end as soon as their condition holds.
START_TIMEOUT_S = 90.0
CLOSE_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DaphneServer:
    """``python -m daphne`` on a free port in its own process group; its stderr (the
    server's log, tracebacks included) goes to ``log_path``."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DaphneServer:
        env = {**os.environ, "DATABASE_URL": test_database_url(), "BALLAST_DEBUG": "1", "BALLAST_LOG_LEVEL": "INFO"}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ballast.asgi:application"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
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
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


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
