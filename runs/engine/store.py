"""The engine's only ORM code: create runs, claim steps, commit results, leases, recovery.

Every state change is a compare-and-set or happens under the run's row lock inside one
short transaction. A step's commit writes its output, the merged run state, the
successor steps, the events and the run's status together; the queue hand-off happens
only after that commit (the caller hands the returned step ids to ``dispatch``).
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from builder.models import GraphVersion
from builder.spec import GraphSpec, NodeSpec
from runs.engine import scheduler
from runs.engine.audit import audit
from runs.models import (
    ACTIVE_STEP_STATUSES,
    TERMINAL_RUN_STATUSES,
    Run,
    RunEvent,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
    Worker,
)
from runs.nodes import get_kind
from runs.nodes.base import ChildCall, NodeError, NodeKind, NodeResult, Usage
from runs.signals import run_finished, steps_requeued

log = logging.getLogger("ballast.engine")


class RunNotFound(LookupError):
    """No run with that id."""


class StepStateError(RuntimeError):
    """A step is not in the status an operation needs (e.g. resuming a step that is not waiting)."""


@lru_cache(maxsize=512)
def compiled_graph(version_id: int) -> scheduler.CompiledGraph:
    """The parsed spec and topology of a graph version (versions are immutable, so cache)."""
    spec = GraphVersion.objects.values_list("spec", flat=True).get(pk=version_id)
    return scheduler.CompiledGraph(GraphSpec.model_validate(spec))


def spec_node_id(step_node_id: str) -> str:
    """``agent#0/turn-1`` -> ``agent``: the spec node of a (child) step's node id."""
    return step_node_id.split("#", 1)[0]


def _spawns_children(kind: Any) -> bool:
    return type(kind).execute_child is not NodeKind.execute_child


def idempotency_key(run: Run, node_id: str, iteration: int) -> str:
    """The key every attempt of one step shares: ``<run uuid>:<node id>:<iteration>``."""
    return f"{run.uuid}:{node_id}:{iteration}"


def _lease_delta() -> timedelta:
    return timedelta(seconds=settings.BALLAST_LEASE_SECONDS)


def _bump(queryset: Any, **fields: Any) -> int:
    """Update run rows and bump their ``version``: every change to a run moves its version,
    so a worker's cached view of a run is valid exactly while the version matches."""
    return queryset.update(version=F("version") + 1, **fields)


def _lock_run(run_id: int) -> Run:
    # The run row serialises commits of one run's parallel branches (state merge and
    # join bookkeeping); SQLite's IMMEDIATE transactions already serialise all writers.
    return Run.objects.select_for_update().get(pk=run_id)


@dataclass
class ClaimedStep:
    """A step this worker holds a lease on, with what executing it needs."""

    step_id: int
    run_id: int
    run_uuid: str
    node_id: str
    kind: str
    iteration: int
    depth: int
    attempt: int
    max_attempts: int
    idempotency_key: str
    version_id: int
    state: dict[str, Any]
    run_input: dict[str, Any]
    budget_remaining_usd: Decimal | None
    budget_remaining_tokens: int | None
    worker: str
    parent_id: int | None = None
    child_key: str = ""
    child_input: dict[str, Any] | None = None
    children: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The run as this worker's last commit left it, when this step is the run's only
    # active step (a sequential stretch); lets the next commit skip reading the run.
    snapshot: Run | None = None

    @property
    def spec_node_id(self) -> str:
        """The spec node this step executes (a child step executes its parent's node)."""
        return spec_node_id(self.node_id)

    @property
    def node(self) -> NodeSpec:
        return compiled_graph(self.version_id).topology.nodes[self.spec_node_id]

    def child_call(self) -> ChildCall:
        """The ChildCall of a child step (key, label, input)."""
        return ChildCall(key=self.child_key, label=self.kind, input=self.child_input or {})


@dataclass
class CommitOutcome:
    """What a commit decided. ``dispatch`` holds step ids to hand to the queue after the
    commit; ``next_step`` is a successor already leased to this worker (no queue hop)."""

    committed: bool
    dispatch: list[int] = field(default_factory=list)
    next_step: ClaimedStep | None = None
    run_status: str = ""


# --------------------------------------------------------------------------- events, audit


def _event(run_id: int, kind: str, step_id: int | None = None, **data: Any) -> RunEvent:
    return RunEvent(run_id=run_id, step_id=step_id, kind=kind, data=data)


# --------------------------------------------------------------------------- create


def run_create(
    *,
    version: GraphVersion,
    run_input: dict[str, Any],
    actor: str = "system",
    actor_type: str = "system",
    created_by: Any = None,
    idempotency_key_value: str | None = None,
    budget_usd: Decimal | None = None,
    budget_tokens: int | None = None,
) -> tuple[Run, list[int]]:
    """Commit a new run and its start step (pending) in one transaction.

    The caller validated the graph and the input. Returns (run, step ids to dispatch
    after commit). The run exists before anything executes, so it cannot vanish.
    """
    graph = compiled_graph(version.pk)
    settings_ = graph.spec.settings
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            graph_version=version,
            input=run_input,
            state=scheduler.initial_state(graph, run_input),
            scheduler={"iterations": {graph.start_id(): 1}},
            max_parallelism=settings_.max_parallelism,
            max_steps=settings_.max_steps,
            budget_usd=budget_usd if budget_usd is not None else settings_.budget_usd,
            budget_tokens=budget_tokens if budget_tokens is not None else settings_.budget_tokens,
            step_count=1,
            created_by=created_by,
            idempotency_key=idempotency_key_value,
        )
        start = graph.topology.nodes[graph.start_id()]
        step = Step.objects.create(
            run=run,
            node_id=start.id,
            kind=start.kind,
            iteration=0,
            depth=0,
            max_attempts=start.retry.max_attempts,
            idempotency_key=idempotency_key(run, start.id, 0),
            dispatched_at=now,
        )
        RunEvent.objects.create(run=run, kind="run_created", data={"graph_version": version.pk, "input": run_input})
        audit(actor, "run.start", run, actor_type=actor_type, graph_version=version.pk)
    return run, [step.pk]


# --------------------------------------------------------------------------- claim


def _claim_details(step: Step, run: Run, worker: str) -> ClaimedStep:
    children: dict[str, dict[str, Any]] = {}
    if step.parent_id is None and _spawns_children(get_kind(compiled_graph(run.graph_version_id).topology.nodes[spec_node_id(step.node_id)].kind)):
        # Durable replay: the node sees every child that finished (a fact) by key.
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
        budget_remaining_tokens=None
        if run.budget_tokens is None
        else run.budget_tokens - run.input_tokens - run.output_tokens,
        worker=worker,
        parent_id=step.parent_id,
        child_key=step.child_key,
        child_input=step.input if step.parent_id else None,
        children=children,
    )


