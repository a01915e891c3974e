"""The approvals inbox over a WebSocket: ``ws/approvals/``, woken by ONE shared reader per web process.

On connect the caller gets ``{"type": "snapshot", "count": N, "approvals": [...]}``: how
many pending requests they may decide (the inbox selector, ``approval_list_for_user``), and
the newest ``MAX_ITEMS`` of them as the inbox API lists them (the inbox's first page: a
person with 10,000 waiting is not sent 10,000 items, bench/inbox.py). Then ``{"type": "approval.pending", "approval": {...}}`` for each new one,
``{"type": "approval.changed", "approval": {...}}`` for one that moved to a new version
(claimed, handed back, reassigned, voted on, escalated by its deadline) and
``{"type": "approval.closed", "approval": {...}}`` for each one that left the inbox
(decided, timed out, its run ended, or no longer the caller's to decide: the closed item
says who decided), the newest ``MAX_ITEMS`` of each kind per wake-up, then
``{"type": "approval.more", "count": k}`` for the k more left out (fetch the list again).
A reconnect gets a fresh snapshot, so nothing is lost.
Close codes: 4401 not authenticated; 4415 a binary frame, 4400 a text frame that is not
JSON (runs.live.consumers.JsonFramesConsumer; the inbox reads no message, but a bad one must
not raise inside the server).

Rows first, so it works whichever process created or decided a request. The database is
read by one marker poller per event loop (:class:`InboxHub`): every ``POLL_SECONDS`` two
small aggregate queries (the newest request id; the count and version sum of pending
requests), whatever the number of open sockets. Only when the marker moves does each
socket read its own inbox (two queries); it also does so every ``RESYNC_SECONDS``, for
what no marker shows (a user added to a group).
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from types import SimpleNamespace
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import DatabaseError, connection
from django.db.models import Count, Max, Sum

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approval_list, approval_list_for_user
from approvals.serializers import ApprovalOutput
from runs.live.consumers import JsonFramesConsumer
from runs.models import RunStateKey

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
# Items serialised per message kind and wake-up (and in a snapshot): an inbox page's worth.
MAX_ITEMS = 50
RESYNC_SECONDS = 30.0


def inbox_marker() -> tuple[Any, ...]:
    """What moves whenever any inbox could change: (newest request id, pending count,
    pending version sum). A new request raises the id; a decision, a time-out or a
    cancellation lowers the count; a claim, vote or reassignment raises the sum."""
    newest = ApprovalRequest.objects.aggregate(top=Max("id"))["top"]
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).aggregate(n=Count("id"), v=Sum("version"))
    return (newest, pending["n"], pending["v"])


class InboxHub:
    """The shared marker poller of one event loop: wakes every subscribed socket when
    :func:`inbox_marker` moves. ``stats["polls"]`` counts marker reads (tests)."""

    def __init__(self) -> None:
        self.waiters: set[asyncio.Event] = set()
        self.marker: tuple[Any, ...] | None = None
        self.task: asyncio.Task[None] | None = None
        self.stats = {"polls": 0}

    def join(self, wake: asyncio.Event) -> None:
        self.waiters.add(wake)
        if self.task is None or self.task.done():
            # A context of its own: the first socket's database thread ends with it.
            self.task = asyncio.get_running_loop().create_task(self._loop(), context=contextvars.Context())

    def leave(self, wake: asyncio.Event) -> None:
        self.waiters.discard(wake)

    # Keeps its connection between polls (database_sync_to_async would open one per poll).
    @sync_to_async(thread_sensitive=True)
    def _read(self) -> tuple[Any, ...]:
        try:
            return inbox_marker()
        except DatabaseError:
            connection.close()
            raise

    async def _loop(self) -> None:
        while self.waiters:
            try:
                marker = await self._read()
                self.stats["polls"] += 1
                if marker != self.marker:
                    self.marker = marker
                    for wake in list(self.waiters):
                        wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup must not end every socket's stream
                log.warning("approvals inbox: marker poll failed", exc_info=True)
            await asyncio.sleep(POLL_SECONDS)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, InboxHub] = weakref.WeakKeyDictionary()


def inbox_hub() -> InboxHub:
    """The inbox hub of the running event loop (one per web process under daphne)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = InboxHub()
    return found


class ApprovalInboxConsumer(JsonFramesConsumer):
    """Streams the caller's pending approvals: a snapshot, then arrivals, changes and departures."""

    # No channel-layer channel of its own (the inbox is read from rows; see
    # runs.live.consumers.RunEventsConsumer: a Redis error there closed the socket with 1011).
    channel_layer_alias = None
    metrics_stream = "inbox"

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user = user
        self.inbox: dict[int, int] = {}  # id -> version on screen
        self.wake = asyncio.Event()
        await self.accept()
        self.pump = asyncio.ensure_future(self._pump())

    async def disconnect(self, code: int) -> None:
        pump = getattr(self, "pump", None)
        if pump is not None:
            pump.cancel()
        wake = getattr(self, "wake", None)
        if wake is not None:
            inbox_hub().leave(wake)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        pass

    def _serialise(self, requests: Any, ids: set[int]) -> tuple[list[dict[str, Any]], int]:
        """(the newest MAX_ITEMS of ``ids`` in ``requests``, serialised, how many were left
        out). The runs' states are read in one query (RunStateKey.hold_states), as the
        inbox API's pages do."""
        if not ids:
            return [], 0
        newest = sorted(ids, reverse=True)[:MAX_ITEMS]
        page = list(requests.filter(pk__in=newest))
        RunStateKey.hold_states(r.run for r in page)
        return list(ApprovalOutput(page, many=True, context={"request": SimpleNamespace(user=self.user)}).data), len(ids) - len(newest)

    @database_sync_to_async
    def _poll(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], int]:
        """(arrived, changed, left, how many were left out) since the last poll, each the
        newest MAX_ITEMS; two queries (the user's groups, the inbox ids and versions) when
        nothing changed, three more per kind that did."""
        inbox = approval_list_for_user(user=self.user)
        mine = dict(inbox.values_list("id", "version"))
        arrived = set(mine) - set(self.inbox)
        changed = {pk for pk, v in mine.items() if pk in self.inbox and self.inbox[pk] != v}
        left = set(self.inbox) - set(mine)
        self.inbox = mine
        new, more_new = self._serialise(inbox, arrived)
        moved, more_moved = self._serialise(inbox, changed)
        # Departed requests are pending no more (or no longer this user's): any status.
        gone, more_gone = self._serialise(approval_list(status=None), left)
        return new, moved, gone, more_new + more_moved + more_gone

    async def _pump(self) -> None:
        hub = inbox_hub()
        hub.join(self.wake)
        arrived, _, _, _ = await self._poll()
        await self.send_json({"type": "snapshot", "count": len(self.inbox), "approvals": arrived})
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=RESYNC_SECONDS)
            except TimeoutError:
                pass
            self.wake.clear()
            arrived, changed, left, more = await self._poll()
            for approval in reversed(arrived):
                await self.send_json({"type": "approval.pending", "approval": approval})
            for approval in changed:
                await self.send_json({"type": "approval.changed", "approval": approval})
            for approval in left:
                await self.send_json({"type": "approval.closed", "approval": approval})
            if more:
                await self.send_json({"type": "approval.more", "count": more})
