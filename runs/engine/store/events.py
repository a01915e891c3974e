"""Run events: the one place that numbers, writes, reads and publishes them.

Every run event carries ``seq``, 1, 2, 3... per run with no gaps. :func:`append` takes the
numbers from the run's counter row (``RunEventCounter.last``) with an upsert ``... SET
last = last + n RETURNING last`` in the same transaction that inserts the events, and the
fast commit paths (fastpath_postgresql / fastpath_sqlite) do the same inside their fixed
statements. That is why no gap and no reordering can happen:

- the bump takes the counter row's write lock and holds it until commit, so two writers
  of one run are serialised: the second reads the counter the first committed (PostgreSQL
  re-reads the row after the lock wait; SQLite has one writer at a time anyway);
- a rollback takes the counter bump back with the events (a database sequence would not:
  ``nextval`` is not transactional, which is where gaps come from);
- so the events of a run become visible in seq order: once seq ``n`` is committed, every
  seq below it is too, and a reader holding cursor ``n`` misses nothing by asking for
  ``seq > n``. The unique (run, seq) constraint makes any writer that bypassed the counter
  fail loudly instead of corrupting the stream.

The counter is a row of its own, not a column of the run, so numbering events never needs
the run row: a claim holding its picked step takes the counter with NOWAIT (``nowait``
below) and never waits for a committer holding the run (runs.engine.store.claims says why).
Writers bump the counter as their last lock of the transaction (events are appended once
the rows they describe are written), so its lock is held only from there to the commit.

Publishing: after the transaction commits (``transaction.on_commit``), and only when a
push channel layer is configured (settings.BALLAST_LIVE_PUSH, channels-redis), the events
are sent to the group :func:`group_name` by one background thread per process, so the
commit path never waits for Redis. A lost or dropped message (channels-redis drops
messages for a channel at capacity) is harmless: readers notice the gap by seq and read
the rows (runs.live.hub). Without Redis nothing is published; the web process polls.

Wire form of an event (:func:`wire`): ``{"id", "seq", "run", "step", "kind", "data",
"created_at"}`` with ``created_at`` ISO 8601 in UTC ending in ``Z``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q

from runs.models import Run, RunEvent, RunEventCounter, RunEventKind

log = logging.getLogger(__name__)

# Rows per read: a backlog is sent in pages of this size.
BATCH = 500


def event(run_id: int, kind: RunEventKind | str, step_id: int | None = None, **data: Any) -> RunEvent:
    """An unsaved RunEvent (payload per :class:`runs.models.RunEventKind`); write it with :func:`append`."""
    return RunEvent(run_id=run_id, step_id=step_id, kind=kind, data=data)


def _bump_sql() -> str:
    table = connection.ops.quote_name(RunEventCounter._meta.db_table)
    # An upsert: a run's first events create its row (PostgreSQL and SQLite >= 3.35).
    return (
        f"INSERT INTO {table} (run_id, last) VALUES (%s, %s) "
        f"ON CONFLICT (run_id) DO UPDATE SET last = {table}.last + excluded.last RETURNING last"
    )


class CounterBusy(Exception):
    """Another transaction holds the run's event counter (``reserve(..., nowait=True)``)."""


def reserve(run_id: int, n: int, *, nowait: bool = False) -> int:
    """Take ``n`` seq numbers of run ``run_id`` and return the last one (the first is
    ``last - n + 1``). Must run inside the transaction that writes the events; it locks the
    run's counter row (not the run row) until that transaction ends. ``nowait``: raise
    :class:`CounterBusy` at once instead of waiting when another transaction holds the
    counter (PostgreSQL; the caller must roll back). Raises IntegrityError for an unknown run."""
    with connection.cursor() as cursor:
        if nowait and connection.features.has_select_for_update_nowait:
            table = connection.ops.quote_name(RunEventCounter._meta.db_table)
            try:
                cursor.execute(f"SELECT last FROM {table} WHERE run_id = %s FOR UPDATE NOWAIT", [run_id])
            except OperationalError as error:
                raise CounterBusy(run_id) from error
        cursor.execute(_bump_sql(), [run_id, n])
        row = cursor.fetchone()
    return int(row[0])


