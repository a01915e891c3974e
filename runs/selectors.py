"""Run reads: runs with filters, steps, events after a cursor, cost aggregates, audit entries.

Lists and cost aggregates are for a ``viewer``: they hold only the runs that user may
read (``accounts.policy.readable_runs_q``, applied here, beneath pagination); a
``viewer`` of None is a trusted caller (a management command) and sees everything.

Cost aggregates are computed by the database (GROUP BY over step attempts), never by
looping over rows in Python: every attempt's spend counts, including attempts that
failed or were retried, which is what the provider billed.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict

import psutil
from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    Count,
    DecimalField,
    Exists,
    F,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone

from accounts.policy import readable_runs_q
from audit.models import AuditEntry
from graphs.models import GraphVersion
from runs.engine import api as engine_api
from runs.models import (
    TERMINAL_RUN_STATUSES,
    AttemptStatus,
    Run,
    RunEvent,
    RunEventCounter,
    RunStateKey,
    Step,
    StepAttempt,
    StepStatus,
    Worker,
)

if TYPE_CHECKING:  # django-stubs' helper, installed with the test extras only
    from django_stubs_ext import WithAnnotations

COST_GROUPS = ("step", "run", "graph", "node", "model", "day")

# What a live run waits for, worked out from its step rows (never stored, so it cannot
# drift from them): "decision" when a step is parked (interrupted by a crash, not safe
# to repeat: a person chooses retry, skip or fail), else "approval" when a step waits at
# an approval gate, else None. Parked wins: it blocks its branch until someone decides.
WAITING_FOR = ("approval", "decision")


class WaitingFor(TypedDict):
    """The annotation :func:`with_waiting_for` adds to each run."""

    waiting_for: str | None


def with_waiting_for(queryset: QuerySet[Run]) -> QuerySet[WithAnnotations[Run, WaitingFor]]:
    """``queryset`` annotated with ``waiting_for`` (``"decision"``, ``"approval"`` or None;
    None for a finished run): the status of the run's first parked-or-waiting step,
    "parked" sorting before "waiting". A correlated subquery with LIMIT 1 on the (run,
    status) step index: the database probes it for the rows it returns (a page), never
    hashes every waiting step in the table as it may for an EXISTS, so a page stays one
    query whose cost does not grow with the number of live runs."""
    first_held = (
        Step.objects.filter(run=OuterRef("pk"), status__in=(StepStatus.PARKED, StepStatus.WAITING))
        .order_by("status")
        .annotate(held=Case(When(status=StepStatus.PARKED, then=Value("decision")), default=Value("approval"), output_field=CharField()))
        .values("held")[:1]
    )
    return queryset.annotate(
        waiting_for=Case(
            When(status__in=TERMINAL_RUN_STATUSES, then=Value(None)),
            default=Subquery(first_held, output_field=CharField(null=True)),
            output_field=CharField(null=True),
        )
    )


def waiting_for_q(what: str) -> Q:
    """A filter on Run: live runs waiting for ``what`` (one of WAITING_FOR), as
    :func:`with_waiting_for` works it out, written as semi-joins the database can plan
    from the step side (few steps are parked or waiting)."""
    steps = Step.objects.filter(run=OuterRef("pk"))
    parked = Exists(steps.filter(status=StepStatus.PARKED))
    live = ~Q(status__in=TERMINAL_RUN_STATUSES)
    if what == "decision":
        return live & Q(parked)
    return live & ~Q(parked) & Q(Exists(steps.filter(status=StepStatus.WAITING)))


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


def day_bounds(since: date | None, until: date | None) -> tuple[datetime | None, datetime | None]:
    """A UTC day range (both inclusive; None: open) as the time range [start, end) it
    covers: what :class:`RunFilter` takes. A range on the timestamp itself (not on its
    ``__date``) lets the database use the column's index."""
    start = datetime.combine(since, time.min, tzinfo=UTC) if since else None
    end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC) if until else None
    return start, end


