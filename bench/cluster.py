"""``manage.py qcluster`` subprocesses for the benchmarks, each in its own process group.

The qcluster main process, its sentinel, monitor, pusher and forked workers share one
process group; :meth:`Cluster.kill` SIGKILLs the whole group (killing only the top
process leaves its workers running as orphans, TRAPS.md). Use clusters as context
managers: the group is killed on exit whatever happened, and an ``atexit`` hook plus
SIGTERM/SIGINT handlers kill any group still alive, so no qcluster outlives a benchmark.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.core import REPO, WORK_DIR, child_env
from runs.engine.workers import process_group_members

_LIVE_GROUPS: set[int] = set()

# Runs manage.py qcluster with socket.gethostname() patched, so the cluster's worker ids
# name another host: recovery cannot check such an owner's pid and must wait for its
# lease to expire, as a worker on another machine would.
_OTHER_HOST_BOOT = (
    "import socket, runpy, sys; socket.gethostname = lambda: 'bench-other-host'; "
    "sys.argv = ['manage.py', 'qcluster']; runpy.run_path('manage.py', run_name='__main__')"
)


group_members = process_group_members


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` in KiB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def kill_group(pgid: int, timeout: float = 10.0) -> None:
    """SIGKILL every process of the group and wait until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not group_members(pgid):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"process group {pgid} still alive after SIGKILL: {group_members(pgid)}")
        time.sleep(0.02)
    _LIVE_GROUPS.discard(pgid)


def _kill_all() -> None:
    for pgid in list(_LIVE_GROUPS):
        try:
            kill_group(pgid, timeout=5)
        except Exception:
            pass


atexit.register(_kill_all)


def _on_signal(signum, frame):  # pragma: no cover - interactive interruption
    _kill_all()
    raise SystemExit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGINT):
    try:
        signal.signal(_sig, _on_signal)
    except ValueError:  # not the main thread
        pass


class Cluster:
    """One ``manage.py qcluster`` on the benchmark database, in its own process group."""

    def __init__(
        self,
        name: str,
        db: str,
        *,
        workers: int = 2,
        lease_seconds: float | None = None,
        recovery_interval: float | None = None,
        q_name: str | None = None,
        fault: str | None = None,
        other_host: bool = False,
        extra_env: dict[str, str] | None = None,
    ):
        self.name = name
        self.db = db
        self.workers = workers
        self.lease_seconds = lease_seconds
        self.recovery_interval = recovery_interval
        self.q_name = q_name
        self.fault = fault
        self.other_host = other_host
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.started_at: float | None = None  # time.time() just before the process was spawned
        WORK_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = WORK_DIR / f"cluster-{db}-{name}.log"
        self.fault_file = WORK_DIR / f"cluster-{db}-{name}-fault.jsonl"

    def env(self) -> dict[str, str]:
        extra = {"BALLAST_WORKERS": str(self.workers)}
        if self.lease_seconds is not None:
            extra["BALLAST_LEASE_SECONDS"] = str(self.lease_seconds)
        if self.recovery_interval is not None:
            extra["BALLAST_RECOVERY_INTERVAL"] = str(self.recovery_interval)
        if self.q_name:
            extra["BALLAST_Q_NAME"] = self.q_name
        if self.fault:
            extra["BALLAST_FAULT"] = self.fault
            extra["BALLAST_FAULT_FILE"] = str(self.fault_file)
        extra.update(self.extra_env)
        return child_env(self.db, **extra)

    def command(self) -> list[str]:
        return [sys.executable, "-c", _OTHER_HOST_BOOT] if self.other_host else [sys.executable, "manage.py", "qcluster"]

    def start(self) -> Cluster:
        if self.fault_file.exists():
            self.fault_file.unlink()
        cmd = self.command()
        log = open(self.log_path, "ab")
        try:
            self.started_at = time.time()
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        self.pgid = self.proc.pid
        _LIVE_GROUPS.add(self.pgid)
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group and wait until it is gone."""
        if self.pgid is None:
            return
        kill_group(self.pgid)
        if self.proc is not None:
            self.proc.wait(timeout=10)
        self.pgid = None

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> tuple[int, int]:
        """(processes, total resident KiB) of the cluster's process group."""
        members = group_members(self.pgid) if self.pgid else []
        return len(members), sum(rss_kib(p) for p in members)

    def wait_ready(self, timeout: float = 60.0):
        """Wait until the cluster's supervisor registered its Worker row (its start-up
        recovery pass follows at once); returns the row."""
        from runs.models import Worker

        row = None

        def ready() -> bool:
            nonlocal row
            row = Worker.objects.filter(pid=self.proc.pid).first()
            return row is not None

        wait_until(ready, timeout, f"cluster {self.name} to register", cluster=self)
        return row

    def wait_for_fault(self, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until a worker reported reaching the armed fault point (it now hangs)."""

        def hit() -> bool:
            return self.fault_file.exists() and bool(self.fault_file.read_text().strip())

        wait_until(hit, timeout, f"cluster {self.name} to reach fault {self.fault}", cluster=self, poll=0.01)
        return json.loads(self.fault_file.read_text().splitlines()[0])

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, *, cluster: Cluster | None = None, poll: float = 0.02) -> None:
    """Poll ``predicate`` until it holds; on timeout raise with the cluster's log tail."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if cluster is not None and not cluster.alive:
            raise RuntimeError(f"cluster {cluster.name} exited while waiting for {what}:\n{cluster.log_tail()}")
        if time.monotonic() > deadline:
            tail = f"\n{cluster.log_tail()}" if cluster else ""
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}{tail}")
        time.sleep(poll)


class WebServer(Cluster):
    """daphne serving ballast.asgi (HTTP + WebSockets) on 127.0.0.1:``port``, in its own
    process group like a cluster."""

    def __init__(self, name: str, db: str, port: int):
        super().__init__(name, db)
        self.port = port

    def command(self) -> list[str]:
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ballast.asgi:application"]

    def wait_ready(self, timeout: float = 60.0) -> None:
        import socket

        def accepting() -> bool:
            with socket.socket() as sock:
                sock.settimeout(0.2)
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(accepting, timeout, f"daphne on port {self.port}", cluster=self, poll=0.05)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
