"""Run events over a WebSocket: ``ws/runs/<run_id>/?after=<event id>``.

Events are rows first. The consumer sends every RunEvent of the run after ``after``, then
polls the table (every ``POLL_SECONDS``) and sends new rows as they commit. Polling the
database, not a channel layer, is what makes it work when the worker is another process
or machine (an in-memory channel layer cannot carry worker -> browser; TRAPS.md), and a
reconnect with the last id seen loses nothing. Messages: ``{"type": "event", "event":
{id, run, step, kind, data, created_at}}``.

Close codes: 4401 not authenticated, 4400 bad ``after``, 4404 no such run or one the
caller may not read (``accounts.policy``; the refusal is audited), before accept, so the
handshake is refused.
"""
from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts import policy
from runs.models import Run, RunEvent
from runs.serializers import EventOutput

POLL_SECONDS = 0.2
BATCH = 200


def query_param(scope: dict[str, Any], name: str) -> str | None:
    """The first value of query parameter ``name`` of a WebSocket scope, or None."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[0] if values else None


class RunEventsConsumer(AsyncJsonWebsocketConsumer):
    """Streams one run's events after a cursor, then new ones as they commit."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        raw = query_param(self.scope, "after") or "0"
        if not raw.isdigit() or len(raw) > 18:
            await self.close(code=4400)
            return
        self.after = int(raw)
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await self._readable(user):
            await self.close(code=4404)
            return
        await self.accept()
        self.pump = asyncio.ensure_future(self._pump())

    @database_sync_to_async
    def _readable(self, user: Any) -> bool:
        """Whether the run exists and ``user`` may read it (a refusal of an existing run is audited)."""
        run = Run.objects.select_related("graph_version__graph").filter(pk=self.run_id).first()
        if run is None:
            return False
        try:
            policy.require_read(user, run, action="run.stream")
        except policy.RunHidden:
            return False
        return True

    async def disconnect(self, code: int) -> None:
        pump = getattr(self, "pump", None)
        if pump is not None:
            pump.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        pass  # the stream is one-way; a client reconnects with ?after= to rewind

    @database_sync_to_async
    def _fetch(self) -> list[dict[str, Any]]:
        rows = RunEvent.objects.filter(run_id=self.run_id, id__gt=self.after).order_by("id")[:BATCH]
        return list(EventOutput(rows, many=True).data)

    async def _pump(self) -> None:
        while True:
            events = await self._fetch()
            for event in events:
                await self.send_json({"type": "event", "event": event})
                self.after = event["id"]
            if len(events) < BATCH:
                await asyncio.sleep(POLL_SECONDS)
