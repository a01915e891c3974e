"""Report reads: cost aggregates and budgets, audit entries, workers.

Cost aggregates are for a ``viewer``: they hold only the runs that user may read (the run
filter of runs.selectors); a ``viewer`` of None is a trusted caller (a management command)
and sees everything. They are computed by the database (GROUP BY over step attempts),
never by looping over rows in Python: every attempt's spend counts, including attempts
that failed or were retried, which is what the provider billed. The spend of runs that
retention pruned lives on in daily rollups (:class:`CostRollup`, runs.retention), which
the totals and the graph, node, model and day groups add (:func:`cost_rollups`).
"""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

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
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone

from accounts.policy import BUILDERS, has_role, is_admin, operates_q, readable_runs_q
from audit.models import AuditEntry
from graphs.models import GraphVersion
from runs.engine import api as engine_api
from runs.models import (
    AttemptStatus,
    CostRollup,
    Run,
    Step,
    StepAttempt,
    StepStatus,
    Worker,
)
from runs.selectors import RunFilter, filter_given

COST_GROUPS = ("step", "run", "graph", "node", "model", "day")


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


def cost_columns() -> dict[str, Any]:
    """The cost report's aggregate columns over step attempts annotated with ``cause``
    (:func:`with_attempt_cause`): what a row of the report and a :class:`CostRollup` hold."""
    return _cost_columns()


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
) -> QuerySet[Any] | list[dict[str, Any]]:
    """Spend grouped by ``group_by`` (one of COST_GROUPS), one database query (two and a
    list, merged, when pruned runs' rollups add to the group: :func:`cost_rollups`).

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
    rollups = _rollup_groups(group_by, cost_rollups(viewer=viewer, filters=filters, model=model))
    if rollups is not None and rollups.exists():
        live: list[dict[str, Any]] = list(qs.order_by())  # type: ignore[arg-type]  # rows of a values() query
        return _merged(live, list(rollups), group_by=group_by, order=order)
    if order == "-cost_usd":
        return qs.order_by("-cost_usd", "key")
    return qs.order_by("key")


def cost_totals(*, viewer: Any, filters: RunFilter | None = None, model: str | None = None) -> dict[str, Any]:
    """The totals of :func:`cost_aggregate` over every group (same filters, no
    ``group_by``): the live attempts' aggregate plus the rollups of pruned runs, so the
    totals and the grouped rows always agree."""
    totals = cost_attempts(viewer=viewer, filters=filters, model=model).aggregate(**_cost_columns())
    rolled = cost_rollups(viewer=viewer, filters=filters, model=model).aggregate(**_rollup_sums())
    for name in ROLLUP_SUMS:
        totals[name] = (totals[name] or 0) + (rolled[name] or 0)
    return totals


# The columns a CostRollup sums (the names of the report's columns).
ROLLUP_SUMS = (
    "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens", "attempts", "unpriced_attempts",
    "retry_cost_usd", "retry_attempts", "retry_unpriced_attempts",
    "crash_rerun_cost_usd", "crash_rerun_attempts", "crash_rerun_unpriced_attempts", "cost_usd",
)  # fmt: skip


def _rollup_sums() -> dict[str, Any]:
    """Sums of every ROLLUP_SUMS column, named as the column (money as Decimal, 0 when none)."""
    out: dict[str, Any] = {}
    for name in ROLLUP_SUMS:
        field = _MONEY if name.endswith("cost_usd") else BigIntegerField()
        zero = Value(Decimal(0)) if name.endswith("cost_usd") else Value(0)
        out[name] = Coalesce(Sum(name, output_field=field), zero, output_field=field)
    return out


def cost_rollups(*, viewer: Any, filters: RunFilter | None = None, model: str | None = None) -> QuerySet[CostRollup]:
    """The rollup rows (spend of pruned runs, :class:`CostRollup`) a cost report with
    these arguments adds to its live attempts. ``filters``: graph, version, status, user
    and tests as for runs; a ``run_id`` matches none (a pruned run is gone); the time range
    counts the UTC days that lie wholly inside it (:func:`day_bounds` gives whole days).
    A ``viewer`` who reads every run (admins, builders) reads every rollup; another reads
    those of the runs they started and of the graphs they operate (a run they could read
    only as its approver is not told apart in a rollup, so not counted)."""
    f = filters or RunFilter()
    qs = CostRollup.objects.all()
    if f.run_id is not None or f.search:
        return qs.none()
    if viewer is not None and not (is_admin(viewer) or has_role(viewer, BUILDERS)):
        if not getattr(viewer, "is_active", False):
            return qs.none()
        qs = qs.filter(Q(created_by=viewer) | operates_q(viewer, graph_ref="graph_id"))
    if not f.include_tests:
        qs = qs.filter(is_test=False)
    given = {"graph_id": f.graph_id, "version_number": f.version, "status": f.status or None, "created_by__username": f.user or None}
    qs = qs.filter(**{k: v for k, v in given.items() if v is not None})
    if f.start is not None:
        # A day counts when it starts at or after the range's start...
        first = f.start.astimezone(UTC).date()
        if datetime.combine(first, datetime.min.time(), tzinfo=UTC) < f.start:
            first += timedelta(days=1)
        qs = qs.filter(day__gte=first)
    if f.end is not None:
        # ...and ends at or before its end.
        qs = qs.filter(day__lt=f.end.astimezone(UTC).date())
    if model:
        qs = qs.filter(model=model)
    return qs


def _rollup_groups(group_by: str, rollups: QuerySet[CostRollup]) -> QuerySet[Any] | None:
    """``rollups`` grouped as :func:`cost_aggregate` groups attempts (None: the group,
    a step or a run, cannot hold a pruned run)."""
    if group_by == "graph":
        rows = rollups.values(key=F("graph_id"), label=F("graph__name"))
    elif group_by == "node":
        # "graph_ref": "graph" is the model's field (renamed to "graph" by _merged).
        rows = rollups.values(key=F("node_id"), graph_ref=F("graph_id"), label=F("graph__name"))
    elif group_by == "model":
        rows = rollups.values(key=F("model"), label=F("provider"))
    elif group_by == "day":
        rows = rollups.values(key=F("day"), label=Value(""))
    else:
        return None
    return rows.annotate(**_rollup_sums()).order_by()


def _merged(live: list[dict[str, Any]], rolled: list[dict[str, Any]], *, group_by: str, order: str) -> list[dict[str, Any]]:
    """Live rows and rollup rows of the same groups added up, in ``order``."""
    def ident(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["key"], row.get("graph")) if group_by == "node" else (row["key"],)

    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in live:
        rows[ident(row)] = dict(row)
    for row in rolled:
        if "graph_ref" in row:
            row["graph"] = row.pop("graph_ref")
        have = rows.get(ident(row))
        if have is None:
            rows[ident(row)] = dict(row)
            continue
        for name in ROLLUP_SUMS:
            have[name] = (have[name] or 0) + (row[name] or 0)
        if group_by == "model" and not have.get("label"):
            have["label"] = row.get("label")

    def by_key(row: dict[str, Any]) -> tuple[bool, Any]:
        return (row["key"] is None, row["key"] if row["key"] is not None else "")

    out = sorted(rows.values(), key=by_key)
    if order == "-cost_usd":
        out.sort(key=lambda r: -Decimal(r["cost_usd"] or 0))  # stable: ties keep key order
    return out


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
    return filter_given(qs, created_at__date__gte=since, created_at__date__lte=until)


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
