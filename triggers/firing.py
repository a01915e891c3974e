"""Firing a schedule's due tick (the due source the engine's claim by due time calls, registered from triggers.apps) and starting a schedule's run.

A schedule's due row is its own ``next_fire_at`` (database clock). No scanner exists: the
claim by due time on any worker fires the earliest due schedule before it picks a step
(:func:`schedule_fire_next`), and the engine's recovery pass rings a doorbell when one
falls due, so an idle cluster wakes for it (runs.engine.sources).

Never twice for one tick, however many workers claim at once: the firing is one
transaction that locks the schedule row (``SELECT ... FOR UPDATE SKIP LOCKED`` on
PostgreSQL: a second worker skips it rather than wait; SQLite: transactions begin
IMMEDIATE, one writer), re-reads it as due, records the tick (unique per schedule and
tick time), starts the run (idempotency key ``schedule:<id>:<tick>``, unique in the
runs table), audits it and moves ``next_fire_at`` past now. A worker that dies before
the commit leaves the row due (the next claim fires it); after, the tick is done.

Missed ticks (an outage, a stopped cluster): a firing looks at the latest tick at or
before now. With the ``skip`` policy it runs only if it is at most
BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS late (an on-time tick fired a little late); with
``catch_up`` if it is within the schedule's ``catch_up_window_seconds``: one run, never
one per missed tick. Ticks before it are counted as ``missed`` on the tick row.

Overlap: ``skip`` records the tick as skipped while the run the last tick started is
still active (queued, running or waiting); ``allow`` starts another run. (Queueing a tick
behind the active run needs per-graph concurrency limits, not built here.)

Worker processes load this module (triggers is one of their apps), so it imports nothing
of the web stack (tests/runs/engine/test_worker_imports.py).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts import policy
from audit.chain import audit
from core.errors import ConflictError, ServiceError
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.models import TERMINAL_RUN_STATUSES, Run
from triggers import cron
from triggers.models import MissedPolicy, OverlapPolicy, Schedule, ScheduleTick, TickOutcome

log = logging.getLogger("ballast.triggers")

DEFAULT_MISFIRE_GRACE_SECONDS = 60


def latest_published(graph_id: int) -> GraphVersion | None:
    """The graph's newest published version (test snapshots are not versions), or None."""
    return GraphVersion.objects.filter(graph_id=graph_id, is_test=False).order_by("-number").first()


def misfire_grace_seconds() -> float:
    """How late a tick may fire and still count as on time under the ``skip`` policy."""
    return float(getattr(settings, "BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS", DEFAULT_MISFIRE_GRACE_SECONDS))


class ScheduleCannotStart(ConflictError):
    """A tick or Run now cannot start a run (no published version, ``run_as`` lost its role): 409."""

    code = "cannot_start"


def version_of(schedule: Schedule) -> GraphVersion | None:
    """The version a tick of ``schedule`` runs now (pinned, or the latest published)."""
    return schedule.version if schedule.version_id is not None else latest_published(schedule.graph_id)


def previous_run_active(schedule: Schedule) -> bool:
    """Whether the run the last tick (or Run now) started has not ended."""
    if schedule.last_run_id is None:
        return False
    return Run.objects.filter(pk=schedule.last_run_id).exclude(status__in=TERMINAL_RUN_STATUSES).exists()


def schedule_run_start(schedule: Schedule, idempotency_key: str | None) -> Run:
    """Start a run of ``schedule`` as its ``run_as`` with its input. Raises ServiceError
    (ScheduleCannotStart, RunInputInvalid, VersionUnrunnable, StateWriteRefused)."""
    if not policy.can_operate_graph(schedule.run_as, schedule.graph):
        raise ScheduleCannotStart(f"run_as {schedule.run_as} lost its role",
                                  message=f"The user this schedule acts as, {schedule.run_as.get_username()}, may no longer start runs of this graph.")
    version = version_of(schedule)
    if version is None:
        raise ScheduleCannotStart("nothing published", message="The graph has no published version.")
    # Here, not at module level: runs.services loads jsonschema, which a worker process
    # loads only when a run first needs it (tests/runs/engine/test_worker_imports.py).
    from runs import services as run_services

    kwargs: dict[str, Any] = {"version": version, "run_input": schedule.input, "user": schedule.run_as, "actor": schedule.source, "source": schedule.source}
    if schedule.overlap_policy == OverlapPolicy.QUEUE:
        # Its runs wait in a line of their own, one active at a time (runs flow control).
        kwargs["flow_line"] = f"schedule:{schedule.pk}"
    if idempotency_key is None:
        return run_services.run_start(**kwargs)
    return run_services.run_start_idempotent(idempotency_key=idempotency_key, version_pinned=False, **kwargs).run


