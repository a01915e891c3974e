"""Claims and leases: pending -> running under a lease (compare-and-set), heartbeats, budget checks.

The attempt number a claim sets is the fencing token every later commit checks. A
duplicate queue delivery finds nothing to claim and does nothing.
"""
from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce

from core.build import build
from graphs.spec import NodeSpec
from runs.engine.store import clock, paths
from runs.engine.store.events import CounterBusy, publish, push_enabled, wire
from runs.engine.store.events import append as append_events
from runs.engine.store.events import create as create_event
from runs.engine.store.graphs import spawns_children, step_node
from runs.engine.store.writes import bump_run, event, fenced, finish_run, lease_delta, lost_attempts
from runs.engine.types import ClaimedStep
from runs.models import (
    TERMINAL_RUN_STATUSES,
    AttemptStatus,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
)
from runs.nodes import get_kind
from runs.nodes.base import ChildCall

log = logging.getLogger("ballast.engine")
# How long a due step whose claim raised is set aside before it is tried again.
CLAIM_RETRY_SECONDS = 60


def claim_details(step: Step, run: Run, worker: str) -> ClaimedStep:
    """What executing ``step`` (leased to ``worker``) needs, read from its rows.

    An agent-like parent gets every child that finished (a fact), by key, for its replay."""
    children: dict[str, dict[str, Any]] = {}
    if step.parent_id is None and spawns_children(get_kind(step_node(run.graph_version_id, step.node_id).kind)):
        for key, status, output, error in Step.objects.filter(parent_id=step.pk).values_list("child_key", "status", "output", "error"):
            if status == StepStatus.SUCCEEDED:
                children[key] = {"status": "succeeded", "output": output}
            elif status == StepStatus.FAILED:
                children[key] = {"status": "failed", "error": error}
    return ClaimedStep(
        step_id=step.pk,
        run_id=run.pk,
        run_uuid=str(run.uuid),
        node_id=step.node_id,
        kind=step.kind,
        iteration=step.iteration,
        depth=step.depth,
        attempt=step.attempt,
        max_attempts=step.max_attempts,
        idempotency_key=step.idempotency_key,
        version_id=run.graph_version_id,
        state=run.state,
        run_input=run.input,
        budget_remaining_usd=None if run.budget_usd is None else run.budget_usd - run.cost_usd,
        budget_remaining_tokens=None if run.budget_tokens is None else run.budget_tokens - run.input_tokens - run.output_tokens,
        worker=worker,
        parent_id=step.parent_id,
        child_key=step.child_key,
        child_input=step.input if step.parent_id else None,
        children=children,
        traceparent=run.traceparent,
    )


def budget_refusal(run: Run, step: Step, state: dict[str, Any]) -> str | None:
    """A message when ``step``'s worst-case cost could overrun the run's budget, else None.

    A child step is estimated by its parent's kind. A node that spawns children costs
    nothing itself: its children are checked one by one.
    """
    if run.budget_usd is None and run.budget_tokens is None:
        return None
    node: NodeSpec = step_node(run.graph_version_id, step.node_id)
    name = step.node_id
    kind = get_kind(node.kind)
    config = kind.config_model.model_validate(node.config)
    if step.parent_id:
        usd, tokens = kind.estimate_child_cost(config, ChildCall(step.child_key, step.kind, step.input or {}), state)
    elif spawns_children(kind):
        return None
    else:
        usd, tokens = kind.estimate_cost(config, state)
    if run.budget_tokens is not None and tokens:
        left = run.budget_tokens - run.input_tokens - run.output_tokens
        if tokens > left:
            return f"step '{name}' may use up to {tokens} tokens; {left} of the run's token budget remain"
    if run.budget_usd is not None:
        left_usd = run.budget_usd - run.cost_usd
        if usd is None:
            return f"step '{name}' has no known price, so the run's USD budget cannot be guaranteed"
        if usd > left_usd:
            return f"step '{name}' may cost up to ${usd:.6f}; ${left_usd:.6f} of the run's budget remain"
    return None


