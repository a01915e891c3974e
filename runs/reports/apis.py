"""API views of the report pages: cost totals, budgets and CSV export; audit verification, filter choices and export; workers; run alerts.

Costs count only the runs the caller may read (``accounts.policy``, in the selectors);
the audit log is for admins (``IsAdmin``, as its list); the workers page for admins and
operators. Exports are downloads (``Content-Disposition: attachment``) built from the
same selectors as the pages, so a file holds what the page shows.
"""
from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response

from accounts.authentication import IsAdmin, is_admin
from accounts.policy import may_operate_some_graph
from audit.chain import audit_verify
from core.api import ApiError, ApiView
from graphs.models import Graph
from runs.reports import alerts
from runs.reports import selectors as report_selectors
from runs.reports.formatting import CsvWriter
from runs.reports.serializers import (
    AuditEntryOutput,
    AuditExportInput,
    AuditFacetsOutput,
    AuditVerifyInput,
    AuditVerifyOutput,
    CostBudgetOutput,
    CostExportInput,
    CostQueryInput,
    CostRowOutput,
    CostTotalsOutput,
    CostTotalsQueryInput,
    RunAlertInput,
    RunAlertOutput,
    WorkersOutput,
    cost_filters,
)

COSTS = ["costs"]
AUDIT = ["audit"]
MICRO = Decimal("0.000001")


class CostTotalsApi(ApiView):
    """GET: the totals over the cost rows' filters (run, graph, model, day range): priced
    spend, attempts whose price is unknown, tokens, and the part of the spend that went to
    retries and to crash re-runs, apart from first attempts. Runs the caller may read."""

    @extend_schema(tags=COSTS, operation_id="costs_totals", parameters=[CostTotalsQueryInput], responses=CostTotalsOutput)
    def get(self, request: Any) -> Response:
        q = self.validated(CostTotalsQueryInput, request.query_params)
        return Response(CostTotalsOutput(report_selectors.cost_totals(viewer=request.user, **cost_filters(q))).data)


class CostBudgetsApi(ApiView):
    """GET: spend against budgets, per graph, over the runs created in the day range that
    carried a USD budget (runs the caller may read)."""

    @extend_schema(tags=COSTS, operation_id="costs_budgets", parameters=[CostTotalsQueryInput], responses=CostBudgetOutput(many=True))
    def get(self, request: Any) -> Response:
        q = self.validated(CostTotalsQueryInput, request.query_params)
        rows = report_selectors.cost_budgets(viewer=request.user, filters=cost_filters(q)["filters"])
        return Response(CostBudgetOutput(rows, many=True).data)


def _csv_money(value: Any, unpriced: int, attempts: int) -> str:
    """A cost cell: the priced sum, or "unknown" when every attempt of the row is unpriced."""
    if attempts and unpriced == attempts:
        return "unknown"
    return str(Decimal(value or 0).quantize(MICRO))


class CostExportApi(ApiView):
    """GET: the cost rows of ``group_by`` (every row, not a page) as a CSV download, with
    the same filters and order as ``GET /costs/``. A cost whose every attempt is unpriced
    reads "unknown"; ``unpriced_attempts`` says how many attempts a priced sum leaves out."""

    @extend_schema(
        tags=COSTS,
        operation_id="costs_export",
        parameters=[CostQueryInput, CostExportInput],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV, one row per group.")},
    )
    def get(self, request: Any) -> HttpResponse:
        q = self.validated(CostQueryInput, request.query_params)
        self.validated(CostExportInput, request.query_params)
        rows = report_selectors.cost_aggregate(viewer=request.user, group_by=q["group_by"], order=q["order"], **cost_filters(q))
        out = io.StringIO()
        writer = CsvWriter(out)
        columns = ["key", "label"] + (["run"] if q["group_by"] == "step" else []) + (["graph"] if q["group_by"] == "node" else [])
        writer.writerow(
            [q["group_by"] if c == "key" else c for c in columns]
            + ["cost_usd", "unpriced_attempts", "attempts", "input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens",
               "retry_cost_usd", "retry_attempts", "crash_rerun_cost_usd", "crash_rerun_attempts"]
        )
        for row in rows:
            data = CostRowOutput(row).data
            writer.writerow(
                [data.get(c, "") for c in columns]
                + [
                    _csv_money(row["cost_usd"], row["unpriced_attempts"], row["attempts"]), row["unpriced_attempts"], row["attempts"],
                    row["input_tokens"], row["cached_input_tokens"], row["cache_write_tokens"], row["output_tokens"],
                    _csv_money(row["retry_cost_usd"], row["retry_unpriced_attempts"], row["retry_attempts"]), row["retry_attempts"],
                    _csv_money(row["crash_rerun_cost_usd"], row["crash_rerun_unpriced_attempts"], row["crash_rerun_attempts"]),
                    row["crash_rerun_attempts"],
                ]
            )
        span = "-".join(str(q[k]) for k in ("since", "until") if q.get(k)) or "all"
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="ballast-costs-by-{q["group_by"]}-{span}.csv"'
        return response