@dataclass(frozen=True)
class RunFilter:
    """Which runs a run list, a dashboard count or a cost report covers: one set of
    criteria, so the list and the reports cannot drift apart. None (False) is "any".

    - ``graph_id``; ``version``: a version number of that graph (needs ``graph_id``);
    - ``status`` (a RunStatus), ``waiting_for`` (``"approval"`` / ``"decision"``, see
      :func:`with_waiting_for`; run lists only), ``user`` (username of who started it),
      ``run_id``;
    - ``search``: a run id (``"123"`` or ``"#123"``), or text the run's input JSON
      contains (case-insensitive; the JSON as the database writes it out);
    - ``start`` (inclusive) / ``end`` (exclusive): a time range. WHICH timestamp it bounds
      belongs to the reader: a run's ``created_at`` for run lists and budgets, an
      attempt's ``started_at`` for spend (what a day's bill holds). See :func:`day_bounds`;
    - ``include_tests``: one-node test runs from the builder count too (they also count
      when ``run_id`` names one).
    """

    graph_id: int | None = None
    version: int | None = None
    status: str | None = None
    waiting_for: str | None = None
    user: str | None = None
    run_id: int | None = None
    search: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    include_tests: bool = False

    def runs_q(self, path: str = "") -> Q:
        """The run criteria (all but the time range and ``waiting_for``) as a Q on Run, or
        on a model that reaches Run through ``path`` (e.g. ``"step__run__"``)."""
        q = Q()
        if not self.include_tests and self.run_id is None:
            q &= Q(**{f"{path}is_test": False})
        given = {
            "graph_version__graph_id": self.graph_id,
            "graph_version__number": self.version,
            "status": self.status or None,
            "created_by__username": self.user or None,
            "id": self.run_id,
        }
        q &= Q(**{f"{path}{k}": v for k, v in given.items() if v is not None})
        return q

    def period_q(self, field: str) -> Q:
        """The time range on ``field`` (a datetime column path)."""
        return Q(**{k: v for k, v in ((f"{field}__gte", self.start), (f"{field}__lt", self.end)) if v is not None})

    def search_q(self) -> Q | None:
        """``search`` as a Q on Run (None: no search). A number matches that run id OR
        input text containing it; the input match reads each run's input (no index can
        serve a substring of JSON): pair it with other filters on big lists."""
        text = (self.search or "").strip()
        if not text:
            return None
        q = Q(input_text__icontains=text)
        digits = text.removeprefix("#")
        if digits.isdigit() and len(digits) <= 18:
            q |= Q(pk=int(digits))
        return q


def run_list(*, viewer: Any, filters: RunFilter | None = None) -> QuerySet[Run]:
    """Runs, newest first, annotated with ``waiting_for`` and ``event_seq``, narrowed by
    ``filters`` (its time range bounds ``created_at``). Only the runs ``viewer`` may read
    (None: every run)."""
    f = filters or RunFilter()
    qs = with_event_seq(with_waiting_for(Run.objects.select_related("graph_version__graph", "created_by").order_by("-id")))
    if viewer is not None:
        qs = qs.filter(readable_runs_q(viewer))
    qs = qs.filter(f.runs_q(), f.period_q("created_at"))
    if f.waiting_for:
        qs = qs.filter(waiting_for_q(f.waiting_for))
    search = f.search_q()
    if search is not None:
        qs = qs.annotate(input_text=Cast("input", TextField())).filter(search)
    return qs


def run_status_counts(*, viewer: Any, filters: RunFilter) -> dict[str, int]:
    """How many runs ``filters`` covers (time range on ``created_at``), per status, of the
    runs ``viewer`` may read: one GROUP BY query (the dashboard's "last 24 hours")."""
    qs = Run.objects.order_by()
    if viewer is not None:
        qs = qs.filter(readable_runs_q(viewer))
    qs = qs.filter(filters.runs_q(), filters.period_q("created_at"))
    return dict(qs.values_list("status").annotate(n=Count("id")).values_list("status", "n"))


def with_event_seq(queryset: QuerySet[Run]) -> QuerySet[Run]:
    """``queryset`` annotated with ``event_seq``: the seq of each run's last committed
    event (its RunEventCounter row; 0 before the first), in the same query."""
    last = Subquery(RunEventCounter.objects.filter(run_id=OuterRef("pk")).values("last")[:1])
    return queryset.annotate(event_seq=Coalesce(last, Value(0), output_field=BigIntegerField()))


