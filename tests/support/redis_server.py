"""A private ``redis-server`` on a free port of its own, for tests that kill and restart Redis.

Never the shared Redis on 6379 (TRAPS.md): the server is started with ``--save ""
--appendonly no`` (a restart loses everything, as a crashed cache-only Redis does), on a
port no one listened on a moment before, and :meth:`RedisServer.start` checks that the
server answering on it is the process it started. The ``private_redis`` fixture kills
it at teardown whatever happened in the test.
"""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# A ceiling for a loaded 2-core machine, not an expected time: every wait polls.
START_CEILING = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One private redis-server: :meth:`start`, :meth:`kill` (SIGKILL, a crash), :meth:`start`
    again on the same port (an empty Redis: nothing was saved)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"redis-{self.port}.log"

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> RedisServer:
        """Start the server and wait until it answers; fail if another process answers."""
        import redis

        if self.alive:
            raise RuntimeError(f"redis-server on {self.port} already runs")
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                raise RuntimeError(f"port {self.port} is taken: not ours to use")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No retries inside a call (redis-py's default backs off for seconds): this loop polls.
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0))
        deadline = time.monotonic() + START_CEILING
        try:
            while True:
                try:
                    pid = int(client.info("server")["process_id"])
                    break
                except redis.RedisError:
                    if not self.alive or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server on {self.port} did not start:\n{self.log_path.read_text(errors='replace')[-2000:]}") from None
                    time.sleep(0.02)
        finally:
            client.close()
        if pid != self.proc.pid:
            self.kill()
            raise RuntimeError(f"port {self.port}: the server answering is pid {pid}, not the one started ({self.proc.pid})")
        return self

    def kill(self) -> None:
        """SIGKILL the server (a crash: no shutdown, clients see the connection drop) and wait."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A started private redis-server (see the module docstring); killed at teardown."""
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.kill()
