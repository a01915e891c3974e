"""Run reads: runs with filters, steps, events after a cursor, cost aggregates, audit entries.

Lists and cost aggregates are for a ``viewer``: they hold only the runs that user may
read (``accounts.policy.readable_runs_q``, applied here, beneath pagination); a
``viewer`` of None is a trusted caller (a management command) and sees everything.

Cost aggregates are computed by the database (GROUP BY over step attempts), never by
looping over rows in Python: every attempt's spend counts, including attempts that
failed or were retried, which is what the provider billed.
"""
from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    Count,
    DecimalField,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate

from accounts.policy import readable_runs_q
from runs.models import TERMINAL_RUN_STATUSES, AuditEntry, Run, RunEvent, Step, StepAttempt, StepStatus

COST_GROUPS = ("step", "run", "graph", "model", "day")

# What a live run waits for, worked out from its step rows (never stored, so it cannot
# drift from them): "decision" when a step is parked (interrupted by a crash, not safe
# to repeat: a person chooses retry, skip or fail), else "approval" when a step waits at
# an approval gate, else None. Parked wins: it blocks its branch until someone decides.
WAITING_FOR = ("approval", "decision")


def with_waiting_for(queryset: QuerySet[Run]) -> QuerySet[Run]:
    """``queryset`` annotated with ``waiting_for`` (``"decision"``, ``"approval"`` or None;
    None for a finished run). Two EXISTS probes per run on the (run, status) step index,
    so a page of runs stays one query."""
    steps = Step.objects.filter(run=OuterRef("pk"))
    return queryset.annotate(
        waiting_for=Case(
            When(status__in=TERMINAL_RUN_STATUSES, then=Value(None)),
            When(Exists(steps.filter(status=StepStatus.PARKED)), then=Value("decision")),
            When(Exists(steps.filter(status=StepStatus.WAITING)), then=Value("approval")),
            default=Value(None),
            output_field=CharField(null=True),
        )
    )


def run_waiting_for(*, run: Run) -> str | None:
    """What ``run`` waits for (see :func:`with_waiting_for`): its annotation when it was
    read through a selector, else one query."""
    if hasattr(run, "waiting_for"):
        return run.waiting_for
    return with_waiting_for(Run.objects.filter(pk=run.pk)).values_list("waiting_for", flat=True).first()


def run_status_now(*, run_id: int) -> tuple[str, str | None]:
    """The run's status and ``waiting_for`` as committed now, in one query."""
    return with_waiting_for(Run.objects.filter(pk=run_id)).values_list("status", "waiting_for").get()


def _filter_given(queryset: Any, **lookups: Any) -> Any:
    """``queryset`` filtered by every lookup whose value was given (not None)."""
    given = {key: value for key, value in lookups.items() if value is not None}
    return queryset.filter(**given) if given else queryset

def run_list(
    *,
    viewer: Any,
    status: str | None = None,
    graph_id: int | None = None,
    user: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    include_tests: bool = False,
    waiting_for: str | None = None,
) -> QuerySet[Run]:
    """Runs, newest first, annotated with ``waiting_for``, filtered by status, what they
    wait for (``"approval"`` or ``"decision"``), graph, the starting user's username and a
    creation time range (``created_after`` inclusive, ``created_before`` exclusive).
    One-node test runs from the builder are left out unless ``include_tests``. Only the
    runs ``viewer`` may read (None: every run)."""
    qs = with_waiting_for(Run.objects.select_related("graph_version__graph", "created_by").order_by("-id"))
    if viewer is not None:
        qs = qs.filter(readable_runs_q(viewer))
    if not include_tests:
        qs = qs.filter(is_test=False)
    return _filter_given(
        qs,
        status=status or None,
        waiting_for=waiting_for or None,
        graph_version__graph_id=graph_id,
        created_by__username=user or None,
        created_at__gte=created_after,
        created_at__lt=created_before,
    )


def run_get(*, run_id: int) -> Run:
    """One run with its graph version, annotated with ``waiting_for``. Raises Run.DoesNotExist."""
    return with_waiting_for(Run.objects.select_related("graph_version__graph", "created_by")).get(pk=run_id)


# The actor name the CLI commands audit their run starts under (run_graph).
CLI_ACTOR = "cli"