def run_get(*, run_id: int) -> Run:
    """One run with its graph version, annotated with ``waiting_for`` and ``event_seq``.
    Raises Run.DoesNotExist."""
    return with_event_seq(with_waiting_for(Run.objects.select_related("graph_version__graph", "created_by"))).get(pk=run_id)


# A fork of a fork of a fork...: how far up the chain a run page looks for kept nodes.
FORK_CHAIN_LIMIT = 20


def run_fork_origin(*, run: Run) -> dict[str, Any] | None:
    """Where a forked run came from, for its page: ``{"run": source id, "step": anchor step
    id, "node_id": the anchor's node, "kept_nodes": [node ids]}``, or None for a run that
    is not a fork (or whose source or anchor step was deleted).

    ``kept_nodes`` are the nodes whose results the fork kept rather than ran: the source's
    committed top-level steps up to and including the anchor (engine ``fork_kept_steps``)
    and, when the source is itself a fork, the nodes it kept in turn (up to
    FORK_CHAIN_LIMIT forks up), each once, in commit order. The fork has no steps of its
    own for them: without this its page would draw them as never reached."""
    if run.forked_from_id is None or run.forked_from_step_id is None:
        return None
    origin: dict[str, Any] | None = None
    kept: list[str] = []
    current = run
    for _ in range(FORK_CHAIN_LIMIT):
        if current.forked_from_id is None or current.forked_from_step_id is None:
            break
        source = Run.objects.filter(pk=current.forked_from_id).first()
        anchor = Step.objects.filter(pk=current.forked_from_step_id).first()
        if source is None or anchor is None:
            break
        if origin is None:
            origin = {"run": source.pk, "step": anchor.pk, "node_id": anchor.node_id}
        # The source's own kept nodes come before its steps: they committed earlier.
        kept = [s.node_id for s in engine_api.fork_kept_steps(source, anchor)] + kept
        current = source
    if origin is None:
        return None
    origin["kept_nodes"] = list(dict.fromkeys(kept))
    return origin


def run_tested_node(*, run: Run, steps: list[dict[str, Any]] | None = None) -> str | None:
    """The node a node-test run (``is_test``) tested: its first top-level step's node (the
    run starts at the tested node, then the harness's end node); None for other runs.
    ``steps`` (serialized, in creation order) saves the query when already read."""
    if not run.is_test:
        return None
    if steps is not None:
        return next((s["node_id"] for s in steps if s.get("parent") is None), None)
    return Step.objects.filter(run=run, parent__isnull=True).order_by("id").values_list("node_id", flat=True).first()


# The actor name the CLI commands audit their run starts under (run_graph).
CLI_ACTOR = "cli"


def run_started_from(*, run: Run) -> str | None:
    """Where a run started that no user started: ``"command line"`` when its ``run.start``
    audit entry names the CLI actor, else None (a user's run, or no honest source)."""
    return runs_started_from(runs=[run]).get(run.pk)


def runs_started_from(*, runs: list[Run]) -> dict[int, str]:
    """:func:`run_started_from` for many runs (a page of the run list): ``{run id: "command
    line"}`` for those the CLI started, no entry for the others. One query, on the runs no
    user started only (the audit table's (scope, seq) unique index finds their chains)."""
    userless = {f"run:{r.pk}": r.pk for r in runs if r.created_by_id is None}
    if not userless:
        return {}
    scopes = AuditEntry.objects.filter(scope__in=list(userless), action="run.start", object_type="run", actor=CLI_ACTOR)
    return {userless[scope]: "command line" for scope in scopes.values_list("scope", flat=True)}


def step_list(*, run: Run) -> QuerySet[Step]:
    """The run's steps in creation order."""
    return Step.objects.filter(run=run).order_by("id")


def step_get(*, step_id: int) -> Step:
    """One step with its attempts, its child steps (an agent's turns and calls, oldest
    first) and its run: three queries. Raises Step.DoesNotExist."""
    children = Prefetch("children", queryset=Step.objects.order_by("id"))
    return Step.objects.select_related("run__graph_version__graph").prefetch_related("attempts", children).get(pk=step_id)


def step_get_bare(*, step_id: int) -> Step:
    """One step with its run and graph (one query, no attempts). Raises Step.DoesNotExist."""
    return Step.objects.select_related("run__graph_version__graph").get(pk=step_id)


