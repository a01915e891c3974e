"""Schedule triggers: create, change, pause, resume and delete them, Run now, and fire a due tick from the engine's claim.

A schedule's due row is its own ``next_fire_at`` (database clock). No scanner exists: this
module registers a due source with the engine (triggers.apps -> runs.engine.api), so the
claim by due time on any worker fires the earliest due schedule before it picks a step
(:func:`schedule_fire_next`), and the engine's recovery pass rings a doorbell when one
falls due, so an idle cluster wakes for it.

Never twice for one tick, however many workers claim at once: the firing is one
transaction that locks the schedule row (``SELECT ... FOR UPDATE SKIP LOCKED`` on
PostgreSQL: a second worker skips it rather than wait; SQLite: transactions begin
IMMEDIATE, one writer), re-reads it as due, records the tick (unique per schedule and
tick time), starts the run (idempotency key ``schedule:<id>:<tick>``, unique in the
runs table), audits it and moves ``next_fire_at`` past now. A worker that dies before
the commit leaves the row due (the next claim fires it); after, the tick is done.

Missed ticks (an outage, a paused cluster): a firing looks at the latest tick at or
before now. With the ``skip`` policy it runs only if it is at most
BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS late (an on-time tick fired a little late); with
``catch_up`` if it is within the schedule's ``catch_up_window_seconds``: one run, never
one per missed tick. Ticks before it are counted as ``missed`` on the tick row.

Overlap: ``skip`` records the tick as skipped while the run the last tick started is
still active (queued, running or waiting); ``allow`` starts another run. (Queueing a tick
behind the active run needs per-graph concurrency limits, not built here.)
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts import policy
from accounts.roles import BUILDERS
from audit.chain import audit
from core.errors import ConflictError, ForbiddenError, NotFoundError, ServiceError
from graphs.models import Graph, GraphVersion
from runs import services as run_services
from runs.engine import api as engine
from runs.models import TERMINAL_RUN_STATUSES, Run
from triggers import cron
from triggers.models import MissedPolicy, OverlapPolicy, Schedule, ScheduleTick, TickOutcome
from triggers.services import TriggerInvalid, latest_published

log = logging.getLogger("ballast.triggers")

NEXT_FIRE_TIMES = 5
MAX_CATCH_UP_WINDOW_SECONDS = 7 * 86400
DEFAULT_MISFIRE_GRACE_SECONDS = 60


class ScheduleCannotStart(ConflictError):
    """A tick or Run now cannot start a run (no published version, ``run_as`` lost its role): 409."""

    code = "cannot_start"


def misfire_grace_seconds() -> float:
    """How late a tick may fire and still count as on time under the ``skip`` policy."""
    return float(getattr(settings, "BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS", DEFAULT_MISFIRE_GRACE_SECONDS))


# Reads ----------------------------------------------------------------------------------


def version_of(schedule: Schedule) -> GraphVersion | None:
    """The version a tick of ``schedule`` runs now (pinned, or the latest published)."""
    return schedule.version if schedule.version_id is not None else latest_published(schedule.graph_id)


def schedule_get(*, graph_id: int, schedule_id: int) -> Schedule:
    """The schedule ``schedule_id`` of graph ``graph_id``; NotFoundError otherwise."""
    schedule = Schedule.objects.select_related("graph", "version", "run_as", "created_by", "last_run").filter(pk=schedule_id, graph_id=graph_id).first()
    if schedule is None:
        raise NotFoundError(f"schedule {schedule_id} of graph {graph_id}")
    return schedule


def next_fire_times(schedule: Schedule, count: int = NEXT_FIRE_TIMES) -> list[datetime]:
    """The next ``count`` tick times (UTC), from ``next_fire_at``; [] while paused."""
    if schedule.next_fire_at is None:
        return []
    return cron.next_ticks(schedule.cron, schedule.timezone, schedule.next_fire_at, count)


def previous_run_active(schedule: Schedule) -> bool:
    """Whether the run the last tick (or Run now) started has not ended."""
    if schedule.last_run_id is None:
        return False
    return Run.objects.filter(pk=schedule.last_run_id).exclude(status__in=TERMINAL_RUN_STATUSES).exists()


# Management -----------------------------------------------------------------------------


def require_builder(user: Any, graph: Graph) -> None:
    """Only builders manage a graph's schedules (as only they edit the graph)."""
    if not (user.is_superuser or user.groups.filter(name=BUILDERS).exists()):
        raise ForbiddenError(f"{user} may not manage the schedules of graph {graph.pk}", message="Only builders may manage a graph's schedules.")


