"""Throttles: API requests per token (or session user), failed token authentications per address and per token prefix, and the sign-in lockout backend.

Every counter lives in Django's default cache (``CACHES``: a table in the project's
database, or Redis), so every web process sees the same counts. Counters are fixed
windows: one cache key per (scope, who, window), created with ``cache.add`` and
counted with ``cache.incr`` (atomic on Redis; on the database cache two processes
counting the same key at the same instant may count once, which can only let a
request or two more through, never refuse one too many). A window resets at its end,
so a client may send up to twice the rate across a window boundary.

Redis down: with Redis as the cache, a counter call that Redis does not answer
(``redis.ConnectionError`` or ``TimeoutError``) goes to the database cache (CACHES
alias ``database``, the ``ballast_cache`` table) instead, and so does every counter
call of this process for the next ``REDIS_RETRY_SECONDS``; then Redis is tried again.
The limits keep holding during an outage (counted afresh in the database: a client may
get up to one more window's worth across the switch), no request answers 500, and each
process logs the outage once when it begins and once when Redis answers again
(:class:`_Counters`).

Failed password sign-ins are django-axes's (settings ``AXES_*``); this module only
gives it the client address (:func:`client_address`); the lockout page is
``ballast.pages.lockout_response`` (it has the sign-in page's look).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

__all__ = [
    "ApiRateThrottle",
    "SignInLockoutBackend",
    "client_address",
    "rate_counted",
    "token_failure_blocked",
    "token_failure_record",
]


def client_address(request: HttpRequest | Any) -> str:
    """The client's address as DRF's throttles see it: ``REMOTE_ADDR``, or with
    ``REST_FRAMEWORK["NUM_PROXIES"]`` set, the address that many proxies back in
    ``X-Forwarded-For``. Used for django-axes (``AXES_CLIENT_IP_CALLABLE``) too, so
    sign-ins and tokens count the same address."""
    return str(BaseThrottle().get_ident(request) or "")[:100]  # type: ignore[arg-type]  # it reads request.META only, which an HttpRequest has


def _rate(scope: str) -> tuple[int, int]:
    """``(requests, seconds)`` of the DRF rate named ``scope`` in DEFAULT_THROTTLE_RATES."""
    rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {})
    num, duration = SimpleRateThrottle.parse_rate(None, rates[scope])  # type: ignore[arg-type]
    if num is None or duration is None:  # a scope whose rate is None: no limit to count against
        raise ImproperlyConfigured(f"DEFAULT_THROTTLE_RATES[{scope!r}] is not set")
    return num, duration


def _window(scope: str, ident: str, now: float) -> tuple[str, int, int, float]:
    """The cache key of ``ident``'s current window in ``scope``, the scope's limit and
    duration, and the seconds left in the window."""
    limit, duration = _rate(scope)
    index = int(now // duration)
    return f"throttle:{scope}:{ident}:{index}", limit, duration, (index + 1) * duration - now


log = logging.getLogger("ballast.throttling")

# The CACHES alias the counters fall back to while Redis does not answer (settings).
FALLBACK_CACHE = "database"
# How long a process keeps counting in the fallback before it tries Redis again.
REDIS_RETRY_SECONDS = 5.0


class _Counters:
    """The cache the counters of this process use: ``default``, or the database cache
    (``FALLBACK_CACHE``) while Redis is down (see the module docstring). Only Redis's
    connection errors and time-outs switch; anything else is raised as before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down_since: float | None = None  # monotonic time of the first failure
        self._next_try = 0.0

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``caches["default"].<method>(*args, **kwargs)``, or the fallback's while Redis is down."""
        if FALLBACK_CACHE not in settings.CACHES:
            return getattr(caches["default"], method)(*args, **kwargs)
        if self._down_since is None or time.monotonic() >= self._next_try:
            try:
                result = getattr(caches["default"], method)(*args, **kwargs)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                self._failed(exc)
            else:
                self._answered()
                return result
        return getattr(caches[FALLBACK_CACHE], method)(*args, **kwargs)

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            now = time.monotonic()
            self._next_try = now + REDIS_RETRY_SECONDS
            if self._down_since is None:
                self._down_since = now
                log.warning("throttle counters: Redis does not answer (%s); counting in the database cache until it does", exc)

    def _answered(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is not None:
                log.warning("throttle counters: Redis answers again after %.1fs; counting in Redis", time.monotonic() - self._down_since)
                self._down_since = None


_counters = _Counters()


def _count(key: str, duration: int) -> int:
    """Add one to the counter ``key`` (created at 0 for ``duration`` seconds) and return it."""
    _counters.call("add", key, 0, timeout=duration + 1)
    try:
        return int(_counters.call("incr", key))
    except ValueError:  # expired between add and incr (or Redis went away between them)
        _counters.call("add", key, 1, timeout=duration + 1)
        return 1


class ApiRateThrottle(BaseThrottle):
    """DRF throttle of every API request: per API token (rate ``token``) when the
    request authenticated with one, else per signed-in user (rate ``user``); anonymous
    requests are refused by authentication before any throttle runs.

    Over the rate: DRF answers 429 with ``Retry-After`` (seconds to the window's end).
    Rates are ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` (``BALLAST_API_RATE_TOKEN``,
    ``BALLAST_API_RATE_USER``)."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        # Not at import: DRF's settings import this module before the app registry is ready.
        from accounts.models import ApiToken

        if isinstance(request.auth, ApiToken):
            scope, ident = "token", str(request.auth.pk)
        elif request.user is not None and request.user.is_authenticated:
            scope, ident = "user", str(request.user.pk)
        else:
            return True
        key, limit, duration, left = _window(scope, ident, time.time())
        if _count(key, duration) > limit:
            self._wait = left
            return False
        return True

    def wait(self) -> float | None:
        """Seconds until the window ends (DRF's ``Retry-After``)."""
        return None if self._wait is None else math.ceil(self._wait)


# --------------------------------------------------------------------------- failed tokens

_FAILURE_SCOPES = ("token_failure_address", "token_failure_prefix")


def _failure_keys(address: str, prefix: str, now: float) -> list[tuple[str, str, int, int, float]]:
    out = []
    for scope, ident in zip(_FAILURE_SCOPES, (address or "?", prefix or "?"), strict=True):
        key, limit, duration, left = _window(scope, ident, now)
        out.append((scope, key, limit, duration, left))
    return out


def rate_counted(scope: str, ident: str) -> int | None:
    """Count one request of ``ident`` against the rate ``scope`` of
    DEFAULT_THROTTLE_RATES (a fixed window, as every counter here): None when within the
    rate, else the seconds until the window ends (for ``Retry-After``)."""
    key, limit, duration, left = _window(scope, ident, time.time())
    if _count(key, duration) > limit:
        return max(1, math.ceil(left))
    return None


def token_failure_blocked(*, address: str, prefix: str) -> int | None:
    """Whether token authentication from ``address`` or with a key starting ``prefix``
    (its first 12 characters) is refused for now: the seconds to wait (for
    ``Retry-After``), or None when neither has reached its rate of failures
    (``token_failure_address``, ``token_failure_prefix``). Reads only: one cache read per
    counter."""
    waits = [left for _, key, limit, _, left in _failure_keys(address, prefix, time.time()) if (_counters.call("get", key) or 0) >= limit]
    return math.ceil(max(waits)) if waits else None


def token_failure_record(*, address: str, prefix: str, path: str = "", via: str = "token") -> None:
    """Count one failed token authentication against ``address`` and ``prefix`` and
    audit it (``auth.login_failed`` in the ``auth`` chain, actor the prefix presented,
    never the key). When a counter reaches its rate, ``auth.token_throttled`` is audited
    once for that window (which counter, the address, the prefix, seconds until it
    resets); refused attempts after that are not audited again, so a flood cannot fill
    the audit log."""
    # Imported here: DRF's settings import this module (DEFAULT_THROTTLE_CLASSES) before
    # the app registry is ready, and audit.chain imports its models.
    from audit.chain import audit

    audit(prefix or "?", "auth.login_failed", None, actor_type="anonymous", ip=address, path=path[:200], via=via)
    for scope, key, limit, duration, left in _failure_keys(address, prefix, time.time()):
        if _count(key, duration) == limit:
            audit(
                prefix or "?",
                "auth.token_throttled",
                None,
                actor_type="anonymous",
                counter=scope.removeprefix("token_failure_"),
                ip=address,
                prefix=prefix,
                retry_after=math.ceil(left),
                via=via,
            )


def token_throttled(wait: int) -> exceptions.Throttled:
    """The 429 a refused token authentication answers (DRF sets ``Retry-After``)."""
    return exceptions.Throttled(wait=wait, detail=f"Too many failed token authentications; try again in {wait} seconds.")


# --------------------------------------------------------------------------- sign-in lockout
# The lockout page itself is ballast.pages.lockout_response (AXES_LOCKOUT_CALLABLE): it has
# the sign-in page's look, which is the project's, above this app.


class SignInLockoutBackend(AxesStandaloneBackend):
    """django-axes's lockout check as the first authentication backend (it refuses a
    locked-out user or address before a password is checked; ModelBackend then checks
    the password). A call with no request (``Client.login`` in tests, a management
    command) has no address to count and is passed on to the next backend: every sign-in
    over HTTP (the login page, the admin's) passes its request."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