def _budget_refusal(
    run: Run, node: NodeSpec, state: dict[str, Any], call: ChildCall | None = None, step_name: str | None = None
) -> str | None:
    """A message when the step's worst-case cost could overrun the run's budget, else None.

    ``call`` is set for a child step (its parent's kind estimates the child). A node
    that spawns children costs nothing itself: its children are checked one by one.
    """
    if run.budget_usd is None and run.budget_tokens is None:
        return None
    name = step_name or node.id
    kind = get_kind(node.kind)
    config = kind.config_model.model_validate(node.config)
    if call is not None:
        usd, tokens = kind.estimate_child_cost(config, call, state)
    elif _spawns_children(kind):
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
    a missing step (a deleted run's task is dropped).
    """
    now = timezone.now()
    with transaction.atomic():
        claimed = (
            Step.objects.filter(pk=step_id, status=StepStatus.PENDING)
            .filter(Q(available_at__isnull=True) | Q(available_at__lte=now))
            .update(
                status=StepStatus.RUNNING,
                attempt=F("attempt") + 1,
                lease_owner=worker,
                lease_expires_at=now + _lease_delta(),
                started_at=now,
            )
        )
        if not claimed:
            return None
        step = Step.objects.select_related("run").get(pk=step_id)
        run = step.run
        if step.parent_id is None and step.attempt > 1 and _lost_attempts(step.pk) >= settings.BALLAST_MAX_LOST_ATTEMPTS:
            # A step that kills its worker every time must not loop forever (django-q2
            # never counts a hard crash as an attempt; we do).
            error = {"code": "worker_lost", "message": f"step '{step.node_id}' was interrupted {settings.BALLAST_MAX_LOST_ATTEMPTS} times; giving up"}
            Step.objects.filter(pk=step_id).update(status=StepStatus.FAILED, lease_owner="", finished_at=now, error=error)
            _finish_run(run, RunStatus.FAILED, error=error | {"node_id": step.node_id}, step_id=step_id)
            return None
        if run.is_terminal:
            Step.objects.filter(pk=step_id).update(status=StepStatus.CANCELLED, lease_owner="", finished_at=now)
            return None
        node = compiled_graph(run.graph_version_id).topology.nodes[spec_node_id(step.node_id)]
        call = ChildCall(step.child_key, step.kind, step.input or {}) if step.parent_id else None
        refusal = _budget_refusal(run, node, run.state, call, step.node_id)
        if refusal:
            Step.objects.filter(pk=step_id).update(
                status=StepStatus.CANCELLED, lease_owner="", finished_at=now, error={"code": "budget_exceeded", "message": refusal}
            )
            _finish_run(run, RunStatus.FAILED, error={"code": "budget_exceeded", "message": refusal}, step_id=step_id)
            return None
        StepAttempt.objects.create(step=step, number=step.attempt, worker=worker, started_at=now)
        events = [_event(run.pk, "step_started", step.pk, node_id=step.node_id, iteration=step.iteration, attempt=step.attempt)]
        if run.status == RunStatus.QUEUED:
            _bump(Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED), status=RunStatus.RUNNING, started_at=now)
            events.insert(0, _event(run.pk, "run_started"))
        RunEvent.objects.bulk_create(events)
        return _claim_details(step, run, worker)


def step_heartbeat(step_id: int, attempt: int, worker: str) -> bool:
    """Extend our lease. False when the lease is no longer ours or the run ended (stop work)."""
    now = timezone.now()
    extended = Step.objects.filter(
        pk=step_id, status=StepStatus.RUNNING, attempt=attempt, lease_owner=worker
    ).update(lease_expires_at=now + _lease_delta())
    if not extended:
        return False
    return not Run.objects.filter(steps__pk=step_id, status__in=TERMINAL_RUN_STATUSES).exists()


# --------------------------------------------------------------------------- commit


ActiveRow = tuple[int, str, str, "datetime | None", "datetime | None", "int | None"]


def _active_steps(run_id: int, exclude: int | None = None) -> list[ActiveRow]:
    """(id, node_id, status, dispatched_at, available_at, parent_id) of the run's active steps."""
    qs = Step.objects.filter(run_id=run_id, status__in=ACTIVE_STEP_STATUSES)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    return list(qs.order_by("id").values_list("id", "node_id", "status", "dispatched_at", "available_at", "parent_id"))


def _lost_attempts(step_id: int) -> int:
    return StepAttempt.objects.filter(step_id=step_id, status="lost").count()


def _lease(step: Step, worker: str, now: datetime) -> None:
    step.status = StepStatus.RUNNING
    step.lease_owner = worker
    step.lease_expires_at = now + _lease_delta()
    step.started_at = now


def _plan_dispatch(
    run: Run,
    active: list[ActiveRow],
    new_steps: list[Step],
    now: datetime,
    *,
    worker: str | None,
    state: dict[str, Any],
) -> tuple[Step | None, list[int]]:
    """Choose which ready steps start now, within the run's parallelism bound.

    New steps fill free slots first: the first one is leased to ``worker`` (it runs next
    in this worker without a queue hop) when the budget allows; the others are marked
    dispatched. Then older pending steps that were never dispatched (held back by the
    bound) fill what is left. Returns (kept step, ids of old steps to mark dispatched).
    The caller saves the new steps, marks the old ones and hands them to the queue
    after commit.
    """
    busy = sum(1 for a in active if a[2] == StepStatus.RUNNING or (a[2] == StepStatus.PENDING and a[3] is not None))
    slots = max(0, run.max_parallelism - busy)
    graph = compiled_graph(run.graph_version_id)
    kept: Step | None = None
    for new in new_steps:
        if slots <= 0:
            break
        if worker is not None and kept is None:
            node = graph.topology.nodes[spec_node_id(new.node_id)]
            call = ChildCall(new.child_key, new.kind, new.input or {}) if new.parent_id else None
            if _budget_refusal(run, node, state, call, new.node_id) is None:
                kept = new
                new.attempt += 1
                _lease(new, worker, now)
                slots -= 1
                continue
        new.dispatched_at = now
        slots -= 1
    old: list[int] = []
    for a in active:
        if slots <= 0:
            break
        if a[2] == StepStatus.PENDING and a[3] is None and (a[4] is None or a[4] <= now):
            old.append(a[0])
            slots -= 1
    return kept, old


def _save_steps(run: Run, new_steps: list[Step]) -> None:
    if not new_steps:
        return
    Step.objects.bulk_create(new_steps)
    if new_steps[0].pk is None:  # a backend without RETURNING on bulk insert
        keys = {(s.node_id, s.iteration): s for s in new_steps}
        for pk, node_id, iteration in Step.objects.filter(run_id=run.pk, node_id__in=[s.node_id for s in new_steps]).values_list(
            "id", "node_id", "iteration"
        ):
            if (node_id, iteration) in keys:
                keys[(node_id, iteration)].pk = pk


def _start_kept(run: Run, kept: Step | None, worker: str | None, now: datetime, events: list[RunEvent]) -> ClaimedStep | None:
    if kept is None or worker is None:
        return None
    StepAttempt.objects.create(step_id=kept.pk, number=kept.attempt, worker=worker, started_at=now)
    events.append(_event(run.pk, "step_started", kept.pk, node_id=kept.node_id, iteration=kept.iteration, attempt=kept.attempt))
    kept.run = run
    return _claim_details(kept, run, worker)


def _finish_run(run: Run, status: str, *, error: dict | None = None, output: Any = None, step_id: int | None = None) -> None:
    """Move ``run`` to a terminal status inside the caller's transaction (CAS on non-terminal)."""
    now = timezone.now()
    updated = _bump(Run.objects.filter(pk=run.pk).exclude(status__in=TERMINAL_RUN_STATUSES),
        status=status, error=error, output=output, finished_at=now
    )
    if not updated:
        return
    open_steps = Step.objects.filter(
        run_id=run.pk, status__in=(StepStatus.PENDING, StepStatus.WAITING, StepStatus.PARKED, StepStatus.SUSPENDED)
    )
    cancelled = list(open_steps.values_list("id", flat=True))
    open_steps.update(status=StepStatus.CANCELLED, finished_at=now, lease_owner="")
    data: dict[str, Any] = {"cancelled_steps": cancelled}
    if error:
        data["error"] = error
    RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind=f"run_{status}", data=data)
    run.status = status
    run_finished.send(sender=Run, run=run, status=status)


