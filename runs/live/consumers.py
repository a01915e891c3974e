"""Run events over a WebSocket, gap-free and committed only (runs.engine.store.events, runs.live.hub).

Two routes:

- ``ws/runs/<run_id>/?after=<seq>``: one run's events with seq > ``after`` (default 0:
  all of them), then new ones as they commit;
- ``ws/runs/``: several runs on one socket (the run list): the client sends
  ``{"type": "follow", "run": <id>, "after": <seq>}`` and ``{"type": "unfollow", "run": <id>}``;
  and ``{"type": "watch_new"}`` / ``{"type": "unwatch_new"}`` to be told
  ``{"type": "runs.created"}`` when runs were created (the list's first page reloads
  through the API, which applies the reader's filters and permissions; the message names
  no run). One query per poll interval per web process serves every watching socket.

Events are sent as ``{"type": "event", "event": {id, seq, run, step, kind, data,
created_at}}``, per run in seq order with no gaps and no repeats: the backlog is read from
the table, then the web process's shared hub (runs.live.hub) hands over what commits next.
A client that reconnects with the last seq it saw loses nothing and sees nothing twice.

Refusals: close codes 4401 not authenticated, 4400 bad ``after``, 4404 no such run or one
the caller may not read (``accounts.policy``; the refusal is audited), before accept, so
the handshake is refused. On ``ws/runs/`` a refused follow answers ``{"type": "error",
"error": {"code", "message", "where"}}`` and the socket stays open. A frame that is not
JSON text closes the socket (:class:`JsonFramesConsumer`): 4415 for a binary frame, 4400
for text that is not JSON.
"""
from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts import policy
from core import metrics
from runs.live.hub import Follower, hub
from runs.models import Run
from runs.sandbox import values

# Runs one socket may follow at once (a page of the run list is 50).
MAX_FOLLOWED = 500
MAX_SEQ_DIGITS = 18


def query_param(scope: dict[str, Any], name: str) -> str | None:
    """The first value of query parameter ``name`` of a WebSocket scope, or None."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[0] if values else None


def parse_seq(raw: Any) -> int | None:
    """A cursor as sent by a client (a non-negative integer, or its decimal text), or None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if 0 <= raw < 10**MAX_SEQ_DIGITS else None
    if isinstance(raw, str) and raw.isdigit() and len(raw) <= MAX_SEQ_DIGITS:
        return int(raw)
    return None


@database_sync_to_async
def readable(user: Any, run_id: int) -> bool:
    """Whether the run exists and ``user`` may read it (a refusal of an existing run is audited)."""
    run = Run.objects.select_related("graph_version__graph").filter(pk=run_id).first()
    if run is None:
        return False
    try:
        policy.require_read(user, run, action="run.stream")
    except policy.RunHidden:
        return False
    return True


# Close codes for a frame that is not JSON text, in the 4000 + HTTP status style of the
# handshake refusals (4400, 4401, 4404). Not RFC 6455's 1003 and 1007: daphne (autobahn)
# refuses to send any code but 1000 and 3000-4999, and the socket would end with 1011.
CLOSE_BINARY_FRAME = 4415  # unsupported media type: every message is JSON text
CLOSE_NOT_JSON = 4400  # bad request: the text did not parse as JSON


