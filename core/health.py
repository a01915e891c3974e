"""Readiness checks of what a web process depends on: the database, its migrations, and Redis where the settings use it.

Each check returns a :class:`Check` (ok or the error, and how long it took) and never
raises; each is bounded so a hung dependency does not hang the probe that calls it:
PostgreSQL statements get a ``statement_timeout`` (and the connection keeps the network
timeouts of ``ballast.settings.pg_network_options``), Redis gets socket timeouts of
:data:`REDIS_TIMEOUT_SECONDS` and no retry loop. Ground floor: reads settings and the
database, imports no app.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

# A probe runs every second or so: a dependency slower than this is as good as down.
REDIS_TIMEOUT_SECONDS = 1.0
DATABASE_TIMEOUT_MS = 1000


@dataclass
class Check:
    """One check's outcome: ``ok``, the ``error`` (one line, "" when ok), ``ms`` it took,
    and ``extra`` keys for the detail (the pending migrations)."""

    ok: bool
    ms: float
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The check as the JSON detail shows it: ``{"ok", "ms", "error"?, ...extra}``."""
        out: dict[str, Any] = {"ok": self.ok, "ms": round(self.ms, 2)}
        if self.error:
            out["error"] = self.error
        return out | self.extra


def _error_text(exc: BaseException) -> str:
    """An exception as one line: its class and first line of message."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


# --------------------------------------------------------------------------- database

# The graph's leaf migrations (app, name) -> the names each replaces (a squashed
# migration is applied when every migration it replaces is). Read from disk once per
# process: the code's migrations do not change while it runs.
_leaves: dict[tuple[str, str], list[tuple[str, str]]] | None = None
# Once every leaf was seen applied, later probes skip the read (migrations are applied
# forward by a deploy, not taken back under a running process).
_all_applied = False
_lock = threading.Lock()


def _migration_leaves() -> dict[tuple[str, str], list[tuple[str, str]]]:
    global _leaves
    with _lock:
        if _leaves is None:
            loader = MigrationLoader(None, ignore_no_migrations=True)
            _leaves = {leaf: list(getattr(loader.graph.nodes[leaf], "replaces", []) or []) for leaf in loader.graph.leaf_nodes()}
        return _leaves


def forget() -> None:
    """Drop the cached "every migration is applied" (tests that unapply one)."""
    global _all_applied
    _all_applied = False


def pending_migrations(connection: BaseDatabaseWrapper | None = None) -> list[str]:
    """The graph's leaf migrations not recorded as applied on ``connection`` (default: the
    default database), as ``"app.name"`` (empty: up to date). One read of
    ``django_migrations``, skipped once a read found nothing pending."""
    global _all_applied
    if _all_applied:
        return []
    applied = set(MigrationRecorder(connection or connections[DEFAULT_DB_ALIAS]).applied_migrations())
    pending = [
        f"{app}.{name}" for (app, name), replaces in _migration_leaves().items()
        if (app, name) not in applied and not (replaces and all(r in applied for r in replaces))
    ]
    if not pending:
        _all_applied = True
    return pending


def database_checks(using: str = DEFAULT_DB_ALIAS) -> tuple[Check, Check]:
    """The database ``using`` (one ``SELECT 1``) and its migrations (:func:`pending_migrations`), in
    one short transaction that is rolled back (it writes nothing; on PostgreSQL it carries
    a ``statement_timeout`` of :data:`DATABASE_TIMEOUT_MS`, which the roll-back undoes,
    inside a caller's transaction too). When the database does not answer, the migrations
    are not known: both fail."""
    connection = connections[using]
    started = time.perf_counter()
    try:
        with transaction.atomic(using=using):
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("SET LOCAL statement_timeout = %s", [DATABASE_TIMEOUT_MS])
                cursor.execute("SELECT 1")
                cursor.fetchone()
                database = Check(ok=True, ms=(time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                try:
                    pending = pending_migrations(connection)
                    migrations = Check(ok=not pending, ms=(time.perf_counter() - started) * 1000,
                                       error=f"{len(pending)} migration(s) not applied" if pending else "",
                                       extra={"pending": pending} if pending else {})
                except DatabaseError as exc:
                    migrations = Check(ok=False, ms=(time.perf_counter() - started) * 1000, error=_error_text(exc))
            transaction.set_rollback(True, using=using)
    except DatabaseError as exc:
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()  # the next request opens a new one
        ms = (time.perf_counter() - started) * 1000
        return Check(ok=False, ms=ms, error=_error_text(exc)), Check(ok=False, ms=0.0, error="database unreachable")
    return database, migrations


# --------------------------------------------------------------------------- redis


def redis_urls() -> dict[str, str]:
    """What the settings use Redis for, as ``{use: url}``: ``cache`` (a Redis cache
    backend), ``channels`` (the channels-redis layer), ``queue`` (django-q2's Redis
    broker). Empty when Redis is not configured (the embedded default)."""
    urls: dict[str, str] = {}
    cache = settings.CACHES.get("default", {})
    if cache.get("BACKEND", "").endswith("RedisCache"):
        location = cache.get("LOCATION")
        urls["cache"] = location[0] if isinstance(location, list | tuple) else str(location)
    layer = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {})
    if "channels_redis" in layer.get("BACKEND", ""):
        host = (layer.get("CONFIG", {}).get("hosts") or [None])[0]
        address = host.get("address") if isinstance(host, dict) else host
        if isinstance(address, str):
            urls["channels"] = address
    q_cluster = getattr(settings, "Q_CLUSTER", {})
    if q_cluster.get("redis"):
        redis_conf = q_cluster["redis"]
        urls["queue"] = redis_conf if isinstance(redis_conf, str) else "redis://{host}:{port}/{db}".format(
            host=redis_conf.get("host", "127.0.0.1"), port=redis_conf.get("port", 6379), db=redis_conf.get("db", 0))
    return urls


# One client (and its connection pool) per URL for the life of the process: a probe a
# second reuses its connection instead of opening one each time.
_clients: dict[str, Any] = {}


def _redis_client(url: str) -> Any:
    import redis  # only when Redis is configured: the embedded default never imports it
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with _lock:
        client = _clients.get(url)
        if client is None:
            # One retry without back-off: a pooled connection that a Redis restart closed
            # is replaced at once, and a Redis that does not answer costs at most two
            # time-outs (redis-py's default retries back off for seconds).
            client = _clients[url] = redis.Redis.from_url(
                url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), 1), health_check_interval=0,
            )
        return client


def redis_check(url: str) -> Check:
    """``PING`` on the Redis at ``url``, within :data:`REDIS_TIMEOUT_SECONDS` per attempt."""
    started = time.perf_counter()
    try:
        _redis_client(url).ping()
    except Exception as exc:  # noqa: BLE001 - any failure (refused, timed out, auth, bad URL) is "unreachable"
        return Check(ok=False, ms=(time.perf_counter() - started) * 1000, error=_error_text(exc))
    return Check(ok=True, ms=(time.perf_counter() - started) * 1000)


def redis_checks() -> dict[str, Check]:
    """A check per use of Redis (:func:`redis_urls`), named ``redis:<use>``; a URL that
    serves several uses is pinged once."""
    by_url: dict[str, Check] = {}
    out: dict[str, Check] = {}
    for use, url in redis_urls().items():
        if url not in by_url:
            by_url[url] = redis_check(url)
        out[f"redis:{use}"] = by_url[url]
    return out


def readiness() -> dict[str, Check]:
    """Every readiness check by name: ``database``, ``migrations``, and ``redis:<use>``
    for each configured use of Redis. Ready when all are ok."""
    database, migrations = database_checks()
    return {"database": database, "migrations": migrations, **redis_checks()}