def _fenced(step_id: int, attempt: int, worker: str):
    return Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, attempt=attempt, lease_owner=worker)


def step_commit(claimed: ClaimedStep, result: NodeResult, *, keep_next: bool = True) -> CommitOutcome:
    """Commit a finished attempt in ONE transaction, fenced by lease owner and attempt.

    Stores output, usage and cost; merges the updates into the run state; creates the
    successor steps; appends events; updates the run's totals and status. If the lease
    is no longer ours (recovery gave the step to someone else) nothing is written.
    With ``keep_next`` one ready successor is leased to this worker in the same commit.
    """
    if claimed.snapshot is not None and keep_next and result.wait is None and not result.spawn:
        fast = _fast_commit(claimed, result)
        if fast is not None:
            return fast
    now = timezone.now()
    usage = result.usage.as_dict() if result.usage else None
    with transaction.atomic():
        run = _lock_run(claimed.run_id)
        if result.spawn and claimed.parent_id is None:
            return _commit_spawn(run, claimed, result, now, keep_next=keep_next)
        status = StepStatus.WAITING if result.wait else StepStatus.SUCCEEDED
        written = _fenced(claimed.step_id, claimed.attempt, claimed.worker).update(
            status=status,
            output=_jsonable(result.recorded_output()),
            updates=_jsonable(result.updates) if result.updates else None,
            usage=usage,
            cost_usd=result.cost_usd,
            price_version=_price_version(result.usage),
            lease_owner="",
            lease_expires_at=None,
            finished_at=None if result.wait else now,
        )
        if not written:
            log.warning("step %s attempt %s: lease lost, result discarded", claimed.step_id, claimed.attempt)
            return CommitOutcome(committed=False)
        StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(
            status="succeeded", usage=usage, cost_usd=result.cost_usd, price_version=_price_version(result.usage), finished_at=now
        )
        _add_usage(run, result)
        step = Step(
            pk=claimed.step_id,
            run_id=run.pk,
            node_id=claimed.node_id,
            kind=claimed.kind,
            iteration=claimed.iteration,
            depth=claimed.depth,
            parent_id=claimed.parent_id,
        )
        if claimed.parent_id is not None:
            events = [_event(run.pk, "step_succeeded", step.pk, node_id=step.node_id, parent=claimed.parent_id)]
            return _child_finished(run, step, events, now, worker=claimed.worker if keep_next else None)
        if result.wait:
            return _commit_wait(run, step, result, now)
        return _advance(run, step, result, now, worker=claimed.worker if keep_next else None)


# The sequential fast path (PostgreSQL): the whole commit of a step that is its run's only
# active step, and the lease of its single successor to this worker, as ONE fenced
# statement in autocommit mode (one round trip). The run row is locked first (the order
# recovery and the slow path use) and only if its version is the one this worker's last
# commit left; the step row only if its lease is still ours. If either check fails the
# statement writes nothing and the caller takes the slow path, which re-reads everything.
_FAST_COMMIT_SQL = """
WITH locked_run AS (
    SELECT id FROM runs_run WHERE id = %(run)s AND version = %(version)s FOR UPDATE
), locked_step AS (
    SELECT id FROM runs_step
    WHERE id = %(step)s AND status = 'running' AND attempt = %(attempt)s AND lease_owner = %(owner)s
      AND EXISTS (SELECT 1 FROM locked_run)
    FOR UPDATE
), run_upd AS (
    UPDATE runs_run SET state = %(state)s::jsonb, scheduler = %(scheduler)s::jsonb, step_count = step_count + 1,
        input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
        cost_usd = cost_usd + %(cost)s, status = 'running', version = version + 1, updated_at = %(now)s
    WHERE id IN (SELECT id FROM locked_run) AND EXISTS (SELECT 1 FROM locked_step)
    RETURNING id
), step_upd AS (
    UPDATE runs_step SET status = 'succeeded', output = %(output)s::jsonb, updates = %(updates)s::jsonb,
        usage = %(usage)s::jsonb, cost_usd = %(step_cost)s, price_version = %(price_version)s, lease_owner = '',
        lease_expires_at = NULL, finished_at = %(now)s
    WHERE id IN (SELECT id FROM locked_step) AND EXISTS (SELECT 1 FROM run_upd)
    RETURNING id
), att_upd AS (
    UPDATE runs_stepattempt SET status = 'succeeded', usage = %(usage)s::jsonb, cost_usd = %(step_cost)s,
        price_version = %(price_version)s, finished_at = %(now)s
    WHERE step_id IN (SELECT id FROM step_upd) AND number = %(attempt)s
), new_step AS (
    INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
        idempotency_key, lease_owner, lease_expires_at, started_at, created_at, price_version)
    SELECT %(run)s, NULL, '', %(next_node)s, %(next_kind)s, %(next_iteration)s, %(next_depth)s, 'running', 1,
        %(next_max_attempts)s, %(next_key)s, %(owner)s, %(lease_until)s, %(now)s, %(now)s, ''
    WHERE EXISTS (SELECT 1 FROM step_upd)
    RETURNING id
), new_att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version)
    SELECT id, 1, %(owner)s, 'running', %(now)s, '' FROM new_step
), events AS (
    INSERT INTO runs_runevent (run_id, step_id, kind, data, created_at)
    SELECT %(run)s, id, 'step_succeeded', %(done_event)s::jsonb, %(now)s FROM step_upd
    UNION ALL SELECT %(run)s, id, 'step_created', %(created_event)s::jsonb, %(now)s FROM new_step
    UNION ALL SELECT %(run)s, id, 'step_started', %(started_event)s::jsonb, %(now)s FROM new_step
)
SELECT (SELECT id FROM new_step)
"""


# The same sequential commit for databases without data-modifying CTEs (SQLite): fixed
# statements in one IMMEDIATE transaction, which holds SQLite's single writer lock from
# BEGIN, so the version and lease checks cannot race. A failed check rolls it all back.
_SEQ_RUN_SQL = """
UPDATE runs_run SET state = %(state)s, scheduler = %(scheduler)s, step_count = step_count + 1,
    input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
    cost_usd = cost_usd + %(cost)s, status = 'running', version = version + 1, updated_at = %(now)s
WHERE id = %(run)s AND version = %(version)s
"""
_SEQ_STEP_SQL = """
UPDATE runs_step SET status = 'succeeded', output = %(output)s, updates = %(updates)s, usage = %(usage)s,
    cost_usd = %(step_cost)s, price_version = %(price_version)s, lease_owner = '', lease_expires_at = NULL, finished_at = %(now)s
WHERE id = %(step)s AND status = 'running' AND attempt = %(attempt)s AND lease_owner = %(owner)s
"""
_SEQ_ATTEMPT_SQL = """
UPDATE runs_stepattempt SET status = 'succeeded', usage = %(usage)s, cost_usd = %(step_cost)s,
    price_version = %(price_version)s, finished_at = %(now)s
WHERE step_id = %(step)s AND number = %(attempt)s
"""
_SEQ_NEW_STEP_SQL = """
INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
    idempotency_key, lease_owner, lease_expires_at, started_at, created_at, price_version)
VALUES (%(run)s, NULL, '', %(next_node)s, %(next_kind)s, %(next_iteration)s, %(next_depth)s, 'running', 1,
    %(next_max_attempts)s, %(next_key)s, %(owner)s, %(lease_until)s, %(now)s, %(now)s, '')
RETURNING id
"""
_SEQ_NEW_ATTEMPT_SQL = """
INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version)
VALUES (%(next_step)s, 1, %(owner)s, 'running', %(now)s, '')
"""
_SEQ_EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, step_id, kind, data, created_at) VALUES
    (%(run)s, %(step)s, 'step_succeeded', %(done_event)s, %(now)s),
    (%(run)s, %(next_step)s, 'step_created', %(created_event)s, %(now)s),
    (%(run)s, %(next_step)s, 'step_started', %(started_event)s, %(now)s)