def _check_run_as(graph: Graph, run_as: Any) -> None:
    if not policy.can_operate_graph(run_as, graph):
        raise TriggerInvalid(f"{run_as} may not start runs of graph {graph.pk}", message="The schedule's runs would act as a user who may not start them.",
                             fields={"run_as": [f"{run_as.get_username()} may not start runs of this graph (not an operator of it)."]})


def input_problems(version: GraphVersion, run_input: Any) -> dict[str, list[str]]:
    """Why ``run_input`` cannot start a run of ``version`` ({} when it can): field -> messages."""
    try:
        errors = run_services.input_errors(version, run_input)
    except engine.VersionUnrunnable as exc:
        return {"version": [exc.message]}
    fields: dict[str, list[str]] = {}
    for err in errors:
        fields.setdefault(err["field"], []).append(err["message"])
    return fields


def _checked(graph: Graph, *, version: GraphVersion | None, run_input: Any, expression: str, timezone_name: str, overlap: str, missed: str,
             window: int, now: datetime) -> datetime:
    """Validate a schedule's settings; return its first tick after ``now``. Raises TriggerInvalid (the field named)."""
    try:
        first = cron.validate(expression, timezone_name, now=now)
    except cron.CronInvalid as exc:
        raise TriggerInvalid(f"{exc.field}: {exc.message}", message=exc.message, fields={exc.field: [exc.message]}) from None
    if overlap not in OverlapPolicy.values:
        raise TriggerInvalid("overlap_policy", fields={"overlap_policy": [f"One of {', '.join(OverlapPolicy.values)}."]})
    if missed not in MissedPolicy.values:
        raise TriggerInvalid("missed_policy", fields={"missed_policy": [f"One of {', '.join(MissedPolicy.values)}."]})
    if not 1 <= window <= MAX_CATCH_UP_WINDOW_SECONDS:
        raise TriggerInvalid("catch_up_window_seconds", fields={"catch_up_window_seconds": [f"Between 1 and {MAX_CATCH_UP_WINDOW_SECONDS} seconds."]})
    if version is not None and version.graph_id != graph.pk:
        raise TriggerInvalid("version of another graph", fields={"version": ["No such published version of this graph."]})
    target = version or latest_published(graph)
    if target is None:
        raise TriggerInvalid("nothing published", fields={"version": ["The graph has no published version; publish it first."]})
    problems = input_problems(target, run_input)
    if problems:
        raise TriggerInvalid("; ".join(f"{k}: {v[0]}" for k, v in problems.items()),
                             message=f"The input does not match the input schema of version {target.number}.", fields=problems)
    return first


