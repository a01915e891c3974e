"""Worker identity (``host:pid:start``) and liveness of a lease owner on this host."""
from __future__ import annotations

import os
import socket
from functools import lru_cache

HOST = socket.gethostname()


def _process_start_ticks(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(")") + 2 :].split()
    if fields and fields[0] in ("Z", "X"):  # exited (zombie, dying): it holds nothing any more
        return None
    return fields[19] if len(fields) > 19 else None


@lru_cache(maxsize=8)
def _identity(pid: int) -> str:
    return f"{HOST}:{pid}:{_process_start_ticks(pid) or '0'}"


def current_worker() -> str:
    """This process's worker id, ``host:pid:start_ticks``; unique across pid reuse."""
    return _identity(os.getpid())


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` names a process on this host that no longer exists.

    A pid that was reused by another process counts as dead (its start time differs).
    Owners on other hosts are never declared dead here: their leases expire instead.
    """
    try:
        host, pid_text, start = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != HOST:
        return False
    actual = _process_start_ticks(pid)
    return actual is None or (start != "0" and actual != start)


def process_group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group ``pgid`` (from /proc), for
    stopping a worker's whole group and knowing when it is gone."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = data[data.rfind(")") + 2 :].split()
        # fields[0] is the state, fields[2] the process group id.
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members
