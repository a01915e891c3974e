"""The portable commit (ORM): a finished or failed attempt, fenced, in ONE transaction.

A commit stores the step's output, usage and cost, merges its writes into the run state,
creates the successor steps (one may be leased to the committing worker), appends the
events and updates the run's totals and status, all under the run's row lock. A lease
that is no longer ours makes it write nothing. The sequential case first tries a fast
path (runs.engine.store.fastpath); everything else, and every fast-path miss, lands here.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from runs.engine import limits, scheduler
from runs.engine.store import clock, fastpath, graphs
from runs.engine.store import state as state_store
from runs.engine.store.claims import budget_refusal, lease_to, start_kept
from runs.engine.store.events import append as append_events
from runs.engine.store.events import create as create_event
from runs.engine.store.writes import (
    active_steps,
    add_usage,
    bump_run,
    event,
    fenced,
    finish_run,
    lock_run,
    park,
    price_version,
    save_run_totals,
    save_run_usage,
    save_steps,
)
from runs.engine.types import (
    ActiveStep,
    ClaimedStep,
    CommitOutcome,
    StateTooLarge,
    StepStateError,
    spec_node_id,
    step_idempotency_key,
)
from runs.models import AttemptStatus, Run, RunEvent, RunEventKind, RunStatus, Step, StepAttempt, StepStatus
from runs.nodes import get_kind
from runs.nodes.base import NodeResult
from runs.sandbox.values import InvalidValue, canonical, safe_text
from runs.vocabulary import NodeError, Usage

log = logging.getLogger("ballast.engine")


def step_commit(claimed: ClaimedStep, result: NodeResult, *, keep_next: bool = True) -> CommitOutcome:
    """Commit a finished attempt in ONE transaction, fenced by lease owner and attempt.

    ``result.wait`` parks the step at a gate (waiting, no lease); ``result.spawn`` suspends
    it behind child steps. With ``keep_next`` one ready successor is leased to this worker
    in the same commit (``CommitOutcome.next_step``). If the lease is no longer ours
    (recovery gave the step to someone else) nothing is written (``committed`` False).

    The single point where every result enters a commit: before any transaction the
    result is checked as JSON (runs.engine.limits.checked_result); a value JSON cannot
    carry fails the step with ``invalid_output``, and a write that would pass the state
    size limit fails it with ``state_too_large`` (both not retried), through
    :func:`step_fail`, so the run fails or a parent agent sees the failure.
    """
    try:
        result, written_sizes = limits.checked_result(result)
    except InvalidValue as exc:
        log.warning("step %s (%s): result is not JSON: %s", claimed.step_id, claimed.node_id, exc)
        return step_fail(claimed, limits.invalid_output_error(exc))
    if keep_next and result.wait is None and not result.spawn:
        # The sequential path from the worker's snapshot; else (a fan-out, a branch, a
        # stale snapshot) the parallel fast path from rows read under the run lock.
        fast = fastpath.fast_commit(claimed, result, written_sizes) if claimed.snapshot is not None else None
        if fast is None:
            fast = fastpath.parallel_commit(claimed, result, written_sizes)
        if fast is not None:
            return fast
    try:
        return _commit(claimed, result, written_sizes, keep_next=keep_next)
    except StateTooLarge as exc:  # raised inside the transaction, which rolled back: nothing was written
        log.warning("step %s (%s): %s", claimed.step_id, claimed.node_id, exc.message)
        return step_fail(claimed, limits.state_too_large_error(exc))


def _commit(claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int], *, keep_next: bool) -> CommitOutcome:
    """The portable commit of a checked result (see :func:`step_commit`). Raises
    StateTooLarge from inside its transaction (rolled back)."""
    now = clock.now()
    usage = result.usage.as_dict() if result.usage else None
    with transaction.atomic():
        run = lock_run(claimed.run_id)
        if run.status == RunStatus.CANCELLED:
            return commit_cancelled(run, claimed, now, usage=result.usage, cost_usd=result.cost_usd)
        if result.spawn and claimed.parent_id is None:
            return _commit_spawn(run, claimed, result, now, keep_next=keep_next)
        status = StepStatus.WAITING if result.wait else StepStatus.SUCCEEDED
        due_at = now + timedelta(seconds=result.wait.due_seconds) if result.wait and result.wait.due_seconds else None
        # A top-level step that succeeds commits the state version run.version + 1
        # (advance writes its keys' rows at that seq; runs.engine.store.state).
        state_seq = run.version + 1 if claimed.parent_id is None and not result.wait else None
        written = fenced(claimed.step_id, claimed.attempt, claimed.worker).update(
            status=status,
            state_seq=state_seq,
            output=result.recorded_output(),
            updates=result.updates or None,
            usage=usage,
            cost_usd=result.cost_usd,
            price_version=price_version(result.usage),
            lease_owner="",
            lease_expires_at=None,
            finished_at=None if result.wait else now,
            # A waiting step is due only at its deadline (claims.step_claim_due fires it
            # once); without one it is never due. A step that finishes is due never again.
            due_at=due_at,
        )
        if not written:
            log.warning("step %s attempt %s: lease lost, result discarded", claimed.step_id, claimed.attempt)
            return CommitOutcome(committed=False)
        StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(
            status=AttemptStatus.SUCCEEDED, usage=usage, cost_usd=result.cost_usd, price_version=price_version(result.usage), finished_at=now
        )
        add_usage(run, result)
        step = Step(
            pk=claimed.step_id,
            run_id=run.pk,
            node_id=claimed.node_id,
            kind=claimed.kind,
            iteration=claimed.iteration,
            depth=claimed.depth,
            parent_id=claimed.parent_id,
            due_at=due_at,
        )
        if claimed.parent_id is not None:
            if result.wait:
                return _commit_child_wait(run, step, claimed, result, now)
            events = [event(run.pk, RunEventKind.STEP_SUCCEEDED, step.pk, node_id=step.node_id, parent=claimed.parent_id)]
            return child_finished(run, step, events, now, worker=claimed.worker if keep_next else None)
        if result.wait:
            return _commit_wait(run, step, result, now)
        return advance(run, step, result, now, worker=claimed.worker if keep_next else None, written_sizes=written_sizes)


CANCELLED_WHILE_RUNNING = "cancelled"


def commit_cancelled(run: Run, claimed: ClaimedStep, now: datetime, *, usage: Usage | None, cost_usd: Decimal | None) -> CommitOutcome:
    """End ``claimed``'s attempt of a run that was cancelled while it ran: the step is
    ``cancelled`` (never a success after ``run_cancelled``: its result is not stored and
    nothing follows it), its attempt failed with the error code ``cancelled``, and what
    the attempt spent (``usage``, ``cost_usd``: a model call billed before it stopped) is
    recorded on the attempt and added to the run's totals. A ``step_failed`` event with
    that error tells live viewers. Inside the caller's transaction, run row locked;
    fenced like every commit (``committed`` False, nothing written, when the lease is no
    longer ours)."""
    error = {"code": CANCELLED_WHILE_RUNNING, "message": "the run was cancelled while the step ran", "attempt": claimed.attempt}
    written = fenced(claimed.step_id, claimed.attempt, claimed.worker).update(
        status=StepStatus.CANCELLED, error=error, lease_owner="", lease_expires_at=None, finished_at=now, due_at=None
    )
    if not written:
        return CommitOutcome(committed=False)
    usage_dict = usage.as_dict() if usage else None
    StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(
        status=AttemptStatus.FAILED, error=error, usage=usage_dict, cost_usd=cost_usd, price_version=price_version(usage), finished_at=now
    )
    if usage or cost_usd:
        run.cost_usd += cost_usd or 0
        run.input_tokens += usage.input_tokens if usage else 0
        run.output_tokens += usage.output_tokens if usage else 0
        bump_run(Run.objects.filter(pk=run.pk), cost_usd=run.cost_usd, input_tokens=run.input_tokens, output_tokens=run.output_tokens)
    data: dict[str, Any] = {"node_id": claimed.node_id, "error": error}
    if claimed.parent_id is not None:
        data["parent"] = claimed.parent_id
    append_events([event(run.pk, RunEventKind.STEP_FAILED, claimed.step_id, **data)])
    return CommitOutcome(committed=True, run_status=run.status)


def _plan(
    run: Run, active: list[ActiveStep], new_steps: list[Step], now: datetime, *, worker: str | None, state: dict[str, Any]
) -> tuple[Step | None, list[int]]:
    """Apply scheduler.plan_dispatch to unsaved ``new_steps``: lease the kept one to
    ``worker`` (if its budget allows), mark the others dispatched. Returns (kept step, ids
    of older steps to mark dispatched)."""
    may_keep = None if worker is None else (lambda i: budget_refusal(run, new_steps[i], state) is None)
    plan = scheduler.plan_dispatch(max_parallelism=run.max_parallelism, active=active, new_count=len(new_steps), now=now, may_keep=may_keep)
    kept: Step | None = None
    if plan.kept is not None and worker is not None:
        kept = new_steps[plan.kept]
        kept.attempt += 1
        lease_to(kept, worker, now)
    for index in plan.dispatch_new:
        new_steps[index].dispatched_at = now
        new_steps[index].due_at = now
    return kept, plan.dispatch_old


def _save_planned(run: Run, new_steps: list[Step], dispatch_old: list[int], now: datetime) -> None:
    save_steps(run, new_steps)
    if dispatch_old:
        Step.objects.filter(pk__in=dispatch_old).update(dispatched_at=now, due_at=now)


def _commit_wait(run: Run, step: Step, result: NodeResult, now: datetime) -> CommitOutcome:
    assert result.wait is not None
    get_kind(step.kind).on_wait(run=run, step=step, wait=result.wait)
    events = [event(run.pk, RunEventKind.STEP_WAITING, step.pk, node_id=step.node_id, reason=result.wait.reason)]
    active = active_steps(run.pk, exclude=step.pk)
    new_status = run.status
    if not run.is_terminal and scheduler.run_status_after(a.status for a in active) == RunStatus.WAITING:
        new_status = RunStatus.WAITING
        events.append(event(run.pk, RunEventKind.RUN_WAITING, step.pk, node_id=step.node_id))
    append_events(events)
    save_run_usage(run, now, status=new_status)
    return CommitOutcome(committed=True, run_status=new_status)


def _commit_child_wait(run: Run, step: Step, claimed: ClaimedStep, result: NodeResult, now: datetime) -> CommitOutcome:
    """A child step (an agent's tool call of a published graph) that waits: its node
    kind's ``on_wait`` runs in this transaction (the agent creates the child run here), a
    ``step_waiting`` event names its parent, and the parent stays suspended: the waiting
    child is still active, so :func:`child_finished` does not wake it. The slot the child
    held goes to a sibling held back by the run's parallelism bound. Whoever finishes the
    waiting child later (operations.step_complete_waiting, step_fail_waiting_child) wakes
    the parent. Inside the commit transaction, run row locked."""
    assert result.wait is not None
    get_kind(graphs.step_node(claimed.version_id, claimed.node_id).kind).on_wait(run=run, step=step, wait=result.wait)
    events = [event(run.pk, RunEventKind.STEP_WAITING, step.pk, node_id=step.node_id, parent=claimed.parent_id, reason=result.wait.reason)]
    return child_finished(run, step, events, now, worker=None, waiting=True)


def advance(
    run: Run, step: Step, result: NodeResult, now: datetime, *, worker: str | None, written_sizes: dict[str, int] | None = None
) -> CommitOutcome:
    """Apply a succeeded top-level step (its result already checked as JSON) to the locked
    run: state, successors, status.

    Inside the caller's transaction. ``worker`` may keep one successor (None: all go to
    the queue). ``written_sizes``: encoded size per written key (limits.checked_result).
    The caller recorded ``Step.state_seq`` = ``run.version + 1`` with the step's status;
    the rows of the keys the step wrote are inserted at that seq (runs.engine.store.state),
    nothing else of the state is written. Raises StateTooLarge, before writing anything
    to the run, when the merged state would pass the state size limit: the caller's
    transaction must roll back."""
    events = [event(run.pk, RunEventKind.STEP_SUCCEEDED, step.pk, node_id=step.node_id, iteration=step.iteration, route=result.route)]
    if run.is_terminal:
        # The run ended (cancelled, failed elsewhere) while this step ran: its output is
        # a fact and is kept, but nothing follows it.
        append_events(events)
        save_run_usage(run, now)
        return CommitOutcome(committed=True, run_status=run.status)

    graph = graphs.compiled_graph(run.graph_version_id)
    active = active_steps(run.pk, exclude=step.pk)
    transition = state_store.transition(
        run, node_id=step.node_id, iteration=step.iteration, depth=step.depth, result=result, other_active=[spec_node_id(a.node_id) for a in active]
    )
    if transition.failure:
        failure = transition.failure
        append_events(events)
        save_run_totals(run, now)
        finish_run(run, RunStatus.FAILED, error={"code": failure.code, "message": failure.message, "node_id": step.node_id}, step_id=step.pk)
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)

    if result.updates:
        sizes = limits.sizes_after(
            graph, old_state=run.state, old_sizes=run.state_sizes, new_state=transition.state, updates=result.updates, written=written_sizes,
            sets=result.sets,
        )
        limits.enforce(sizes, field="output")
        run.state_sizes = sizes
        state_store.write(run.pk, run.version + 1, result.updates, transition.state, sizes, transition.bookkeeping)
    elif run.state_sizes is None:
        run.state_sizes = limits.full_sizes(run.state)

    if transition.ended and graph.topology.nodes[step.node_id].kind == "end":
        run.output = result.recorded_output()

    new_steps = []
    for act in transition.activations:
        node = graph.topology.nodes[act.node_id]
        new_steps.append(
            Step(
                run_id=run.pk,
                node_id=act.node_id,
                kind=node.kind,
                iteration=act.iteration,
                depth=act.depth,
                max_attempts=node.retry.max_attempts,
                idempotency_key=step_idempotency_key(run.uuid, act.node_id, act.iteration),
            )
        )
    kept, dispatch_old = _plan(run, active, new_steps, now, worker=worker, state=transition.state)
    # Keeping nothing (a branch that reaches a join that is not ready): take the run's
    # oldest due sibling instead, in this commit, as the fast path does.
    sibling = take_due_sibling(run, now, worker) if kept is None and worker is not None and active else None
    _save_planned(run, new_steps, dispatch_old, now)
    for new in new_steps:
        events.append(event(run.pk, RunEventKind.STEP_CREATED, new.pk, node_id=new.node_id, iteration=new.iteration))
    run.state = transition.state
    run.scheduler = transition.bookkeeping
    run.step_count += len(new_steps)
    next_claim = start_kept(run, kept or sibling, worker, now, events)

    if not active and not new_steps:
        append_events(events)
        save_run_totals(run, now)
        if transition.bookkeeping.get("ended"):
            finish_run(run, RunStatus.SUCCEEDED, output=run.output, step_id=step.pk)
            return CommitOutcome(committed=True, run_status=RunStatus.SUCCEEDED)
        error = {"code": "no_end", "message": "every branch stopped before reaching an end node"}
        finish_run(run, RunStatus.FAILED, error=error, step_id=step.pk)
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)

    new_status = scheduler.run_status_after([a.status for a in active] + [s.status for s in new_steps])
    if new_status != run.status and new_status == RunStatus.WAITING:
        events.append(event(run.pk, RunEventKind.RUN_WAITING, step.pk))
    append_events(events)
    run.status = new_status
    save_run_totals(run, now, status=new_status)
    if next_claim is not None and not active and len(new_steps) == 1:
        run.version += 1
        next_claim.snapshot = run
    dispatch = [s.pk for s in new_steps if s.dispatched_at is not None] + dispatch_old
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=new_status)


def take_due_sibling(run: Run, now: datetime, worker: str) -> Step | None:
    """Lease to ``worker`` the run's oldest due top-level step that was never attempted
    (a branch released to the queue), inside the caller's commit, or None. Its doorbell,
    delivered later, finds it running and does nothing. SKIP LOCKED on PostgreSQL: a
    sibling another worker is claiming stays its. Only first attempts: a retried or
    recovered step goes through the claim, which counts lost attempts."""
    picks = (
        Step.objects.filter(run_id=run.pk, status=StepStatus.PENDING, parent__isnull=True, attempt=0, due_at__lte=now)
        .filter(Q(available_at__isnull=True) | Q(available_at__lte=now))
        .order_by("due_at", "id")
    )
    if connection.features.has_select_for_update_skip_locked:
        picks = picks.select_for_update(skip_locked=True, no_key=True)
    sibling = picks.first()
    if sibling is None:
        return None
    sibling.attempt = 1
    lease_to(sibling, worker, now)
    Step.objects.filter(pk=sibling.pk, status=StepStatus.PENDING).update(
        status=StepStatus.RUNNING, attempt=1, lease_owner=worker, lease_expires_at=sibling.lease_expires_at, started_at=now
    )
    return sibling


def _commit_spawn(run: Run, claimed: ClaimedStep, result: NodeResult, now: datetime, *, keep_next: bool) -> CommitOutcome:
    """The parent asked for child steps: suspend it (no lease) and commit the children.

    Children whose key already exists (an earlier replay spawned them) are not created
    again. Inside the commit transaction, run row locked.
    """
    assert result.spawn is not None
    worker = claimed.worker if keep_next else None
    written = fenced(claimed.step_id, claimed.attempt, claimed.worker).update(status=StepStatus.SUSPENDED, lease_owner="", lease_expires_at=None)
    if not written:
        log.warning("step %s attempt %s: lease lost, spawn discarded", claimed.step_id, claimed.attempt)
        return CommitOutcome(committed=False)
    StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(status=AttemptStatus.SUSPENDED, finished_at=now)
    add_usage(run, result)
    events = [event(run.pk, RunEventKind.STEP_SUSPENDED, claimed.step_id, node_id=claimed.node_id, children=[c.key for c in result.spawn])]
    existing = set(Step.objects.filter(parent_id=claimed.step_id).values_list("child_key", flat=True))
    node = graphs.step_node(claimed.version_id, claimed.node_id)
    new_steps = []
    for call in result.spawn:
        if call.key in existing:
            continue
        existing.add(call.key)
        child_node_id = f"{claimed.node_id}#{claimed.iteration}/{call.key}"
        new_steps.append(
            Step(
                run_id=run.pk,
                parent_id=claimed.step_id,
                child_key=call.key,
                node_id=child_node_id,
                kind=call.label,
                iteration=0,
                depth=claimed.depth,
                input=call.input,
                max_attempts=node.retry.max_attempts,
                idempotency_key=step_idempotency_key(run.uuid, child_node_id, 0),
            )
        )
    active = active_steps(run.pk, exclude=claimed.step_id)
    failure = None
    if not new_steps and not any(a.parent_id == claimed.step_id for a in active):
        failure = {"code": "spawn", "message": f"node '{node.id}' asked again for children that already finished", "node_id": node.id}
    elif run.step_count + len(new_steps) > run.max_steps:
        failure = {"code": "max_steps", "message": f"run reached its max_steps limit of {run.max_steps}", "node_id": node.id}
    if failure or run.is_terminal:
        append_events(events)
        save_run_totals(run, now)
        if failure:
            Step.objects.filter(pk=claimed.step_id).update(status=StepStatus.FAILED, error=failure, finished_at=now)
            finish_run(run, RunStatus.FAILED, error=failure, step_id=claimed.step_id)
        return CommitOutcome(committed=True, run_status=run.status)
    kept, dispatch_old = _plan(run, active, new_steps, now, worker=worker, state=run.state)
    _save_planned(run, new_steps, dispatch_old, now)
    for new in new_steps:
        events.append(event(run.pk, RunEventKind.STEP_CREATED, new.pk, node_id=new.node_id, parent=claimed.step_id))
    next_claim = start_kept(run, kept, worker, now, events)
    run.step_count += len(new_steps)
    run.status = scheduler.run_status_after([a.status for a in active] + [s.status for s in new_steps])
    append_events(events)
    save_run_usage(run, now, status=run.status, step_count=run.step_count)
    dispatch = [s.pk for s in new_steps if s.dispatched_at is not None] + dispatch_old
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=run.status)


def child_finished(run: Run, child: Step, events: list[RunEvent], now: datetime, *, worker: str | None, waiting: bool = False) -> CommitOutcome:
    """A child step finished (succeeded, or failed for good): once no sibling is active,
    the parent becomes runnable again (its replay sees every child's result), leased to
    ``worker`` or dispatched. ``waiting``: the child did not finish but waits (it stays
    active, so the parent is not woken; only the run's status and held-back siblings
    follow). Inside the commit transaction, run row locked."""
    active = active_steps(run.pk, exclude=None if waiting else child.pk)
    dispatch: list[int] = []
    next_claim: ClaimedStep | None = None
    if child.parent_id is not None and not run.is_terminal and not any(a.parent_id == child.parent_id for a in active):
        parent = Step.objects.get(pk=child.parent_id)
        if parent.status == StepStatus.SUSPENDED:
            events.append(event(run.pk, RunEventKind.STEP_RESUMED, parent.pk, node_id=parent.node_id, reason="children finished"))
            if worker is not None:
                parent.attempt += 1
                lease_to(parent, worker, now)
                Step.objects.filter(pk=parent.pk, status=StepStatus.SUSPENDED).update(
                    status=StepStatus.RUNNING,
                    attempt=parent.attempt,
                    lease_owner=worker,
                    lease_expires_at=parent.lease_expires_at,
                    started_at=now,
                )
                next_claim = start_kept(run, parent, worker, now, events)
            else:
                Step.objects.filter(pk=parent.pk, status=StepStatus.SUSPENDED).update(status=StepStatus.PENDING, dispatched_at=now, due_at=now)
                dispatch.append(parent.pk)
            active = [
                a if a.id != parent.pk else a._replace(status=StepStatus.RUNNING, dispatched_at=now, available_at=None, parent_id=None)
                for a in active
            ]
    if not run.is_terminal:
        _, dispatch_old = _plan(run, active, [], now, worker=None, state=run.state)
        if dispatch_old:
            Step.objects.filter(pk__in=dispatch_old).update(dispatched_at=now, due_at=now)
            dispatch += dispatch_old
        run.status = scheduler.run_status_after(a.status for a in active)
    append_events(events)
    save_run_usage(run, now, status=run.status)
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=run.status)


def step_fail_waiting_child(step_id: int, *, actor: str, error: dict[str, Any]) -> list[int]:
    """Fail a waiting child step (an agent's call of a graph tool whose child run failed
    or was cancelled) with ``error`` (``{"code", "message", ...}``): as a child that
    failed for good, it does not fail the run; its parent is woken once no sibling is
    active and its replay sees the failure (the model is told). Inside the caller's
    transaction. Returns step ids to dispatch. Raises StepStateError when the step is
    not a waiting child step."""
    step = Step.objects.get(pk=step_id)
    run = lock_run(step.run_id)
    now = clock.now()
    if step.parent_id is None or not Step.objects.filter(pk=step_id, status=StepStatus.WAITING).update(
        status=StepStatus.FAILED, error=error, finished_at=now, lease_owner=""
    ):
        raise StepStateError(f"step {step_id} is {step.status}, not a waiting child step")
    if run.is_terminal:
        return []
    failed = event(run.pk, RunEventKind.STEP_FAILED, step.pk, node_id=step.node_id, parent=step.parent_id, error=error, by=actor)
    return child_finished(run, step, [failed], now, worker=None).dispatch


def _retry_after(error: NodeError) -> float:
    """Seconds the failing service asked us to wait (the provider parsed HTTP Retry-After
    into ``error.retry_after`` or ``details["retry_after"]``), else 0."""
    value = getattr(error, "retry_after", None)
    if value is None and isinstance(error.details, dict):
        value = error.details.get("retry_after")
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def storable_error(error: NodeError) -> dict[str, Any]:
    """``error.as_dict()`` as JSON a commit can store. A node's ``details`` (or message)
    holding a value JSON cannot carry must not make the failure itself fail: such details
    are replaced by ``details_dropped`` saying where and why (never silently), and NUL
    characters in the message are shown as ``\\u0000``."""
    data = error.as_dict() | {"code": safe_text(str(error.code)), "message": safe_text(str(error.message))}
    try:
        return dict(canonical(data, "error"))
    except InvalidValue as exc:
        log.warning("step error %r has details that are not JSON (%s); they are not stored", error.code, exc)
        return {
            "code": safe_text(str(error.code)),
            "message": safe_text(str(error.message)),
            "retryable": bool(error.retryable),
            "details_dropped": f"{exc.path}: {exc.reason}",
        }


def step_fail(claimed: ClaimedStep, error: NodeError) -> CommitOutcome:
    """Record a failed attempt (fenced), with what it spent (``error.usage``/``cost_usd``).

    Retry per the node's policy: the step's failed and lost attempts count against its
    ``max_attempts``; the delay is the policy's backoff or the service's Retry-After,
    whichever is longer. A step not safe to repeat (its node's or kind's ``repeat_safe``)
    is not retried after an error that may have let its side effect happen (any error
    without ``not_sent``, such as a timeout): it is parked for a person's decision instead
    (retry, skip, fail), as recovery parks it after a crash. A retry puts the step back to pending with ``available_at``; it
    is dispatched at once when the delay is zero, else by the recovery poller when due.
    A child step that fails for good does not fail the run: its parent is woken and its
    replay sees the failure. Any other final failure fails the run. A lost lease writes
    nothing (``committed`` False).
    """
    now = clock.now()
    policy = graphs.step_node(claimed.version_id, claimed.node_id).retry
    usage, cost_usd = error.usage, error.cost_usd
    with transaction.atomic():
        run = lock_run(claimed.run_id)
        if run.status == RunStatus.CANCELLED:
            # Whatever stopped it (most often the cancel itself: StepCancelled), a step of
            # a cancelled run ends cancelled, never retried or parked.
            return commit_cancelled(run, claimed, now, usage=usage, cost_usd=cost_usd)
        failures = StepAttempt.objects.filter(step_id=claimed.step_id, status__in=(AttemptStatus.FAILED, AttemptStatus.LOST)).count() + 1
        retry = error.retryable and failures < claimed.max_attempts and (not policy.retry_on or error.code in policy.retry_on) and not run.is_terminal
        # A retry would repeat a side effect that may have happened (the attempt timed out
        # or lost its connection mid-request): a step not safe to repeat is parked for a
        # person instead, as after a crash, unless the error says nothing was sent.
        call = claimed.child_call() if claimed.parent_id is not None else None
        park_it = retry and not error.not_sent and not graphs.step_repeat_safe(claimed.version_id, claimed.node_id, child=call)
        err = storable_error(error) | {"attempt": claimed.attempt}
        fields: dict[str, Any] = {"error": err, "lease_owner": "", "lease_expires_at": None}
        if park_it:
            fields |= {"status": StepStatus.PARKED, "dispatched_at": None, "due_at": None}
        elif retry:
            delay = max(policy.delay(failures), _retry_after(error))
            fields |= {"status": StepStatus.PENDING, "available_at": now + timedelta(seconds=delay)}
            # A backoff of zero is due now; a longer one is released (dispatched, due at
            # its available_at) by recovery's due_pending_steps once it has passed.
            fields["dispatched_at"] = now if delay == 0 else None
            fields["due_at"] = now if delay == 0 else None
        else:
            fields |= {"status": StepStatus.FAILED, "finished_at": now}
        if not fenced(claimed.step_id, claimed.attempt, claimed.worker).update(**fields):
            return CommitOutcome(committed=False)
        StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(
            status=AttemptStatus.FAILED,
            error=err,
            usage=usage.as_dict() if usage else None,
            cost_usd=cost_usd,
            price_version=price_version(usage),
            finished_at=now,
        )
        if usage or cost_usd:
            run.cost_usd += cost_usd or 0
            run.input_tokens += usage.input_tokens if usage else 0
            run.output_tokens += usage.output_tokens if usage else 0
            bump_run(Run.objects.filter(pk=run.pk), cost_usd=run.cost_usd, input_tokens=run.input_tokens, output_tokens=run.output_tokens)
        if park_it:
            reason = f"stopped by an error that leaves its outcome unknown ({err['code']}: {err['message']}); not safe to repeat"
            data = {"node_id": claimed.node_id, "attempt": claimed.attempt, "error": err}
            park(run, Step.objects.get(pk=claimed.step_id), by=claimed.worker, reason=reason, data=data, cause="outcome_unknown")
            return CommitOutcome(committed=True, run_status=Run.objects.values_list("status", flat=True).get(pk=run.pk))
        if retry:
            create_event(
                run_id=run.pk,
                step_id=claimed.step_id,
                kind=RunEventKind.STEP_RETRYING,
                data={"node_id": claimed.node_id, "error": err, "available_at": fields["available_at"].isoformat()},
            )
            return CommitOutcome(committed=True, dispatch=[claimed.step_id] if fields["dispatched_at"] else [], run_status=run.status)
        failed = event(run.pk, RunEventKind.STEP_FAILED, claimed.step_id, node_id=claimed.node_id, error=err)
        if claimed.parent_id is not None:
            child = Step(pk=claimed.step_id, run_id=run.pk, node_id=claimed.node_id, parent_id=claimed.parent_id)
            return child_finished(run, child, [failed], now, worker=None)
        append_events([failed])
        finish_run(run, RunStatus.FAILED, error=err | {"node_id": claimed.node_id}, step_id=claimed.step_id)
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)
