"""The API and WebSocket sign-in stay up while the Redis that holds the throttle counters
is down: a private redis-server is killed, token-authenticated requests and WebSocket
sign-ins answer as before (the counters go to the database cache, and their limits
still hold), the outage is logged once, and the counters go back to Redis when it
answers again."""
from __future__ import annotations

import logging
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from accounts import throttling
from accounts.tokens import token_create
from tests.support.redis_server import RedisServer
from tests.support.throttling import rates

pytestmark = pytest.mark.django_db(transaction=True)


def _redis_caches(server: RedisServer, prefix: str) -> dict:
    """CACHES as settings builds them with BALLAST_CACHE_REDIS_URL set (the private server)."""
    caches = dict(settings.CACHES)
    caches["database"] = caches.get("database", caches["default"])
    caches["default"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": server.url(),
        "KEY_PREFIX": prefix,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    return caches


async def _ws_signs_in(path: str) -> bool:
    """Whether the inbox WebSocket on ``path`` is accepted, sends its snapshot and stays
    open for a moment (a consumer that crashed after accepting raises here)."""
    from ballast.asgi import application

    ws = WebsocketCommunicator(application, path)
    connected, _ = await ws.connect(timeout=10)
    if not connected:
        return False
    assert (await ws.receive_json_from(10))["type"] == "snapshot"
    quiet = await ws.receive_nothing(1.0)
    await ws.disconnect()  # re-raises what the consumer raised, if it crashed
    return quiet


def test_token_requests_and_websocket_sign_in_answer_while_redis_is_down(private_redis: RedisServer, monkeypatch, caplog) -> None:  # noqa: F811
    monkeypatch.setattr(throttling, "_counters", throttling._Counters())
    monkeypatch.setattr(throttling, "REDIS_RETRY_SECONDS", 0.2)
    caplog.set_level(logging.WARNING, logger="ballast.throttling")
    prefix = f"ballast-test-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_user("ada", password="pw")
    token, key = token_create(user=user, name="t")
    layers = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [private_redis.url(1)]}}}
    server = redis.Redis.from_url(private_redis.url())

    def counted_in_redis() -> bool:
        return bool(server.keys(f"{prefix}:*throttle:token:{token.pk}:*"))

    with override_settings(CACHES=_redis_caches(private_redis, prefix), CHANNEL_LAYERS=layers, REST_FRAMEWORK=rates(token="4/hour")):
        client = APIClient(raise_request_exception=False)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert client.get("/api/v1/graphs/").status_code == 200
        assert counted_in_redis()

        private_redis.kill()
        # Counted afresh in the database cache: the limit still holds, nothing answers 5xx.
        codes = [client.get("/api/v1/graphs/").status_code for _ in range(5)]
        assert codes == [200, 200, 200, 200, 429], codes
        assert async_to_sync(_ws_signs_in)(f"/ws/approvals/?token={key}")
        assert not async_to_sync(_ws_signs_in)("/ws/approvals/?token=bal_not-a-real-key")
        down = [r for r in caplog.records if "does not answer" in r.getMessage()]
        assert len(down) == 1, [r.getMessage() for r in caplog.records]  # once per outage, not per request

        private_redis.start()  # the same port, empty
        server = redis.Redis.from_url(private_redis.url())
        throttling._counters._next_try = 0.0  # Redis is tried again (after REDIS_RETRY_SECONDS)
        assert client.get("/api/v1/graphs/").status_code == 200
        assert counted_in_redis()
        assert [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()] != []
