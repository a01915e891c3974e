"""``manage.py serve``: run the web server (daphne) and a worker (qcluster) together, supervised.

Each child runs in its own session (so its own process group): a terminal's Ctrl-C or a
signal to serve's group reaches serve alone, which then stops both children in order.
A child that dies on its own is started again after a backoff that doubles with each
quick death (1 s, 2 s, 4 s ... up to 30 s; back to 1 s once it has run for 30 s), and
the other child stays up meanwhile. Every death and restart is logged ("ballast.serve").
SIGTERM or SIGINT to serve stops both: the worker gets BALLAST_STOP_GRACE_SECONDS to
finish or hand back its steps (runs/engine/cluster.py), the web server a few seconds;
then whatever is left of either process group is killed. If serve itself is killed, the
children get SIGTERM from the kernel (Linux: PR_SET_PDEATHSIG) and stop the same way.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core.metrics import clean_dead_processes
from runs.management.commands.create_login import login_hint

log = logging.getLogger("ballast.serve")

BACKOFF_FIRST = 1.0  # seconds before the first restart of a child that died
BACKOFF_MAX = 30.0
STABLE_AFTER = 30.0  # a child that ran this long counts as healthy again: the backoff starts over
# daphne closes its sockets and cancels open requests within milliseconds of SIGTERM; the
# rest of this allowance is the interpreter's exit, kept short by manage.py (gc.freeze at
# exit), so it holds on a loaded machine without being longer.
WEB_STOP_SECONDS = 5.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask the kernel to SIGTERM this child when serve dies (Linux only; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class Child:
    """One supervised child: its command, its process, and its restart bookkeeping."""

    name: str
    argv: list[str]
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    restarts: int = field(default=0)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, start_new_session=True, preexec_fn=_die_with_parent)
        self.started_at = time.monotonic()
        self.restart_at = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to this child's whole process group (its session leader's pid)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass


def ready_lines(bind: str) -> list[str]:
    """What serve prints once web and worker started: where Ballast is and, last (it
    closes make up's output, after npm's and vite's), how to sign in."""
    return [f"Ballast is up: http://{bind}/  (admin: http://{bind}/admin/) — Ctrl-C stops web and worker", login_hint()]


def backoff_seconds(quick_deaths: int) -> float:
    """Seconds to wait before restarting a child after its ``quick_deaths``-th quick death
    in a row (1 -> 1 s, 2 -> 2 s, 3 -> 4 s, ..., at most BACKOFF_MAX)."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, quick_deaths - 1))


class Command(BaseCommand):
    help = "Start web (daphne, HTTP + WebSockets) and worker (django-q2 qcluster) together, restarting either if it dies."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default=os.environ.get("BALLAST_BIND", "127.0.0.1:8000"))

    def handle(self, *args: Any, **opts: Any) -> None:
        metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # set by settings for serve
        if metrics_dir:
            # The host's metric files of an earlier start (dead processes): not added to
            # this one's. Web and worker then share the directory.
            clean_dead_processes(metrics_dir)
        manage = [sys.executable, "manage.py"]
        children = [Child("web", [*manage, "runserver", opts["bind"], "--noreload"]), Child("worker", [*manage, "qcluster"])]
        stopping: list[str] = []

        def stop(signum: int, frame: FrameType | None) -> None:
            stopping.append(signal.Signals(signum).name)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for child in children:
            child.start()
        for line in ready_lines(opts["bind"]):
            self.stdout.write(line)
        self.stdout.flush()
        while not stopping:
            now = time.monotonic()
            for child in children:
                if child.restart_at is None and not child.alive:
                    assert child.proc is not None
                    ran = now - child.started_at
                    child.quick_deaths = 1 if ran >= STABLE_AFTER else child.quick_deaths + 1
                    delay = backoff_seconds(child.quick_deaths)
                    child.restart_at = now + delay
                    child.signal_group(signal.SIGKILL)  # what a dead qcluster main leaves behind
                    log.error("%s (pid %s) exited with code %s after %.1fs; restarting it in %gs", child.name, child.proc.pid, child.proc.returncode, ran, delay)
                elif child.restart_at is not None and now >= child.restart_at:
                    child.restarts += 1
                    child.start()
                    assert child.proc is not None
                    log.warning("%s restarted (pid %s, restart %d)", child.name, child.proc.pid, child.restarts)
            time.sleep(0.2)
        log.info("%s: stopping web and worker", stopping[0])
        self._stop(children)
        sys.exit(0)

    def _stop(self, children: list[Child]) -> None:
        """SIGTERM both children (the worker's main process and group alike stop it
        gracefully), wait for them within their grace periods, then kill what is left."""
        for child in children:
            if child.alive:
                child.signal_group(signal.SIGTERM)
        limits = {"web": WEB_STOP_SECONDS, "worker": settings.BALLAST_STOP_GRACE_SECONDS + 2}
        began = time.monotonic()
        for child in children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, limits[child.name] - (time.monotonic() - began)))
            except subprocess.TimeoutExpired:
                log.error("%s did not stop within %gs; killing it", child.name, limits[child.name])
            child.signal_group(signal.SIGKILL)  # no orphans, ever
            if child.proc.poll() is None:
                child.proc.wait(timeout=5)