"""


class _Stale(Exception):
    """A sequential commit's version or lease check failed: roll back, take the slow path."""


def _sequential_statements(params: dict[str, Any]) -> int | None:
    """Run the portable sequential commit; the new step's id, or None when a check failed."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_SEQ_RUN_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            cursor.execute(_SEQ_STEP_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            cursor.execute(_SEQ_ATTEMPT_SQL, params)
            cursor.execute(_SEQ_NEW_STEP_SQL, params)
            params["next_step"] = cursor.fetchone()[0]
            cursor.execute(_SEQ_NEW_ATTEMPT_SQL, params)
            cursor.execute(_SEQ_EVENTS_SQL, params)
    except _Stale:
        return None
    return params["next_step"]


def _execute_prepared(sql: str, params: dict[str, Any]) -> Any:
    """Run ``sql`` as a server-side prepared statement (PostgreSQL) and return the first
    column of its row. Django's cursors bind parameters on the client, so the server would
    plan the big CTE on every commit; psycopg prepares it once per connection. The call is
    logged like Django's own queries so query counts still see it."""
    import time

    import psycopg

    connection.ensure_connection()
    started = time.perf_counter()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        row = cursor.fetchone()
    if connection.queries_logged:
        connection.queries_log.append({"sql": sql, "time": f"{time.perf_counter() - started:.3f}"})
    return row[0] if row else None


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(_jsonable(value), cls=DjangoJSONEncoder)


def _fast_commit(claimed: ClaimedStep, result: NodeResult) -> CommitOutcome | None:
    """Commit ``claimed`` and lease its single successor, trusting the run snapshot this
    worker's last commit left (checked by version), or return None and let the caller
    take the slow path. One statement on PostgreSQL (_FAST_COMMIT_SQL), fixed statements
    in one transaction elsewhere (_SEQ_*_SQL)."""
    run = claimed.snapshot
    assert run is not None
    if run.budget_usd is not None or run.budget_tokens is not None or transaction.get_connection().in_atomic_block:
        return None
    graph = compiled_graph(run.graph_version_id)
    transition = scheduler.apply_step(
        graph,
        state=run.state,
        bookkeeping=run.scheduler,
        node_id=claimed.node_id,
        iteration=claimed.iteration,
        depth=claimed.depth,
        updates=result.updates,
        route=result.route,
        other_active=[],
        step_count=run.step_count,
        max_steps=run.max_steps,
    )
    if transition.failure or transition.ended or len(transition.activations) != 1:
        return None
    act = transition.activations[0]
    node = graph.topology.nodes[act.node_id]
    now = timezone.now()
    usage = result.usage
    key = idempotency_key(run, act.node_id, act.iteration)
    params = {
        "run": run.pk,
        "version": run.version,
        "step": claimed.step_id,
        "attempt": claimed.attempt,
        "owner": claimed.worker,
        "state": _dumps(transition.state),
        "scheduler": _dumps(transition.bookkeeping),
        "in_tokens": usage.input_tokens if usage else 0,
        "out_tokens": usage.output_tokens if usage else 0,
        "cost": result.cost_usd or Decimal(0),
        "now": now,
        "output": _dumps(result.recorded_output()),
        "updates": _dumps(result.updates) if result.updates else None,
        "usage": _dumps(usage.as_dict()) if usage else None,
        "step_cost": result.cost_usd,
        "price_version": _price_version(usage),
        "next_node": act.node_id,
        "next_kind": node.kind,
        "next_iteration": act.iteration,
        "next_depth": act.depth,
        "next_max_attempts": node.retry.max_attempts,
        "next_key": key,
        "lease_until": now + _lease_delta(),
        "done_event": _dumps({"node_id": claimed.node_id, "iteration": claimed.iteration, "route": result.route}),
        "created_event": _dumps({"node_id": act.node_id, "iteration": act.iteration}),
        "started_event": _dumps({"node_id": act.node_id, "iteration": act.iteration, "attempt": 1}),
    }
    for name in ("now", "lease_until"):
        params[name] = connection.ops.adapt_datetimefield_value(params[name])
    for name in ("cost", "step_cost"):
        params[name] = connection.ops.adapt_decimalfield_value(params[name], 24, 12)
    if connection.vendor == "postgresql":
        new_id = _execute_prepared(_FAST_COMMIT_SQL, params)
    else:
        new_id = _sequential_statements(params)
    if new_id is None:
        return None
    row = (new_id,)
    run.state = transition.state
    run.scheduler = transition.bookkeeping
    run.step_count += 1
    run.version += 1
    run.status = RunStatus.RUNNING
    _add_usage(run, result)
    kept = Step(
        pk=row[0],
        run=run,
        node_id=act.node_id,
        kind=node.kind,
        iteration=act.iteration,
        depth=act.depth,
        attempt=1,
        max_attempts=node.retry.max_attempts,
        idempotency_key=key,
    )
    next_claim = _claim_details(kept, run, claimed.worker)
    next_claim.snapshot = run
    return CommitOutcome(committed=True, next_step=next_claim, run_status=RunStatus.RUNNING)


def _price_version(usage: Usage | None) -> str:
    """The price data version a cost came from ('' when there was no priced usage)."""
    return (getattr(usage, "price_version", None) or "") if usage else ""


def _add_usage(run: Run, result: NodeResult) -> None:
    if result.usage:
        run.input_tokens += result.usage.input_tokens
        run.output_tokens += result.usage.output_tokens
    if result.cost_usd:
        run.cost_usd += result.cost_usd


def _jsonable(value: Any) -> Any:
    # Decimal and other simple types are stored as their JSON-friendly text.
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _commit_wait(run: Run, step: Step, result: NodeResult, now: datetime) -> CommitOutcome:
    assert result.wait is not None
    kind = get_kind(step.kind)
    kind.on_wait(run=run, step=step, wait=result.wait)
    events = [_event(run.pk, "step_waiting", step.pk, node_id=step.node_id, reason=result.wait.reason)]
    active = _active_steps(run.pk, exclude=step.pk)
    new_status = run.status
    if not run.is_terminal and not any(s[2] in (StepStatus.PENDING, StepStatus.RUNNING) for s in active):
        new_status = RunStatus.WAITING
        events.append(_event(run.pk, "run_waiting", step.pk, node_id=step.node_id))
    RunEvent.objects.bulk_create(events)
    _bump(Run.objects.filter(pk=run.pk),
        status=new_status, input_tokens=run.input_tokens, output_tokens=run.output_tokens, cost_usd=run.cost_usd, updated_at=now
    )
    return CommitOutcome(committed=True, run_status=new_status)


