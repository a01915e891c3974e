"""Throttles: API requests per token and per session user, failed token authentications
per address and per token prefix (429 with Retry-After, audited, never the key), failed
sign-ins per user and per address (django-axes), and counters that every process shares
(the database cache table, or Redis), shown with a second process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from rest_framework.test import APIClient

from accounts.tokens import token_create
from audit.models import AuditEntry
from tests.support.cluster import test_database_url
from tests.support.throttling import rates

ROOT = Path(__file__).resolve().parents[2]




def token_client(user, address: str = "127.0.0.1") -> tuple[APIClient, object, str]:
    token, key = token_create(user=user, name="t")
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, token, key


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user("ada", password="pw-ada")


def cache_keys() -> list[str]:
    with connection.cursor() as cur:
        cur.execute("SELECT cache_key FROM ballast_cache")
        return [row[0] for row in cur.fetchall()]


# --------------------------------------------------------------------------- API rates


def test_api_requests_are_limited_per_token_with_retry_after(user) -> None:
    with override_settings(REST_FRAMEWORK=rates(token="3/hour")):
        first, token, _ = token_client(user)
        codes = [first.get("/api/v1/graphs/").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        refused = first.get("/api/v1/graphs/")
        assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 3600
        body = refused.json()["error"]
        assert body["code"] == "throttled" and body["retry_after"] == int(refused["Retry-After"])
        # Per token: the same user's other token has its own count.
        second, _, _ = token_client(user)
        assert second.get("/api/v1/graphs/").status_code == 200
    # The count is a row of the database cache table, not one process's memory.
    assert any(f"throttle:token:{token.pk}:" in key for key in cache_keys())


def test_session_requests_are_limited_per_user(user) -> None:
    client = Client()
    client.force_login(user)
    with override_settings(REST_FRAMEWORK=rates(user="2/hour")):
        assert [client.get("/api/v1/graphs/").status_code for _ in range(3)] == [200, 200, 429]
        other = Client()
        other.force_login(get_user_model().objects.create_user("bob", password="pw"))
        assert other.get("/api/v1/graphs/").status_code == 200


def _child(env: dict[str, str], key: str, requests: int) -> list[int]:
    """Status codes of ``requests`` GETs made with token ``key`` by a new Python process."""
    script = (
        "import django, json; django.setup();"
        "from django.test import Client;"
        f"c = Client(HTTP_HOST='localhost', HTTP_AUTHORIZATION='Token {key}');"
        f"print(json.dumps([c.get('/api/v1/graphs/').status_code for _ in range({requests})]))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(DJANGO_SETTINGS_MODULE="ballast.settings", DATABASE_URL=test_database_url(), BALLAST_API_RATE_TOKEN="3/hour", **extra)
    env.pop("BALLAST_REDIS_URL", None)
    env.pop("BALLAST_CACHE_REDIS_URL", None)
    env.update(extra)
    return env


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_second_process_sees_the_count_of_the_first() -> None:
    user = get_user_model().objects.create_user("ada", password="pw")
    with override_settings(REST_FRAMEWORK=rates(token="3/hour")):
        client, _, key = token_client(user)
        assert [client.get("/api/v1/graphs/").status_code for _ in range(2)] == [200, 200]
    # Another process (its own memory, the same database): one request left, then 429.
    assert _child(_child_env(), key, 2) == [200, 429]


def _redis_url() -> str | None:
    try:
        import redis

        url = "redis://127.0.0.1:6379/0"
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except Exception:  # noqa: BLE001 - no Redis here: the test is skipped
        return None


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_with_redis_configured_two_processes_share_the_count_in_redis() -> None:
    import redis

    url = _redis_url()
    if url is None:
        pytest.skip("no Redis on 127.0.0.1:6379")
    prefix = f"ballast-test-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_user("ada", password="pw")
    _, key = token_create(user=user, name="t")
    rates()  # not in an hour's last minute (see rates)
    env = _child_env(BALLAST_CACHE_REDIS_URL=url, BALLAST_CACHE_KEY_PREFIX=prefix)
    server = redis.Redis.from_url(url)
    try:
        assert _child(env, key, 2) == [200, 200]
        assert [k.decode() for k in server.keys(f"{prefix}:*throttle:token:*")], "the count is not in Redis"
        assert _child(env, key, 2) == [200, 429]
    finally:
        for k in server.keys(f"{prefix}:*"):
            server.delete(k)


# --------------------------------------------------------------------------- failed tokens


def test_failed_tokens_are_throttled_per_address_and_audited_without_the_key(user) -> None:
    good, _, good_key = token_client(user, address="10.1.1.1")
    with override_settings(REST_FRAMEWORK=rates(token_failure_address="3/hour", token_failure_prefix="100/hour")):
        bad = [f"bal_wrong{i}xyz-secret-part-{i}" for i in range(4)]
        codes = [APIClient(REMOTE_ADDR="10.1.1.1").get("/api/v1/graphs/", HTTP_AUTHORIZATION=f"Token {k}").status_code for k in bad]
        assert codes == [401, 401, 401, 429]
        # Refused before the look-up, even a valid key from that address; not elsewhere.
        refused = good.get("/api/v1/graphs/")
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
        assert refused.json()["error"]["code"] == "throttled"
        assert APIClient(REMOTE_ADDR="10.2.2.2").get("/api/v1/graphs/", HTTP_AUTHORIZATION=f"Token {good_key}").status_code == 200
        assert APIClient(REMOTE_ADDR="10.2.2.2").get("/api/v1/graphs/", HTTP_AUTHORIZATION="Token bal_other").status_code == 401
    failed = AuditEntry.objects.filter(action="auth.login_failed", data__ip="10.1.1.1").order_by("seq")
    assert [(e.actor, e.scope, e.data["via"]) for e in failed] == [(k[:12], "auth", "token") for k in bad[:3]]
    throttled = AuditEntry.objects.get(action="auth.token_throttled")
    assert throttled.data["counter"] == "address" and throttled.data["ip"] == "10.1.1.1" and throttled.data["retry_after"] >= 1
    everything = json.dumps(list(AuditEntry.objects.values("actor", "data")))
    assert "secret-part" not in everything and good_key[12:] not in everything  # never the key


def test_failed_tokens_are_throttled_per_token_prefix_across_addresses(user) -> None:
    with override_settings(REST_FRAMEWORK=rates(token_failure_address="100/hour", token_failure_prefix="2/hour")):
        codes = [
            APIClient(REMOTE_ADDR=f"10.0.0.{i}").get("/api/v1/graphs/", HTTP_AUTHORIZATION="Token bal_revoked1-rest").status_code
            for i in range(3)
        ]
        assert codes == [401, 401, 429]
        assert APIClient(REMOTE_ADDR="10.0.0.9").get("/api/v1/graphs/", HTTP_AUTHORIZATION="Token bal_another-rest").status_code == 401
    assert AuditEntry.objects.get(action="auth.token_throttled").data["counter"] == "prefix"


# --------------------------------------------------------------------------- sign-in


def _sign_in(username: str, password: str, address: str):
    return Client(REMOTE_ADDR=address).post("/accounts/login/", {"username": username, "password": password})


@override_settings(AXES_FAILURE_LIMIT=3)
def test_failed_sign_ins_lock_out_the_user_and_the_address(user) -> None:
    get_user_model().objects.create_user("bob", password="pw-bob")
    assert [_sign_in("ada", "wrong", "10.9.0.1").status_code for _ in range(3)] == [200, 200, 429]
    locked = _sign_in("ada", "pw-ada", "10.9.0.2")  # per user: the right password, elsewhere
    assert locked.status_code == 429 and int(locked["Retry-After"]) == 15 * 60
    assert b"Sign-in locked" in locked.content and b"ballast-context" in locked.content  # the login page's shell
    assert _sign_in("bob", "pw-bob", "10.9.0.1").status_code == 429  # per address: another user, same address
    assert _sign_in("bob", "pw-bob", "10.9.0.3").status_code == 302  # signed in
    failures = AuditEntry.objects.filter(action="auth.login_failed", actor="ada")
    assert failures.count() >= 3 and all(e.data["ip"].startswith("10.9.0.") for e in failures)
    assert AuditEntry.objects.filter(action="auth.locked_out").exists()
    assert "wrong" not in json.dumps(list(AuditEntry.objects.values_list("data", flat=True)))


@override_settings(AXES_FAILURE_LIMIT=3)
def test_an_address_trying_many_users_is_locked_out(user) -> None:
    codes = [_sign_in(name, "wrong", "10.8.0.1").status_code for name in ("x1", "x2", "x3")]
    assert codes == [200, 200, 429]
    assert _sign_in("ada", "pw-ada", "10.8.0.1").status_code == 429
    assert _sign_in("ada", "pw-ada", "10.8.0.2").status_code == 302


def test_a_successful_sign_in_clears_the_users_failures(user) -> None:
    for _ in range(4):
        assert _sign_in("ada", "wrong", "10.7.0.1").status_code == 200
    assert _sign_in("ada", "pw-ada", "10.7.0.1").status_code == 302
    assert [_sign_in("ada", "wrong", "10.7.0.1").status_code for _ in range(4)] == [200] * 4


# --------------------------------------------------------------------------- the cache table


@pytest.mark.django_db(transaction=True)
def test_migrate_creates_the_cache_table() -> None:
    with connection.cursor() as cur:
        cur.execute("DROP TABLE ballast_cache")
    assert "ballast_cache" not in connection.introspection.table_names()
    call_command("migrate", verbosity=0)
    assert "ballast_cache" in connection.introspection.table_names()
    cache.set("probe", 1)
    assert cache.get("probe") == 1