def step_input_state(*, step: Step) -> dict[str, Any] | None:
    """The run state as committed when ``step``'s latest attempt started (what the engine
    handed its node): the state after the last top-level commit that finished at or before
    ``started_at`` (seq 0, the initial state, when none had). Two queries, no replay; None
    for a step that never started. Writes made outside a step at that time (a fork's
    patch, an approval's edited values) are the state of the step they committed with."""
    if step.started_at is None:
        return None
    seq = (
        Step.objects.filter(run_id=step.run_id, parent__isnull=True, state_seq__isnull=False, finished_at__lte=step.started_at)
        .exclude(pk=step.pk).aggregate(seq=Max("state_seq"))["seq"]
    )
    state, _ = RunStateKey.state_at(step.run_id, seq or 0)
    return state


def step_previous_commit(*, step: Step) -> int | None:
    """The id of the top-level step of ``step``'s run that committed just before it (the
    greatest ``state_seq`` below its own), or None: one indexed query."""
    if step.state_seq is None:
        return None
    return (
        Step.objects.filter(run_id=step.run_id, parent__isnull=True, state_seq__lt=step.state_seq)
        .order_by("-state_seq").values_list("id", flat=True).first()
    )


def run_events_after(*, run: Run, after: int = 0, limit: int = 100) -> tuple[list[RunEvent], bool]:
    """Events of ``run`` with id > ``after``, oldest first, at most ``limit``; and whether
    more follow. Ids increase with commit order of each run's events (the run row lock
    serialises them), so ``after`` is a complete cursor."""
    rows = list(RunEvent.objects.filter(run=run, id__gt=after).order_by("id")[: limit + 1])
    return rows[:limit], len(rows) > limit


def _tokens(key: str) -> Any:
    return Coalesce(Sum(Cast(KeyTextTransform(key, "usage"), BigIntegerField())), Value(0), output_field=BigIntegerField())


# Why an attempt ran (never stored: worked out from the attempt before it, so it cannot
# drift from the attempt rows). "first": attempt 1, or the attempt that continues a step
# after its child steps (an agent that replays after a suspension is not repeating
# itself); "retry": the attempt before failed (the node's retry policy, or a run retry
# from the failed step); "crash_rerun": the attempt before was lost (its worker died and
# recovery re-ran the step). Retries and crash re-runs are spend a first attempt would
# not have cost, which is why the cost reports show them apart.
ATTEMPT_CAUSES = ("first", "retry", "crash_rerun")
_MONEY = DecimalField(max_digits=24, decimal_places=12)


def with_attempt_cause(queryset: QuerySet[StepAttempt]) -> QuerySet[StepAttempt]:
    """``queryset`` annotated with ``cause`` (one of ATTEMPT_CAUSES). One correlated
    probe per attempt on the (step, number) unique index."""
    before = StepAttempt.objects.filter(step_id=OuterRef("step_id"), number=OuterRef("number") - 1)
    return queryset.annotate(
        cause=Case(
            When(number__lte=1, then=Value("first")),
            When(Exists(before.filter(status=AttemptStatus.LOST)), then=Value("crash_rerun")),
            When(Exists(before.filter(status=AttemptStatus.FAILED)), then=Value("retry")),
            default=Value("first"),
            output_field=CharField(),
        )
    )


def _spend(cause: str | None = None) -> Any:
    """Sum of priced spend (of one cause, or of all): an unpriced attempt adds nothing here
    and is counted by ``_unpriced`` instead, so an unknown price never reads as $0."""
    value = F("cost_usd") if cause is None else Case(When(cause=cause, then=F("cost_usd")), default=Value(None), output_field=_MONEY)
    return Coalesce(Sum(value, output_field=_MONEY), Value(Decimal(0)), output_field=_MONEY)


def _unpriced() -> Any:
    return Count("id", filter=Q(cost_usd__isnull=True))


