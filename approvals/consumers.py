"""The approvals inbox over a WebSocket: ``ws/approvals/``.

On connect the caller gets ``{"type": "snapshot", "approvals": [...]}``: every pending
request they may decide. Then, polling the database every ``POLL_SECONDS`` (rows first:
it works whichever process created or decided a request), ``{"type": "approval.pending",
"approval": {...}}`` for each new one and ``{"type": "approval.closed", "approval":
{...}}`` for each one that left the inbox (decided, or its run ended). A reconnect gets a
fresh snapshot, so nothing is lost. Close code 4401: not authenticated.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.serializers import ApprovalOutput
from approvals.services import user_may_decide

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
        self.verdicts: dict[int, bool] = {}  # approval id -> may this user decide it
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
        """(arrived, left) since the last poll; one cheap query when nothing changed."""
        pending = set(ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).values_list("id", flat=True))
        unknown = pending - set(self.verdicts)
        if unknown:
            for request in ApprovalRequest.objects.select_related("run__graph_version__graph").filter(pk__in=unknown):
                self.verdicts[request.pk] = user_may_decide(self.user, request)
        mine = {pk for pk in pending if self.verdicts.get(pk)}
        arrived, left = mine - self.inbox, self.inbox - mine
        self.inbox = mine
        qs = ApprovalRequest.objects.select_related("run__graph_version__graph").order_by("-id")
        return (
            self._serialise(qs.filter(pk__in=arrived)) if arrived else [],
            self._serialise(qs.filter(pk__in=left)) if left else [],
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