def run_started_from(*, run: Run) -> str | None:
    """Where a run started that no user started: ``"command line"`` when its ``run.start``
    audit entry names the CLI actor, else None (a user's run, or no honest source)."""
    if run.created_by_id is not None:
        return None
    actor = (
        AuditEntry.objects.filter(scope=f"run:{run.pk}", action="run.start", object_type="run").values_list("actor", flat=True).first()
    )
    return "command line" if actor == CLI_ACTOR else None


def step_list(*, run: Run) -> QuerySet[Step]:
    """The run's steps in creation order."""
    return Step.objects.filter(run=run).order_by("id")


def step_get(*, step_id: int) -> Step:
    """One step with its attempts and its run. Raises Step.DoesNotExist."""
    return Step.objects.select_related("run__graph_version__graph").prefetch_related("attempts").get(pk=step_id)


def run_events_after(*, run: Run, after: int = 0, limit: int = 100) -> tuple[list[RunEvent], bool]:
    """Events of ``run`` with id > ``after``, oldest first, at most ``limit``; and whether
    more follow. Ids increase with commit order of each run's events (the run row lock
    serialises them), so ``after`` is a complete cursor."""
    rows = list(RunEvent.objects.filter(run=run, id__gt=after).order_by("id")[: limit + 1])
    return rows[:limit], len(rows) > limit


def _tokens(key: str) -> Any:
    return Coalesce(Sum(Cast(KeyTextTransform(key, "usage"), BigIntegerField())), Value(0), output_field=BigIntegerField())


def cost_aggregate(
    *,
    viewer: Any,
    group_by: str,
    run_id: int | None = None,
    graph_id: int | None = None,
    model: str | None = None,
    since: date | None = None,
    until: date | None = None,
    include_tests: bool = False,
) -> QuerySet[Any]:
    """Spend grouped by ``group_by`` (one of COST_GROUPS), one database query.

    The spend of one-node test runs is left out unless ``include_tests`` or ``run_id``
    names a run (then that run's spend is shown whatever it is).

    Rows are dicts: the group's ``key`` (and ``label``) plus ``cost_usd`` (Decimal),
    ``input_tokens``, ``output_tokens``, ``cached_input_tokens`` and ``attempts``. The
    day is the UTC day an attempt started; ``since``/``until`` are inclusive days. Only
    the spend of runs ``viewer`` may read counts (None: every run).
    Raises ValueError for an unknown group.
    """
    qs = StepAttempt.objects.filter(Q(cost_usd__isnull=False) | Q(usage__isnull=False))
    if viewer is not None:
        qs = qs.filter(step__run__in=Run.objects.filter(readable_runs_q(viewer)).values("pk"))
    if not include_tests and run_id is None:
        qs = qs.filter(step__run__is_test=False)
    qs = _filter_given(
        qs,
        step__run_id=run_id,
        step__run__graph_version__graph_id=graph_id,
        usage__model=model or None,
        started_at__date__gte=since,
        started_at__date__lte=until,
    )
    if group_by == "step":
        qs = qs.values(key=F("step_id"), label=F("step__node_id"), run=F("step__run_id"))
    elif group_by == "run":
        qs = qs.values(key=F("step__run_id"), label=F("step__run__graph_version__graph__name"))
    elif group_by == "graph":
        qs = qs.values(key=F("step__run__graph_version__graph_id"), label=F("step__run__graph_version__graph__name"))
    elif group_by == "model":
        qs = qs.values(key=KeyTextTransform("model", "usage"), label=KeyTextTransform("provider", "usage"))
    elif group_by == "day":
        qs = qs.values(key=TruncDate("started_at"), label=Value(""))
    else:
        raise ValueError(f"group_by must be one of {COST_GROUPS}")
    money = DecimalField(max_digits=20, decimal_places=6)
    return qs.annotate(
        cost_usd=Coalesce(Sum("cost_usd"), Value(Decimal(0)), output_field=money),
        input_tokens=_tokens("input_tokens"),
        output_tokens=_tokens("output_tokens"),
        cached_input_tokens=_tokens("cached_input_tokens"),
        attempts=Count("id"),
    ).order_by("key")


def audit_list(
    *,
    action: str | None = None,
    actor: str | None = None,
    actor_type: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    scope: str | None = None,
) -> QuerySet[AuditEntry]:
    """Audit entries, newest first, filtered by exact values."""
    qs = AuditEntry.objects.order_by("-id")
    for field, value in (
        ("action", action),
        ("actor", actor),
        ("actor_type", actor_type),
        ("object_type", object_type),
        ("object_id", object_id),
        ("scope", scope),
    ):
        if value:
            qs = qs.filter(**{field: value})
    return qs
