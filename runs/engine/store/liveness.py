"""Read-side liveness of running steps' workers (lease, psutil on this host, cluster heartbeats elsewhere) and of worker hosts, for the API, admin and health checks.

Recovery decides with ``workers.owner_is_dead`` and the lease on its own pass; this
module answers the same question when a run is *read*, so a step whose worker vanished
shows as stale before any recovery pass has taken it back. It writes nothing.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from runs.engine.store import clock
from runs.engine.workers import HOST, owner_is_dead
from runs.models import HostHeartbeat, StepStatus, Worker


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


def workers_health(*, host: str | None = None) -> dict[str, Any]:
    """Liveness of the worker hosts (of ``host`` only, when given), for ``manage.py
    check_health`` and ``/readyz``'s detail. Reads only: two queries on tables of one
    row per cluster and one per host, ages on the database's clock (``clock.now``).

    Returns ``{"clusters", "clusters_alive", "hosts_alive", "hosts": [...],
    "heartbeat_window_seconds", "host_silent_seconds", "host_heartbeats"}``; each host is
    ``{"host", "alive", "reason", "clusters", "clusters_alive",
    "cluster_heartbeat_age_seconds", "host_heartbeat_age_seconds"}`` (ages of the freshest
    beat, None when there is none). A cluster (``Worker`` row) is alive when its heartbeat
    is within :func:`heartbeat_window` and, on this host, its process exists. A host is
    alive when one of its clusters is and, on PostgreSQL (where each qcluster's main
    process writes ``HostHeartbeat``; ``host_heartbeats`` says so), its host heartbeat is
    within BALLAST_HOST_SILENT_SECONDS, the window after which recovery takes its leases
    back. ``reason`` says why a host is not alive ("" when it is). A ``host`` with no row
    at all is listed, not alive."""
    now = clock.now()
    window = heartbeat_window()
    silent = float(settings.BALLAST_HOST_SILENT_SECONDS)
    host_beats = connection.vendor == "postgresql"
    clusters = Worker.objects.order_by("host", "name")
    beats = HostHeartbeat.objects.all()
    if host is not None:
        clusters, beats = clusters.filter(host=host), beats.filter(host=host)
    hosts: dict[str, dict[str, Any]] = {}
    if host is not None:
        hosts[host] = _host_entry(host)
    for cluster in clusters:
        entry = hosts.setdefault(cluster.host, _host_entry(cluster.host))
        age = max(0.0, (now - cluster.heartbeat_at).total_seconds())
        entry["clusters"] += 1
        previous = entry["cluster_heartbeat_age_seconds"]
        entry["cluster_heartbeat_age_seconds"] = age if previous is None else min(previous, age)
        if age > window:
            continue
        if cluster.host == HOST and owner_is_dead(cluster.name):
            entry["gone"].append(cluster.pid)
            continue
        entry["clusters_alive"] += 1
    for beat in beats:
        entry = hosts.setdefault(beat.host, _host_entry(beat.host))
        entry["host_heartbeat_age_seconds"] = max(0.0, (now - beat.beat_at).total_seconds())
    for name, entry in hosts.items():
        entry["reason"] = _dead_reason(name, entry, window=window, silent=silent, host_beats=host_beats)
        entry["alive"] = not entry["reason"]
        entry.pop("gone")
        for key in ("cluster_heartbeat_age_seconds", "host_heartbeat_age_seconds"):
            if entry[key] is not None:
                entry[key] = round(entry[key], 3)
    listed = sorted(hosts.values(), key=lambda e: e["host"])
    return {
        "clusters": sum(e["clusters"] for e in listed),
        "clusters_alive": sum(e["clusters_alive"] for e in listed),
        "hosts_alive": sum(1 for e in listed if e["alive"]),
        "hosts": listed,
        "heartbeat_window_seconds": window,
        "host_silent_seconds": silent,
        "host_heartbeats": host_beats,
    }


def _host_entry(host: str) -> dict[str, Any]:
    return {"host": host, "alive": False, "reason": "", "clusters": 0, "clusters_alive": 0,
            "cluster_heartbeat_age_seconds": None, "host_heartbeat_age_seconds": None, "gone": []}


def _dead_reason(host: str, entry: dict[str, Any], *, window: float, silent: float, host_beats: bool) -> str:
    """Why ``host`` is not alive, in one line ("" when it is)."""
    if entry["clusters_alive"] == 0:
        if entry["clusters"] == 0:
            return f"no worker cluster is registered on host {host}"
        if entry["gone"]:
            return f"the worker cluster of host {host} (pid {', '.join(map(str, entry['gone']))}) is registered but its process is gone"
        return (f"no worker cluster of host {host} sent a heartbeat in the last {window:g} s "
                f"(freshest: {entry['cluster_heartbeat_age_seconds']:.1f} s ago)")
    if host_beats:
        age = entry["host_heartbeat_age_seconds"]
        if age is None:
            return f"host {host} has no host heartbeat"
        if age > silent:
            return f"host {host}'s heartbeat is {age:.1f} s old (silent after {silent:g} s: its leases are taken back)"
    return ""
