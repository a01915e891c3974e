"""ballast_websockets_open counts the sockets a consumer accepted, by stream, until they close; a refused socket never counts."""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from prometheus_client import REGISTRY

from accounts.tokens import token_create
from ballast.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
TIMEOUT = 10


def _open(stream: str) -> float:
    return REGISTRY.get_sample_value("ballast_websockets_open", {"stream": stream}) or 0.0


def test_open_sockets_are_counted_by_stream_until_they_close() -> None:
    key = token_create(user=get_user_model().objects.create_user("watcher", password="pw"), name="ws")[1]
    base = {"runs": _open("runs"), "inbox": _open("inbox")}

    async def body() -> list[dict[str, float]]:
        seen = []
        refused = WebsocketCommunicator(application, "/ws/runs/")  # no token: closed with 4401, never accepted
        connected, _ = await refused.connect(timeout=TIMEOUT)
        assert not connected
        seen.append({"runs": _open("runs"), "inbox": _open("inbox")})
        runs = WebsocketCommunicator(application, f"/ws/runs/?token={key}")
        inbox = WebsocketCommunicator(application, f"/ws/approvals/?token={key}")
        assert (await runs.connect(timeout=TIMEOUT))[0] and (await inbox.connect(timeout=TIMEOUT))[0]
        seen.append({"runs": _open("runs"), "inbox": _open("inbox")})
        await runs.disconnect()
        seen.append({"runs": _open("runs"), "inbox": _open("inbox")})
        await inbox.disconnect()
        seen.append({"runs": _open("runs"), "inbox": _open("inbox")})
        return seen

    seen = async_to_sync(body)()
    deltas = [(s["runs"] - base["runs"], s["inbox"] - base["inbox"]) for s in seen]
    assert deltas == [(0, 0), (1, 1), (0, 1), (0, 0)]
