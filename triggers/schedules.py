"""Schedule triggers: create, change, pause, resume and delete them, and Run now (builders). Firing a due tick is triggers.firing's."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from accounts import policy
from accounts.roles import BUILDERS
from audit.chain import audit
from core.errors import ForbiddenError, NotFoundError
from graphs.models import Graph, GraphVersion
from runs import services as run_services
from runs.engine import api as engine
from runs.models import Run
from triggers import cron
from triggers.firing import latest_published, schedule_run_start
from triggers.models import MissedPolicy, OverlapPolicy, Schedule, ScheduleTick, TickOutcome
from triggers.services import TriggerInvalid

NEXT_FIRE_TIMES = 5
MAX_CATCH_UP_WINDOW_SECONDS = 7 * 86400


# Reads ----------------------------------------------------------------------------------


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
    target = version or latest_published(graph.pk)
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


def schedule_run_now(*, schedule: Schedule, user: Any) -> Run:
    """Start a run now with the schedule's input, as its ``run_as``, source ``schedule
    <name>`` (whatever the overlap policy: it was asked for), recorded as a manual tick
    and audited ``schedule.run_now`` by ``user``. Raises ScheduleCannotStart (409),
    RunInputInvalid (400, the version's schema changed), ForbiddenError."""
    require_builder(user, schedule.graph)
    now = engine.db_now()
    with transaction.atomic():
        locked = Schedule.objects.select_for_update(of=("self",)).select_related("graph", "version", "run_as").get(pk=schedule.pk)
        run = schedule_run_start(locked, None)
        ScheduleTick.objects.create(schedule=locked, tick_at=now, fired_at=now, manual=True, outcome=TickOutcome.STARTED, run=run, worker=user.get_username())
        Schedule.objects.filter(pk=locked.pk).update(last_run=run)
        audit(user.get_username(), "schedule.run_now", locked, run=run.pk)
    return run


