"""Row writers every engine transaction shares: run lock and version bump, events, terminal status.

Every change to a run row goes through :func:`bump_run`, which moves ``Run.version``: a
worker's cached view of a run (the fast commit path's snapshot) is valid exactly while the
version matches. All functions here run inside the caller's transaction.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils.module_loading import import_string

from audit.chain import audit
from core import metrics
from runs.engine.store import clock
from runs.engine.store.events import create as create_event
from runs.engine.store.events import event as event  # re-exported: the engine builds events with writes.event
from runs.engine.types import ActiveStep
from runs.models import (
    ACTIVE_STEP_STATUSES,
    FINISHED_EVENT_KINDS,
    TERMINAL_RUN_STATUSES,
    AttemptStatus,
    Run,
    RunEventKind,
    RunStatus,
    Step,
    StepAttempt,
    StepStatus,
)
from runs.nodes.base import NodeResult
from runs.signals import run_finished, step_parked
from runs.vocabulary import Usage


def lease_delta() -> timedelta:
    """How long a lease lasts from a claim or heartbeat (settings.BALLAST_LEASE_SECONDS)."""
    return timedelta(seconds=settings.BALLAST_LEASE_SECONDS)


def bump_run(queryset: QuerySet[Run], **fields: Any) -> int:
    """Update the run rows of ``queryset`` with ``fields`` and bump their ``version``.

    Returns the number of rows updated (a compare-and-set when the queryset filters on the
    old status)."""
    return queryset.update(version=F("version") + 1, **fields)


def lock_run(run_id: int) -> Run:
    """Lock and read the run row. Raises Run.DoesNotExist.

    The run row serialises commits of one run's parallel branches (state merge and join
    bookkeeping); SQLite's IMMEDIATE transactions already serialise all writers.

    ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: it excludes every other writer of the run
    row alike, but not the key-share lock PostgreSQL's foreign-key checks take when a
    claim inserts the run's attempt and event rows. A claim's pick (``SKIP LOCKED``) may
    keep a lock on a step a committer is about to update (PostgreSQL keeps the lock on a
    row that failed its re-check); were the claim then to wait for the committer's run
    lock, the two would deadlock."""
    return Run.objects.select_for_update(no_key=True).get(pk=run_id)


def lock_run_for_audit(key: str) -> None:
    """The lock an append to the audit chain ``run:<key>`` takes before the chain's head
    (registered from runs.apps with audit.chain.register_scope_lock): the run row, FOR NO
    KEY UPDATE as :func:`lock_run`, so an audited service and an engine commit of one run
    take their locks in one order and cannot deadlock. Nothing is locked, and nothing
    raised, when the run is gone."""
    list(Run.objects.select_for_update(no_key=True).filter(pk=int(key)).values_list("pk"))


def fenced(step_id: int, attempt: int, worker: str) -> QuerySet[Step]:
    """The step row, only while it runs under this lease (owner and attempt): the fence."""
    return Step.objects.filter(pk=step_id, status=StepStatus.RUNNING, attempt=attempt, lease_owner=worker)


def lost_attempts(step_id: int) -> int:
    """How many attempts of the step were interrupted by a worker's death."""
    return StepAttempt.objects.filter(step_id=step_id, status=AttemptStatus.LOST).count()


def active_steps(run_id: int, exclude: int | None = None) -> list[ActiveStep]:
    """The run's active steps (pending, running, waiting, parked, suspended) by id."""
    qs = Step.objects.filter(run_id=run_id, status__in=ACTIVE_STEP_STATUSES)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    return [ActiveStep(*row) for row in qs.order_by("id").values_list("id", "node_id", "status", "dispatched_at", "available_at", "parent_id")]


