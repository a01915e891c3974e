"""Approval writes: decide a request (one transaction: decision, audit, resume) and park runs."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from accounts.policy import can_decide, can_reassign, decider_q
from accounts.roles import is_admin
from approvals.models import ApprovalRequest, ApprovalStatus, principals_text
from approvals.nodes import APPROVED, REJECTED, ApprovalNode, edit_errors
from approvals.notify import notify_on_commit
from audit.chain import audit
from core.errors import ConflictError, ForbiddenError, ServiceError
from runs.engine import api as engine
from runs.engine.api import compiled_graph
from runs.models import Run
from runs.nodes import get_kind
from runs.signals import run_finished, steps_requeued

GATE_DECISIONS = {"approve", "reject"}
RECOVERY_DECISIONS = {"retry", "skip", "fail"}


def _preview() -> Any:
    """approvals.preview, imported on first use: it loads Jinja2, which a worker's start must
    not (approvals.nodes: _lazy_imports_note)."""
    from approvals import preview  # not at import: Jinja2 (see the docstring)

    return preview


class ApprovalError(ServiceError):
    """Base of approval errors; ``code`` is a short machine name."""

    code = "approval_error"


class AlreadyDecided(ApprovalError, ConflictError):
    """The request was decided before (deciding twice is an error, not a second resume):
    409 with who decided it, when, and how."""

    code = "already_decided"

    def __init__(self, request: ApprovalRequest):
        who = request.decided_by_name or "someone"
        super().__init__(
            f"approval {request.pk} was already {request.status} by {who} at {request.decided_at:%Y-%m-%d %H:%M:%S}",
            decided_by=request.decided_by_name or None,
            decided_at=request.decided_at.isoformat() if request.decided_at else None,
            status=request.status,
        )
        self.request = request


class Changed(ApprovalError, ConflictError):
    """The request is not what the decider was shown, or not theirs to act on now (409):
    ``code`` is ``changed`` (its version moved on: ``last_change`` says how),
    ``action_changed`` (what approving would do is different now), ``claimed`` (someone
    else claimed it), ``already_voted`` or ``not_claimed``; ``by``/``at`` name who and when
    where known. Nothing is decided."""

    def __init__(self, code: str, message: str, *, by: str | None = None, at: Any = None, version: str | None = None):
        super().__init__(message, by=by, at=at.isoformat() if at else None, version=version)
        self.code = code
        self.by = by
        self.at = at
        self.version = version


class NotAllowed(ApprovalError, ForbiddenError):
    """This user may not decide this request."""

    code = "not_allowed"


class BadDecision(ApprovalError):
    """The decision does not fit the request (e.g. ``retry`` on a gate, a comment that
    cannot be stored). ``field`` names the input at fault (``decision``, ``comment``)."""

    code = "bad_decision"

    def __init__(self, message: str, *, field: str = "decision"):
        super().__init__(message, fields={field: [message]})
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


def _lock(approval_id: int, *, run_lock: bool) -> ApprovalRequest:
    """The request, row-locked (after its run's row when ``run_lock``: a cancel, a resume
    and every engine commit take the run's lock first, so taking them in that order here
    never deadlocks). Raises ApprovalRequest.DoesNotExist."""
    if run_lock:
        run_id = ApprovalRequest.objects.values_list("run_id", flat=True).get(pk=approval_id)
        engine.run_lock(run_id)
    return ApprovalRequest.objects.select_for_update().select_related("run__graph_version__graph").get(pk=approval_id)


def _bump(request: ApprovalRequest, change: str, **fields: Any) -> None:
    """Move the request to its next version with ``fields`` set (under its row lock)."""
    fields.update(version=request.version + 1, last_change=change[:300])
    ApprovalRequest.objects.filter(pk=request.pk, version=request.version).update(**fields)
    for key, value in fields.items():
        setattr(request, key, value)
    # Whoever watches the run (the inbox item, the run page) sees the change live.
    engine.run_event_append(
        request.run_id, step_id=request.step_id, kind="approval_changed", data={"approval": request.pk, "version": request.version, "change": change[:300]}
    )


def _when(at: Any) -> str:
    return f" at {at:%Y-%m-%d %H:%M:%S} UTC" if at else ""


def _check_current(request: ApprovalRequest, user: Any, version: str | None) -> None:
    """Refuse (AlreadyDecided, Changed) a decision on a request that moved on from what the
    decider was shown (``version``: the token they were shown; None = trusted, current)."""
    action_digest = _preview().action_digest
    if request.status != ApprovalStatus.PENDING:
        raise AlreadyDecided(request)
    mine = user is not None and request.claimed_by_id == getattr(user, "pk", None)
    if request.claimed_by_id is not None and user is not None and not mine:
        raise Changed(
            "claimed", f"approval {request.pk} is claimed by {request.claimed_by_name}{_when(request.claimed_at)}; only they may decide it unless they hand it back",
            by=request.claimed_by_name, at=request.claimed_at,
        )  # fmt: skip
    if version is None:
        return
    shown, _, digest = version.partition(":")
    if shown != str(request.version):
        raise Changed(
            "changed", f"approval {request.pk} changed since you saw it: {request.last_change or 'it was updated'}. Look at it again before deciding.",
            version=f"{request.version}:{action_digest(request)}",
        )  # fmt: skip
    current = action_digest(request)
    if digest != current:
        raise Changed(
            "action_changed", f"what approval {request.pk} would do next changed since you saw it (the run's state moved on). Look at it again before deciding.",
            version=f"{request.version}:{current}",
        )  # fmt: skip


def approval_decide(
    *,
    approval_id: int,
    decision: str,
    user: Any = None,
    actor: str | None = None,
    comment: str = "",
    output: dict[str, Any] | None = None,
    version: str | None = None,
    reason: str = "",
    values: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """Decide (or vote on) an approval request in ONE transaction: record, resume the run,
    audit (with the request's ``node_id`` and the run's ``status_before``/``status_after``).

    ``decision``: ``approve``/``reject`` for a gate; ``retry``/``skip``/``fail`` for a
    recovery request (``output``: the skipped step's state updates, or for an agent's tool
    call the result the model is given). ``version``: the token (``"<n>:<digest>"``,
    approvals.preview.version_token) of the request as the decider saw it; a request
    that moved on since (claimed, handed back, reassigned, voted on, decided) or whose
    next action changed is refused (Changed / AlreadyDecided, 409) and nothing is
    decided. None (trusted callers: the ``approve`` command) decides what is current.
    A gate with ``quorum`` N needs N distinct approvals (each one a vote, audited
    ``approval.vote``, until the last decides); one rejection rejects; with N >= 2 the
    run's starter is refused unless the node's ``starter_counts``. ``reason``: for a
    rejection, one of the node's ``reject_reasons`` (required when it declares any).
    ``values``: edited state values on an approval, checked against the node's
    ``edit_schema`` (a change of values clears earlier votes: they approved other values).
    ``user`` is the deciding Django user (permission checked); ``user=None`` with ``actor``
    is a trusted operator. Successor steps are handed to the queue after the commit.
    Raises AlreadyDecided, Changed, NotAllowed, BadDecision, ApprovalRequest.DoesNotExist;
    runs.engine.api.StateWriteRefused when a skip's ``output`` writes a key the graph does
    not know, holds a value JSON cannot carry, or would pass the state size limit
    (nothing is recorded then).
    """
    gate_config = _preview().gate_config
    name = actor or (user.get_username() if user is not None else "system")
    if "\x00" in comment:
        # PostgreSQL stores no NUL in text or jsonb: refuse it here, never as a database error.
        raise BadDecision("comment: a NUL character (\\u0000) cannot be stored", field="comment")
    with transaction.atomic():
        request = _lock(approval_id, run_lock=True)
        allowed = GATE_DECISIONS if request.purpose == "gate" else RECOVERY_DECISIONS
        if decision not in allowed:
            raise BadDecision(f"decision must be one of {sorted(allowed)} for a {request.purpose} request, not '{decision}'")
        if user is not None and not user_may_decide(user, request):
            raise NotAllowed(f"{name} may not decide approval {request.pk}")
        _check_current(request, user, version)
        config = gate_config(request)
        approvers: list[str] = [name]
        if config is not None:
            if decision == "reject":
                if config.reject_reasons and reason not in config.reject_reasons:
                    raise BadDecision(f"reason must be one of {config.reject_reasons}", field="reason")
                if not config.reject_reasons and reason:
                    raise BadDecision("this approval declares no rejection reasons: put the reason in the comment", field="reason")
            elif reason:
                raise BadDecision("a reason goes with a rejection only", field="reason")
            if values is not None and decision == "approve":
                errors = edit_errors(config, values)
                if errors:
                    field, messages = next(iter(errors.items()))
                    raise BadDecision(f"{field}: {messages[0]}", field=field)
            elif values is not None:
                raise BadDecision("edited values go with an approval only", field="values")
            if decision == "approve":
                starter = request.run.created_by_id
                if config.quorum > 1 and not config.starter_counts and user is not None and starter is not None and starter == user.pk:
                    raise NotAllowed(f"{name} started run {request.run_id}; the starter does not count towards this approval's {config.quorum} approvals")
                if request.votes.filter(user_name=name).exists():
                    raise Changed("already_voted", f"{name} already approved approval {request.pk}; it needs {request.quorum} distinct approvals", by=name)
                if values is not None and values != (request.values or {}):
                    request.votes.all().delete()  # they approved other values
                    request.values = values
                    ApprovalRequest.objects.filter(pk=request.pk).update(values=values)
                votes = list(request.votes.values_list("user_name", flat=True))
                if len(votes) + 1 < request.quorum:
                    request.votes.create(user=_real(user), user_name=name, decision="approve", comment=comment)
                    _bump(request, f"approved by {name} ({len(votes) + 1} of {request.quorum})")
                    audit(
                        name, "approval.vote", request, actor_type="user" if user is not None else "operator",
                        run=request.run_id, comment=comment, node_id=request.node_id, votes=len(votes) + 1, quorum=request.quorum,
                    )  # fmt: skip
                    request.refresh_from_db()
                    return request
                approvers = votes + [name]
                if request.quorum > 1:
                    request.votes.create(user=_real(user), user_name=name, decision="approve", comment=comment)
        status = ApprovalStatus.REJECTED if decision in ("reject", "fail") else ApprovalStatus.APPROVED
        now = timezone.now()
        # Compare-and-set on the version read under the row lock: exactly one decision moves it.
        won = ApprovalRequest.objects.filter(pk=request.pk, status=ApprovalStatus.PENDING, version=request.version).update(
            status=status,
            decision=decision,
            comment=comment,
            reason=reason,
            decided_by=_real(user),
            decided_by_name=name,
            decided_at=now,
            version=request.version + 1,
            last_change=f"{status} by {name}",
        )
        if not won:
            request.refresh_from_db()
            raise AlreadyDecided(request)
        before = Run.objects.filter(pk=request.run_id).values_list("status", flat=True).first()
        _resume(request, decision, name, comment, output, reason=reason, approvers=approvers)  # the engine dispatches after commit
        after = Run.objects.filter(pk=request.run_id).values_list("status", flat=True).first()
        # The run's status before and after the decision, read in this transaction: what
        # the decision did to the run (waiting -> running, or -> failed on a rejection).
        audit(
            name, f"approval.{decision}", request, actor_type="user" if user is not None else "operator",
            run=request.run_id, comment=comment, node_id=request.node_id, status_before=before, status_after=after,
            **({"reason": reason} if reason else {}), **({"approvers": approvers} if len(approvers) > 1 else {}),
        )  # fmt: skip
    request.refresh_from_db()
    return request


def _real(user: Any) -> Any:
    return user if user is not None and user.is_authenticated else None


def approval_claim(*, approval_id: int, user: Any) -> ApprovalRequest:
    """Claim a pending request the user may decide: until they hand it back (or it is
    reassigned) only they may decide it. Claiming one's own claim changes nothing.
    Raises NotAllowed, AlreadyDecided, Changed (``claimed``: someone else holds it)."""
    name = user.get_username()
    with transaction.atomic():
        request = _lock(approval_id, run_lock=False)
        if not user_may_decide(user, request):
            raise NotAllowed(f"{name} may not decide approval {request.pk}, so may not claim it")
        if request.status != ApprovalStatus.PENDING:
            raise AlreadyDecided(request)
        if request.claimed_by_id == user.pk:
            return request
        if request.claimed_by_id is not None:
            raise Changed("claimed", f"approval {request.pk} is already claimed by {request.claimed_by_name}{_when(request.claimed_at)}", by=request.claimed_by_name, at=request.claimed_at)
        _bump(request, f"claimed by {name}", claimed_by=user, claimed_by_name=name, claimed_at=timezone.now())
        audit(name, "approval.claim", request, actor_type="user", run=request.run_id, node_id=request.node_id)
    return request


MAX_BULK = 200


def approval_claim_many(*, approval_ids: list[int], user: Any) -> dict[str, Any]:
    """Claim each of ``approval_ids`` (at most MAX_BULK), each in its own transaction, so
    one refused claim does not undo the others. Returns ``{"claimed": [ids], "refused":
    [{"id", "code", "message"}]}``."""
    claimed: list[int] = []
    refused: list[dict[str, Any]] = []
    for approval_id in dict.fromkeys(approval_ids):
        try:
            approval_claim(approval_id=approval_id, user=user)
            claimed.append(approval_id)
        except ApprovalRequest.DoesNotExist:
            refused.append({"id": approval_id, "code": "not_found", "message": f"approval {approval_id} does not exist"})
        except ApprovalError as exc:
            refused.append({"id": approval_id, "code": exc.code, "message": str(exc)})
    return {"claimed": claimed, "refused": refused}


def approval_hand_back(*, approval_id: int, user: Any) -> ApprovalRequest:
    """Give a claimed request back to everyone who may decide it (its claimer, or an
    admin). Raises NotAllowed, AlreadyDecided, Changed (``not_claimed``)."""
    name = user.get_username()
    with transaction.atomic():
        request = _lock(approval_id, run_lock=False)
        if request.status != ApprovalStatus.PENDING:
            raise AlreadyDecided(request)
        if request.claimed_by_id is None:
            raise Changed("not_claimed", f"approval {request.pk} is not claimed by anyone")
        if request.claimed_by_id != user.pk and not is_admin(user):
            raise NotAllowed(f"approval {request.pk} is claimed by {request.claimed_by_name}; only they or an admin may hand it back")
        _bump(request, f"handed back by {name}", claimed_by=None, claimed_by_name="", claimed_at=None)
        audit(name, "approval.hand_back", request, actor_type="user", run=request.run_id, node_id=request.node_id)
    return request


def approval_reassign(
    *, approval_id: int, user: Any, to_user: str | None = None, to_group: str | None = None, version: str | None = None, comment: str = ""
) -> ApprovalRequest:
    """Give a pending request to one user or one group instead of whoever it named (an
    operator of the run's graph or an admin may: ``accounts.policy.can_reassign``). Clears
    any claim; earlier approvals towards a quorum stay. The new approvers are emailed.
    Raises NotAllowed, AlreadyDecided, Changed, BadDecision (``to``: no such user or group,
    or not exactly one of them given)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    if (to_user is None) == (to_group is None):
        raise BadDecision("give exactly one of to_user or to_group", field="to_user")
    if to_user is not None and not get_user_model().objects.filter(username=to_user, is_active=True).exists():
        raise BadDecision(f"no active user named '{to_user}'", field="to_user")
    if to_group is not None and not Group.objects.filter(name=to_group).exists():
        raise BadDecision(f"no group named '{to_group}'", field="to_group")
    name = user.get_username()
    target = f"user {to_user}" if to_user is not None else f"group {to_group}"
    with transaction.atomic():
        request = _lock(approval_id, run_lock=False)
        if not can_reassign(user, request):
            raise NotAllowed(f"{name} may not reassign approval {request.pk}: operators of its graph and admins may")
        if request.status != ApprovalStatus.PENDING:
            raise AlreadyDecided(request)
        if version is not None and version.partition(":")[0] != str(request.version):
            raise Changed("changed", f"approval {request.pk} changed since you saw it: {request.last_change or 'it was updated'}")
        approvers = [to_user] if to_user is not None else []
        groups = [to_group] if to_group is not None else []
        _bump(
            request, f"reassigned to {target} by {name}", approvers=approvers, approver_groups=groups,
            principals=principals_text(approvers, groups), claimed_by=None, claimed_by_name="", claimed_at=None,
        )  # fmt: skip
        audit(name, "approval.reassign", request, actor_type="user", run=request.run_id, node_id=request.node_id, to=target, comment=comment)
        notify_on_commit(request)
    return request


def _resume(
    request: ApprovalRequest, decision: str, name: str, comment: str, output: dict | None, *, reason: str = "", approvers: list[str] | None = None
) -> list[int]:
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
        reason=reason,
        values=request.values if approved else None,
        approvers=approvers,
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


@receiver(post_save, sender=ApprovalRequest)
def _email_approvers_of_new_gate(sender: Any, instance: ApprovalRequest, created: bool, **kwargs: Any) -> None:
    # A gate's approvers hear of it once the commit that asked them lands.
    if created and instance.purpose == "gate":
        notify_on_commit(instance)


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
