"""The chaos suite's worker hosts (a real ``manage.py qcluster`` in its own UTS and network namespace) and its web app with an API poller.

A host's process tree is its qcluster: the main process (``ip netns exec`` and
``unshare`` exec into it, so the Popen pid is the qcluster main pid) leads its own
session, so its sentinel, monitor, pusher and workers share its process group. SIGKILL
goes to the group (TRAPS: killing the main process alone orphans its workers); the
graceful stop's SIGTERM goes to the main pid only (TRAPS: a SIGTERM to the group is
handled too, but a rolling restart is what an operator's supervisor does).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.infra import FAKETIME_LIB, Layout, kill_session, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_READY = "worker ready"  # runs.engine.cluster.WORKER_READY: a worker logs it when it takes tasks


class Host:
    """One worker host ``i``: namespace ``layout.host_name(i)``, same host name."""

    def __init__(self, layout: Layout, i: int, *, env: dict[str, str], workdir: Path, workers: int):
        self.layout = layout
        self.i = i
        self.name = layout.host_name(i)
        self.env = env
        self.workers = workers
        self.log_path = workdir / f"host-{self.name}.log"
        self.proc: subprocess.Popen | None = None
        self.skew: str | None = None  # faketime offset of the running qcluster ("+60s")
        self.starts = 0
        self.expected_exit = False  # set while the suite stops it on purpose

    def start(self, *, skew: str | None = None) -> None:
        """Start the qcluster (under libfaketime with offset ``skew`` when given); returns at once."""
        if self.alive:
            raise RuntimeError(f"host {self.name} is already running")
        env = dict(self.env)
        if skew:
            # The library directly, not the faketime wrapper (which forks and would stand
            # between the suite and the qcluster main pid).
            env.update({"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": skew})
        self.skew = skew
        self.starts += 1
        self.expected_exit = False
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts} skew={skew} at {time.strftime('%H:%M:%S')} =====\n".encode())
        log.flush()
        try:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.name, "unshare", "--uts", "--", "sh", "-c",
                 f'hostname {self.name} && exec "$@"', "sh", sys.executable, "manage.py", "qcluster"],
                cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until its Worker row exists and each worker logged that it takes tasks."""
        from runs.models import Worker

        def ready() -> bool:
            if not self.alive:
                raise RuntimeError(f"host {self.name} exited (rc={self.proc.returncode}) while starting\n{self.log_tail()}")
            text = self.log_path.read_text(errors="replace").rsplit("===== start #", 1)[-1]
            return text.count(WORKER_READY) >= self.workers and Worker.objects.filter(host=self.name, pid=self.pid).exists()

        wait_for(ready, timeout, f"host {self.name} to be ready", poll=0.1)

    def kill(self) -> None:
        """SIGKILL the host's whole process tree and wait until none of it is left."""
        if self.proc is None:
            return
        from tests.support.engine import process_group_members

        self.expected_exit = True
        pgid = self.proc.pid
        kill_session(self.proc)
        deadline = time.monotonic() + 30
        while process_group_members(pgid) and time.monotonic() < deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.02)

    def terminate(self, timeout: float = 30.0) -> None:
        """Graceful stop: SIGTERM to the qcluster main pid only; wait for the tree to exit
        (SIGKILL after ``timeout``: the qcluster promises to be gone within its grace)."""
        if self.proc is None or not self.alive:
            return
        from tests.support.engine import process_group_members

        self.expected_exit = True
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while process_group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.kill()

    def stop_tree(self) -> None:
        """SIGSTOP the host's whole process tree (its process group: main process,
        sentinel, monitor, pusher, workers), as a host frozen by its hypervisor or a
        debugger would be; :meth:`continue_tree` resumes it."""
        if self.proc is not None and self.alive:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def continue_tree(self) -> None:
        """SIGCONT the host's process group (undoes :meth:`stop_tree`; harmless otherwise)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def log_size(self) -> int:
        """The log's size in bytes now (0 before the first start)."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset: int) -> str:
        """What the log got after ``offset`` bytes (:meth:`log_size`)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                return fh.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


class WebApp:
    """``manage.py runserver`` (no reloader) in the root namespace, on loopback."""

    def __init__(self, layout: Layout, *, env: dict[str, str], workdir: Path):
        self.layout = layout
        self.env = env
        self.log_path = workdir / "web.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.layout.web_port}"

    def start(self) -> None:
        import httpx

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.layout.web_port}", "--noreload", "--skip-checks"],
                cwd=REPO_ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def up() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the web app exited: {self.log_path.read_text(errors='replace')[-3000:]}")
            try:
                httpx.get(self.base_url + "/api/v1/", timeout=2, trust_env=False)
                return True
            except httpx.HTTPError:
                return False

        wait_for(up, 120, "the web app to answer")

    def stop(self) -> None:
        if self.proc is not None:
            kill_session(self.proc, signal.SIGTERM, timeout=10)


@dataclass
class ApiPoller:
    """Polls the REST API with a token every ``interval`` seconds in a thread; keeps
    ``(time.time(), status)`` per request (status 0: no answer)."""

    base_url: str
    token: str
    interval: float = 0.25
    answers: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="api-poller", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import httpx

        with httpx.Client(base_url=self.base_url, headers={"Authorization": f"Token {self.token}"}, timeout=10, trust_env=False) as client:
            while not self._stop.is_set():
                began = time.time()
                try:
                    status = client.get("/api/v1/runs/", params={"page_size": 5}).status_code
                except httpx.HTTPError:
                    status = 0
                self.answers.append((began, status))
                self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=15)

    def between(self, start: float, end: float) -> list[int]:
        """Statuses of the requests sent between ``start`` and ``end`` (time.time())."""
        return [s for t, s in list(self.answers) if start <= t <= end]