def schedule_earliest_due(now: datetime) -> datetime | None:
    """The due time of the earliest schedule due at ``now``, or None: one read of the
    ``schedule_due`` index, asked on every claim of the engine."""
    return Schedule.objects.filter(next_fire_at__lte=now).order_by("next_fire_at", "id").values_list("next_fire_at", flat=True).first()


@dataclass(frozen=True)
class Fired:
    """What :func:`schedule_fire_next` did: the schedule, the tick, its outcome and run."""

    schedule_id: int
    tick_at: datetime
    outcome: str
    run_id: int | None


def schedule_fire_next(now: datetime, worker: str) -> Fired | None:
    """Fire the earliest schedule due at ``now`` (database clock) that no other worker
    holds, in one transaction (module docstring); None when none is. Returns what it did.

    The tick fired is the latest at or before ``now``; whether it starts a run follows
    the missed and overlap policies; ``next_fire_at`` moves to the first tick after now.
    A run that cannot start (no version, input no longer valid, ``run_as`` without its
    role, any error of the start) is recorded as a ``failed`` tick with its error and
    the schedule moves on: one bad schedule never blocks the others behind it."""
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update(skip_locked=True)
            .filter(next_fire_at__lte=now)
            .order_by("next_fire_at", "id")
            .first()
        )
        if schedule is None:
            return None
        return _fire(schedule, now, worker)


def _fire(schedule: Schedule, now: datetime, worker: str) -> Fired:
    """The tick of locked, due ``schedule`` (inside the caller's transaction)."""
    due = schedule.next_fire_at
    assert due is not None  # selected as due
    latest = max(due, cron.latest_at_or_before(schedule.cron, schedule.timezone, now))
    following = cron.next_after(schedule.cron, schedule.timezone, max(now, latest))
    if ScheduleTick.objects.filter(schedule=schedule, tick_at=latest, manual=False).exists():
        # This tick fired already: only a due row set back by hand (an operator, a test)
        # can point at it again. Move on rather than fail on the tick's unique constraint
        # at every claim.
        Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=following)
        return Fired(schedule.pk, latest, "already_fired", None)
    missed = cron.ticks_between(schedule.cron, schedule.timezone, due, latest)
    late = (now - latest).total_seconds()
    allowed = misfire_grace_seconds()
    if schedule.missed_policy == MissedPolicy.CATCH_UP:
        allowed = max(allowed, float(schedule.catch_up_window_seconds))
    run: Run | None = None
    error: dict[str, Any] | None = None
    if late > allowed:
        outcome, missed = TickOutcome.SKIPPED_MISSED, missed + 1
    elif schedule.overlap_policy == OverlapPolicy.SKIP and previous_run_active(schedule):
        outcome = TickOutcome.SKIPPED_OVERLAP
    else:
        try:
            with transaction.atomic():  # a savepoint: a refused start leaves the tick recorded as failed
                run = schedule_run_start(schedule, f"schedule:{schedule.pk}:{latest.strftime('%Y%m%dT%H%M%SZ')}")
            outcome = TickOutcome.STARTED
        except ServiceError as exc:
            outcome, error = TickOutcome.FAILED, exc.body()
        except Exception as exc:
            log.exception("schedule %s: the run of tick %s failed to start", schedule.pk, latest.isoformat())
            outcome, error = TickOutcome.FAILED, {"code": "start_failed", "message": f"{type(exc).__name__}: {exc}", "fields": {}}
    # fired_at is when it fired (the database clock now), not the claim's due-by time (now
    # plus the clock's slack), so fired_at - tick_at is the real fire lag.
    ScheduleTick.objects.create(schedule=schedule, tick_at=latest, fired_at=engine.db_now(), outcome=outcome, run=run, missed=missed, error=error, worker=worker)
    updates: dict[str, Any] = {"next_fire_at": following}
    if run is not None:
        updates["last_run"] = run
    Schedule.objects.filter(pk=schedule.pk).update(**updates)
    audit(schedule.source, "schedule.tick", schedule, actor_type="system", tick=latest.isoformat(), outcome=str(outcome),
          run=None if run is None else run.pk, missed=missed, worker=worker, **({"error": error["code"]} if error else {}))
    if outcome != TickOutcome.STARTED:
        log.info("schedule %s: tick %s %s (missed before it: %d)", schedule.pk, latest.isoformat(), outcome, missed)
    return Fired(schedule.pk, latest, str(outcome), None if run is None else run.pk)


def fire_next_for_engine(now: datetime, worker: str) -> bool:
    """The due source's ``fire_next`` (runs.engine.sources.DueSource): True when one fired."""
    return schedule_fire_next(now, worker) is not None


def register_with_engine() -> None:
    """Register schedules as a due source of the engine (triggers.apps, once per process)."""
    engine.register_due_source(engine.DueSource(name="schedules", earliest_due=schedule_earliest_due, fire_next=fire_next_for_engine))