def _advance(run: Run, step: Step, result: NodeResult, now: datetime, *, worker: str | None) -> CommitOutcome:
    """Apply a succeeded step to the locked run: state, successors, status. Inside a transaction."""
    events = [_event(run.pk, "step_succeeded", step.pk, node_id=step.node_id, iteration=step.iteration, route=result.route)]
    if run.is_terminal:
        # The run ended (cancelled, failed elsewhere) while this step ran: its output is
        # a fact and is kept, but nothing follows it.
        RunEvent.objects.bulk_create(events)
        _bump(Run.objects.filter(pk=run.pk),
            input_tokens=run.input_tokens, output_tokens=run.output_tokens, cost_usd=run.cost_usd, updated_at=now
        )
        return CommitOutcome(committed=True, run_status=run.status)

    graph = compiled_graph(run.graph_version_id)
    active = _active_steps(run.pk, exclude=step.pk)
    transition = scheduler.apply_step(
        graph,
        state=run.state,
        bookkeeping=run.scheduler,
        node_id=step.node_id,
        iteration=step.iteration,
        depth=step.depth,
        updates=result.updates,
        route=result.route,
        other_active=[spec_node_id(a[1]) for a in active],
        step_count=run.step_count,
        max_steps=run.max_steps,
    )
    if transition.failure:
        code, message = transition.failure
        RunEvent.objects.bulk_create(events)
        _save_run_totals(run, now)
        _finish_run(run, RunStatus.FAILED, error={"code": code, "message": message, "node_id": step.node_id}, step_id=step.pk)
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)

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
                idempotency_key=idempotency_key(run, act.node_id, act.iteration),
            )
        )
    kept, dispatch_old = _plan_dispatch(run, active, new_steps, now, worker=worker, state=transition.state)
    _save_steps(run, new_steps)
    if dispatch_old:
        Step.objects.filter(pk__in=dispatch_old).update(dispatched_at=now)
    for new in new_steps:
        events.append(_event(run.pk, "step_created", new.pk, node_id=new.node_id, iteration=new.iteration))
    run.state = transition.state
    run.scheduler = transition.bookkeeping
    run.step_count += len(new_steps)
    next_claim = _start_kept(run, kept, worker, now, events)

    remaining = len(active) + len(new_steps)
    if remaining == 0:
        RunEvent.objects.bulk_create(events)
        _save_run_totals(run, now)
        if transition.bookkeeping.get("ended"):
            _finish_run(run, RunStatus.SUCCEEDED, output=_jsonable(run.output), step_id=step.pk)
            return CommitOutcome(committed=True, run_status=RunStatus.SUCCEEDED)
        _finish_run(
            run,
            RunStatus.FAILED,
            error={"code": "no_end", "message": "every branch stopped before reaching an end node"},
            step_id=step.pk,
        )
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)

    statuses = {a[2] for a in active} | {s.status for s in new_steps}
    new_status = RunStatus.RUNNING if statuses & {StepStatus.PENDING, StepStatus.RUNNING} else RunStatus.WAITING
    if new_status != run.status and new_status == RunStatus.WAITING:
        events.append(_event(run.pk, "run_waiting", step.pk))
    RunEvent.objects.bulk_create(events)
    run.status = new_status
    _bump(Run.objects.filter(pk=run.pk),
        status=new_status,
        state=run.state,
        scheduler=run.scheduler,
        step_count=run.step_count,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        updated_at=now,
    )
    if next_claim is not None and not active and len(new_steps) == 1:
        run.version += 1
        next_claim.snapshot = run
    dispatch = [s.pk for s in new_steps if s.dispatched_at is not None] + dispatch_old
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=new_status)


def _run_status_after(active: list[ActiveRow], extra: Iterable[str] = ()) -> str:
    statuses = {a[2] for a in active} | set(extra)
    return RunStatus.RUNNING if statuses & {StepStatus.PENDING, StepStatus.RUNNING} else RunStatus.WAITING


def _commit_spawn(run: Run, claimed: ClaimedStep, result: NodeResult, now: datetime, *, keep_next: bool) -> CommitOutcome:
    """The parent asked for child steps: suspend it (no lease) and commit the children.

    Children whose key already exists (an earlier replay spawned them) are not created
    again. Inside the commit transaction, run row locked.
    """
    assert result.spawn is not None
    worker = claimed.worker if keep_next else None
    written = _fenced(claimed.step_id, claimed.attempt, claimed.worker).update(
        status=StepStatus.SUSPENDED, lease_owner="", lease_expires_at=None
    )
    if not written:
        log.warning("step %s attempt %s: lease lost, spawn discarded", claimed.step_id, claimed.attempt)
        return CommitOutcome(committed=False)
    StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(status="suspended", finished_at=now)
    _add_usage(run, result)
    events = [_event(run.pk, "step_suspended", claimed.step_id, node_id=claimed.node_id, children=[c.key for c in result.spawn])]
    existing = set(Step.objects.filter(parent_id=claimed.step_id).values_list("child_key", flat=True))
    node = claimed.node
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
                input=_jsonable(call.input),
                max_attempts=node.retry.max_attempts,
                idempotency_key=idempotency_key(run, child_node_id, 0),
            )
        )
    active = _active_steps(run.pk, exclude=claimed.step_id)
    failure = None
    if not new_steps and not any(a[5] == claimed.step_id for a in active):
        failure = {"code": "spawn", "message": f"node '{node.id}' asked again for children that already finished", "node_id": node.id}
    elif run.step_count + len(new_steps) > run.max_steps:
        failure = {"code": "max_steps", "message": f"run reached its max_steps limit of {run.max_steps}", "node_id": node.id}
    if failure or run.is_terminal:
        RunEvent.objects.bulk_create(events)
        _save_run_totals(run, now)
        if failure:
            Step.objects.filter(pk=claimed.step_id).update(status=StepStatus.FAILED, error=failure, finished_at=now)
            _finish_run(run, RunStatus.FAILED, error=failure, step_id=claimed.step_id)
        return CommitOutcome(committed=True, run_status=run.status)
    kept, dispatch_old = _plan_dispatch(run, active, new_steps, now, worker=worker, state=run.state)
    _save_steps(run, new_steps)
    if dispatch_old:
        Step.objects.filter(pk__in=dispatch_old).update(dispatched_at=now)
    for new in new_steps:
        events.append(_event(run.pk, "step_created", new.pk, node_id=new.node_id, parent=claimed.step_id))
    next_claim = _start_kept(run, kept, worker, now, events)
    run.step_count += len(new_steps)
    run.status = _run_status_after(active, (s.status for s in new_steps))
    RunEvent.objects.bulk_create(events)
    _bump(Run.objects.filter(pk=run.pk),
        status=run.status,
        step_count=run.step_count,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        updated_at=now,
    )
    dispatch = [s.pk for s in new_steps if s.dispatched_at is not None] + dispatch_old
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=run.status)


