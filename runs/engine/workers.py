"""Worker identity (``host:pid:start``) and liveness of a lease owner on this host, through psutil.

Recovery takes a lease back at once when its owner is a dead process on this host, so
"dead" must be certain: a process that does not exist, has exited (a zombie not yet
reaped holds nothing any more), or whose pid now belongs to a process started at another
time. When liveness cannot be determined (no permission, no process table, an unexpected
error), the owner counts as alive and its lease simply runs out.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from functools import lru_cache

import psutil

HOST = socket.gethostname()
log = logging.getLogger("ballast.engine")

_EXITED = {psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD}
try:
    _CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # no sysconf (Windows): any fixed unit will do
    _CLOCK_TICKS = 100


class _Unknown(Exception):
    """Liveness of a process cannot be determined here."""


def _start_mark(pid: int) -> str | None:
    """The start time of ``pid`` as a stable text, or None when no such process runs (it
    never existed, or it exited). Raises _Unknown when the process table cannot tell.

    The text is clock ticks since boot, as /proc/PID/stat field 22 gives it on Linux (the
    form worker ids always had, so ids written before this module used psutil still
    match)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() in _EXITED:
            return None
        return str(round((proc.create_time() - psutil.boot_time()) * _CLOCK_TICKS))
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except Exception as exc:  # AccessDenied, no /proc, an unsupported platform: cannot tell
        raise _Unknown(f"{type(exc).__name__}: {exc}") from exc


def worker_id(pid: int) -> str:
    """The worker id of process ``pid`` on this host: ``host:pid:start`` (start ``0`` when
    the start time cannot be read; such an owner is then judged by its pid alone)."""
    try:
        start = _start_mark(pid)
    except _Unknown:
        start = None
    return f"{HOST}:{pid}:{start or '0'}"


@lru_cache(maxsize=8)
def _identity(pid: int) -> str:
    return worker_id(pid)


def current_worker() -> str:
    """This process's worker id, ``host:pid:start``; unique across pid reuse."""
    return _identity(os.getpid())


_stopping = threading.Event()


def note_stop() -> None:
    """Record that this worker process was asked to stop (its cluster is stopping)."""
    _stopping.set()


def stop_requested() -> bool:
    """Whether this worker process was asked to stop: it finishes the step in hand and
    hands back the successors its commits keep for it instead of running them."""
    return _stopping.is_set()


def owner_is_alive_here(owner: str) -> bool:
    """True only when ``owner`` certainly names a process on this host that runs now (the
    same pid and start time); False for other hosts, malformed owners, dead processes and
    processes whose liveness cannot be determined. Recovery gives such an owner's lapsed
    lease a grace period (runs.engine.store.recovery_queries.lease_lapsed)."""
    try:
        host, pid_text, start = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != HOST or start == "0":
        return False
    try:
        return _start_mark(pid) == start
    except _Unknown:
        return False


def owner_is_dead(owner: str) -> bool:
    """True only when ``owner`` certainly names a process on this host that is gone.

    Gone: no such pid, exited (zombie), or the pid was reused by another process (its
    start time differs). Owners on other hosts, malformed owners and owners whose
    liveness cannot be determined are never declared dead here: their leases expire.
    """
    try:
        host, pid_text, start = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != HOST:
        return False
    try:
        actual = _start_mark(pid)
    except _Unknown as exc:
        log.debug("liveness of %s unknown (%s): treated as alive", owner, exc)
        return False
    return actual is None or (start != "0" and actual != start)


def process_group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group ``pgid``, for stopping a
    worker's whole group and knowing when it is gone."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] in _EXITED or os.getpgid(proc.pid) != pgid:
                continue
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
        members.append(proc.pid)
    return members
