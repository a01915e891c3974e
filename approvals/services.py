"""Approval writes: decide a request (one transaction: decision, audit, resume) and park runs."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.dispatch import receiver
from django.utils import timezone

from accounts.policy import can_decide, decider_q
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.nodes import APPROVED, REJECTED, ApprovalNode
from runs.engine import api as engine
from runs.engine.api import audit, compiled_graph
from runs.models import Run
from runs.nodes import get_kind
from runs.signals import run_finished, steps_requeued

GATE_DECISIONS = {"approve", "reject"}
RECOVERY_DECISIONS = {"retry", "skip", "fail"}


class ApprovalError(Exception):
    """Base of approval errors; ``code`` is a short machine name."""

    code = "approval_error"


class AlreadyDecided(ApprovalError):
    """The request was decided before (deciding twice is an error, not a second resume)."""

    code = "already_decided"

    def __init__(self, request: ApprovalRequest):
        who = request.decided_by_name or "someone"
        super().__init__(f"approval {request.pk} was already {request.status} by {who} at {request.decided_at:%Y-%m-%d %H:%M:%S}")
        self.request = request


class NotAllowed(ApprovalError):
    """This user may not decide this request."""

    code = "not_allowed"


class BadDecision(ApprovalError):
    """The decision does not fit the request (e.g. ``retry`` on a gate, a comment that
    cannot be stored). ``field`` names the input at fault (``decision``, ``comment``)."""

    code = "bad_decision"

    def __init__(self, message: str, *, field: str = "decision"):
        super().__init__(message)
        self.field = field


def decidable_by(user: Any) -> Q:
    """The rule of who may decide a request, as a filter on ApprovalRequest (the inbox,
    the decision and who may read a run all use it, so it is stated once, in
    ``accounts.policy.decider_q``): superusers always; else named approvers or members
    of named groups; when none are named, the graph's approvers, members of the
    ``approvers`` group and staff."""
    return decider_q(user)


def user_may_decide(user: Any, request: ApprovalRequest) -> bool:
    """Whether ``user`` may decide ``request`` (see :func:`decidable_by`)."""
    return can_decide(user, request)


def approval_decide(
    *,
    approval_id: int,
    decision: str,
    user: Any = None,
    actor: str | None = None,
    comment: str = "",
    output: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """Decide an approval request in ONE transaction: record, resume the run, audit (with
    the request's ``node_id`` and the run's ``status_before``/``status_after``).

    ``decision``: ``approve``/``reject`` for a gate; ``retry``/``skip``/``fail`` for a
    recovery request (``output``: the skipped step's state updates, or for an agent's tool
    call the result the model is given). ``user`` is the
    deciding Django user (permission checked); ``user=None`` with ``actor`` is a trusted
    operator (the ``approve`` command). Successor steps are handed to the queue after the
    commit. Raises AlreadyDecided, NotAllowed, BadDecision, ApprovalRequest.DoesNotExist;
    runs.engine.api.StateWriteRefused when a skip's ``output`` writes a key the graph does
    not know, holds a value JSON cannot carry, or would pass the state size limit
    (nothing is recorded then).
    """
    name = actor or (user.get_username() if user is not None else "system")
    if "\x00" in comment:
        # PostgreSQL stores no NUL in text or jsonb: refuse it here, never as a database error.
        raise BadDecision("comment: a NUL character (\\u0000) cannot be stored", field="comment")
    with transaction.atomic():
        request = ApprovalRequest.objects.select_related("run__graph_version__graph").get(pk=approval_id)
        # The run's row lock first, as a cancel, a resume and every engine commit take it:
        # a cancel holding it closes this request, and taking the request's row before
        # the run's here was a deadlock on PostgreSQL (a 500 for one of the two).
        engine.run_lock(request.run_id)
        allowed = GATE_DECISIONS if request.purpose == "gate" else RECOVERY_DECISIONS
        if decision not in allowed:
            raise BadDecision(f"decision must be one of {sorted(allowed)} for a {request.purpose} request, not '{decision}'")
        if user is not None and not user_may_decide(user, request):
            raise NotAllowed(f"{name} may not decide approval {request.pk}")
        status = ApprovalStatus.REJECTED if decision in ("reject", "fail") else ApprovalStatus.APPROVED
        now = timezone.now()
        # Compare-and-set: of two concurrent decisions exactly one moves it off pending.
        won = ApprovalRequest.objects.filter(pk=request.pk, status=ApprovalStatus.PENDING).update(
            status=status,
            decision=decision,
            comment=comment,
            decided_by=user if user is not None and user.is_authenticated else None,
            decided_by_name=name,
            decided_at=now,
        )
        if not won:
            request.refresh_from_db()
            raise AlreadyDecided(request)
        before = Run.objects.filter(pk=request.run_id).values_list("status", flat=True).first()
        _resume(request, decision, name, comment, output)  # the engine dispatches after commit
        after = Run.objects.filter(pk=request.run_id).values_list("status", flat=True).first()
        # The run's status before and after the decision, read in this transaction: what
        # the decision did to the run (waiting -> running, or -> failed on a rejection).
        audit(
            name, f"approval.{decision}", request, actor_type="user" if user is not None else "operator",
            run=request.run_id, comment=comment, node_id=request.node_id, status_before=before, status_after=after,
        )  # fmt: skip
    request.refresh_from_db()
    return request


def _resume(request: ApprovalRequest, decision: str, name: str, comment: str, output: dict | None) -> list[int]:
    if decision == "retry":
        return engine.step_requeue_parked(request.step_id, actor=name)
    if decision == "fail":
        engine.step_fail_parked(request.step_id, actor=name, message=f"failed by {name} after a crash: {comment}".strip())
        return []
    if decision == "skip":
        return engine.step_skip_parked(request.step_id, output=output, actor=name)
    topology = compiled_graph(request.run.graph_version_id).topology
    node = topology.nodes[request.node_id]
    kind = get_kind(node.kind)
    # Only the approval kind's on_wait creates gate requests.
    assert isinstance(kind, ApprovalNode), f"a gate request on a {node.kind!r} node"
    approved = decision == "approve"
    result = kind.decision_result(
        kind.config_model.model_validate(node.config),
        approved=approved,
        comment=comment,
        by=name,
        wired_handles=[e.source_handle or "" for e in topology.out_edges.get(request.node_id, [])],
    )
    if result is None:
        engine.step_fail_parked(request.step_id, actor=name, message=f"rejected by {name}" + (f": {comment}" if comment else ""))
        return []
    return engine.step_complete_waiting(request.step_id, result, actor=name, reason=APPROVED if approved else REJECTED)


def recovery_request_create(*, run: Any, step: Any, reason: str) -> ApprovalRequest:
    """Park handler (settings.BALLAST_PARK_HANDLER): ask a person whether to retry, skip or
    fail a step that was interrupted and is not safe to repeat. Inside the caller's transaction."""
    payload = {"reason": reason, "attempt": step.attempt, "idempotency_key": step.idempotency_key}
    skip = "skip it with a given output"
    if step.parent_id is not None:
        # A child (an agent's tool call): what it was asked to do, so a person can tell
        # whether it happened; a skip's output becomes its result (what the model sees).
        payload["child"] = {"key": step.child_key, "kind": step.kind, "input": step.input}
        skip = "skip it with a given result"
    return ApprovalRequest.objects.create(
        run_id=run.pk,
        step_id=step.pk,
        node_id=step.node_id,
        purpose="recovery",
        prompt=f"Step '{step.node_id}' (attempt {step.attempt}) was {reason}. Retry it, {skip}, or fail the run?",
        payload=payload,
    )


@receiver(run_finished)
def _close_requests_of_finished_run(sender: Any, run: Any, status: str, **kwargs: Any) -> None:
    # A cancelled or failed run leaves nothing to decide.
    ApprovalRequest.objects.filter(run_id=run.pk, status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.CANCELLED, decided_at=timezone.now(), decided_by_name="system"
    )


@receiver(steps_requeued)
def _close_recovery_requests(sender: Any, run: Any, step_ids: list[int], actor: str, **kwargs: Any) -> None:
    # Resuming a parked run answers its recovery requests with "retry".
    ApprovalRequest.objects.filter(step_id__in=step_ids, purpose="recovery", status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.APPROVED, decision="retry", decided_at=timezone.now(), decided_by_name=actor
    )
