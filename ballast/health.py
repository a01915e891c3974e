"""Health probes for load balancers and orchestrators: ``/healthz`` (the process answers) and ``/readyz`` (its dependencies do).

Both answer a one-word ``text/plain`` body without a token, a session or a CSRF check,
and are answered by :class:`HealthProbeMiddleware`, first in the middleware stack: no
session, authentication, django-axes or throttle work, and no ``ALLOWED_HOSTS`` check
(a load balancer probes by the address it reaches, ``Host: 10.0.3.7:8000``, which no
allowed-hosts list names). The one-word body builds no URL from the Host header, so
there is nothing to poison. ``/readyz?detail=1`` adds a JSON detail for an API token of
an administrator (staff): each check with its latency, and the worker hosts' liveness,
which is reported and never makes a web host unready (workers are not this process's
dependency: a web host that went unready with them would take the API and the approval
inbox down too). The same middleware answers ``/metrics`` (ballast.metrics), which
Prometheus scrapes by address too.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse

from ballast.access import admin_token_refusal
from ballast.metrics import metrics_view
from core import health
from runs.engine import api as engine_api

log = logging.getLogger("ballast.health")

# Whether the last /readyz of this process was ready (None: none yet): a change is
# logged once, not every probe.
_last_ready: bool | None = None


def _plain(body: str, status: int) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    if status >= 500:
        # Django logs every 5xx as an error (django.request); a probe every second of an
        # unready host would fill the log. The change of state is logged once instead.
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's own flag for "already logged"
    return response


def healthz(request: HttpRequest) -> HttpResponse:
    """``GET /healthz``: 200 ``ok`` while the process serves requests. Touches nothing:
    no database, no Redis, no session."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    return _plain("ok", 200)


def _note(ready: bool, checks: dict[str, health.Check]) -> None:
    """Log a change of this process's readiness (a warning naming the failed checks)."""
    global _last_ready
    if ready == _last_ready:
        return
    _last_ready = ready
    if ready:
        log.info("ready")
    else:
        log.warning("not ready: %s", "; ".join(f"{name}: {c.error}" for name, c in checks.items() if not c.ok))


def _workers() -> dict[str, Any]:
    try:
        return engine_api.workers_health()
    except DatabaseError as exc:
        return {"error": f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"}


def readyz(request: HttpRequest) -> HttpResponse:
    """``GET /readyz``: 200 ``ready`` when the database answers, every migration of this
    code is applied and each configured use of Redis answers (``core.health.readiness``);
    503 ``unready`` otherwise. ``?detail=1`` with an administrator's API token: the same
    status with JSON ``{"status", "checks": {name: {"ok", "ms", "error"?}}, "workers"}``
    (``runs.engine.api.workers_health``; never part of the status); without one, 401
    (403 for a token that is not staff) and no detail."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    detail = request.GET.get("detail", "").lower() in {"1", "true", "yes"}
    if detail:
        refused = admin_token_refusal(request)
        if refused is not None:
            return refused
    checks = health.readiness()
    ready = all(check.ok for check in checks.values())
    _note(ready, checks)
    status = 200 if ready else 503
    if not detail:
        return _plain("ready" if ready else "unready", status)
    response = JsonResponse({
        "status": "ready" if ready else "unready",
        "checks": {name: check.as_dict() for name, check in checks.items()},
        # Not read again from a database that just failed (a second connect time-out).
        "workers": _workers() if checks["database"].ok else {"error": "database unreachable"},
    }, status=status)
    response["Cache-Control"] = "no-store"
    if status >= 500:
        response._has_been_logged = True  # type: ignore[attr-defined]  # see _plain
    return response


# The probe paths, answered before any other middleware (URLs in ballast/urls.py name them
# too). /metrics too: Prometheus scrapes by address, as a load balancer probes.
PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics_view}


class HealthProbeMiddleware:
    """First in MIDDLEWARE: answers :data:`PROBES` itself, before the security
    middleware's redirects, ``ALLOWED_HOSTS``, sessions, CSRF, authentication and
    django-axes; every other request passes on untouched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is None:
            return self.get_response(request)
        return probe(request)
