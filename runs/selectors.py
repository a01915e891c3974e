"""Run reads: runs with filters, steps, events after a cursor, where a run came from.

Lists are for a ``viewer``: they hold only the runs that user may read
(``accounts.policy.readable_runs_q``, applied here, beneath pagination); a ``viewer`` of
None is a trusted caller (a management command) and sees everything. The reads of the
report pages (costs, audit, workers) are runs.reports.selectors'.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    Count,
    Exists,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from accounts.policy import readable_runs_q
from audit.models import AuditEntry
from runs.engine import api as engine_api
from runs.models import (
    DRAFT_SOURCE,
    TERMINAL_RUN_STATUSES,
    Run,
    RunEvent,
    RunEventCounter,
    RunEventKind,
    RunStateKey,
    Step,
    StepAttempt,
    StepStatus,
)

if TYPE_CHECKING:  # django-stubs' helper, installed with the test extras only
    from django_stubs_ext import WithAnnotations

# What a live run waits for, worked out from its step rows (never stored, so it cannot
# drift from them): "decision" when a step is parked (interrupted by a crash, not safe
# to repeat: a person chooses retry, skip or fail), else "approval" when a step waits at
# an approval gate, else None. Parked wins: it blocks its branch until someone decides.
# The kind of a step that waits for a child run (runs.subgraphs), not for a person; a
# waiting child step (an agent's graph tool call) waits for one too.
SUBGRAPH_KIND = "subgraph"
WAITING_FOR = ("approval", "decision", "child_run")


class WaitingFor(TypedDict):
    """The annotation :func:`with_waiting_for` adds to each run."""

    waiting_for: str | None


def with_waiting_for(queryset: QuerySet[Run]) -> QuerySet[WithAnnotations[Run, WaitingFor]]:
    """``queryset`` annotated with ``waiting_for`` (``"decision"``, ``"approval"``,
    ``"child_run"`` or None; None for a finished run): what the run's first parked-or-waiting
    step waits for, a parked step before a gate, a gate before a child run (a subgraph
    step waiting for the run it called). A correlated subquery with LIMIT 1 on the (run,
    status) step index: the database probes it for the rows it returns (a page), never
    hashes every waiting step in the table as it may for an EXISTS, so a page stays one
    query whose cost does not grow with the number of live runs."""
    first_held = (
        Step.objects.filter(run=OuterRef("pk"), status__in=(StepStatus.PARKED, StepStatus.WAITING))
        .annotate(held=Case(
            When(status=StepStatus.PARKED, then=Value("decision")),
            When(Q(kind=SUBGRAPH_KIND) | Q(parent__isnull=False), then=Value("child_run")),
            default=Value("approval"), output_field=CharField(),
        ))  # fmt: skip
        .order_by("status", "held")  # parked first; then a person's gate before a child run
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
    calling = Q(kind=SUBGRAPH_KIND) | Q(parent__isnull=False)
    gates = steps.filter(status=StepStatus.WAITING).exclude(calling)
    if what == "child_run":
        return live & ~Q(parked) & ~Q(Exists(gates)) & Q(Exists(steps.filter(calling, status=StepStatus.WAITING)))
    return live & ~Q(parked) & Q(Exists(gates))


def run_waiting_for(*, run: Run) -> str | None:
    """What ``run`` waits for (see :func:`with_waiting_for`): its annotation when it was
    read through a selector, else one query."""
    if hasattr(run, "waiting_for"):
        return run.waiting_for
    return with_waiting_for(Run.objects.filter(pk=run.pk)).values_list("waiting_for", flat=True).first()


def run_status_now(*, run_id: int) -> tuple[str, str | None]:
    """The run's status and ``waiting_for`` as committed now, in one query."""
    return with_waiting_for(Run.objects.filter(pk=run_id)).values_list("status", "waiting_for").get()


def filter_given(queryset: Any, **lookups: Any) -> Any:
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


def run_parent(*, run: Run) -> dict[str, Any] | None:
    """The run and step that called ``run`` (a subgraph step: runs.subgraphs), for its page:
    ``{"run", "step", "node_id", "graph_name"}``; None for a run nobody called (or whose
    parent was deleted: the link is cleared). One query when it has a parent."""
    if run.parent_step_id is None:
        return None
    row = (
        Step.objects.filter(pk=run.parent_step_id)
        .values("run_id", "node_id", "run__graph_version__graph__name")
        .first()
    )
    if row is None:
        return None
    return {"run": row["run_id"], "step": run.parent_step_id, "node_id": row["node_id"], "graph_name": row["run__graph_version__graph__name"]}


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
    if not run.is_test or run.source == DRAFT_SOURCE:  # a draft run starts at the start node and tests no one node
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


def attempts_with_retry(attempts: QuerySet[StepAttempt]) -> QuerySet[StepAttempt]:
    """``attempts`` in number order, each annotated with ``error_code`` (its error's
    ``code``, None when it did not fail) and ``retry_due`` (for a failed attempt that was
    retried: when the next attempt was due, the end of its backoff, as the ISO text the
    ``step_retrying`` event of that attempt recorded; None otherwise). No extra query: the
    retry time is a correlated subquery on the step's own events (runevent's step index),
    so a prefetch over a whole run stays one query however many attempts it has."""
    # Compared as text on both sides: a value that is not a number (an event written by
    # hand, an older payload) then matches nothing instead of failing PostgreSQL's cast.
    retry = (
        RunEvent.objects.filter(step_id=OuterRef("step_id"), kind=RunEventKind.STEP_RETRYING)
        .annotate(after_attempt=Cast(KT("data__error__attempt"), TextField()))
        .filter(after_attempt=Cast(OuterRef("number"), TextField()))
        .order_by("-id")
        .values(due=KT("data__available_at"))[:1]
    )
    return attempts.order_by("number").annotate(error_code=KT("error__code"), retry_due=Subquery(retry))


def step_get(*, step_id: int) -> Step:
    """One step with its attempts (:func:`attempts_with_retry`), its child steps (an
    agent's turns and calls, oldest first, each with ``called_run``: the run a graph
    tool's call started, else None) and its run: three queries. Raises
    Step.DoesNotExist."""
    called = Run.objects.filter(parent_step=OuterRef("pk")).values("pk")[:1]
    children = Prefetch("children", queryset=Step.objects.annotate(called_run=Subquery(called)).order_by("id"))
    attempts = Prefetch("attempts", queryset=attempts_with_retry(StepAttempt.objects.all()))
    return Step.objects.select_related("run__graph_version__graph").prefetch_related(attempts, children).get(pk=step_id)


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


