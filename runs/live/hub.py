"""The web process's live-event hub: ONE shared reader of committed run events for every open socket.

Each WebSocket consumer (runs.live.consumers) registers the runs it follows with the hub of
its event loop (one per web process). The hub keeps, per followed run, the highest seq it
has handed out, and finds new committed events in two ways:

- a poller (one asyncio task): every BALLAST_LIVE_POLL_SECONDS it reads the runs'
  counters (``RunEventCounter``, one query for all followed runs) and, for the runs that
  moved, their new events (one more query). The number of queries per interval does not
  depend on the number of sockets; with Redis configured (settings.BALLAST_LIVE_PUSH) the
  poller runs only every BALLAST_LIVE_SAFETY_SECONDS, to catch pushes the channel layer
  dropped;
- with Redis, a receiver: the hub's one channel joins each followed run's group
  (runs.engine.store.events.group_name) and gets the events the committing process published
  after its commit; a push that does not continue the hub's seq (a dropped message) wakes
  the poller instead, which reads the rows.

Either way only committed rows or events published after commit reach a socket, and the
hub hands each run's events out in seq order, at most once per hub. Subscribers still
check seq themselves (see :class:`Subscriber`): they may have joined mid-stream.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection

from runs.engine.store import events as run_events

log = logging.getLogger(__name__)


# The least time between two rejoins of the runs' groups prompted by the safety poll (a
# push that is only late also looks like a missed one).
REJOIN_SECONDS = 5.0


class Subscriber(Protocol):
    """What the hub hands events to: ``deliver`` takes one run's events in seq order
    (wire form, runs.engine.store.events.wire) and must not block."""

    def deliver(self, run_id: int, events: list[dict[str, Any]]) -> None: ...


class Hub:
    """The shared reader of one event loop (see the module docstring). ``stats`` counts
    polls and database reads (for tests and the benchmark)."""

    def __init__(self) -> None:
        self.subscribers: dict[int, set[Subscriber]] = {}
        # Highest seq handed out per run; None while the first subscriber of the run is
        # still reading its backlog (the run is not polled until it says where it is).
        self.cursor: dict[int, int | None] = {}
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.receiver: asyncio.Task[None] | None = None
        self.channel: str | None = None
        self.layer: Any = None
        self.stats = {"polls": 0, "reads": 0, "pushes": 0, "gaps": 0, "new_run_reads": 0}
        # Sockets that want to hear of new runs (the run list's first page): told, at most
        # once per poll, that a run newer than the newest one seen was created. One query
        # per poll for all of them (the newest run id), whatever their number.
        self.new_run_watchers: set[Callable[[], None]] = set()
        self.newest_run: int | None = None
        self.rejoined = float("-inf")  # loop time of the last rejoin
        # While the channel layer's receive fails, no push comes: the rows are read at the
        # poll interval, not the safety interval (interval()).
        self.layer_down = False

    @staticmethod
    def push() -> bool:
        return run_events.push_enabled()

    def interval(self) -> float:
        """Seconds between two reads of the rows: the safety interval while pushes come
        (they deliver; the read only makes up for a lost one), else the poll interval (no
        channel layer, or its receive is failing)."""
        if self.push() and not self.layer_down:
            return float(getattr(settings, "BALLAST_LIVE_SAFETY_SECONDS", 1.0))
        return float(getattr(settings, "BALLAST_LIVE_POLL_SECONDS", 0.2))

    async def add(self, run_id: int, subscriber: Subscriber) -> None:
        """Follow ``run_id`` for ``subscriber``. Call BEFORE the subscriber reads its
        backlog, then :meth:`ready` with the seq it read up to: every event committed
        after that backlog read is then handed to it (it drops what it already had)."""
        first = run_id not in self.subscribers
        self.subscribers.setdefault(run_id, set()).add(subscriber)
        if first:
            self.cursor[run_id] = None
            if self.push():
                await self._join(run_id)
        self._start()

    def ready(self, run_id: int, seq: int) -> None:
        """The subscriber's backlog of ``run_id`` is read up to ``seq``: poll from there
        if no one else follows the run yet."""
        if run_id in self.cursor and self.cursor[run_id] is None:
            self.cursor[run_id] = seq

    async def remove(self, run_id: int, subscriber: Subscriber) -> None:
        """Stop following ``run_id`` for ``subscriber`` (the run is dropped with its last subscriber)."""
        subs = self.subscribers.get(run_id)
        if subs is None:
            return
        subs.discard(subscriber)
        if not subs:
            del self.subscribers[run_id]
            self.cursor.pop(run_id, None)
            if self.push() and self.layer is not None and self.channel is not None:
                try:
                    await self.layer.group_discard(run_events.group_name(run_id), self.channel)
                except Exception:
                    log.warning("live events: leaving the group of run %s failed", run_id, exc_info=True)

    async def watch_new_runs(self, notify: Callable[[], None]) -> None:
        """Call ``notify()`` (must not block) after each poll that found runs created
        since the last one; :meth:`unwatch_new_runs` stops it."""
        if not self.new_run_watchers:
            self.newest_run = await self._newest_run()
        self.new_run_watchers.add(notify)
        self._start()

    def unwatch_new_runs(self, notify: Callable[[], None]) -> None:
        self.new_run_watchers.discard(notify)

    @sync_to_async(thread_sensitive=True)
    def _newest_run(self) -> int:
        try:
            self.stats["new_run_reads"] += 1
            return run_events.newest_run_id()
        except DatabaseError:
            connection.close()
            raise

    async def _poll_new_runs(self) -> None:
        if not self.new_run_watchers:
            return
        newest = await self._newest_run()
        if self.newest_run is not None and newest > self.newest_run:
            for notify in list(self.new_run_watchers):
                try:
                    notify()
                except Exception:
                    log.warning("live events: a new-run watcher failed", exc_info=True)
        self.newest_run = newest

    def _start(self) -> None:
        # The tasks run in a context of their own, not the first socket's: Channels gives
        # each connection a thread-sensitive context whose database thread ends with it.
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._poll_loop(), context=contextvars.Context())
        if self.push() and (self.receiver is None or self.receiver.done()):
            self.receiver = loop.create_task(self._receive_loop(), context=contextvars.Context())

    async def _join(self, run_id: int) -> None:
        from channels.layers import get_channel_layer

        try:
            if self.layer is None:
                self.layer = get_channel_layer()
                self.channel = await self.layer.new_channel()
            await self.layer.group_add(run_events.group_name(run_id), self.channel)
        except Exception:  # Redis down: the poller still reads the rows
            log.warning("live events: joining the group of run %s failed", run_id, exc_info=True)

    def _fan_out(self, run_id: int, events: list[dict[str, Any]]) -> None:
        for sub in list(self.subscribers.get(run_id, ())):
            try:
                sub.deliver(run_id, events)
            except Exception:
                log.warning("live events: a subscriber of run %s refused events", run_id, exc_info=True)

    def _take(self, run_id: int, events: list[dict[str, Any]]) -> bool:
        """Hand out the part of ``events`` (one run's, in seq order) that continues the
        run's cursor; False when they leave a gap (read the rows instead)."""
        at = self.cursor.get(run_id)
        if at is None:
            return True  # not followed, or its first subscriber is still reading: it reads the rows
        fresh = [e for e in events if e["seq"] > at]
        if not fresh:
            return True
        if fresh[0]["seq"] != at + 1 or any(b["seq"] != a["seq"] + 1 for a, b in zip(fresh, fresh[1:], strict=False)):
            return False
        self.cursor[run_id] = fresh[-1]["seq"]
        self._fan_out(run_id, fresh)
        return True

    # Not database_sync_to_async: that closes the connection after every call when
    # CONN_MAX_AGE is 0, and the poller would open a new database connection per poll.
    # It keeps its connection instead and drops it only when a read fails.
    @sync_to_async(thread_sensitive=True)
    def _read(self, cursors: dict[int, int]) -> tuple[dict[int, int], list[dict[str, Any]]]:
        # One query for the counters, and one for the events of the runs that moved.
        try:
            last = run_events.last_seqs(cursors)
            behind = {r: c for r, c in cursors.items() if last.get(r, 0) > c}
            self.stats["reads"] += 1 + bool(behind)
            return last, run_events.after_many(behind) if behind else []
        except DatabaseError:
            connection.close()  # reconnect at the next poll
            raise

    async def poll_once(self) -> bool:
        """Read and hand out what committed since the cursors; True when a page was full (more to read)."""
        await self._poll_new_runs()
        return await self._poll_events()

    async def _poll_events(self) -> bool:
        cursors = {r: c for r, c in self.cursor.items() if c is not None}
        if not cursors:
            return False
        self.stats["polls"] += 1
        last, rows = await self._read(cursors)
        by_run: dict[int, list[dict[str, Any]]] = {}
        for e in rows:
            by_run.setdefault(e["run"], []).append(e)
        handed = 0
        for run_id, evs in by_run.items():
            before = self.cursor.get(run_id)
            self._take(run_id, evs)
            handed += before is not None and self.cursor.get(run_id) != before
        if handed and self.push():
            # The rows had events no push brought: a restarted Redis may have forgotten
            # this hub's groups (its reads did not fail: redis-py reconnects by itself).
            try:
                await self.rejoin(every=REJOIN_SECONDS)
            except Exception:
                pass  # the receive loop reports the layer's errors
        return len(rows) >= run_events.BATCH

    async def _poll_loop(self) -> None:
        while self.subscribers or self.new_run_watchers:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.interval())
            except TimeoutError:
                pass
            self.wake.clear()
            try:
                if await self.poll_once():
                    while await self._poll_events():
                        pass
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup must not end every socket's stream
                log.warning("live events: poll failed", exc_info=True)
                await asyncio.sleep(self.interval())

    async def rejoin(self, *, every: float = 0.0) -> None:
        """Join the groups of every followed run again (at most once per ``every``
        seconds): a restarted Redis forgot them, and its pushes would never come. The
        poller reads the rows meanwhile, so nothing is lost either way."""
        now = asyncio.get_running_loop().time()
        if self.layer is None or self.channel is None or now - self.rejoined < every:
            return
        self.rejoined = now
        for run_id in list(self.subscribers):
            await self.layer.group_add(run_events.group_name(run_id), self.channel)

    async def _receive_loop(self) -> None:
        down_since: float | None = None
        while self.subscribers and self.layer is not None and self.channel is not None:
            try:
                if down_since is not None:
                    await self.rejoin()
                    log.warning("live events: the channel layer answers again after %.1fs", asyncio.get_running_loop().time() - down_since)
                    down_since = None
                    self.layer_down = False
                    self.wake.set()  # pushes sent meanwhile are lost: read the rows
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if down_since is None:  # once per outage; the poller delivers meanwhile
                    down_since = asyncio.get_running_loop().time()
                    expected = type(exc).__module__.startswith("redis")
                    log.warning("live events: receive from the channel layer failed (%s); polling the rows until it answers", exc, exc_info=not expected)
                    self.layer_down = True
                    self.wake.set()  # the poller takes the poll interval from now on
                await asyncio.sleep(self.interval())
                continue
            if message.get("type") != "run.events":
                continue
            self.stats["pushes"] += 1
            if not self._take(int(message["run"]), list(message.get("events") or [])):
                self.stats["gaps"] += 1
                self.wake.set()


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    """The hub of the running event loop (one per web process under daphne)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = Hub()
    return found


class Follower:
    """One socket's view of its runs: a cursor per run, events sent in seq order with
    duplicates dropped and gaps filled from the rows.

    ``send`` sends one event (wire form) to the client. Events the hub hands over are
    queued (bounded: a full queue is dropped and the rows are read again), and a single
    pump task sends them, so a slow client never blocks the hub."""

    MAX_QUEUED = 2000

    def __init__(self, send: Callable[[dict[str, Any]], Any]) -> None:
        self.send = send
        self.cursors: dict[int, int] = {}
        self.queue: asyncio.Queue[tuple[int, list[dict[str, Any]] | None]] = asyncio.Queue()
        self.queued = 0
        self.task = asyncio.ensure_future(self._pump())

    def deliver(self, run_id: int, events: list[dict[str, Any]]) -> None:
        if run_id not in self.cursors:
            return
        if self.queued >= self.MAX_QUEUED:
            self.queue.put_nowait((run_id, None))  # overflow: re-read this run from the rows
            return
        self.queued += len(events)
        self.queue.put_nowait((run_id, events))

    async def follow(self, run_id: int, after: int) -> None:
        """Start sending run ``run_id`` from seq ``after`` (exclusive): backlog first, then live."""
        if run_id in self.cursors:
            return
        self.cursors[run_id] = after
        await hub().add(run_id, self)
        self.queue.put_nowait((run_id, None))  # the pump reads the backlog, then tells the hub

    async def unfollow(self, run_id: int) -> None:
        """Stop sending run ``run_id``."""
        if self.cursors.pop(run_id, None) is not None:
            await hub().remove(run_id, self)

    async def close(self) -> None:
        """Stop everything (the socket closed)."""
        self.task.cancel()
        for run_id in list(self.cursors):
            await self.unfollow(run_id)

    @database_sync_to_async
    def _rows(self, run_id: int, after: int) -> list[dict[str, Any]]:
        return run_events.after(run_id, after)

    async def _backfill(self, run_id: int) -> None:
        while run_id in self.cursors:
            rows = await self._rows(run_id, self.cursors[run_id])
            await self._send_in_order(run_id, rows)
            if len(rows) < run_events.BATCH:
                break
        if run_id in self.cursors:
            hub().ready(run_id, self.cursors[run_id])

    async def _send_in_order(self, run_id: int, events: list[dict[str, Any]]) -> bool:
        """Send what continues the cursor; False at a gap (the caller reads the rows)."""
        for e in events:
            at = self.cursors.get(run_id)
            if at is None:
                return True
            if e["seq"] <= at:
                continue  # a duplicate: already sent
            if e["seq"] != at + 1:
                return False
            await self.send(e)
            self.cursors[run_id] = e["seq"]
        return True

    async def _pump(self) -> None:
        while True:
            run_id, events = await self.queue.get()
            if events is not None:
                self.queued -= len(events)
            if run_id not in self.cursors:
                continue
            if events is None or not await self._send_in_order(run_id, events):
                await self._backfill(run_id)
