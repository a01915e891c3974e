"""The web's ``GET /metrics``: this host's Prometheus metrics plus the gauges read from the database at scrape time, behind a token or an allowed address.

Counters, histograms and live gauges are recorded where things happen (core.metrics) and
added up over this host's processes. What is a fact of the database rather than of a
process (queue depth and the age of the oldest due step, runs by status, approvals
waiting and the oldest one's age, worker hosts and clusters alive) comes from :class:`DatabaseCollector`, one collector
read at scrape time, on the web's endpoint only: every web host answers the same
numbers, so Prometheus reads them from whichever it scrapes (``max by (status)``),
and worker hosts' endpoints never query the database. Six cheap queries per scrape:
the due-step count uses the claim's partial index; runs by status is one grouped count;
liveness reads the Worker and HostHeartbeat tables (a row per cluster, a row per host).

Access: a client whose address (REMOTE_ADDR) is in ``BALLAST_METRICS_ALLOW``, or a
staff user's API token (``Authorization: Token <key>``, checked as for
``/readyz?detail=1``); anyone else gets 401 with no metric in the body. Answered by
ballast.health's probe middleware (ballast.health.PROBES), before ``ALLOWED_HOSTS``: Prometheus scrapes by
address (``Host: 10.0.3.7:8000``).
"""
from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from approvals.models import ApprovalRequest, ApprovalStatus
from ballast.access import admin_token_refusal
from core import metrics
from runs.engine import api as engine_api
from runs.models import Run, RunStatus

log = logging.getLogger("ballast.metrics")

# Every name DatabaseCollector exposes (the dashboard's check reads these too).
DATABASE_GAUGES = (
    "ballast_queue_depth",
    "ballast_queue_oldest_due_age_seconds",
    "ballast_runs",
    "ballast_approvals_waiting",
    "ballast_approvals_oldest_waiting_age_seconds",
    "ballast_metrics_database_up",
    "ballast_worker_hosts_alive",
    "ballast_workers_alive",
)


class DatabaseCollector:
    """Gauges read from the database at scrape time. A database that fails a query
    gives ``ballast_metrics_database_up 0`` and none of the other gauges (a missing
    series, not a false zero)."""

    def collect(self) -> Iterator[Metric]:
        try:
            depth, oldest_due = engine_api.queue_depth()
            by_status = dict(Run.objects.order_by().values_list("status").annotate(n=Count("id")))
            waiting = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).aggregate(n=Count("id"), oldest=Min("created_at"))
            health = engine_api.workers_health()
        except DatabaseError as exc:
            log.warning("metrics: the database gauges could not be read: %s", (str(exc).strip().splitlines() or [""])[0])
            yield GaugeMetricFamily("ballast_metrics_database_up", "Whether the database gauges could be read (1) or not (0).", value=0)
            return
        yield GaugeMetricFamily("ballast_metrics_database_up", "Whether the database gauges could be read (1) or not (0).", value=1)
        yield GaugeMetricFamily("ballast_queue_depth", "Pending steps due now (a doorbell could claim them).", value=depth)
        yield GaugeMetricFamily(
            "ballast_queue_oldest_due_age_seconds",
            "Seconds the step due longest has waited for a worker (0 when none is due).",
            value=oldest_due or 0.0,
        )
        runs = GaugeMetricFamily("ballast_runs", "Runs by status.", labels=["status"])
        for status in RunStatus.values:
            runs.add_metric([status], by_status.get(status, 0))
        yield runs
        yield GaugeMetricFamily("ballast_approvals_waiting", "Approval requests waiting for a decision.", value=waiting["n"])
        oldest = waiting["oldest"]
        age = max(0.0, (timezone.now() - oldest).total_seconds()) if oldest is not None else 0.0
        yield GaugeMetricFamily(
            "ballast_approvals_oldest_waiting_age_seconds",
            "Seconds the oldest waiting approval request has waited (0 when none waits).",
            value=age,
        )
        # Liveness as recovery judges it (runs.engine.store.liveness): a cluster (Worker row)
        # whose heartbeat is within the heartbeat window, a host with a live cluster and, on
        # PostgreSQL, a host heartbeat within BALLAST_HOST_SILENT_SECONDS. Alert on a drop.
        yield GaugeMetricFamily(
            "ballast_worker_hosts_alive",
            "Worker hosts alive now: a cluster there beats and so does the host (BALLAST_HOST_SILENT_SECONDS).",
            value=health["hosts_alive"],
        )
        yield GaugeMetricFamily(
            "ballast_workers_alive", "Worker clusters (qcluster processes) whose heartbeat is fresh now.", value=health["clusters_alive"]
        )


def _address_allowed(request: HttpRequest) -> bool:
    """Whether the client's address (REMOTE_ADDR) is in BALLAST_METRICS_ALLOW."""
    if not settings.BALLAST_METRICS_ALLOW:
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    for entry in settings.BALLAST_METRICS_ALLOW:
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            log.warning("BALLAST_METRICS_ALLOW: %r is not an address or network; ignored", entry)
    return False


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the text exposition of this host's metrics and the database
    gauges. 401 (JSON error, no metric) without an allowed address or a token, 403 for a
    token of a user who is not staff, 429 past the rate of failed tokens."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not _address_allowed(request):
        refused = admin_token_refusal(request, what="the metrics")
        if refused is not None:
            return refused
    response = HttpResponse(metrics.exposition([DatabaseCollector()]), content_type=metrics.CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