def step_claim(step_id: int, worker: str) -> ClaimedStep | None:
    """Claim a pending step for ``worker``: compare-and-set pending -> running with a lease.

    Returns None when the step is not claimable (already running elsewhere, finished,
    not yet due, or its run ended): a duplicate delivery does nothing. Raises nothing for
    a missing step (a deleted run's task is dropped). A step interrupted
    BALLAST_MAX_LOST_ATTEMPTS times, or one the budget cannot cover, fails its run instead.
    """
    while True:
        now = clock.now()
        try:
            fast = _fast_claim(step_id, worker, now)
            if not isinstance(fast, _Portable):
                return fast
            with transaction.atomic():
                return _claim(step_id, worker, now)
        except CounterBusy:
            time.sleep(0.002)  # another writer is numbering this run's events: a moment


class _Portable:
    """:func:`_fast_claim`'s answer when the portable claim must decide."""


_PORTABLE = _Portable()


def _fast_claim(step_id: int | None, worker: str, now: datetime) -> ClaimedStep | _Portable | None:
    """The common first claim as one statement on PostgreSQL (fastpath_postgresql.CLAIM_SQL,
    in autocommit) of step ``step_id``, or (None) of the step due the longest: what
    :func:`_claim` writes for a pending top-level step on its first attempt in a queued
    or running run without a budget, and the snapshot its commit takes the fast path
    from. None when no step is due (``step_id`` None). ``_PORTABLE`` (nothing written)
    for every other step, on SQLite, with the fast path off (settings.BALLAST_FAST_COMMIT)
    or inside a transaction: the portable claim decides. Raises CounterBusy (nothing
    written) as :func:`_claim` does."""
    if not paths.is_postgresql() or not paths.enabled() or connection.in_atomic_block:
        return _PORTABLE
    fastpath_postgresql = paths.postgresql()

    step_cols, run_cols = _columns(Step), _columns(Run)
    params = {
        "step": step_id,
        "owner": worker,
        "now": now,
        "due_by": clock.due_by(now),  # the doorbell's pick (fastpath_postgresql.PICK_DUE)
        "lease_until": now + lease_delta(),
        "st_running": StepStatus.RUNNING.value,
        "st_pending": StepStatus.PENDING.value,
        "run_claimable": [RunStatus.QUEUED.value, RunStatus.RUNNING.value],
        "run_running": RunStatus.RUNNING.value,
        "run_queued": RunStatus.QUEUED.value,
        "att_running": AttemptStatus.RUNNING.value,
        "build": build(),
        "ev_run_started": RunEventKind.RUN_STARTED.value,
        "ev_started": RunEventKind.STEP_STARTED.value,
    }
    try:
        row = fastpath_postgresql.claim(params, step_cols, run_cols, due=step_id is None)
    except OperationalError as error:
        if getattr(error.__cause__, "sqlstate", None) == "55P03":  # lock_not_available: the counter's NOWAIT
            raise CounterBusy(step_id) from error
        raise
    if row is None:
        return None  # nothing due
    n = len(step_cols)
    if row[1] is None:
        return _PORTABLE  # picked, and not a first claim this statement decides
    step = _from_row(Step, step_cols, row[1 : n + 1])
    started, last_seq, event_ids, state_json = row[n + 1 : n + 5]
    run = _from_row(Run, run_cols, row[n + 5 :])
    run.state = json.loads(state_json) if state_json else {}
    step.run = run
    kinds = [RunEventKind.RUN_STARTED] if started else []
    rows = [event(run.pk, k) for k in kinds]
    rows.append(event(run.pk, RunEventKind.STEP_STARTED, step.pk, node_id=step.node_id, iteration=step.iteration, attempt=1))
    if push_enabled():
        for i, (e, pk) in enumerate(zip(rows, event_ids, strict=True)):
            e.pk, e.seq, e.created_at = int(pk), int(last_seq) - len(rows) + 1 + i, now
        publish([wire(e) for e in rows])
    details = claim_details(step, run, worker)
    if started and run.step_count == 1:
        # As _claim: the run's first claim with one step created, so the step's commit may
        # take the fast path from this snapshot (the run as this claim left it).
        run.version += 1
        run.status = RunStatus.RUNNING
        run.started_at = now
        details.snapshot = run
    return details


def _columns(model: type[Step] | type[Run]) -> list[str]:
    """The model's concrete columns, in field order (what :func:`_from_row` reads back)."""
    return [str(f.column) for f in model._meta.concrete_fields]