def append(events: list[RunEvent], *, nowait: bool = False) -> list[RunEvent]:
    """Number ``events`` per run, insert them and publish them once the transaction commits.

    Runs inside the caller's transaction (one is opened when there is none); runs are
    numbered in id order, the lock order the rest of the engine uses. ``nowait``: see
    :func:`reserve` (raises CounterBusy). Returns ``events`` with ``seq`` (and, where the
    backend returns them, ``pk``) set."""
    if not events:
        return events
    by_run: dict[int, list[RunEvent]] = {}
    for e in events:
        by_run.setdefault(e.run_id, []).append(e)
    with transaction.atomic(savepoint=False):
        for run_id in sorted(by_run):
            mine = by_run[run_id]
            last = reserve(run_id, len(mine), nowait=nowait)
            for i, e in enumerate(mine):
                e.seq = last - len(mine) + 1 + i
        RunEvent.objects.bulk_create(events)
        if push_enabled():
            wires = [wire(e) for e in events]
            transaction.on_commit(lambda: publish(wires))
    return events


def create(**fields: Any) -> RunEvent:
    """Append one event built from RunEvent ``fields`` (see :func:`append`) and return it."""
    return append([RunEvent(**fields)])[0]


def _iso(value: datetime) -> str:
    # The same text DRF's DateTimeField gives for an aware UTC datetime.
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def wire(e: RunEvent) -> dict[str, Any]:
    """The event as sent to live clients (see the module docstring)."""
    return {
        "id": e.pk,
        "seq": e.seq,
        "run": e.run_id,
        "step": e.step_id,
        "kind": str(e.kind),
        "data": e.data,
        "created_at": _iso(e.created_at),
    }


_FIELDS = ("id", "seq", "run_id", "step_id", "kind", "data", "created_at")


def _wire_row(row: tuple[Any, ...]) -> dict[str, Any]:
    pk, seq, run_id, step_id, kind, data, created_at = row
    return {"id": pk, "seq": seq, "run": run_id, "step": step_id, "kind": kind, "data": data, "created_at": _iso(created_at)}


def after(run_id: int, seq: int, limit: int = BATCH) -> list[dict[str, Any]]:
    """Committed events of run ``run_id`` with seq > ``seq``, in seq order, at most ``limit`` (wire form)."""
    rows = RunEvent.objects.filter(run_id=run_id, seq__gt=seq).order_by("seq").values_list(*_FIELDS)[:limit]
    return [_wire_row(r) for r in rows]


def after_many(cursors: dict[int, int], limit: int = BATCH) -> list[dict[str, Any]]:
    """Committed events after each run's cursor (``{run_id: seq}``) in ONE query, ordered
    by run then seq, at most ``limit`` in all (wire form)."""
    if not cursors:
        return []
    where = Q()
    for run_id, seq in cursors.items():
        where |= Q(run_id=run_id, seq__gt=seq)
    rows = RunEvent.objects.filter(where).order_by("run_id", "seq").values_list(*_FIELDS)[:limit]
    return [_wire_row(r) for r in rows]


def last_seqs(run_ids: Iterable[int]) -> dict[int, int]:
    """The committed last seq of each run (its RunEventCounter) in one query; runs without
    events and unknown runs are absent."""
    return dict(RunEventCounter.objects.filter(run_id__in=list(run_ids)).values_list("run_id", "last"))


def newest_run_id() -> int:
    """The id of the newest committed run (0 when there is none): one index lookup. The
    live run list hears "new runs" when it grows (runs.live.hub.Hub.watch_new_runs). A run
    whose transaction commits after a newer run's is announced with the next new run."""
    return Run.objects.order_by("-id").values_list("id", flat=True).first() or 0


def group_name(run_id: int) -> str:
    """The channel-layer group a run's committed events are pushed to."""
    return f"ballast.run.{run_id}"