class JsonFramesConsumer(AsyncJsonWebsocketConsumer):
    """An ``AsyncJsonWebsocketConsumer`` that closes the socket on a frame it cannot read
    instead of raising inside the server (a traceback and close code 1011): a binary frame
    closes with :data:`CLOSE_BINARY_FRAME`, text that is not strict JSON (NaN and
    Infinity included, as everywhere in Ballast: ``runs.sandbox.values.loads``) with
    :data:`CLOSE_NOT_JSON`. Messages that parse go to ``receive_json`` as before."""

    # The ``stream`` label of ballast_websockets_open (bounded: one per consumer class).
    metrics_stream = "runs"
    _counted = False

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accept the socket and count it open (ballast_websockets_open) until it closes."""
        await super().accept(subprotocol, headers)
        if not self._counted:
            self._counted = True
            metrics.WEBSOCKETS_OPEN.labels(stream=self.metrics_stream).inc()

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        if self._counted:
            self._counted = False
            metrics.WEBSOCKETS_OPEN.labels(stream=self.metrics_stream).dec()
        await super().websocket_disconnect(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if text_data is None:
            await self.close(code=CLOSE_BINARY_FRAME, reason="binary frame: send JSON text")
            return
        try:
            content = values.loads(text_data)
        except ValueError:
            await self.close(code=CLOSE_NOT_JSON, reason="the frame is not JSON")
            return
        await self.receive_json(content, **kwargs)


class RunEventsConsumer(JsonFramesConsumer):
    """Streams the events of one run (``run_id`` in the route) or of the runs the client follows."""

    # No channel of its own: nothing is ever sent to one socket (the process's hub joins
    # the runs' groups, runs.live.hub). With the Redis layer a channel per socket meant one
    # blocking Redis read per socket, and a Redis error there (a restart, an outage, a
    # socket time-out) ended the consumer and closed the socket with 1011. A layer alias
    # that is not configured gives the consumer no layer (channels.layers.get_channel_layer).
    channel_layer_alias = None
    follower: Follower | None = None
    watching_new = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        run_id = self.scope["url_route"]["kwargs"].get("run_id")
        after = parse_seq(query_param(self.scope, "after") or "0")
        if after is None:
            await self.close(code=4400)
            return
        if run_id is not None and not await readable(user, int(run_id)):
            await self.close(code=4404)
            return
        await self.accept()
        self.follower = Follower(self._send_event)
        if run_id is not None:
            await self.follower.follow(int(run_id), after)

    async def _send_event(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "event": event})

    async def disconnect(self, code: int) -> None:
        if self.watching_new:
            hub().unwatch_new_runs(self._runs_created)
        if self.follower is not None:
            await self.follower.close()

    def _runs_created(self) -> None:
        # Called by the hub's poller: never block it (one message per poll at most).
        asyncio.ensure_future(self.send_json({"type": "runs.created"}))

    async def _error(self, code: str, message: str, where: str, run: Any = None) -> None:
        await self.send_json({"type": "error", "run": run, "error": {"code": code, "message": message, "where": where}})

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if self.follower is None:
            return
        if self.scope["url_route"]["kwargs"].get("run_id") is not None:
            await self._error("bad_request", "this socket streams one run; open ws/runs/ to follow several", "type")
            return
        if isinstance(content, dict) and content.get("type") in ("watch_new", "unwatch_new"):
            if content["type"] == "watch_new" and not self.watching_new:
                self.watching_new = True
                await hub().watch_new_runs(self._runs_created)
            elif content["type"] == "unwatch_new" and self.watching_new:
                self.watching_new = False
                hub().unwatch_new_runs(self._runs_created)
            return
        if not isinstance(content, dict) or content.get("type") not in ("follow", "unfollow"):
            await self._error("bad_request", 'send {"type": "follow", "run": <id>, "after": <seq>} or {"type": "unfollow", "run": <id>}', "type")
            return
        run_id = parse_seq(content.get("run"))
        if run_id is None:
            await self._error("bad_request", "run must be a run id (a non-negative integer)", "run", content.get("run"))
            return
        if content["type"] == "unfollow":
            await self.follower.unfollow(run_id)
            return
        after = parse_seq(content.get("after", 0))
        if after is None:
            await self._error("bad_request", "after must be the last seq seen (a non-negative integer)", "after", run_id)
            return
        if run_id not in self.follower.cursors and len(self.follower.cursors) >= MAX_FOLLOWED:
            await self._error("too_many", f"one socket follows at most {MAX_FOLLOWED} runs; unfollow some first", "run", run_id)
            return
        if not await readable(self.scope["user"], run_id):
            await self._error("not_found", f"no run {run_id} you may read", "run", run_id)
            return
        await self.follower.follow(run_id, after)