def _from_row(model: Any, columns: list[str], values: Any) -> Any:
    """A model instance from a raw row of ``columns``, converted as the ORM converts
    (JSON text decoded: Django reads jsonb as text)."""
    fields = model._meta.concrete_fields
    converted = [
        f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


def due_steps(now: datetime) -> QuerySet[Step]:
    """Pending steps a doorbell may claim at ``now``: released (``due_at`` set and passed)
    and past any backoff, oldest due first (ties by id, creation order)."""
    due_by = clock.due_by(now)
    return (
        Step.objects.filter(status=StepStatus.PENDING, due_at__lte=due_by)
        .filter(Q(available_at__isnull=True) | Q(available_at__lte=due_by))
        .order_by("due_at", "id")
    )


# What :func:`claim_oldest_due` returns when the pick must start again (a claim refused
# or set aside, the event counter busy): the caller fires due deadlines first, then picks.
class PickAgain:
    pass


PICK_AGAIN = PickAgain()


def claim_oldest_due(worker: str, now: datetime) -> ClaimedStep | PickAgain | None:
    """One pick of the pending step due the longest (at ``now``) and its claim for
    ``worker``: the claimed step, None when no step is due, or PICK_AGAIN when the pick
    must start again. The doorbell's claim (runs.engine.loop.step_claim_due) loops over it,
    firing any deadline that fell due before each pick.

    PostgreSQL: ``SELECT ... ORDER BY due_at, id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED``,
    so concurrent claimers take different steps without waiting on each other (run rows
    are locked NO KEY UPDATE too, writes.lock_run says why). SQLite: the
    transaction is IMMEDIATE (settings), so it holds the single writer lock from BEGIN
    and the select and the update cannot interleave with another claimer. A step the
    claim then refuses (run ended, budget, interrupted too often) is settled as
    :func:`step_claim` settles it and PICK_AGAIN is returned, so a doorbell is never
    spent on a step that cannot run. A step whose claim raises (its run row cannot be
    read back, its version no longer parses) is set aside for CLAIM_RETRY_SECONDS (its
    ``available_at``, as a backoff) and PICK_AGAIN is returned: one bad row never
    leaves every other run queued.

    On PostgreSQL the pick and a first claim are one statement (:func:`_fast_claim`:
    fastpath_postgresql.CLAIM_SQL with PICK_DUE); a picked step that statement does not
    claim (a retry, a budget, an ended run) is picked again by the transaction below.

    A claim never waits for a committer holding the step's run row (writes.lock_run): its
    events take their seq from the run's counter row (RunEventCounter), not from the run
    row, and it takes that counter with NOWAIT. Waiting for the counter while holding the
    picked step could deadlock with a writer that holds the counter and then updates that
    step, so on CounterBusy the claim rolls back, lets go of the step and picks again a
    moment later; a writer holds the counter only from its last write to its commit. The
    seq stays gap-free: whoever bumps the counter holds its row lock until it commits.
    """
    try:
        fast = _fast_claim(None, worker, now)
        if fast is None:
            return None  # nothing due
        if isinstance(fast, ClaimedStep):
            return fast
        with transaction.atomic():
            pick = due_steps(now).values_list("id", flat=True)
            if connection.features.has_select_for_update_skip_locked:
                pick = pick.select_for_update(skip_locked=True, no_key=True)
            step_id = pick.first()
            if step_id is None:
                return None
            try:
                with transaction.atomic():  # a savepoint: the pick's transaction stays usable
                    claimed = _claim(step_id, worker, now)
            except (CounterBusy, DatabaseError):
                raise  # the counter is busy, or the database is (a lock, a lost connection): pick again later
            except Exception:
                # A step whose claim raises otherwise (a run row whose value cannot be
                # read back, a version whose spec no longer parses) is the oldest due
                # row: it must not fail every doorbell behind it and leave every run
                # queued. It is set aside like a backoff (recovery rings for it again)
                # and the next due step is picked.
                log.exception("claim of step %s failed; trying it again in %ss", step_id, CLAIM_RETRY_SECONDS)
                Step.objects.filter(pk=step_id, status=StepStatus.PENDING).update(
                    available_at=now + timedelta(seconds=CLAIM_RETRY_SECONDS)
                )
                return PICK_AGAIN
    except CounterBusy:
        # Another writer is numbering this run's events: let go of the step (that
        # writer may be about to update it) and pick again in a moment.
        time.sleep(0.002)
        return PICK_AGAIN
    return claimed if claimed is not None else PICK_AGAIN


def _claim(step_id: int, worker: str, now: datetime) -> ClaimedStep | None:
    """The claim of :func:`step_claim`, inside the caller's transaction. Raises
    CounterBusy when another transaction holds the run's event counter (the claim numbers
    its events last, with NOWAIT: see :func:`claim_oldest_due`); the caller rolls back."""
    claimed = (
        Step.objects.filter(pk=step_id, status=StepStatus.PENDING)
        # Within the clock's slack, as the pick (due_steps): else a step picked there and
        # refused here would be picked again and again until its backoff ended.
        .filter(Q(available_at__isnull=True) | Q(available_at__lte=clock.due_by(now)))
        .update(
            status=StepStatus.RUNNING,
            attempt=F("attempt") + 1,
            lease_owner=worker,
            lease_expires_at=now + lease_delta(),
            started_at=now,
        )
    )
    if not claimed:
        return None
    step = Step.objects.select_related("run").get(pk=step_id)
    run = step.run
    if step.parent_id is None and step.attempt > 1 and lost_attempts(step.pk) >= settings.BALLAST_MAX_LOST_ATTEMPTS:
        # A step that kills its worker every time must not loop forever (django-q2
        # never counts a hard crash as an attempt; we do).
        error = {"code": "worker_lost", "message": f"step '{step.node_id}' was interrupted {settings.BALLAST_MAX_LOST_ATTEMPTS} times; giving up"}
        Step.objects.filter(pk=step_id).update(status=StepStatus.FAILED, lease_owner="", finished_at=now, error=error)
        finish_run(run, RunStatus.FAILED, error=error | {"node_id": step.node_id}, step_id=step_id)
        return None
    if run.is_terminal:
        Step.objects.filter(pk=step_id).update(status=StepStatus.CANCELLED, lease_owner="", finished_at=now)
        return None
    refusal = budget_refusal(run, step, run.state)
    if refusal:
        Step.objects.filter(pk=step_id).update(
            status=StepStatus.CANCELLED, lease_owner="", finished_at=now, error={"code": "budget_exceeded", "message": refusal}
        )
        finish_run(run, RunStatus.FAILED, error={"code": "budget_exceeded", "message": refusal}, step_id=step_id)
        return None
    StepAttempt.objects.create(step=step, number=step.attempt, worker=worker, build=build(), started_at=now)
    events = [event(run.pk, RunEventKind.STEP_STARTED, step.pk, node_id=step.node_id, iteration=step.iteration, attempt=step.attempt)]
    first = False
    if run.status == RunStatus.QUEUED:
        first = bool(bump_run(Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED), status=RunStatus.RUNNING, started_at=now))
        events.insert(0, event(run.pk, RunEventKind.RUN_STARTED))
    append_events(events, nowait=True)
    details = claim_details(step, run, worker)
    if first and run.step_count == 1 and step.parent_id is None:
        # The first claim of a run that has created one step (run_create, or a fork
        # with one successor): this step is the run's only active step, so its commit
        # may take the fast path from this snapshot, as a step a commit kept may. The
        # snapshot is the run as our bump left it; any other write in between moved
        # the version further, and the fast path's version check then falls back.
        run.version += 1
        run.status = RunStatus.RUNNING
        run.started_at = now
        details.snapshot = run
    return details