def _child_finished(run: Run, child: Step, events: list[RunEvent], now: datetime, *, worker: str | None) -> CommitOutcome:
    """A child step finished (succeeded, or failed for good): once no sibling is active,
    the parent becomes runnable again (its replay sees every child's result). Inside the
    commit transaction, run row locked."""
    active = _active_steps(run.pk, exclude=child.pk)
    dispatch: list[int] = []
    next_claim: ClaimedStep | None = None
    if not run.is_terminal and not any(a[5] == child.parent_id for a in active):
        parent = Step.objects.get(pk=child.parent_id)
        if parent.status == StepStatus.SUSPENDED:
            events.append(_event(run.pk, "step_resumed", parent.pk, node_id=parent.node_id, reason="children finished"))
            if worker is not None:
                parent.attempt += 1
                _lease(parent, worker, now)
                Step.objects.filter(pk=parent.pk, status=StepStatus.SUSPENDED).update(
                    status=StepStatus.RUNNING,
                    attempt=parent.attempt,
                    lease_owner=worker,
                    lease_expires_at=parent.lease_expires_at,
                    started_at=now,
                )
                next_claim = _start_kept(run, parent, worker, now, events)
            else:
                Step.objects.filter(pk=parent.pk, status=StepStatus.SUSPENDED).update(status=StepStatus.PENDING, dispatched_at=now)
                dispatch.append(parent.pk)
            active = [a if a[0] != parent.pk else (a[0], a[1], StepStatus.RUNNING, now, None, None) for a in active]
    if not run.is_terminal:
        _, dispatch_old = _plan_dispatch(run, active, [], now, worker=None, state=run.state)
        if dispatch_old:
            Step.objects.filter(pk__in=dispatch_old).update(dispatched_at=now)
            dispatch += dispatch_old
        run.status = _run_status_after(active)
    RunEvent.objects.bulk_create(events)
    _bump(Run.objects.filter(pk=run.pk),
        status=run.status, input_tokens=run.input_tokens, output_tokens=run.output_tokens, cost_usd=run.cost_usd, updated_at=now
    )
    return CommitOutcome(committed=True, dispatch=dispatch, next_step=next_claim, run_status=run.status)


def _save_run_totals(run: Run, now: datetime) -> None:
    _bump(Run.objects.filter(pk=run.pk),
        state=run.state,
        scheduler=run.scheduler,
        step_count=run.step_count,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        updated_at=now,
    )


def _retry_after(error: NodeError) -> float:
    """Seconds the failing service asked us to wait (HTTP Retry-After), else 0."""
    value = getattr(error, "retry_after", None)
    if value is None and isinstance(error.details, dict):
        value = error.details.get("retry_after")
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def step_fail(claimed: ClaimedStep, error: NodeError) -> CommitOutcome:
    """Record a failed attempt (fenced), with what it spent (``error.usage``/``cost_usd``).

    Retry per the node's policy: the step's failed and lost attempts count against its
    ``max_attempts``; the delay is the policy's backoff or the service's Retry-After,
    whichever is longer. A retry puts the step back to pending with ``available_at``; it
    is dispatched at once when the delay is zero, else by the recovery poller when due.
    A child step that fails for good does not fail the run: its parent is woken and its
    replay sees the failure. Any other final failure fails the run.
    """
    now = timezone.now()
    policy = claimed.node.retry
    usage, cost_usd = error.usage, error.cost_usd
    with transaction.atomic():
        run = _lock_run(claimed.run_id)
        failures = StepAttempt.objects.filter(step_id=claimed.step_id, status__in=("failed", "lost")).count() + 1
        retry = (
            error.retryable
            and failures < claimed.max_attempts
            and (not policy.retry_on or error.code in policy.retry_on)
            and not run.is_terminal
        )
        err = error.as_dict() | {"attempt": claimed.attempt}
        fields: dict[str, Any] = {"error": err, "lease_owner": "", "lease_expires_at": None}
        if retry:
            delay = max(policy.delay(failures), _retry_after(error))
            fields |= {"status": StepStatus.PENDING, "available_at": now + timedelta(seconds=delay)}
            fields["dispatched_at"] = now if delay == 0 else None
        else:
            fields |= {"status": StepStatus.FAILED, "finished_at": now}
        if not _fenced(claimed.step_id, claimed.attempt, claimed.worker).update(**fields):
            return CommitOutcome(committed=False)
        StepAttempt.objects.filter(step_id=claimed.step_id, number=claimed.attempt).update(
            status="failed",
            error=err,
            usage=usage.as_dict() if usage else None,
            cost_usd=cost_usd,
            price_version=_price_version(usage),
            finished_at=now,
        )
        if usage or cost_usd:
            run.cost_usd += cost_usd or 0
            run.input_tokens += usage.input_tokens if usage else 0
            run.output_tokens += usage.output_tokens if usage else 0
            _bump(Run.objects.filter(pk=run.pk), cost_usd=run.cost_usd, input_tokens=run.input_tokens, output_tokens=run.output_tokens)
        if retry:
            RunEvent.objects.create(
                run_id=run.pk,
                step_id=claimed.step_id,
                kind="step_retrying",
                data={"node_id": claimed.node_id, "error": err, "available_at": fields["available_at"].isoformat()},
            )
            return CommitOutcome(committed=True, dispatch=[claimed.step_id] if fields["dispatched_at"] else [], run_status=run.status)
        event = _event(run.pk, "step_failed", claimed.step_id, node_id=claimed.node_id, error=err)
        if claimed.parent_id is not None:
            child = Step(pk=claimed.step_id, run_id=run.pk, node_id=claimed.node_id, parent_id=claimed.parent_id)
            return _child_finished(run, child, [event], now, worker=None)
        event.save()
        _finish_run(run, RunStatus.FAILED, error=err | {"node_id": claimed.node_id}, step_id=claimed.step_id)
        return CommitOutcome(committed=True, run_status=RunStatus.FAILED)


# --------------------------------------------------------------------------- resume, cancel


def step_complete_waiting(step_id: int, result: NodeResult, *, actor: str, reason: str) -> list[int]:
    """Finish a waiting or parked step with ``result`` and schedule its successors.

    Must run inside the caller's transaction (an approval decision commits together with
    the resume). Returns step ids to dispatch after commit. Raises StepStateError if the
    step is not waiting or parked (deciding twice never resumes twice).
    """
    step = Step.objects.get(pk=step_id)
    run = _lock_run(step.run_id)
    now = timezone.now()
    written = Step.objects.filter(pk=step_id, status__in=(StepStatus.WAITING, StepStatus.PARKED)).update(
        status=StepStatus.SUCCEEDED,
        output=_jsonable(result.recorded_output()),
        updates=_jsonable(result.updates) if result.updates else None,
        finished_at=now,
        lease_owner="",
    )
    if not written:
        raise StepStateError(f"step {step_id} is {step.status}, not waiting")
    if run.is_terminal:
        return []
    RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind="run_resumed", data={"by": actor, "reason": reason})
    if step.parent_id is not None:
        done = _event(run.pk, "step_succeeded", step.pk, node_id=step.node_id, parent=step.parent_id, by=actor)
        return _child_finished(run, step, [done], now, worker=None).dispatch
    outcome = _advance(run, step, result, now, worker=None)
    return outcome.dispatch


def step_requeue_parked(step_id: int, *, actor: str) -> list[int]:
    """Send a parked step back to pending for a deliberate re-run (same idempotency key).

    Inside the caller's transaction. Returns step ids to dispatch. Raises StepStateError.
    """
    step = Step.objects.get(pk=step_id)
    run = _lock_run(step.run_id)
    now = timezone.now()
    if not Step.objects.filter(pk=step_id, status=StepStatus.PARKED).update(
        status=StepStatus.PENDING, dispatched_at=now, available_at=None
    ):
        raise StepStateError(f"step {step_id} is {step.status}, not parked")
    _bump(Run.objects.filter(pk=run.pk, status=RunStatus.WAITING), status=RunStatus.RUNNING)
    RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind="step_requeued", data={"by": actor})
    return [step_id]


def step_fail_parked(step_id: int, *, actor: str, message: str) -> None:
    """Fail a waiting or parked step and its run (a rejection with no reject edge, or a
    person choosing "fail" for an interrupted step). Inside the caller's transaction."""
    step = Step.objects.get(pk=step_id)
    run = _lock_run(step.run_id)
    now = timezone.now()
    error = {"code": "rejected", "message": message, "node_id": step.node_id, "by": actor}
    if not Step.objects.filter(pk=step_id, status__in=(StepStatus.WAITING, StepStatus.PARKED)).update(
        status=StepStatus.FAILED, error=error, finished_at=now
    ):
        raise StepStateError(f"step {step_id} is {step.status}, not waiting")
    _finish_run(run, RunStatus.FAILED, error=error, step_id=step_id)


