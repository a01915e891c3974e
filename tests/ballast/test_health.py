"""/healthz and /readyz through the real middleware stack: no token, session or allowed host needed, the database, migrations and Redis checked, the detail only for an admin's token."""
from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.test import AsyncClient, Client, override_settings
from django.test.utils import CaptureQueriesContext

from accounts.tokens import token_create
from ballast import health as probes
from core import health
from runs.engine.store import clock
from runs.models import HostHeartbeat, Worker
from tests.support.bounded import TIME_SLACK, finishes_within
from tests.support.redis_server import RedisServer, free_port
from tests.support.throttling import rates

# A load balancer probes by the address it reaches: a Host no ALLOWED_HOSTS names.
PROBE_HOST = "10.0.3.7:8000"


@pytest.fixture(autouse=True)
def _fresh_probe_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no cached "migrations applied" and no remembered readiness."""
    health.forget()
    monkeypatch.setattr(probes, "_last_ready", None)
    yield
    health.forget()


def _redis_settings(url: str) -> dict:
    """Settings that use Redis at ``url`` for the channel layer and django-q2's broker, as
    BALLAST_CHANNELS_REDIS_URL and BALLAST_Q_BROKER=redis make them."""
    return {
        "CHANNEL_LAYERS": {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [{"address": url}]}}},
        "Q_CLUSTER": {**settings.Q_CLUSTER, "redis": url},
    }


def _admin_key() -> str:
    user = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
    return token_create(user=user, name="probe")[1]


# --------------------------------------------------------------------------- /healthz


def test_healthz_answers_without_database_session_or_allowed_host() -> None:
    # No django_db mark: any database query here fails the test.
    client = Client(raise_request_exception=True)
    for host in ("127.0.0.1", PROBE_HOST):
        response = client.get("/healthz", HTTP_HOST=host)
        assert (response.status_code, response.content, response["Content-Type"]) == (200, b"ok", "text/plain; charset=utf-8")
        assert "sessionid" not in response.cookies and "csrftoken" not in response.cookies
    assert client.head("/healthz", HTTP_HOST=PROBE_HOST).status_code == 200
    assert client.post("/healthz").status_code == 405
    # The same host on any other page is refused: the probe's pass is its own.
    assert Client(raise_request_exception=False).get("/accounts/login/", HTTP_HOST=PROBE_HOST).status_code == 400


def test_healthz_through_the_asgi_handler_daphne_serves() -> None:
    response = async_to_sync(AsyncClient().get)("/healthz", headers={"host": PROBE_HOST})
    assert (response.status_code, response.content) == (200, b"ok")


@override_settings(SECURE_SSL_REDIRECT=True)
def test_healthz_is_not_redirected_to_https() -> None:
    assert Client().get("/healthz", HTTP_HOST=PROBE_HOST).status_code == 200
    assert Client().get("/accounts/login/").status_code == 301  # the rest of the site is


# --------------------------------------------------------------------------- /readyz


@pytest.mark.django_db
def test_readyz_is_ready_on_a_migrated_database_for_an_anonymous_probe_by_ip() -> None:
    response = Client().get("/readyz", HTTP_HOST=PROBE_HOST)
    assert (response.status_code, response.content) == (200, b"ready")
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_readyz_reads_migrations_once_then_one_select_per_probe() -> None:
    client = Client()
    with CaptureQueriesContext(connection) as first:
        assert client.get("/readyz").status_code == 200
    with CaptureQueriesContext(connection) as later:
        assert client.get("/readyz").status_code == 200
    assert any("django_migrations" in q["sql"] for q in first.captured_queries)
    sql = [q["sql"] for q in later.captured_queries]
    assert not any("django_migrations" in s for s in sql), sql
    # The probe's one statement, besides its savepoint and (PostgreSQL) its statement_timeout.
    assert [s for s in sql if "SAVEPOINT" not in s.upper() and "statement_timeout" not in s] == ["SELECT 1"]
    if connection.vendor == "postgresql":
        assert any("statement_timeout" in s for s in sql)


@pytest.mark.django_db
def test_readyz_is_unready_while_a_migration_is_not_applied() -> None:
    leaf = next(node for node in MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes() if node[0] == "runs")
    # The test database recorded as if the newest runs migration were not applied yet
    # (rolled back with the test).
    assert MigrationRecorder.Migration.objects.filter(app=leaf[0], name=leaf[1]).delete()[0] == 1
    response = Client().get("/readyz")
    assert (response.status_code, response.content) == (503, b"unready")
    assert health.pending_migrations() == [f"{leaf[0]}.{leaf[1]}"]
    MigrationRecorder.Migration.objects.create(app=leaf[0], name=leaf[1])
    assert Client().get("/readyz").content == b"ready"


@pytest.mark.django_db
def test_readyz_ready_with_redis_reachable(private_redis: RedisServer) -> None:
    caches = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": private_redis.url(2)},
              "database": settings.CACHES["default"]}
    with override_settings(CACHES=caches, **_redis_settings(private_redis.url())):
        assert health.redis_urls() == {"cache": private_redis.url(2), "channels": private_redis.url(), "queue": private_redis.url()}
        response = Client().get("/readyz")
        assert (response.status_code, response.content) == (200, b"ready")
        checks = health.readiness()
    assert {name: check.ok for name, check in checks.items()} == {
        "database": True, "migrations": True, "redis:cache": True, "redis:channels": True, "redis:queue": True,
    }


@pytest.mark.django_db
def test_readyz_unready_with_redis_unreachable_and_not_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    closed = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(**_redis_settings(closed)):
        codes = [Client().get("/readyz") for _ in range(3)]
        checks = health.readiness()
    assert [(r.status_code, r.content) for r in codes] == [(503, b"unready")] * 3
    assert checks["redis:channels"].error.startswith("ConnectionError") and checks["database"].ok
    assert [r for r in caplog.records if r.name == "django.request"] == []
    assert [r.getMessage() for r in caplog.records if r.name == "ballast.health"] == [
        f"not ready: redis:channels: {checks['redis:channels'].error}; redis:queue: {checks['redis:queue'].error}",
    ]
    assert Client().get("/readyz").status_code == 200  # Redis no longer configured
    assert [r.getMessage() for r in caplog.records if r.name == "ballast.health"][-1] == "ready"


@pytest.mark.django_db
def test_readyz_is_bounded_when_redis_accepts_but_never_answers() -> None:
    # A listener whose connections the kernel accepts and nobody reads: PING times out.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        with override_settings(**_redis_settings(url)), finishes_within(2 * health.REDIS_TIMEOUT_SECONDS * TIME_SLACK, "a probe of a silent Redis"):
            response = Client().get("/readyz")
        check = health.redis_check(url)
    assert response.status_code == 503
    assert not check.ok and check.error.startswith("TimeoutError"), check.error


# --------------------------------------------------------------------------- detail


@pytest.mark.django_db
def test_readyz_detail_needs_an_admins_token() -> None:
    client = Client()
    for headers in ({}, {"HTTP_AUTHORIZATION": "Token bal_not-a-real-key"}):
        response = client.get("/readyz?detail=1", **headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Token realm="api"'
        assert set(response.json()) == {"error"} and b"workers" not in response.content and b"database" not in response.content
    user = get_user_model().objects.create_user("ada", password="pw")
    key = token_create(user=user, name="t")[1]
    response = client.get("/readyz?detail=1", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 403 and set(response.json()) == {"error"}
    # A session is not a token: a signed-in admin still needs one.
    admin = get_user_model().objects.create_user("root", password="pw", is_staff=True)
    client.force_login(admin)
    assert client.get("/readyz?detail=1").status_code == 401
    assert client.get("/readyz").content == b"ready"  # the one word needs nothing


@pytest.mark.django_db
def test_readyz_detail_reports_checks_and_workers_without_workers_making_it_unready() -> None:
    key = _admin_key()
    client = Client()
    response = client.get("/readyz?detail=1", HTTP_AUTHORIZATION=f"Token {key}", HTTP_HOST=PROBE_HOST)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "migrations"}
    assert all(c["ok"] and c["ms"] >= 0 for c in body["checks"].values())
    # No worker at all: reported, and the web host stays ready.
    assert (body["workers"]["clusters"], body["workers"]["hosts"]) == (0, [])

    now = clock.now()
    Worker.objects.create(name="w1:101:1", host="w1", pid=101, started_at=now, heartbeat_at=now)
    Worker.objects.create(name="w2:202:1", host="w2", pid=202, started_at=now, heartbeat_at=now - timedelta(minutes=5))
    HostHeartbeat.objects.create(host="w1", beat_at=now, up_since=now)
    HostHeartbeat.objects.create(host="w2", beat_at=now - timedelta(minutes=5), up_since=now - timedelta(hours=1))
    response = client.get("/readyz?detail=1", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200
    workers = response.json()["workers"]
    assert (workers["clusters"], workers["clusters_alive"], workers["hosts_alive"]) == (2, 1, 1)
    by_host = {h["host"]: h for h in workers["hosts"]}
    assert by_host["w1"]["alive"] and by_host["w1"]["reason"] == ""
    assert not by_host["w2"]["alive"] and "heartbeat" in by_host["w2"]["reason"]
    assert by_host["w2"]["cluster_heartbeat_age_seconds"] >= 299
    assert workers["host_heartbeats"] == (connection.vendor == "postgresql")


@pytest.mark.django_db
def test_readyz_detail_names_the_failing_redis_with_its_latency() -> None:
    key = _admin_key()
    closed = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(**_redis_settings(closed)):
        response = Client().get("/readyz?detail=1", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["checks"]["database"]["ok"] and not body["checks"]["redis:queue"]["ok"]
    assert body["checks"]["redis:queue"]["error"].startswith("ConnectionError") and body["checks"]["redis:queue"]["ms"] >= 0


@pytest.mark.django_db
def test_probes_are_not_throttled_where_the_api_is() -> None:
    key = _admin_key()
    client = Client()
    with override_settings(REST_FRAMEWORK=rates(token="2/hour")):
        codes = [client.get(path, HTTP_AUTHORIZATION=f"Token {key}").status_code for path in ["/readyz?detail=1", "/readyz", "/healthz"] * 4]
        assert codes == [200] * 12
        # The same token on the API is past its rate.
        assert [client.get("/api/v1/graphs/", HTTP_AUTHORIZATION=f"Token {key}").status_code for _ in range(3)] == [200, 200, 429]