def schedule_create(
    *, graph: Graph, name: str, user: Any, cron_expression: str, timezone: str = "UTC", run_input: dict[str, Any] | None = None,
    version: GraphVersion | None = None, run_as: Any = None, paused: bool = False, overlap_policy: str = OverlapPolicy.SKIP,
    missed_policy: str = MissedPolicy.SKIP, catch_up_window_seconds: int = 3600,
) -> Schedule:
    """Create a schedule of ``graph`` (audited ``schedule.create``), due at its first tick
    after now (database clock) unless ``paused``. Raises TriggerInvalid (a field named:
    ``cron``, ``timezone``, ``input.<path>``, ``version``, ``run_as``, ``name``...) and
    ForbiddenError."""
    require_builder(user, graph)
    run_input = {} if run_input is None else run_input
    first = _checked(graph, version=version, run_input=run_input, expression=cron_expression, timezone_name=timezone, overlap=overlap_policy,
                     missed=missed_policy, window=catch_up_window_seconds, now=engine.db_now())
    _check_run_as(graph, run_as or user)
    if Schedule.objects.filter(graph=graph, name=name).exists():
        raise TriggerInvalid("name taken", fields={"name": ["This graph has a schedule of this name."]})
    schedule = Schedule(
        graph=graph, name=name, cron=cron_expression.strip(), timezone=timezone, input=run_input, version=version, run_as=run_as or user,
        paused=paused, overlap_policy=overlap_policy, missed_policy=missed_policy, catch_up_window_seconds=catch_up_window_seconds,
        next_fire_at=None if paused else first, created_by=user,
    )
    with transaction.atomic():
        schedule.save()
        audit(user.get_username(), "schedule.create", schedule, name=name, cron=schedule.cron, timezone=timezone,
              version=version.number if version else None, paused=paused)
    return schedule


_UNSET: Any = object()
_FIELDS = ("name", "cron", "timezone", "input", "overlap_policy", "missed_policy", "catch_up_window_seconds")


def schedule_update(*, schedule: Schedule, user: Any, version: Any = _UNSET, run_as: Any = None, **changes: Any) -> Schedule:
    """Change a schedule: any of ``name``, ``cron``, ``timezone``, ``input``,
    ``overlap_policy``, ``missed_policy``, ``catch_up_window_seconds``, ``version``
    (None: latest published), ``run_as``; validated as at creation. A new cron or time zone
    moves ``next_fire_at`` to the first tick after now. Audited ``schedule.update``."""
    require_builder(user, schedule.graph)
    unknown = set(changes) - set(_FIELDS)
    if unknown:
        raise TypeError(f"unknown schedule fields {sorted(unknown)}")
    if run_as is not None:
        _check_run_as(schedule.graph, run_as)
    new_version = schedule.version if version is _UNSET else version
    merged = {f: changes.get(f, getattr(schedule, f)) for f in _FIELDS}
    first = _checked(schedule.graph, version=new_version, run_input=merged["input"], expression=merged["cron"], timezone_name=merged["timezone"],
                     overlap=merged["overlap_policy"], missed=merged["missed_policy"], window=merged["catch_up_window_seconds"], now=engine.db_now())
    if merged["name"] != schedule.name and Schedule.objects.filter(graph_id=schedule.graph_id, name=merged["name"]).exists():
        raise TriggerInvalid("name taken", fields={"name": ["This graph has a schedule of this name."]})
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        retimed = merged["cron"] != locked.cron or merged["timezone"] != locked.timezone
        for f, value in merged.items():
            setattr(locked, f, value)
        locked.version = new_version
        if run_as is not None:
            locked.run_as = run_as
        if retimed and not locked.paused:
            locked.next_fire_at = first
        locked.save()
        changed: dict[str, Any] = {k: v for k, v in changes.items() if k != "input"}  # the input itself stays out of the audit log
        if "input" in changes:
            changed["input"] = True
        if version is not _UNSET:
            changed["version"] = None if new_version is None else new_version.number
        if run_as is not None:
            changed["run_as"] = run_as.get_username()
        audit(user.get_username(), "schedule.update", locked, **changed)
    return schedule_get(graph_id=locked.graph_id, schedule_id=locked.pk)


def schedule_pause(*, schedule: Schedule, user: Any) -> Schedule:
    """Pause: no tick fires until resumed (``next_fire_at`` null). Audited ``schedule.pause``; pausing twice changes nothing."""
    require_builder(user, schedule.graph)
    with transaction.atomic():
        if Schedule.objects.filter(pk=schedule.pk, paused=False).update(paused=True, next_fire_at=None):
            audit(user.get_username(), "schedule.pause", schedule)
    return schedule_get(graph_id=schedule.graph_id, schedule_id=schedule.pk)


