"""Read-side liveness of running steps' workers (lease, psutil on this host, cluster heartbeats elsewhere), for the API and admin.

Recovery decides with ``workers.owner_is_dead`` and the lease on its own pass; this
module answers the same question when a run is *read*, so a step whose worker vanished
shows as stale before any recovery pass has taken it back. It writes nothing.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings

from runs.engine import clock
from runs.engine.workers import HOST, owner_is_dead
from runs.models import StepStatus, Worker


class LeasedStep(Protocol):
    """What liveness reads of a step (a ``runs.models.Step`` has it)."""

    pk: int
    status: str
    lease_owner: str
    lease_expires_at: datetime | None


def heartbeat_window() -> float:
    """Seconds after which a cluster's heartbeat row counts as silent: three recovery
    intervals, at least 5 s (the window ``workers_alive`` uses to pick in-process runs)."""
    return max(5.0, 3 * settings.BALLAST_RECOVERY_INTERVAL)


def steps_worker_alive(steps: Iterable[LeasedStep], *, now: datetime | None = None) -> dict[int, bool | None]:
    """Whether the worker holding each running step is alive, keyed by step id.

    ``None`` for a step that is not running (it holds no lease). For a running step,
    ``False`` when its lease expired (heartbeats extend it every third of
    BALLAST_LEASE_SECONDS, so an expired lease means they stopped), when its owner is a
    process on this host that is certainly gone (psutil: no such pid, exited, or pid
    reused), or when its owner is on another host whose clusters all stopped
    heartbeating (their Worker rows are older than :func:`heartbeat_window`). Otherwise
    ``True``: an owner whose liveness cannot be told counts as alive until its lease
    runs out, the rule recovery follows. Costs at most one query (the Worker rows, read
    only when some owner is on another host) and one process-table lookup per distinct
    owner on this host, whatever the number of steps.
    """
    now = now or clock.now()
    steps = list(steps)
    running = [s for s in steps if s.status == StepStatus.RUNNING]
    result: dict[int, bool | None] = {s.pk: None for s in steps if s.status != StepStatus.RUNNING}
    if not running:
        return result
    other_hosts = {_host(s.lease_owner) for s in running} - {HOST, ""}
    silent_hosts: set[str] = set()
    if other_hosts:
        cutoff = now - timedelta(seconds=heartbeat_window())
        fresh: set[str] = set()
        seen: set[str] = set()
        for host, beat in Worker.objects.filter(host__in=other_hosts).values_list("host", "heartbeat_at"):
            seen.add(host)
            if beat >= cutoff:
                fresh.add(host)
        silent_hosts = seen - fresh  # hosts with no Worker row at all: cannot tell
    dead_owner: dict[str, bool] = {}
    for step in running:
        owner = step.lease_owner
        if step.lease_expires_at is not None and step.lease_expires_at < now:
            result[step.pk] = False
            continue
        host = _host(owner)
        if host == HOST:
            if owner not in dead_owner:
                dead_owner[owner] = owner_is_dead(owner)
            result[step.pk] = not dead_owner[owner]
        else:
            result[step.pk] = host not in silent_hosts
    return result


def _host(owner: str) -> str:
    """The host part of a ``host:pid:start`` worker id ("" when malformed)."""
    parts = owner.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else ""