def step_heartbeat(step_id: int, attempt: int, worker: str) -> bool:
    """Extend our lease. False when the lease is no longer ours or the run ended (stop work)."""
    now = clock.now()
    extended = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, attempt=attempt, lease_owner=worker).update(
        lease_expires_at=now + lease_delta()
    )
    if not extended:
        return False
    return not Run.objects.filter(steps__pk=step_id, status__in=TERMINAL_RUN_STATUSES).exists()


def runs_ended(run_ids: set[int]) -> set[int]:
    """Which of ``run_ids`` have ended (succeeded, failed, cancelled): one indexed read,
    for the check that tells running steps their run was cancelled (runs.engine.loop)."""
    if not run_ids:
        return set()
    return set(Run.objects.filter(pk__in=run_ids, status__in=TERMINAL_RUN_STATUSES).values_list("id", flat=True))


def step_release(claimed: ClaimedStep) -> bool:
    """Hand back a step leased to us that has not started executing (a successor a
    commit kept for this worker, when the worker is stopping): pending again, dispatched,
    its unstarted attempt forgotten so the next claim uses the same attempt number.

    Compare-and-set on the lease (owner and attempt): False, and nothing written, when
    the lease is no longer ours. The caller hands the step to the queue after this."""
    return _release(claimed.run_id, claimed.step_id, claimed.attempt, claimed.worker, reason="worker stopping")


