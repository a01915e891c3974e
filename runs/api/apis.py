"""Run API views: start (with Idempotency-Key), list, read, cancel, resume, retry, fork,
steps, events after a cursor, cost aggregates and the audit log.

Who may read or act on a run is ``accounts.policy``'s rule: lists and costs hold only
the runs the caller may read (in the selectors); a run the caller may not read answers
404, an action they may not take on a run they can read 403, both audited. Acting on a
run needs to be an operator of its graph; the audit log is for admins.
"""
from __future__ import annotations

import re
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from accounts import policy
from accounts.authentication import IsAdmin
from core.api import (
    CURSOR_PARAMETERS,
    ERROR_BODY,
    PAGE_PARAMETERS,
    ApiError,
    ApiView,
    bad_request,
    cursor_paginated,
    paginated,
)
from graphs.models import Graph, GraphVersion
from runs import selectors, services, start_options
from runs.api.actions import checked_fork_step
from runs.api.serializers import (
    BulkCancelOutput,
    EventOutput,
    EventPageOutput,
    EventsQueryInput,
    RunBulkCancelInput,
    RunCancelInput,
    RunDetailOutput,
    RunForkInput,
    RunGraphOutput,
    RunListFilterInput,
    RunOutput,
    RunResumeInput,
    RunStartInput,
    RunStartOutput,
    RunSummaryInput,
    RunSummaryOutput,
    StepDetailOutput,
    StepOutput,
    StepStateOutput,
    run_filter,
)
from runs.engine import api as engine
from runs.models import Run, RunStatus, StepStatus
from runs.reports import selectors as report_selectors
from runs.reports.serializers import AuditEntryOutput, AuditQueryInput, CostQueryInput, CostRowOutput, cost_filters

TAG = ["runs"]
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")  # printable ASCII, no spaces
CONFLICT = OpenApiResponse(ERROR_BODY, description="The run is not in a status that allows this.")


def _idempotency_header() -> OpenApiParameter:
    return OpenApiParameter(
        "Idempotency-Key",
        str,
        location=OpenApiParameter.HEADER,
        description="Up to 128 printable ASCII characters. The same key (per user) returns the run it first started "
        "(200) instead of starting another; a different request body with a used key is refused (422).",
        pattern=r"^[\x21-\x7e]{1,128}$",
    )


def _run(request: Any, run_id: int, *, action: str = "run.read") -> Any:
    """The run ``run_id`` if the caller may read it; else 404 (audited when it exists)."""
    run = selectors.run_get(run_id=run_id)
    policy.require_read(request.user, run, action=action)
    return run


def _run_to_act_on(request: Any, run_id: int, action: str) -> Any:
    """The run ``run_id`` if the caller may take ``action`` on it: 404 when they may not
    read it, 403 when they may read it but not act (each audited)."""
    run = selectors.run_get(run_id=run_id)
    policy.require_act(request.user, run, action)
    return run


class MayOperateSomeGraph(permissions.BasePermission):
    """An operator, a superuser, or a user some graph names as its operator (directly or
    through a group): anyone else can start nothing and is refused up front (audited)."""

    message = "Only operators may start or change runs."

    def has_permission(self, request: Any, view: Any) -> bool:
        if policy.may_operate_some_graph(request.user):
            return True
        policy.audit_denied(request.user, None, action="run.start", status=403)
        return False