def _cost_columns() -> dict[str, Any]:
    """The aggregate columns every cost row and the totals share (see cost_aggregate).
    ``cost_usd`` comes last: once it names the aggregate, ``cost_usd`` in the other
    columns would mean the sum, not the attempt's column."""
    columns: dict[str, Any] = {
        "input_tokens": _tokens("input_tokens"),
        "output_tokens": _tokens("output_tokens"),
        "cached_input_tokens": _tokens("cached_input_tokens"),
        "cache_write_tokens": _tokens("cache_write_tokens"),
        "attempts": Count("id"),
        "unpriced_attempts": _unpriced(),
    }
    for cause in ATTEMPT_CAUSES[1:]:
        columns[f"{cause}_cost_usd"] = _spend(cause)
        columns[f"{cause}_attempts"] = Count("id", filter=Q(cause=cause))
        columns[f"{cause}_unpriced_attempts"] = Count("id", filter=Q(cause=cause, cost_usd__isnull=True))
    columns["cost_usd"] = _spend()
    return columns


COST_ORDERS = ("key", "-cost_usd")


def cost_attempts(*, viewer: Any, filters: RunFilter | None = None, model: str | None = None) -> QuerySet[StepAttempt]:
    """The step attempts that carry spend (a cost, or usage with no known price) of the
    runs ``filters`` covers, whose ``started_at`` falls in its time range, of ``model``
    when given, annotated with ``cause``: what every cost report aggregates (see
    :func:`cost_aggregate`)."""
    f = filters or RunFilter()
    qs = StepAttempt.objects.filter(Q(cost_usd__isnull=False) | Q(usage__isnull=False))
    if viewer is not None:
        qs = qs.filter(step__run__in=Run.objects.filter(readable_runs_q(viewer)).values("pk"))
    qs = qs.filter(f.runs_q("step__run__"), f.period_q("started_at"))
    if model:
        qs = qs.filter(usage__model=model)
    return with_attempt_cause(qs)


def cost_aggregate(
    *,
    viewer: Any,
    group_by: str,
    filters: RunFilter | None = None,
    model: str | None = None,
    order: str = "key",
) -> QuerySet[Any]:
    """Spend grouped by ``group_by`` (one of COST_GROUPS), one database query.

    The spend of the runs ``filters`` covers (:class:`RunFilter`: graph, run, ...; one-node
    test runs left out unless ``include_tests`` or ``run_id`` names one); its time range
    bounds each attempt's ``started_at`` (:func:`day_bounds` for UTC days).

    Rows are dicts: the group's ``key`` (and ``label``; ``run`` for a step, ``graph`` for
    a node) plus ``cost_usd`` (Decimal, priced attempts only), ``unpriced_attempts``
    (attempts with usage but no known price: their cost is unknown, not zero),
    ``input_tokens``, ``output_tokens``, ``cached_input_tokens`` (cache reads),
    ``cache_write_tokens`` (cache writes), ``attempts``, and for
    each cause other than "first" (ATTEMPT_CAUSES) ``<cause>_cost_usd``,
    ``<cause>_attempts`` and ``<cause>_unpriced_attempts``. The day is the UTC day an
    attempt started. Only the spend of runs
    ``viewer`` may read counts (None: every run). ``order`` is "key" or "-cost_usd"
    (costliest first, ties by key). Raises ValueError for an unknown group or order.
    """
    if order not in COST_ORDERS:
        raise ValueError(f"order must be one of {COST_ORDERS}")
    qs: QuerySet[StepAttempt, Any] = cost_attempts(viewer=viewer, filters=filters, model=model)
    if group_by == "step":
        qs = qs.values(key=F("step_id"), label=F("step__node_id"), run=F("step__run_id"))
    elif group_by == "run":
        qs = qs.values(key=F("step__run_id"), label=F("step__run__graph_version__graph__name"))
    elif group_by == "graph":
        qs = qs.values(key=F("step__run__graph_version__graph_id"), label=F("step__run__graph_version__graph__name"))
    elif group_by == "node":
        qs = qs.values(key=F("step__node_id"), graph=F("step__run__graph_version__graph_id"), label=F("step__run__graph_version__graph__name"))
    elif group_by == "model":
        qs = qs.values(key=KeyTextTransform("model", "usage"), label=KeyTextTransform("provider", "usage"))
    elif group_by == "day":
        qs = qs.values(key=TruncDate("started_at"), label=Value(""))
    else:
        raise ValueError(f"group_by must be one of {COST_GROUPS}")
    qs = qs.annotate(**_cost_columns())
    if order == "-cost_usd":
        return qs.order_by("-cost_usd", "key")
    return qs.order_by("key")