def run_cancel(run_id: int, *, actor: str, actor_type: str = "user", reason: str = "") -> bool:
    """Cancel a run: terminal status, pending/waiting steps cancelled, audited, in one
    transaction. Running steps notice at their next heartbeat; their commits keep their
    output but start nothing. Returns False if the run had already ended."""
    with transaction.atomic():
        try:
            run = _lock_run(run_id)
        except Run.DoesNotExist:
            raise RunNotFound(run_id) from None
        if run.is_terminal:
            return False
        _finish_run(run, RunStatus.CANCELLED, error={"code": "cancelled", "message": reason or f"cancelled by {actor}"})
        audit(actor, "run.cancel", run, actor_type=actor_type, reason=reason)
    return True


def run_resume(run_id: int, *, actor: str, actor_type: str = "user", budget_usd: Decimal | None = None, budget_tokens: int | None = None) -> list[int]:
    """Continue a failed run from where it stopped, or a parked run, in one transaction.

    Failed run: the step whose failure ended the run gets a fresh attempt budget (its
    policy's ``max_attempts`` more) and goes back to pending, with the failed children
    of an agent-like parent; the steps the failure cancelled are pending again; the run
    is running again. Committed steps stay facts and never run again. A new budget may
    be given (a run stopped for its budget). Parked run: each parked step is re-queued
    (a deliberate re-run with the same idempotency key). Audited. Returns step ids to
    dispatch after commit. Raises RunNotFound, StepStateError (any other status).
    """
    now = timezone.now()
    with transaction.atomic():
        try:
            run = _lock_run(run_id)
        except Run.DoesNotExist:
            raise RunNotFound(run_id) from None
        graph = compiled_graph(run.graph_version_id)
        if run.status == RunStatus.WAITING and Step.objects.filter(run=run, status=StepStatus.PARKED).exists():
            parked = list(Step.objects.filter(run=run, status=StepStatus.PARKED).values_list("id", flat=True))
            Step.objects.filter(pk__in=parked).update(status=StepStatus.PENDING, dispatched_at=now, available_at=None)
            _bump(Run.objects.filter(pk=run.pk), status=RunStatus.RUNNING, updated_at=now)
            RunEvent.objects.create(run=run, kind="run_resumed", data={"by": actor, "requeued": parked})
            steps_requeued.send(sender=Run, run=run, step_ids=parked, actor=actor)
            audit(actor, "run.resume", run, actor_type=actor_type, requeued=parked)
            return parked
        if run.status != RunStatus.FAILED:
            raise StepStateError(f"run {run.pk} is {run.status}; only a failed or parked run can be resumed")
        last = RunEvent.objects.filter(run=run, kind="run_failed").order_by("-id").first()
        reopen = set(last.data.get("cancelled_steps", [])) if last else set()
        failed_ids = set(Step.objects.filter(run=run, status=StepStatus.FAILED).values_list("id", flat=True))
        if last and last.step_id:
            reopen.add(last.step_id)
        reopen |= failed_ids
        rows = list(Step.objects.filter(pk__in=reopen).select_related(None))
        parents_with_reopened_children = {r.parent_id for r in rows if r.parent_id}
        ids: list[int] = []
        for step in rows:
            node = graph.topology.nodes[spec_node_id(step.node_id)]
            status = StepStatus.SUSPENDED if step.pk in parents_with_reopened_children else StepStatus.PENDING
            Step.objects.filter(pk=step.pk).update(
                status=status,
                max_attempts=step.attempt + node.retry.max_attempts,
                finished_at=None,
                available_at=None,
                dispatched_at=now if status == StepStatus.PENDING else None,
                lease_owner="",
            )
            if status == StepStatus.PENDING:
                ids.append(step.pk)
        fields: dict[str, Any] = {"status": RunStatus.RUNNING, "error": None, "finished_at": None, "updated_at": now}
        if budget_usd is not None:
            fields["budget_usd"] = budget_usd
        if budget_tokens is not None:
            fields["budget_tokens"] = budget_tokens
        _bump(Run.objects.filter(pk=run.pk), **fields)
        RunEvent.objects.create(run=run, kind="run_resumed", data={"by": actor, "reopened": sorted(ids)})
        audit(actor, "run.resume", run, actor_type=actor_type, reopened=sorted(ids), previous_error=run.error)
        return ids


def run_fork(run_id: int, *, step_id: int, state_patch: dict[str, Any], actor: str, actor_type: str = "user", created_by: Any = None) -> tuple[Run, list[int]]:
    """Start a new run from a committed step of another run, with edited state.

    The new run is pinned to the same graph version. Its state is the source run's
    state right after ``step_id`` committed (rebuilt by replaying every committed step's
    writes in commit order, with the graph's reducers), then ``state_patch`` on top; it
    starts with that step's successors as if the step had just committed (branches of
    the source that had not finished by then do not exist in the fork). Audited.
    Returns (new run, step ids to dispatch after commit). Raises RunNotFound,
    StepStateError (step not committed, not top-level, or nothing follows it).
    """
    try:
        source = Run.objects.get(pk=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None
    anchor = Step.objects.filter(pk=step_id, run=source, parent__isnull=True, status=StepStatus.SUCCEEDED).first()
    if anchor is None:
        raise StepStateError(f"step {step_id} is not a committed step of run {run_id}")
    graph = compiled_graph(source.graph_version_id)
    state = scheduler.initial_state(graph, source.input)
    book: dict[str, Any] = {"iterations": {}}
    committed = Step.objects.filter(run=source, parent__isnull=True, status=StepStatus.SUCCEEDED, finished_at__lte=anchor.finished_at)
    for row in committed.order_by("finished_at", "id"):
        if (row.finished_at, row.pk) > (anchor.finished_at, anchor.pk):
            continue
        scheduler.merge_updates(graph, state, book, row.updates or {}, node_id=row.node_id, iteration=row.iteration, depth=row.depth)
        book["iterations"][row.node_id] = max(book["iterations"].get(row.node_id, 0), row.iteration + 1)
    state.update(state_patch)
    done = RunEvent.objects.filter(run=source, step=anchor, kind="step_succeeded").order_by("-id").first()
    route = done.data.get("route") if done else None
    transition = scheduler.apply_step(
        graph,
        state=state,
        bookkeeping=book,
        node_id=anchor.node_id,
        iteration=anchor.iteration,
        depth=anchor.depth,
        updates={},
        route=route,
        other_active=[],
        step_count=0,
        max_steps=source.max_steps,
    )
    if transition.failure or not transition.activations:
        reason = transition.failure[1] if transition.failure else "no step follows it"
        raise StepStateError(f"cannot fork run {run_id} at step {step_id}: {reason}")
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            graph_version_id=source.graph_version_id,
            input=source.input,
            state=transition.state,
            scheduler=transition.bookkeeping,
            max_parallelism=source.max_parallelism,
            max_steps=source.max_steps,
            budget_usd=source.budget_usd,
            budget_tokens=source.budget_tokens,
            step_count=len(transition.activations),
            created_by=created_by,
            forked_from=source,
            forked_from_step=anchor,
        )
        new_steps = [
            Step(
                run=run,
                node_id=act.node_id,
                kind=graph.topology.nodes[act.node_id].kind,
                iteration=act.iteration,
                depth=act.depth,
                max_attempts=graph.topology.nodes[act.node_id].retry.max_attempts,
                idempotency_key=idempotency_key(run, act.node_id, act.iteration),
                dispatched_at=now,
            )
            for act in transition.activations
        ]
        _save_steps(run, new_steps)
        RunEvent.objects.create(
            run=run, kind="run_created", data={"forked_from": source.pk, "forked_from_step": anchor.pk, "state_patch": _jsonable(state_patch)}
        )
        audit(actor, "run.fork", run, actor_type=actor_type, source_run=source.pk, source_step=anchor.pk, patched=sorted(state_patch))
    return run, [s.pk for s in new_steps]


