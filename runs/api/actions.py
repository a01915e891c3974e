"""Run action API views for the run page: which actions the caller may take now, previews of
resume, retry and fork (the engine's own plan with cost estimates), and two runs compared.

Previews follow the actions' rules exactly: the same roles (404 for a run the caller may
not read, 403 for an action they may not take, audited), the same refusals (409 when the
run's status does not allow it, 400 with field errors for a bad step or state patch).
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts import policy
from core.api import ERROR_BODY, ApiView, bad_request
from runs import selectors
from runs.api import previews
from runs.api.action_serializers import ActionPreviewOutput, RunActionsOutput, RunComparisonOutput
from runs.api.compare import run_compare
from runs.api.serializers import MAX_INT, RunForkInput
from runs.models import Run, RunStatus, Step, StepStatus

TAG = ["runs"]
CONFLICT = OpenApiResponse(ERROR_BODY, description="The run is not in a status that allows this.")
PREVIEW = OpenApiResponse(
    ActionPreviewOutput,
    description="``kept`` (committed steps that stay facts), ``run_again`` (steps the action reopens or creates, each with "
    "its estimate), ``then`` (nodes after them on the costliest path), ``estimate`` (worst case of the rest: usd of the "
    "priced nodes, tokens, unpriced node ids), ``kept_cost_usd``; a fork adds ``state``, ``state_keys``, ``patched``, "
    "``dropped`` and ``anchor``.",
)


def _act(request: Any, run_id: int, action: str) -> Run:
    """The run if the caller may take ``action`` on it (404 / 403 otherwise, audited)."""
    run = selectors.run_get(run_id=run_id)
    policy.require_act(request.user, run, action)
    return run


def fork_step_errors(run: Run, step_id: int) -> dict[str, list[str]]:
    """Field errors (``step``) when ``step_id`` is not a committed top-level step of ``run``
    (a fork's anchor); {} when it is."""
    step = Step.objects.filter(pk=step_id, run=run).only("id", "parent_id", "status", "node_id").first()
    if step is None:
        return {"step": [f"Run {run.pk} has no step {step_id}."]}
    if step.parent_id is not None:
        return {"step": [f"Step {step_id} is a child step of an agent; fork from a top-level step."]}
    if step.status != StepStatus.SUCCEEDED:
        return {"step": [f"Step {step_id} ({step.node_id}) has not committed (it is {step.status}); fork from a succeeded step."]}
    return {}


def checked_fork_step(run: Run, step_id: int) -> None:
    """Raise a 400 with field errors unless ``step_id`` is a fork anchor of ``run``."""
    errors = fork_step_errors(run, step_id)
    if errors:
        raise bad_request("invalid_step", errors["step"][0], errors)


class RunActionsApi(ApiView):
    """GET: which actions the caller may take on the run now: for each of cancel, resume,
    retry and fork, ``allowed`` and, when not, ``reason``. The same roles and statuses the
    actions check (they refuse anyway; a node-test run is never resumed, retried or
    forked); the run page shows only the allowed buttons."""

    @extend_schema(tags=TAG, operation_id="runs_actions", responses=RunActionsOutput)
    def get(self, request: Any, run_id: int) -> Response:
        run = selectors.run_get(run_id=run_id)
        policy.require_read(request.user, run, action="run.actions")
        may = policy.can_act(request.user, run, "cancel")
        parked = run.status == RunStatus.WAITING and Step.objects.filter(run=run, status=StepStatus.PARKED).exists()
        forkable = Step.objects.filter(run=run, parent__isnull=True, status=StepStatus.SUCCEEDED).exists()
        by_status = {
            "cancel": (not run.is_terminal, f"The run has ended ({run.status})."),
            "resume": (parked or run.status == RunStatus.FAILED, "Only a failed run, or one parked for a decision, can be resumed."),
            "retry": (run.status == RunStatus.FAILED, "Only a failed run can be retried."),
            "fork": (forkable, "No step has committed yet."),
        }
        if run.is_test:  # the engine refuses these on a node-test run (409 test_run)
            why = "A test of one node from the builder: test the node again there."
            by_status.update({a: (False, why) for a in ("resume", "retry", "fork")})
        body: dict[str, Any] = {}
        for action, (ok, why) in by_status.items():
            if not may:
                body[action] = {"allowed": False, "reason": "Only operators of this graph may act on its runs."}
            else:
                body[action] = {"allowed": ok, "reason": "" if ok else why}
        body["may_act"] = may
        body["status"] = run.status
        return Response(body)


class RunResumePreviewApi(ApiView):
    """POST: what a resume would do now (nothing changes): steps kept, steps re-run and
    their estimated cost. Same roles and refusals as the resume (409)."""

    @extend_schema(tags=TAG, operation_id="runs_resume_preview", request=None, responses={200: PREVIEW, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        return Response(previews.resume_preview(run=_act(request, run_id, "resume")))


class RunRetryPreviewApi(ApiView):
    """POST: what a retry from the failed step would do now (nothing changes). 409 unless failed."""

    @extend_schema(tags=TAG, operation_id="runs_retry_preview", request=None, responses={200: PREVIEW, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        return Response(previews.resume_preview(run=_act(request, run_id, "retry"), retry=True))


class RunForkPreviewApi(ApiView):
    """POST ``{step, state_patch}``: what a fork would start (nothing changes): its state,
    the steps kept from the source and the ones run, with estimates. 400 with field errors
    for a step that is not a committed top-level step of this run or a bad patch
    (``state_patch.<key>``); 409 when nothing follows the step."""

    @extend_schema(tags=TAG, operation_id="runs_fork_preview", request=RunForkInput, responses={200: PREVIEW, 409: CONFLICT})
    def post(self, request: Any, run_id: int) -> Response:
        run = _act(request, run_id, "fork")
        data = self.validated(RunForkInput, request.data)
        checked_fork_step(run, data["step"])
        return Response(previews.fork_preview(run=run, step_id=data["step"], state_patch=data["state_patch"]))


class RunCompareInput(serializers.Serializer):
    """GET /runs/compare/?a=&b=: two runs of one graph."""

    a = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    b = serializers.IntegerField(min_value=1, max_value=MAX_INT)


class RunCompareApi(ApiView):
    """GET ``?a=&b=``: two runs of one graph side by side (per node: status, output, cost,
    duration; their states key by key). 400 with field errors when a run is unknown or
    hidden from the caller, the same run twice, or of another graph."""

    @extend_schema(tags=TAG, operation_id="runs_compare", parameters=[RunCompareInput], responses={200: RunComparisonOutput})
    def get(self, request: Any) -> Response:
        q = self.validated(RunCompareInput, request.query_params)
        if q["a"] == q["b"]:
            raise bad_request("invalid", "Choose two different runs.", {"b": ["The same run as a; choose another run."]})
        runs: dict[str, Run] = {}
        for side in ("a", "b"):
            run = selectors.run_list(viewer=request.user, filters=selectors.RunFilter(include_tests=True)).filter(pk=q[side]).first()
            if run is None:  # unknown or not the caller's to read: the same answer either way
                raise bad_request("invalid", f"No run {q[side]}.", {side: [f"No run {q[side]} that you may read."]})
            runs[side] = selectors.run_get(run_id=run.pk)
        a, b = runs["a"], runs["b"]
        if a.graph_version.graph_id != b.graph_version.graph_id:
            raise bad_request(
                "invalid", "The runs are of different graphs.",
                {"b": [f"Run {b.pk} is of graph “{b.graph_version.graph.name}”, not “{a.graph_version.graph.name}”."]},
            )  # fmt: skip
        return Response(run_compare(a=a, b=b), status=status.HTTP_200_OK)
