"""The approvals inbox over a WebSocket: ``ws/approvals/``.

On connect the caller gets ``{"type": "snapshot", "approvals": [...]}``: every pending
request they may decide (the inbox selector, ``approval_list_for_user``, as the inbox API
lists them). Then, polling the database every ``POLL_SECONDS`` (rows first: it works
whichever process created or decided a request, and a change of who may decide shows at
the next poll), ``{"type": "approval.pending", "approval": {...}}`` for each new one and
``{"type": "approval.closed", "approval": {...}}`` for each one that left the inbox
(decided, its run ended, or no longer the caller's to decide). A reconnect gets a
fresh snapshot, so nothing is lost. Close code 4401: not authenticated.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.selectors import approval_list, approval_list_for_user
from approvals.serializers import ApprovalOutput

POLL_SECONDS = 0.2


class ApprovalInboxConsumer(AsyncJsonWebsocketConsumer):
    """Streams the caller's pending approvals: a snapshot, then arrivals and departures."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user = user
        self.inbox: set[int] = set()
        await self.accept()
        self.pump = asyncio.ensure_future(self._pump())

    async def disconnect(self, code: int) -> None:
        pump = getattr(self, "pump", None)
        if pump is not None:
            pump.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        pass

    def _serialise(self, requests: Any) -> list[dict[str, Any]]:
        return list(ApprovalOutput(requests, many=True, context={"request": SimpleNamespace(user=self.user)}).data)

    @database_sync_to_async
    def _poll(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(arrived, left) since the last poll; two queries (the user's groups, the inbox
        ids) when nothing changed."""
        inbox = approval_list_for_user(user=self.user)
        mine = set(inbox.values_list("id", flat=True))
        arrived, left = mine - self.inbox, self.inbox - mine
        self.inbox = mine
        return (
            self._serialise(inbox.filter(pk__in=arrived)) if arrived else [],
            # Departed requests are pending no more (or no longer this user's): any status.
            self._serialise(approval_list(status=None).filter(pk__in=left)) if left else [],
        )

    async def _pump(self) -> None:
        arrived, _ = await self._poll()
        await self.send_json({"type": "snapshot", "approvals": arrived})
        while True:
            await asyncio.sleep(POLL_SECONDS)
            arrived, left = await self._poll()
            for approval in reversed(arrived):
                await self.send_json({"type": "approval.pending", "approval": approval})
            for approval in left:
                await self.send_json({"type": "approval.closed", "approval": approval})