class RunCollectionApi(ApiView):
    """GET: the runs the caller may read, newest first, filtered. POST: start a run
    (operators of the graph)."""

    method_permissions = {"POST": [MayOperateSomeGraph]}

    @extend_schema(tags=TAG, operation_id="runs_list", parameters=[RunListFilterInput, *CURSOR_PARAMETERS], responses=cursor_paginated(RunOutput, "Run"))
    def get(self, request: Any) -> Response:
        qs = selectors.run_list(viewer=request.user, filters=run_filter(self.validated(RunListFilterInput, request.query_params)))
        return self.paginate_cursor(qs, RunOutput, ordering="-id")

    @extend_schema(
        tags=TAG,
        operation_id="runs_start",
        parameters=[_idempotency_header()],
        request=RunStartInput,
        responses={
            201: RunStartOutput,
            200: OpenApiResponse(RunDetailOutput, description="Replay: the run this Idempotency-Key started before."),
            422: OpenApiResponse(ERROR_BODY, description="The Idempotency-Key was used with a different request."),
        },
    )
    def post(self, request: Any) -> Response:
        data = self.validated(RunStartInput, request.data)
        key = request.headers.get("Idempotency-Key")
        if key is not None and not IDEMPOTENCY_KEY.match(key):
            raise bad_request("invalid", "Idempotency-Key must be 1 to 128 printable ASCII characters.", {"Idempotency-Key": ["Invalid key."]})
        graph = Graph.objects.filter(pk=data["graph"]).first()
        if graph is None:
            raise bad_request("invalid", "No such graph.", {"graph": ["No such graph."]})
        if not policy.can_operate_graph(request.user, graph):
            policy.audit_denied(request.user, graph, action="run.start", status=403)
            raise ApiError(status.HTTP_403_FORBIDDEN, "not_allowed", f"Only operators of graph {graph.pk} may start its runs.")
        versions = GraphVersion.objects.filter(graph=graph, is_test=False)  # test snapshots are not runnable versions
        version = versions.filter(number=data["version"]).first() if "version" in data else versions.order_by("-number").first()
        if version is None:
            field = "version" if "version" in data else "graph"
            raise bad_request("invalid", "No such published version of this graph.", {field: ["No such published version; publish the graph first."]})
        kwargs = {"version": version, "run_input": data["input"], "user": request.user,
                  "budget_usd": data.get("budget_usd"), "budget_tokens": data.get("budget_tokens")}
        extra: dict[str, Any] = {}
        # One transaction when the start carries options (a callback_url): what they write
        # commits with the run, before its first step is handed to a worker.
        with transaction.atomic() if start_options.requested(data) else nullcontext():
            if key is None:
                run, replayed = services.run_start(**kwargs), False
            else:
                # Keys are scoped to the user: one client's key never names another's run.
                try:
                    started = services.run_start_idempotent(idempotency_key=f"{request.user.pk}:{key}", version_pinned="version" in data, **kwargs)
                except services.IdempotencyKeyReused as exc:
                    raise ApiError(status.HTTP_422_UNPROCESSABLE_ENTITY, "idempotency_key_reused", str(exc), run=exc.run.pk) from None
                run, replayed = started.run, started.replayed
            if not replayed:
                extra = start_options.apply(run=run, user=request.user, data=data)
        code = status.HTTP_200_OK if replayed else status.HTTP_201_CREATED
        return Response({**RunDetailOutput(selectors.run_get(run_id=run.pk)).data, **extra}, status=code)


class RunSummaryApi(ApiView):
    """GET: how many runs the caller may read were created in the last ``hours`` (default
    24), per status (the home dashboard). One GROUP BY query on the created_at index."""

    @extend_schema(tags=TAG, operation_id="runs_summary", parameters=[RunSummaryInput], responses=RunSummaryOutput)
    def get(self, request: Any) -> Response:
        q = self.validated(RunSummaryInput, request.query_params)
        since = timezone.now() - timedelta(hours=q["hours"])
        counts = selectors.run_status_counts(viewer=request.user, filters=selectors.RunFilter(start=since, include_tests=q["include_tests"]))
        by_status = {s: counts.get(s, 0) for s in RunStatus.values}
        return Response(RunSummaryOutput({"since": since, "total": sum(by_status.values()), "by_status": by_status}).data)


class RunDetailApi(ApiView):
    """GET: one run with its input, state, output and steps."""

    @extend_schema(tags=TAG, operation_id="runs_read", responses=RunDetailOutput)
    def get(self, request: Any, run_id: int) -> Response:
        return Response(RunDetailOutput(_run(request, run_id)).data)


class RunGraphApi(ApiView):
    """GET: the graph the run ran, as its page draws it: the spec of the version it is pinned
    to. The one place a node-test run's hidden snapshot is served (the graph's version
    endpoints list and open published versions only); same read rule as the run (404)."""

    @extend_schema(tags=TAG, operation_id="runs_graph", responses=RunGraphOutput)
    def get(self, request: Any, run_id: int) -> Response:
        return Response(RunGraphOutput(_run(request, run_id).graph_version).data)