def push_enabled() -> bool:
    """Whether commits push their events through the channel layer (Redis configured)."""
    return bool(getattr(settings, "BALLAST_LIVE_PUSH", False))


class _Publisher:
    """One thread per process with its own event loop (and so one Redis connection pool):
    commits hand it their events and go on; it sends them to the runs' groups in order."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[list[dict[str, Any]]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.pid = 0
        self.down_since: float | None = None  # monotonic time of the first failed push of an outage

    def start(self) -> None:
        """Start this process's thread if it does not run yet (idempotent)."""
        with self.lock:
            # A forked worker process inherits the object but not the thread.
            if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
                self._build_layer()
                self.queue = queue.SimpleQueue()
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self._main, name="ballast-event-publisher", daemon=True)
                self.thread.start()

    def put(self, events: list[dict[str, Any]]) -> None:
        self.start()
        self.queue.put(events)

    @staticmethod
    def _build_layer() -> None:
        """Import the layer (channels, its Redis client) and build it in the caller's
        thread, before the publisher thread exists. Imported in that thread instead, a
        qcluster parent that publishes at start (recovery hands steps back) could fork its
        workers in the middle of the import: each child then held a half-initialised
        ``channels_redis.core`` in ``sys.modules`` for good, and none of its pushes went
        out. Built before the first batch, too: building it at the first publish held a
        fresh worker's first events back by up to a second under load (see warm_push).
        Nothing connects here."""
        from channels.layers import (
            get_channel_layer,  # the push broker, on first push: a process that never pushes never imports channels
        )

        try:
            get_channel_layer()
        except Exception:
            log.warning("live events: the channel layer could not be built", exc_info=True)

    def _main(self) -> None:
        from channels.layers import (
            get_channel_layer,  # the push broker, on first push: a process that never pushes never imports channels
        )

        loop = asyncio.new_event_loop()
        while True:
            batch = self.queue.get()
            try:
                while True:
                    batch += self.queue.get_nowait()
            except queue.Empty:
                pass
            by_run: dict[int, list[dict[str, Any]]] = {}
            for e in batch:
                by_run.setdefault(e["run"], []).append(e)
            try:
                # Asked every time: the layer is rebuilt when settings change (tests).
                loop.run_until_complete(self._send(get_channel_layer(), by_run))
            except Exception as exc:  # a push is an optimisation: readers fall back to the rows
                self._failed(exc)
            else:
                if self.down_since is not None:
                    log.warning("live events: pushes go through again after %.1fs", time.monotonic() - self.down_since)
                    self.down_since = None

    def _failed(self, exc: Exception) -> None:
        """Log a failed push: once per outage of the layer (the readers' safety poll
        delivers the events meanwhile), with the traceback only for an unexpected error."""
        if self.down_since is not None:
            return
        self.down_since = time.monotonic()
        expected = type(exc).__module__.startswith("redis")  # Redis down, restarting, timing out
        log.warning("live events: push to the channel layer failed (%s); readers poll the rows until it works again", exc, exc_info=not expected)

    @staticmethod
    async def _send(layer: Any, by_run: dict[int, list[dict[str, Any]]]) -> None:
        for run_id, evs in by_run.items():
            await layer.group_send(group_name(run_id), {"type": "run.events", "run": run_id, "events": evs})


_publisher = _Publisher()


def warm_push() -> None:
    """Start this process's publisher now, when a push layer is configured, so it has
    imported and built the channel layer before the process's first commit. A qcluster
    worker calls it right after it is forked (runs.engine.cluster): a publisher started at
    the first publish imports channels and its Redis client in its thread while the worker
    runs the run's steps, and under load (the GIL shared with those steps) that held a
    fresh worker's first events back for up to a second: its commits queued behind the
    first send, and readers got them only from the safety poll. Nothing connects here."""
    if push_enabled():
        _publisher.start()


def publish(events: list[dict[str, Any]]) -> None:
    """Push committed events (wire form) to their runs' groups, in the background. Call
    only after the commit (append and the fast paths do)."""
    if events and push_enabled():
        _publisher.put(list(events))