class AuditVerifyApi(ApiView):
    """GET: recompute the audit hash chains (all, or ``scope``) and say whether they are
    intact: an edited, deleted, reordered or cut-off entry is a problem (admins)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=AUDIT, operation_id="audit_verify", parameters=[AuditVerifyInput], responses=AuditVerifyOutput)
    def get(self, request: Any) -> Response:
        q = self.validated(AuditVerifyInput, request.query_params)
        started = time.monotonic()
        report = audit_verify(scope=q.get("scope"))
        body = {
            "ok": report.ok,
            "entries": report.entries,
            "chains": report.chains,
            "problems": [vars(p) for p in report.problems[:200]],
            "scope": q.get("scope"),
            "verified_at": timezone.now(),
            "seconds": round(time.monotonic() - started, 3),
        }
        return Response(AuditVerifyOutput(body).data)


class AuditFacetsApi(ApiView):
    """GET: the distinct actions, actor types and object types in the log: the audit
    page's filter choices (admins)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=AUDIT, operation_id="audit_facets", responses=AuditFacetsOutput)
    def get(self, request: Any) -> Response:
        return Response(AuditFacetsOutput(report_selectors.audit_facets()).data)


AUDIT_COLUMNS = ("id", "created_at", "actor_type", "actor", "action", "object_type", "object_id", "scope", "seq", "prev_hash", "hash", "data")


class _Echo:
    def write(self, value: str) -> str:
        return value


class AuditExportApi(ApiView):
    """GET: every audit entry matching the list's filters, newest first, as a CSV or JSON
    Lines download (``kind``), streamed in chunks so a long log never sits in memory
    (admins). Each line carries the entry's chain position and hashes, so an exported
    file can be checked against the chain."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(
        tags=AUDIT,
        operation_id="audit_export",
        parameters=[AuditExportInput],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR), (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR)},
    )
    def get(self, request: Any) -> StreamingHttpResponse:
        q = dict(self.validated(AuditExportInput, request.query_params))
        fmt = q.pop("kind")
        entries = report_selectors.audit_list(**q).iterator(chunk_size=2000)

        def rows() -> Iterator[dict[str, Any]]:
            for entry in entries:
                output: serializers.Serializer = AuditEntryOutput(entry)  # for mypy, its field "data" hides .data
                yield dict(output.data)

        if fmt == "jsonl":
            body: Iterator[str] = (json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows())
            content_type = "application/x-ndjson; charset=utf-8"
        else:
            writer = CsvWriter(_Echo())

            def lines() -> Iterator[str]:
                yield writer.writerow(AUDIT_COLUMNS)
                for row in rows():
                    yield writer.writerow([json.dumps(row["data"], sort_keys=True) if c == "data" else row[c] for c in AUDIT_COLUMNS])

            body, content_type = lines(), "text/csv; charset=utf-8"
        response = StreamingHttpResponse(body, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="ballast-audit-{timezone.now():%Y%m%d-%H%M%S}.{fmt}"'
        return response


class IsAdminOrOperator(permissions.BasePermission):
    """Staff, members of ``operators``, or a user some graph names as its operator (``may_operate_some_graph``)."""

    message = "Only administrators and operators may see the workers."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(is_admin(user) or may_operate_some_graph(user))


class WorkersApi(ApiView):
    """GET: every registered worker cluster (host, pid, heartbeat, alive) with the steps
    it is running, running steps no live worker holds, and the queue depth."""

    permission_classes = ApiView.permission_classes + [IsAdminOrOperator]

    @extend_schema(tags=["workers"], operation_id="workers_list", responses=WorkersOutput)
    def get(self, request: Any) -> Response:
        return Response(WorkersOutput(report_selectors.workers_overview(viewer=request.user)).data)


def _alert_body(user: Any, graph: Graph) -> dict[str, Any]:
    subscription = alerts.alert_get(user=user, graph=graph)
    return {
        "graph": graph.pk,
        "subscribed": subscription is not None,
        "on_failed": bool(subscription and subscription.on_failed),
        "on_parked": bool(subscription and subscription.on_parked),
        "email": user.email or "",
    }


class RunAlertApi(ApiView):
    """GET: whether the caller gets an email when a run of the graph fails or is parked.
    PUT ``{on_failed, on_parked}``: set it (both false: stop). Only the graph's owners
    (staff, builders, its creator, its operators) may subscribe: 403 for others."""

    def _graph(self, request: Any, graph_id: int) -> Graph:
        graph = get_object_or_404(Graph, pk=graph_id)
        if not alerts.may_subscribe(request.user, graph):
            raise ApiError(403, "permission_denied", "Only the graph's owners (builders, its creator, its operators, admins) may ask for its run alerts.")
        return graph

    @extend_schema(tags=["graphs"], operation_id="graphs_alerts_get", responses=RunAlertOutput)
    def get(self, request: Any, graph_id: int) -> Response:
        return Response(RunAlertOutput(_alert_body(request.user, self._graph(request, graph_id))).data)

    @extend_schema(tags=["graphs"], operation_id="graphs_alerts_set", request=RunAlertInput, responses=RunAlertOutput)
    def put(self, request: Any, graph_id: int) -> Response:
        graph = self._graph(request, graph_id)
        q = self.validated(RunAlertInput, request.data)
        alerts.alert_set(user=request.user, graph=graph, on_failed=q["on_failed"], on_parked=q["on_parked"])
        return Response(RunAlertOutput(_alert_body(request.user, graph)).data)