def _release(run_id: int, step_id: int, attempt: int, worker: str, *, reason: str) -> bool:
    now = clock.now()
    with transaction.atomic():
        released = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, attempt=attempt, lease_owner=worker).update(
            status=StepStatus.PENDING,
            attempt=F("attempt") - 1,
            lease_owner="",
            lease_expires_at=None,
            started_at=None,
            dispatched_at=now,
            # Due since it was created (leased at once): the next doorbell takes it first.
            due_at=Coalesce(F("due_at"), F("created_at")),
        )
        if not released:
            return False
        StepAttempt.objects.filter(step_id=step_id, number=attempt).delete()
        create_event(run_id=run_id, step_id=step_id, kind=RunEventKind.STEP_REQUEUED, data={"by": worker, "reason": reason})
    return True


def attempt_settled(claimed: ClaimedStep) -> bool:
    """Whether ``claimed``'s attempt was committed (succeeded or failed): how a worker whose
    commit's reply was lost with its connection tells a commit that landed (its retry
    then finds the fence gone) from a lease really lost."""
    return StepAttempt.objects.filter(
        step_id=claimed.step_id, number=claimed.attempt, status__in=(AttemptStatus.SUCCEEDED, AttemptStatus.FAILED)
    ).exists()


def steps_release_kept(run_id: int, worker: str, *, in_hand: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Hand back the steps of run ``run_id`` leased to ``worker`` that never began (no
    ``effect_attempt`` mark) and that no thread of the worker holds (``in_hand``: the ids
    of the steps its other step threads have claimed or been kept, runs.engine.loop):
    what a commit whose reply was lost kept for this worker, which it will not run.
    Returns their ids, for the queue."""
    kept = (
        Step.objects.filter(run_id=run_id, status=StepStatus.RUNNING, lease_owner=worker)
        .exclude(effect_attempt=F("attempt"))
        .exclude(pk__in=list(in_hand))
    )
    return [pk for pk, attempt in kept.values_list("id", "attempt") if _release(run_id, pk, attempt, worker, reason="commit reply lost")]


def mark_effect_begun(claimed: ClaimedStep) -> bool:
    """Before a step not safe to repeat runs (runs.engine.loop.execute_node), commit that
    this attempt is about to begin its side effect (``Step.effect_attempt``, fenced by the
    lease; one UPDATE in autocommit), so recovery can tell an attempt that may have acted
    (parked for a person) from one leased and never started (re-queued). Repeat-safe
    steps do not call it. False when the lease is no longer ours: the step must not run."""
    return bool(fenced(claimed.step_id, claimed.attempt, claimed.worker).update(effect_attempt=claimed.attempt))


def lease_to(step: Step, worker: str, now: datetime) -> None:
    """Mark an in-memory step running under a new lease of ``worker`` (saved by the caller)."""
    step.status = StepStatus.RUNNING
    step.lease_owner = worker
    step.lease_expires_at = now + lease_delta()
    step.started_at = now


def start_kept(run: Run, kept: Step | None, worker: str | None, now: datetime, events: list[RunEvent]) -> ClaimedStep | None:
    """Open the attempt of a step a commit leased to ``worker`` (inside that commit) and
    return its claim; None when nothing was kept."""
    if kept is None or worker is None:
        return None
    StepAttempt.objects.create(step_id=kept.pk, number=kept.attempt, worker=worker, build=build(), started_at=now)
    events.append(event(run.pk, RunEventKind.STEP_STARTED, kept.pk, node_id=kept.node_id, iteration=kept.iteration, attempt=kept.attempt))
    kept.run = run
    return claim_details(kept, run, worker)