def schedule_resume(*, schedule: Schedule, user: Any) -> Schedule:
    """Resume: due again at the first tick after now (the ticks while paused are not
    run). Audited ``schedule.resume``; resuming a running schedule changes nothing."""
    require_builder(user, schedule.graph)
    first = cron.next_after(schedule.cron, schedule.timezone, engine.db_now())
    with transaction.atomic():
        if Schedule.objects.filter(pk=schedule.pk, paused=True).update(paused=False, next_fire_at=first):
            audit(user.get_username(), "schedule.resume", schedule, next_fire_at=first.isoformat())
    return schedule_get(graph_id=schedule.graph_id, schedule_id=schedule.pk)


def schedule_delete(*, schedule: Schedule, user: Any) -> None:
    """Delete ``schedule`` and its tick log (its runs stay); audited ``schedule.delete``."""
    require_builder(user, schedule.graph)
    with transaction.atomic():
        audit(user.get_username(), "schedule.delete", schedule, name=schedule.name)
        schedule.delete()


# Starting runs --------------------------------------------------------------------------


def _start(schedule: Schedule, idempotency_key: str | None) -> Run:
    """Start a run of ``schedule`` as its ``run_as`` with its input. Raises ServiceError
    (ScheduleCannotStart, RunInputInvalid, VersionUnrunnable, StateWriteRefused)."""
    if not policy.can_operate_graph(schedule.run_as, schedule.graph):
        raise ScheduleCannotStart(f"run_as {schedule.run_as} lost its role",
                                  message=f"The user this schedule acts as, {schedule.run_as.get_username()}, may no longer start runs of this graph.")
    version = version_of(schedule)
    if version is None:
        raise ScheduleCannotStart("nothing published", message="The graph has no published version.")
    kwargs: dict[str, Any] = {"version": version, "run_input": schedule.input, "user": schedule.run_as, "actor": schedule.source, "source": schedule.source}
    if idempotency_key is None:
        return run_services.run_start(**kwargs)
    return run_services.run_start_idempotent(idempotency_key=idempotency_key, version_pinned=False, **kwargs).run


def schedule_run_now(*, schedule: Schedule, user: Any) -> Run:
    """Start a run now with the schedule's input, as its ``run_as``, source ``schedule
    <name>`` (whatever the overlap policy: it was asked for), recorded as a manual tick
    and audited ``schedule.run_now`` by ``user``. Raises ScheduleCannotStart (409),
    RunInputInvalid (400, the version's schema changed), ForbiddenError."""
    require_builder(user, schedule.graph)
    now = engine.db_now()
    with transaction.atomic():
        locked = Schedule.objects.select_for_update(of=("self",)).select_related("graph", "version", "run_as").get(pk=schedule.pk)
        run = _start(locked, None)
        ScheduleTick.objects.create(schedule=locked, tick_at=now, fired_at=now, manual=True, outcome=TickOutcome.STARTED, run=run, worker=user.get_username())
        Schedule.objects.filter(pk=locked.pk).update(last_run=run)
        audit(user.get_username(), "schedule.run_now", locked, run=run.pk)
    return run


# Firing (the engine's due source) -------------------------------------------------------


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
                run = _start(schedule, f"schedule:{schedule.pk}:{latest.strftime('%Y%m%dT%H%M%SZ')}")
            outcome = TickOutcome.STARTED
        except ServiceError as exc:
            outcome, error = TickOutcome.FAILED, exc.body()
        except Exception as exc:
            log.exception("schedule %s: the run of tick %s failed to start", schedule.pk, latest.isoformat())
            outcome, error = TickOutcome.FAILED, {"code": "start_failed", "message": f"{type(exc).__name__}: {exc}", "fields": {}}
    ScheduleTick.objects.create(schedule=schedule, tick_at=latest, fired_at=now, outcome=outcome, run=run, missed=missed, error=error, worker=worker)
    following = cron.next_after(schedule.cron, schedule.timezone, max(now, latest))
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