# --------------------------------------------------------------------------- recovery


def worker_heartbeat(name: str, host: str, pid: int, started_at: datetime) -> None:
    """Register or refresh a worker row (its heartbeat says a qcluster is alive)."""
    now = timezone.now()
    if not Worker.objects.filter(name=name).update(heartbeat_at=now):
        Worker.objects.update_or_create(name=name, defaults={"host": host, "pid": pid, "started_at": started_at, "heartbeat_at": now})


def worker_remove(name: str) -> None:
    """Forget a worker that is shutting down cleanly."""
    Worker.objects.filter(name=name).delete()


def workers_forget_dead(owner_is_dead: Any, *, silent_seconds: float) -> list[str]:
    """Delete the rows of clusters that died (a dead pid on this host, or no heartbeat for
    ``silent_seconds``) and return their names: their prefetched queue entries are lost."""
    cutoff = timezone.now() - timedelta(seconds=silent_seconds)
    dead = [name for name, beat in Worker.objects.values_list("name", "heartbeat_at") if beat < cutoff or owner_is_dead(name)]
    if dead:
        Worker.objects.filter(name__in=dead).delete()
    return dead


def workers_alive(within_seconds: float) -> bool:
    """Whether any worker sent a heartbeat in the last ``within_seconds``."""
    return Worker.objects.filter(heartbeat_at__gte=timezone.now() - timedelta(seconds=within_seconds)).exists()


def expired_step_ids(owner_is_dead: Any, *, run_id: int | None = None) -> list[int]:
    """Running steps whose lease expired, or whose owner process on this host is dead."""
    now = timezone.now()
    qs = Step.objects.filter(status=StepStatus.RUNNING)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    rows = qs.values_list("id", "lease_owner", "lease_expires_at")
    return [pk for pk, owner, expires in rows if (expires is not None and expires < now) or owner_is_dead(owner)]


def step_recover(step_id: int, *, recovered_by: str, owner_is_dead: Any) -> list[int]:
    """Take back a step whose worker died: re-queue it (same idempotency key), or park
    the run if the node is not safe to repeat. One transaction, audited as the worker.

    Returns step ids to dispatch. Does nothing if the lease is live (never steals).
    """
    now = timezone.now()
    with transaction.atomic():
        step = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING).first()
        if step is None:
            return []
        expired = step.lease_expires_at is not None and step.lease_expires_at < now
        if not expired and not owner_is_dead(step.lease_owner):
            return []
        run = _lock_run(step.run_id)
        node = compiled_graph(run.graph_version_id).topology.nodes[spec_node_id(step.node_id)]
        kind = get_kind(node.kind)
        config = kind.config_model.model_validate(node.config)
        if step.parent_id is not None:
            safe = kind.is_child_repeat_safe(config, ChildCall(step.child_key, step.kind, step.input or {}))
        else:
            safe = node.repeat_safe if node.repeat_safe is not None else kind.is_repeat_safe(config)
        target = StepStatus.PENDING if safe or run.is_terminal else StepStatus.PARKED
        if not Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, attempt=step.attempt, lease_owner=step.lease_owner).update(
            status=target, lease_owner="", lease_expires_at=None, dispatched_at=now if target == StepStatus.PENDING else None
        ):
            return []
        StepAttempt.objects.filter(step_id=step_id, number=step.attempt, status="running").update(
            status="lost", finished_at=now, error={"code": "worker_lost", "message": f"worker {step.lease_owner} died"}
        )
        data = {"node_id": step.node_id, "attempt": step.attempt, "owner": step.lease_owner, "lease_expired": expired}
        if target == StepStatus.PENDING:
            RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind="step_recovered", data=data)
            audit(recovered_by, "step.rerun", step, actor_type="worker", **data)
            return [step_id]
        RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind="step_parked", data=data)
        audit(recovered_by, "run.park", run, actor_type="worker", step=step_id, **data)
        active = _active_steps(run.pk, exclude=step_id)
        if not any(a[2] in (StepStatus.PENDING, StepStatus.RUNNING) for a in active):
            _bump(Run.objects.filter(pk=run.pk), status=RunStatus.WAITING)
            RunEvent.objects.create(run_id=run.pk, step_id=step_id, kind="run_waiting", data={"node_id": step.node_id})
        handler = import_string(settings.BALLAST_PARK_HANDLER)
        handler(run=run, step=step, reason="interrupted by a worker crash; not safe to repeat")
        return []


def due_pending_steps(*, stale_seconds: float, everything: bool = False, run_id: int | None = None) -> list[int]:
    """Pending steps that no queue entry is known to hold, within each run's parallelism.

    A step is due when it is available (backoff passed) and was never dispatched, was
    dispatched before its backoff ended, or was dispatched more than ``stale_seconds``
    ago and still not claimed (a lost queue entry). ``everything`` re-dispatches all
    pending steps (on worker start: the queue may have lost them). Marks the chosen
    steps dispatched; returns their ids (dispatch after commit).
    """
    now = timezone.now()
    stale = now - timedelta(seconds=stale_seconds)
    with transaction.atomic():
        qs = Step.objects.filter(status=StepStatus.PENDING).filter(Q(available_at__isnull=True) | Q(available_at__lte=now))
        if run_id is not None:
            qs = qs.filter(run_id=run_id)
        if not everything:
            qs = qs.filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale) | Q(dispatched_at__lt=F("available_at")))
        candidates = list(qs.order_by("id").values_list("id", "run_id", "dispatched_at")[:1000])
        if not candidates:
            return []
        run_ids = {c[1] for c in candidates}
        limits = dict(Run.objects.filter(pk__in=run_ids).values_list("id", "max_parallelism"))
        busy: dict[int, int] = {}
        for rid, status, dispatched in Step.objects.filter(
            run_id__in=run_ids, status__in=(StepStatus.RUNNING, StepStatus.PENDING)
        ).values_list("run_id", "status", "dispatched_at"):
            if status == StepStatus.RUNNING or (dispatched is not None and dispatched >= stale):
                busy[rid] = busy.get(rid, 0) + 1
        chosen = []
        for pk, rid, dispatched in candidates:
            counted = dispatched is not None and dispatched >= stale
            if not counted and busy.get(rid, 0) >= limits.get(rid, 1):
                continue
            if not counted:
                busy[rid] = busy.get(rid, 0) + 1
            chosen.append(pk)
        if chosen:
            Step.objects.filter(pk__in=chosen).update(dispatched_at=now)
        return chosen


def reset_connection_if_broken() -> None:
    """Drop a database connection left unusable by an error (long-lived worker threads)."""
    if connection.connection is not None and not connection.is_usable():
        connection.close()


def run_ids_of(step_ids: Iterable[int]) -> set[int]:
    """Run ids of the given steps (for logging and waiting helpers)."""
    return set(Step.objects.filter(pk__in=list(step_ids)).values_list("run_id", flat=True))