class RunCancelApi(ApiView):
    """POST: cancel the run (operators of its graph). 409 when it had already ended."""

    @extend_schema(tags=TAG, operation_id="runs_cancel", request=RunCancelInput, responses={200: RunDetailOutput, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        run = _run_to_act_on(request, run_id, "cancel")
        data = self.validated(RunCancelInput, request.data)
        if not services.run_cancel(run=run, user=request.user, reason=data["reason"]):
            run.refresh_from_db()
            raise ApiError(status.HTTP_409_CONFLICT, "invalid_state", f"Run {run.pk} already ended ({run.status}).")
        return Response(RunDetailOutput(selectors.run_get(run_id=run.pk)).data)


class RunBulkCancelApi(ApiView):
    """POST ``{"runs": [ids], "reason"}``: cancel each run the caller may cancel, exactly
    as the single cancel does (same policy, same audit entries: ``run.cancel`` for a
    cancelled run, ``access.denied`` for a refused one), and say per run what happened.
    A refusal of one run never stops the others; the answer is 200 with per-run results
    (400 only for a malformed body)."""

    @extend_schema(tags=TAG, operation_id="runs_cancel_bulk", request=RunBulkCancelInput, responses={200: BulkCancelOutput})
    def post(self, request: Any) -> Response:
        data = self.validated(RunBulkCancelInput, request.data)
        results = [self._cancel_one(request, run_id, data["reason"]) for run_id in data["runs"]]
        cancelled = sum(1 for r in results if r["ok"])
        return Response(BulkCancelOutput({"results": results, "cancelled": cancelled, "refused": len(results) - cancelled}).data)

    @staticmethod
    def _cancel_one(request: Any, run_id: int, reason: str) -> dict[str, Any]:
        def refused(code: str, message: str, run_status: str | None) -> dict[str, Any]:
            return {"run": run_id, "ok": False, "status": run_status, "error": {"code": code, "message": message}}

        try:
            run = _run_to_act_on(request, run_id, "cancel")
        except (Run.DoesNotExist, policy.RunHidden):
            return refused("not_found", f"No run {run_id} you may read.", None)
        except policy.ActionNotAllowed:
            run = Run.objects.only("status").get(pk=run_id)
            return refused("not_allowed", f"Only operators of its graph may cancel run {run_id}.", run.status)
        if not services.run_cancel(run=run, user=request.user, reason=reason):
            run.refresh_from_db(fields=["status"])
            return refused("invalid_state", f"Run {run_id} already ended ({run.status}).", run.status)
        run.refresh_from_db(fields=["status"])
        return {"run": run_id, "ok": True, "status": run.status, "error": None}


class RunResumeApi(ApiView):
    """POST: continue a failed run from its failed step (fresh attempts), or re-queue a
    parked run's interrupted steps (operators of its graph). 409 for any other status."""

    @extend_schema(tags=TAG, operation_id="runs_resume", request=RunResumeInput, responses={200: RunDetailOutput, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        run = _run_to_act_on(request, run_id, "resume")
        data = self.validated(RunResumeInput, request.data)
        run = services.run_resume(run=run, user=request.user, budget_usd=data.get("budget_usd"), budget_tokens=data.get("budget_tokens"))
        return Response(RunDetailOutput(selectors.run_get(run_id=run.pk)).data)


class RunRetryApi(ApiView):
    """POST: retry a failed run from the step that failed (operators of its graph). 409 otherwise."""

    @extend_schema(tags=TAG, operation_id="runs_retry", request=None, responses={200: RunDetailOutput, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        run = services.run_retry(run=_run_to_act_on(request, run_id, "retry"), user=request.user)
        return Response(RunDetailOutput(selectors.run_get(run_id=run.pk)).data)


class RunForkApi(ApiView):
    """POST: start a new run from a committed step of this run, with ``state_patch``
    applied to the state as it was right after that step (operators of its graph). 201 with the new
    run; 400 with field errors when the step is not a committed top-level step of this run
    (``step``) or the patch is bad (``state_patch.<key>``); 409 when nothing follows the step.
    POST .../fork/preview/ shows what it would start."""

    @extend_schema(tags=TAG, operation_id="runs_fork", request=RunForkInput, responses={201: RunDetailOutput, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        run = _run_to_act_on(request, run_id, "fork")
        data = self.validated(RunForkInput, request.data)
        checked_fork_step(run, data["step"])  # 400 with a field error, as the preview answers
        new = services.run_fork(run=run, step_id=data["step"], state_patch=data["state_patch"], user=request.user)
        return Response(RunDetailOutput(selectors.run_get(run_id=new.pk)).data, status=status.HTTP_201_CREATED)


class RunStepListApi(ApiView):
    """GET: the run's steps in creation order, by cursor (``next``/``previous``)."""

    @extend_schema(tags=TAG, operation_id="runs_steps", parameters=CURSOR_PARAMETERS, responses=cursor_paginated(StepOutput, "Step"))
    def get(self, request: Any, run_id: int) -> Response:
        return self.paginate_cursor(selectors.step_list(run=_run(request, run_id, action="run.steps")), StepOutput, ordering="id")


class StepDetailApi(ApiView):
    """GET: one step with its input and attempts."""

    @extend_schema(tags=TAG, operation_id="steps_read", responses=StepDetailOutput)
    def get(self, request: Any, step_id: int) -> Response:
        step = selectors.step_get(step_id=step_id)
        policy.require_read(request.user, step.run, action="step.read", obj=step)
        return Response(StepDetailOutput(step).data)


class StepStateApi(ApiView):
    """GET: a top-level step's view of the run state: ``input_state`` (the state when its
    latest attempt started), and once it succeeded the state right after it and its
    difference from the state just before it (what the step changed); read from the
    versioned state keys with no replay: a fixed number of queries however long the run.
    404 when the caller may not read the run (or there is no such step); 409
    ``invalid_state`` for a child step (its parent writes the state)."""

    @extend_schema(
        tags=TAG,
        operation_id="steps_state",
        responses={200: StepStateOutput, 409: OpenApiResponse(ERROR_BODY, description="The step committed no state.")},
    )
    def get(self, request: Any, step_id: int) -> Response:
        step = selectors.step_get_bare(step_id=step_id)
        policy.require_read(request.user, step.run, action="step.state", obj=step)
        if step.parent_id is not None:
            raise ApiError(status.HTTP_409_CONFLICT, "invalid_state", f"Step {step.pk} is a child step: its parent step writes the run state.")
        body: dict[str, Any] = {"step_id": step.pk, "seq": None, "previous_step": None, "state": None, "changed": {},
                                "input_state": selectors.step_input_state(step=step)}
        if step.status == StepStatus.SUCCEEDED:
            after = engine.step_state(step.pk)
            body |= {"seq": after.seq, "previous_step": selectors.step_previous_commit(step=step), "state": after.state, "changed": after.changed}
        return Response(StepStateOutput(body).data)


class RunEventListApi(ApiView):
    """GET ``?after=<event id>&page_size=``: the run's events after the cursor (keyset:
    the last event id seen), oldest first. Follow ``next`` while ``has_more``; poll with
    ``after=next_after`` until ``run_status`` is final and ``has_more`` false."""

    @extend_schema(tags=TAG, operation_id="runs_events", parameters=[EventsQueryInput], responses=EventPageOutput)
    def get(self, request: Any, run_id: int) -> Response:
        run = _run(request, run_id, action="run.events")
        query = self.validated(EventsQueryInput, request.query_params)
        events, more = selectors.run_events_after(run=run, after=query["after"], limit=query["page_size"])
        # Read after the events, in one query: a status at least as new as the last event.
        run_status, waiting_for = selectors.run_status_now(run_id=run.pk)
        next_after = events[-1].pk if events else query["after"]
        next_url = None
        if more:
            url = remove_query_param(request.build_absolute_uri(), "limit")
            url = replace_query_param(url, "page_size", query["page_size"])
            next_url = replace_query_param(url, "after", next_after)
        body = {
            "results": EventOutput(events, many=True).data,
            "next": next_url,
            "next_after": next_after,
            "has_more": more,
            "run_status": run_status,
            "run_waiting_for": waiting_for,
        }
        return Response(body)


class CostListApi(ApiView):
    """GET: spend grouped by step, run, graph, node, model or day (``group_by``), filtered
    by run, graph, model and a day range, ordered by the group or costliest first
    (``order``); computed by the database over the runs the caller may read (admins:
    all). Each row keeps apart the attempts whose price is unknown (never counted as $0)
    and the spend of retries and crash re-runs."""

    @extend_schema(tags=["costs"], operation_id="costs_aggregate", parameters=[CostQueryInput, *PAGE_PARAMETERS], responses=paginated(CostRowOutput, "CostRow"))
    def get(self, request: Any) -> Response:
        q = self.validated(CostQueryInput, request.query_params)
        rows = report_selectors.cost_aggregate(viewer=request.user, group_by=q["group_by"], order=q["order"], **cost_filters(q))
        return self.paginate(rows, CostRowOutput)


class AuditListApi(ApiView):
    """GET: audit entries, newest first, by cursor (``next``/``previous``) (admins)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=["audit"], operation_id="audit_list", parameters=[AuditQueryInput, *CURSOR_PARAMETERS], responses=cursor_paginated(AuditEntryOutput, "AuditEntry"))
    def get(self, request: Any) -> Response:
        q = self.validated(AuditQueryInput, request.query_params)
        return self.paginate_cursor(report_selectors.audit_list(**q), AuditEntryOutput, ordering="-id")