def cost_totals(*, viewer: Any, filters: RunFilter | None = None, model: str | None = None) -> dict[str, Any]:
    """The totals of :func:`cost_aggregate` over every group (same filters, no
    ``group_by``): one aggregate query, so the totals and the grouped rows always agree."""
    return cost_attempts(viewer=viewer, filters=filters, model=model).aggregate(**_cost_columns())


def cost_budgets(*, viewer: Any, filters: RunFilter | None = None) -> QuerySet[Any]:
    """Spend against budgets, per graph, over the runs ``filters`` covers (its time range
    bounds their ``created_at``) that ``viewer`` may read and that carried a USD budget (the graph's run
    settings, or one given at start). Rows: ``graph``, ``label`` (its name), ``runs``,
    ``budget_usd`` (the largest per-run budget among them), ``cost_usd`` (their spend),
    ``max_run_cost_usd``, ``near_budget`` (runs that spent 80% of their budget or more)
    and ``stopped_by_budget`` (runs the runtime stopped before a step would exceed it).
    One query. A run's spend is its committed total (``Run.cost_usd``), what its budget
    is checked against."""
    f = filters or RunFilter()
    qs = Run.objects.filter(budget_usd__isnull=False)
    if viewer is not None:
        qs = qs.filter(readable_runs_q(viewer))
    qs = qs.filter(f.runs_q(), f.period_q("created_at"))
    return (
        qs.values(graph=F("graph_version__graph_id"), label=F("graph_version__graph__name"))
        .annotate(
            # Aggregates named like a column come last (after them the name means the sum).
            runs=Count("id"),
            max_run_cost_usd=Coalesce(Max("cost_usd"), Value(Decimal(0)), output_field=_MONEY),
            near_budget=Count("id", filter=Q(cost_usd__gte=F("budget_usd") * Decimal("0.8"))),
            stopped_by_budget=Count("id", filter=Q(error__code="budget_exceeded")),
            budget_usd=Max("budget_usd"),
            cost_usd=Coalesce(Sum("cost_usd"), Value(Decimal(0)), output_field=_MONEY),
        )
        .order_by("label", "graph")
    )