def park(run: Run, step: Step, *, by: str, reason: str, data: dict[str, Any], cause: str) -> None:
    """What follows parking ``step`` (already set parked in the caller's transaction, under
    the run's row lock) because its side effect may have happened and it is not safe to
    repeat: its event and audit entry (``run.park`` by the worker ``by``), the run waiting
    when no other step can make progress, a person's decision asked for
    (settings.BALLAST_PARK_HANDLER, with ``reason``) and the ``step_parked`` signal.
    ``cause`` (``worker_lost``, ``outcome_unknown``) labels ballast_steps_parked_total,
    counted once the caller's transaction commits."""
    transaction.on_commit(lambda: metrics.STEPS_PARKED.labels(cause=cause).inc())
    create_event(run_id=run.pk, step_id=step.pk, kind=RunEventKind.STEP_PARKED, data=data)
    audit(by, "run.park", run, actor_type="worker", step=step.pk, **data)
    if not any(a.status in (StepStatus.PENDING, StepStatus.RUNNING) for a in active_steps(run.pk, exclude=step.pk)):
        bump_run(Run.objects.filter(pk=run.pk), status=RunStatus.WAITING)
        create_event(run_id=run.pk, step_id=step.pk, kind=RunEventKind.RUN_WAITING, data={"node_id": step.node_id})
    handler = import_string(settings.BALLAST_PARK_HANDLER)
    handler(run=run, step=step, reason=reason)
    step_parked.send(sender=Run, run=run, step=step)


def save_steps(run: Run, new_steps: list[Step]) -> None:
    """Insert ``new_steps`` (of ``run``) and set their primary keys."""
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


def save_run_totals(run: Run, now: datetime, **fields: Any) -> None:
    """Write the run's per-key size map, bookkeeping (without the reducer contributions,
    which go with their keys' rows: runs.engine.store.state), step count and usage totals as
    held in ``run`` (plus ``fields``), in one UPDATE. The state's keys are written by
    runs.engine.store.state.write, only those a step changed."""
    bump_run(
        Run.objects.filter(pk=run.pk),
        state_sizes=run.state_sizes,
        scheduler={k: v for k, v in run.scheduler.items() if k != "contrib"},
        step_count=run.step_count,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        updated_at=now,
        **fields,
    )


def save_run_usage(run: Run, now: datetime, **fields: Any) -> None:
    """Write the run's usage totals as held in ``run`` (plus ``fields``)."""
    bump_run(
        Run.objects.filter(pk=run.pk),
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        updated_at=now,
        **fields,
    )


def run_cost_adjust(run_id: int, delta_usd: Decimal) -> None:
    """Move a run's ``cost_usd`` by ``delta_usd`` (re-pricing) and bump its version, so a
    worker holding a snapshot of the run re-reads it instead of overwriting the total.
    Call with the run row locked."""
    bump_run(Run.objects.filter(pk=run_id), cost_usd=F("cost_usd") + delta_usd)


def finish_run(run: Run, status: str, *, error: dict[str, Any] | None = None, output: Any = None, step_id: int | None = None) -> None:
    """Move ``run`` to a terminal status (compare-and-set on non-terminal): its open steps
    are cancelled, a ``run_<status>`` event is appended and ``run_finished`` is sent, all
    inside the caller's transaction. Does nothing if the run had already ended."""
    now = clock.now()
    updated = bump_run(
        Run.objects.filter(pk=run.pk).exclude(status__in=TERMINAL_RUN_STATUSES), status=status, error=error, output=output, finished_at=now
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
    create_event(run_id=run.pk, step_id=step_id, kind=FINISHED_EVENT_KINDS[status], data=data)
    run.status = status
    run_finished.send(sender=Run, run=run, status=status)


def price_version(usage: Usage | None) -> str:
    """The price data version a cost came from ('' when there was no priced usage)."""
    return (getattr(usage, "price_version", None) or "") if usage else ""


def add_usage(run: Run, result: NodeResult) -> None:
    """Add a result's tokens and cost to the run's totals held in ``run`` (not saved)."""
    if result.usage:
        run.input_tokens += result.usage.input_tokens
        run.output_tokens += result.usage.output_tokens
    if result.cost_usd:
        run.cost_usd += result.cost_usd
