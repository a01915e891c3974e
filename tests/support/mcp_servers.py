"""Real MCP servers for the tests (tests/support/mcp_server_script.py): the stdio command line, a Streamable HTTP server in a subprocess on a random port, and what a server saw."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loopback import accepts, free_port
from tests.support.bounded import wait_until

SCRIPT = str(Path(__file__).with_name("mcp_server_script.py"))
# The stdio command the tests allow (BALLAST_MCP_STDIO_COMMANDS): this interpreter, which has the SDK.
PYTHON = sys.executable


def stdio_args(log: Path) -> list[str]:
    """The arguments of ``PYTHON`` that start the test server on stdio, logging to ``log``."""
    return ["-P", SCRIPT, "stdio", str(log)]


def seen(log: Path) -> list[dict[str, Any]]:
    """The calls the server recorded, oldest first."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@dataclass
class HttpServer:
    """A running Streamable HTTP test server: ``url`` (its MCP endpoint), ``port``, ``log``."""

    process: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and wait until its port refuses connections.
        SIGKILL after one second: on SIGTERM uvicorn waits for the requests in flight, and
        a test's hung call (a tool that sleeps a minute) would hold the stop for as long."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(1)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        wait_until(lambda: not accepts(self.port), 10, f"port {self.port} to close")


@contextmanager
def http_server(log: Path) -> Iterator[HttpServer]:
    """Start the test server on Streamable HTTP on a random port of 20000-40000 and wait
    until it accepts connections; stop it after the block."""
    port = free_port()
    process = subprocess.Popen([PYTHON, "-P", SCRIPT, "http", str(port), str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = HttpServer(process, port, log)
    try:
        wait_until(lambda: process.poll() is not None or accepts(port), 60, f"the MCP test server on port {port}")
        assert process.poll() is None, f"the MCP test server exited with {process.returncode}"
        yield server
    finally:
        server.stop()