def audit_list(
    *,
    action: str | None = None,
    actor: str | None = None,
    actor_type: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    scope: str | None = None,
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[AuditEntry]:
    """Audit entries, newest first, filtered by exact values and by the UTC day range
    they were written in (``since``/``until`` inclusive)."""
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
    return _filter_given(qs, created_at__date__gte=since, created_at__date__lte=until)


def audit_versions(*, entries: list[AuditEntry]) -> dict[int, dict[str, Any]]:
    """The graph versions ``entries`` name, by version id: ``{"id", "number", "graph",
    "graph_name", "is_test"}``. An entry names a version as its object (``graph.publish``)
    or as ``data["graph_version"]`` (``run.start``, ``run.test_node``); the chained entry
    keeps the id, this gives the number people know it by. One query for a page of entries;
    a version deleted since (with its graph) is absent."""
    ids = {version_id for e in entries if (version_id := audit_version_id(e)) is not None}
    if not ids:
        return {}
    rows = GraphVersion.objects.filter(pk__in=ids).values("pk", "number", "graph_id", "graph__name", "is_test")
    return {
        r["pk"]: {"id": r["pk"], "number": r["number"], "graph": r["graph_id"], "graph_name": r["graph__name"], "is_test": r["is_test"]}
        for r in rows
    }


def audit_version_id(entry: AuditEntry) -> int | None:
    """The id of the graph version ``entry`` names (its object, else ``data["graph_version"]``), or None."""
    if entry.object_type == "graphversion" and entry.object_id.isdigit():
        return int(entry.object_id)
    value = entry.data.get("graph_version") if isinstance(entry.data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def audit_facets() -> dict[str, list[str]]:
    """The distinct actions, actor types and object types in the audit log, sorted: the
    choices of the audit page's filters (three DISTINCT queries; actions are indexed and
    each list is as short as the code's vocabulary)."""
    return {
        field: sorted(v for v in AuditEntry.objects.order_by().values_list(field, flat=True).distinct() if v)
        for field in ("action", "actor_type", "object_type")
    }


def _owner_pid(owner: str) -> int | None:
    """The pid of a ``host:pid:start`` worker id (None when malformed)."""
    parts = owner.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _owner_cluster(owner: str, clusters: list[Worker], this_host: str) -> Worker | None:
    """The cluster (Worker row) a lease owner belongs to: the cluster whose pid is the
    owner's or, on this host, one of its ancestors' (psutil); on another host the only
    cluster there, else None (cannot tell which)."""
    host, pid = owner.rsplit(":", 2)[0] if owner.count(":") >= 2 else "", _owner_pid(owner)
    on_host = [c for c in clusters if c.host == host]
    for cluster in on_host:
        if cluster.pid == pid:
            return cluster
    if host == this_host and pid is not None:
        try:
            ancestors = {p.pid for p in psutil.Process(pid).parents()}
        except (psutil.Error, OSError):
            ancestors = set()
        for cluster in on_host:
            if cluster.pid in ancestors:
                return cluster
    return on_host[0] if len(on_host) == 1 else None


def workers_overview(*, viewer: Any = None, now: datetime | None = None) -> dict[str, Any]:
    """What the workers page shows: every registered cluster (``Worker`` row: name, host,
    pid, started_at, heartbeat_at, seconds since its heartbeat, ``alive``) with the
    running steps it holds, the running steps no registered cluster holds, and the queue
    depth (steps ``ready`` to run now, ``scheduled`` for later (a retry backoff),
    ``waiting`` at an approval gate, ``parked`` for a decision). Three queries plus a
    process-table lookup per lease owner on this host. ``alive``: a heartbeat within
    ``heartbeat_window()`` seconds and, on this host, a process that still exists.

    With a ``viewer``, steps of runs the viewer may not read (policy.readable_runs_q: a
    graph's named operator reads that graph's runs, not every graph's) are left out of
    ``in_flight`` and ``unattributed`` and only counted (``in_flight_hidden``,
    ``unattributed_hidden``): their run ids, graph names and node ids are not the viewer's
    to see, but a busy worker should not look idle. The queue depth stays global."""
    now = now or timezone.now()
    window = engine_api.heartbeat_window()
    clusters = list(Worker.objects.order_by("host", "name"))
    running = list(
        Step.objects.filter(status=StepStatus.RUNNING)
        .select_related("run__graph_version__graph")
        .order_by("id")[:2000]
    )
    readable = (
        None if viewer is None
        else set(Run.objects.filter(readable_runs_q(viewer), pk__in={s.run_id for s in running}).values_list("pk", flat=True))
    )
    held: dict[int, list[Step]] = {c.pk: [] for c in clusters}
    hidden: dict[int | None, int] = {c.pk: 0 for c in clusters} | {None: 0}
    unattributed: list[Step] = []
    for step in running:
        cluster = _owner_cluster(step.lease_owner, clusters, engine_api.HOST)
        if readable is not None and step.run_id not in readable:
            hidden[cluster.pk if cluster is not None else None] += 1
            continue
        (held[cluster.pk] if cluster is not None else unattributed).append(step)
    counts = dict(
        Step.objects.filter(status__in=(StepStatus.PENDING, StepStatus.WAITING, StepStatus.PARKED))
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    ready = Step.objects.filter(Q(available_at__isnull=True) | Q(available_at__lte=now), status=StepStatus.PENDING).count()
    workers = []
    for c in clusters:
        silent = (now - c.heartbeat_at).total_seconds()
        dead_here = c.host == engine_api.HOST and engine_api.owner_is_dead(c.name)
        workers.append({
            "name": c.name, "host": c.host, "pid": c.pid, "started_at": c.started_at, "heartbeat_at": c.heartbeat_at,
            "seconds_since_heartbeat": max(0.0, silent), "alive": silent <= window and not dead_here, "in_flight": held[c.pk],
            "in_flight_hidden": hidden[c.pk],
        })
    return {
        "workers": workers,
        "unattributed": unattributed,
        "unattributed_hidden": hidden[None],
        "queue": {
            "ready": ready,
            "scheduled": counts.get(StepStatus.PENDING, 0) - ready,
            "waiting": counts.get(StepStatus.WAITING, 0),
            "parked": counts.get(StepStatus.PARKED, 0),
            "running": len(running),
        },
        "heartbeat_window_seconds": window,
        "checked_at": now,
    }
