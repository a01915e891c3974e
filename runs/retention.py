"""Retention: prune finished runs past their graph's retention, in bounded batches, keeping
daily cost rollups and audit tombstones (README "Retention").

Which runs go. A run is *due* when it finished (succeeded, failed, cancelled) more than
its retention ago: its graph's ``retention_days``, else ``BALLAST_RETENTION_DAYS`` (unset:
kept forever); a one-node test run from the builder keeps the shorter of that and
``BALLAST_TEST_RUN_RETENTION_DAYS`` (default 7). A run with a step still pending, running,
waiting at a gate, parked or suspended is never due, whatever its status says.

How. :func:`prune` takes up to ``batch_size`` due runs per transaction: locks them (skip
locked: a run some other transaction holds is left for the next prune), writes the cost
rollups of their step attempts (:class:`CostRollup`, the report's columns per UTC day,
graph, node, model, ...), deletes them with their steps, attempts, events, state rows and
approvals (the foreign keys' CASCADE), and commits; each transaction holds its locks only
for one batch. Then test snapshot versions no run is pinned to any more, past the test
retention. Then audit: when ``BALLAST_AUDIT_RETENTION_DAYS`` is set, the ``run:<id>`` chain
of a run that is gone, whose last entry is older than that, is cut whole and tombstoned
(audit.chain.audit_prune_chains). The run chains of runs that still exist are kept. The
long-lived chains (``graph:``, ``user:``, ``auth``, ...) lose their entries older than that,
``BALLAST_AUDIT_CUT_BATCH`` per transaction, each cut leaving a checkpoint the rest of the
chain verifies from (audit.chain.audit_cut_chain).

Dry run: the same selection, counted, nothing deleted.

The database clock is not needed: ``now`` is the caller's (the prune job's) and only
compared with ``finished_at`` days ago; a skew of seconds moves nothing that matters.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Count, Exists, F, Max, OuterRef, Q, Subquery, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate

from audit.chain import RETENTION_SCOPE, audit_cut_chain, audit_prune_chains
from audit.models import AuditChain, AuditEntry
from graphs.models import Graph, GraphVersion
from runs.models import (
    ACTIVE_STEP_STATUSES,
    TERMINAL_RUN_STATUSES,
    AttemptStatus,
    CostRollup,
    Run,
    RunEvent,
    RunStateKey,
    Step,
    StepAttempt,
)
from runs.reports.selectors import cost_columns, with_attempt_cause


@dataclass
class PruneReport:
    """What :func:`prune` deleted (or, with ``dry_run``, would delete): row counts per
    table, the rollup rows written, the run audit chains cut whole (and their entries),
    the checkpoints written in long-lived chains (``audit_checkpoints``; a dry run: the
    chains that would be cut) and the entries those cuts deleted (``audit_cut_entries``),
    chains kept because they did not verify (``refused_chains``), the transactions
    (``batches``) and the longest one in seconds (how long its locks were held), and
    ``more``: work was left because ``max_batches`` was reached."""

    dry_run: bool
    runs: int = 0
    test_runs: int = 0
    steps: int = 0
    attempts: int = 0
    events: int = 0
    state_keys: int = 0
    snapshot_versions: int = 0
    rollups: int = 0
    audit_chains: int = 0
    audit_entries: int = 0
    audit_checkpoints: int = 0
    audit_cut_entries: int = 0
    refused_chains: list[str] = field(default_factory=list)
    batches: int = 0
    longest_batch_seconds: float = 0.0
    more: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _days(value: int | None) -> timedelta | None:
    return None if not value else timedelta(days=value)


def due_runs_q(now: datetime) -> Q:
    """A filter on Run: the finished runs whose retention has passed at ``now`` (see the
    module docstring). Built from the distinct ``retention_days`` values graphs name (a
    few), so the database compares ``finished_at`` with constants and can use its index."""
    default = settings.BALLAST_RETENTION_DAYS
    test = settings.BALLAST_TEST_RUN_RETENTION_DAYS
    per_graph = {d for d in Graph.objects.exclude(retention_days=None).values_list("retention_days", flat=True).distinct() if d}
    graph_days = "graph_version__graph__retention_days"
    q = Q(pk__in=[])  # nothing, OR-ed with each case below
    # Runs of graphs that name no retention: the defaults.
    if default:
        q |= Q(**{f"{graph_days}__isnull": True}, is_test=False, finished_at__lt=now - timedelta(days=default))
    if test:
        q |= Q(**{f"{graph_days}__isnull": True}, is_test=True, finished_at__lt=now - timedelta(days=test))
    # Runs of graphs that do: theirs (test runs: the shorter of it and the test default).
    for days in sorted(per_graph):
        q |= Q(**{graph_days: days}, is_test=False, finished_at__lt=now - timedelta(days=days))
        q |= Q(**{graph_days: days}, is_test=True, finished_at__lt=now - timedelta(days=min(days, test or days)))
    active = Step.objects.filter(run_id=OuterRef("pk"), status__in=ACTIVE_STEP_STATUSES)
    return q & Q(status__in=TERMINAL_RUN_STATUSES, finished_at__isnull=False) & ~Q(Exists(active))


def _rollups_of(step_ids: list[int]) -> list[CostRollup]:
    """The cost rollup rows of these steps' attempts that carry spend (what the cost
    report counts), one per (UTC day, graph, version, node, provider, model, status,
    test, starter): one aggregate query. By step id, not by run id through a join: the
    planner then starts from the attempts' (step, number) index instead of scanning."""
    attempts = with_attempt_cause(
        StepAttempt.objects.filter(Q(cost_usd__isnull=False) | Q(usage__isnull=False), step_id__in=step_ids)
    )
    groups = attempts.values(
        day=TruncDate("started_at"),
        graph_ref=F("step__run__graph_version__graph_id"),
        name=F("step__run__graph_version__graph__name"),
        version=F("step__run__graph_version__number"),
        node=F("step__node_id"),
        provider_name=KeyTextTransform("provider", "usage"),
        model_name=KeyTextTransform("model", "usage"),
        run_status=F("step__run__status"),
        test=F("step__run__is_test"),
        starter=F("step__run__created_by_id"),
    ).annotate(
        # What manage.py cost_report shows beside the report's columns (before cost_columns,
        # whose last column renames cost_usd to the sum).
        failed_attempts=Count("id", filter=Q(status__in=(AttemptStatus.FAILED, AttemptStatus.LOST))),
        reasoning_tokens=Coalesce(Sum(Cast(KeyTextTransform("reasoning_tokens", "usage"), BigIntegerField())), Value(0)),
        **cost_columns(),
    )
    rows = []
    g: dict[str, Any]
    for g in groups.order_by():  # type: ignore[assignment]  # values() rows plus the annotations
        rows.append(
            CostRollup(
                day=g["day"], graph_id=g["graph_ref"], graph_name=g["name"], version_number=g["version"], node_id=g["node"],
                provider=g["provider_name"], model=g["model_name"], status=g["run_status"], is_test=g["test"],
                created_by_id=g["starter"],
                **{name: g[name] for name in (
                    "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens", "attempts",
                    "unpriced_attempts", "cost_usd", "retry_cost_usd", "retry_attempts", "retry_unpriced_attempts",
                    "crash_rerun_cost_usd", "crash_rerun_attempts", "crash_rerun_unpriced_attempts",
                    "failed_attempts", "reasoning_tokens",
                )},
            )  # fmt: skip
        )
    return rows


def _count_children(report: PruneReport, runs: Any) -> None:
    """Add the rows that go with ``runs`` (a Run queryset or id list) to ``report``."""
    report.steps += Step.objects.filter(run_id__in=runs).count()
    report.attempts += StepAttempt.objects.filter(step__run_id__in=runs).count()
    report.events += RunEvent.objects.filter(run_id__in=runs).count()
    report.state_keys += RunStateKey.objects.filter(run_id__in=runs).count()


def _no_jit() -> None:
    """Turn PostgreSQL's JIT off for the current transaction. The rollup query's many
    correlated subplans (and the due-run filter's joins on a big table) make the planner
    estimate them dear enough to JIT-compile: measured 3.3 s of compiling for a 0.3 s
    query over one batch, all of it with the batch's locks held."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")


def _lock_due(ids: list[int], now: datetime) -> list[int]:
    """Of ``ids``, the runs still due, locked for this transaction (skip locked where the
    database has it: a run an engine transaction holds is left for the next prune)."""
    qs = Run.objects.filter(due_runs_q(now), pk__in=ids).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        qs = qs.select_for_update(skip_locked=True, of=("self",))
    return list(qs.values_list("pk", flat=True))


def prune(
    now: datetime,
    *,
    dry_run: bool = False,
    batch_size: int | None = None,
    max_batches: int | None = None,
    on_batch: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Prune what retention lets go at ``now`` (aware datetime): due runs, unused test
    snapshot versions, and audit chains of pruned runs (module docstring). ``batch_size``
    runs per transaction (default ``BALLAST_RETENTION_BATCH``, at least 1); ``on_batch`` is
    called with the running report after each committed batch (progress, measurements).
    ``max_batches``: stop after that many run batches (a scheduled job's bound per call);
    ``report.more`` then says due runs are left for the next call.
    ``dry_run``: count what would go, delete nothing (the audit chains counted are those of
    runs already gone plus those of the runs due, and the long-lived chains with entries
    past the audit retention). Returns the :class:`PruneReport`."""
    size = max(1, int(batch_size or settings.BALLAST_RETENTION_BATCH))
    report = PruneReport(dry_run=dry_run)
    due = Run.objects.filter(due_runs_q(now))
    if dry_run:
        report.runs = due.count()
        report.test_runs = due.filter(is_test=True).count()
        _count_children(report, due.values("pk"))
        report.snapshot_versions = _unused_snapshots(now, extra_gone=due).count()
        for ids in _chunks(due.order_by("pk").values_list("pk", flat=True), size):
            _count_chains(report, _expired_chains(now, gone=ids))
        if _audit_cutoff(now) is not None:
            for ids in _gone_run_chains(size):
                _count_chains(report, _expired_chains(now, gone=ids))
        _count_cuts(report, now)
        return report
    last = 0
    while max_batches is None or report.batches < max_batches:
        # Candidates read before the batch's transaction, by id, so the lock is held for one batch only.
        with transaction.atomic():
            _no_jit()
            ids = list(due.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            break
        last = ids[-1]
        started = time.monotonic()
        with transaction.atomic():
            _no_jit()
            locked = _lock_due(ids, now)
            if locked:
                step_ids = list(Step.objects.filter(run_id__in=locked).values_list("pk", flat=True))
                rollups = _rollups_of(step_ids)
                CostRollup.objects.bulk_create(rollups)
                report.rollups += len(rollups)
                report.test_runs += Run.objects.filter(pk__in=locked, is_test=True).count()
                # Children first, each one DELETE by run (no row loaded, no SET NULL of
                # events' step ids for steps about to go); then the runs, whose collector
                # takes their steps, approvals and event counters and unlinks forks.
                report.events += RunEvent.objects.filter(run_id__in=locked).delete()[0]
                report.attempts += StepAttempt.objects.filter(step_id__in=step_ids).delete()[0]
                report.state_keys += RunStateKey.objects.filter(run_id__in=locked).delete()[0]
                report.steps += len(step_ids)
                Run.objects.filter(pk__in=locked).delete()
                report.runs += len(locked)
                _prune_audit(report, now, gone=locked)
        report.batches += 1
        report.longest_batch_seconds = max(report.longest_batch_seconds, time.monotonic() - started)
        if on_batch is not None:
            on_batch(report)
    else:
        report.more = due.filter(pk__gt=last).exists()
        if report.more:
            return report  # the bound was reached: snapshots and the audit sweep wait for the last call
    _prune_snapshots(report, now, size)
    _sweep_audit(report, now, size)
    _cut_long_lived(report, now, max_batches=max_batches, on_batch=on_batch)
    return report


def _unused_snapshots(now: datetime, *, extra_gone: Any = None) -> Any:
    """Test snapshot versions past the test retention that no run is pinned to (dry run:
    or only runs in ``extra_gone``, which would go)."""
    days = settings.BALLAST_TEST_RUN_RETENTION_DAYS
    if not days:
        return GraphVersion.objects.none()
    pinned = Run.objects.filter(graph_version_id=OuterRef("pk"))
    if extra_gone is not None:
        pinned = pinned.exclude(pk__in=extra_gone.values("pk"))
    return GraphVersion.objects.filter(is_test=True, created_at__lt=now - timedelta(days=days)).exclude(Exists(pinned))


def _prune_snapshots(report: PruneReport, now: datetime, size: int) -> None:
    """Delete unused test snapshot versions, ``size`` per transaction. A run pinned to one
    between the read and the delete (a node tested again) keeps it: the delete re-checks."""
    while True:
        ids = list(_unused_snapshots(now).order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            return
        with transaction.atomic():
            deleted, _ = _unused_snapshots(now).filter(pk__in=ids).delete()
        report.snapshot_versions += deleted
        if deleted < len(ids):
            return  # the rest became pinned meanwhile: leave them for the next prune


def _audit_cutoff(now: datetime) -> datetime | None:
    days = settings.BALLAST_AUDIT_RETENTION_DAYS
    return None if not days else now - timedelta(days=days)


def _expired_chains(now: datetime, *, gone: list[int]) -> list[str]:
    """The ``run:<id>`` chains of runs ``gone`` whose last entry is older than the audit
    retention (none when audit is kept forever)."""
    cutoff = _audit_cutoff(now)
    if cutoff is None or not gone:
        return []
    scopes = [f"run:{pk}" for pk in gone]
    last = AuditEntry.objects.filter(scope__in=scopes).values("scope").annotate(at=Max("created_at")).order_by()
    return sorted(row["scope"] for row in last if row["at"] < cutoff)


def _prune_audit(report: PruneReport, now: datetime, *, gone: list[int]) -> None:
    """Cut and tombstone the expired chains of runs ``gone`` (in the caller's transaction)."""
    outcome = audit_prune_chains(_expired_chains(now, gone=gone))
    report.audit_chains += len(outcome.pruned)
    report.audit_entries += sum(outcome.pruned.values())
    report.refused_chains = sorted(set(report.refused_chains) | {p.scope for p in outcome.refused})


def _chunks(values: Any, size: int) -> Iterator[list[int]]:
    chunk: list[int] = []
    for value in values.iterator(chunk_size=max(size, 100)):
        chunk.append(value)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _gone_run_chains(size: int) -> Iterator[list[int]]:
    """Ids of runs that no longer exist but whose ``run:<id>`` chain does, ``size`` heads
    read at a time (every ``run:`` head is read once, by id)."""
    last = 0
    while True:
        heads = list(AuditChain.objects.filter(pk__gt=last, scope__startswith="run:").order_by("pk").values_list("pk", "scope")[:size])
        if not heads:
            return
        last = heads[-1][0]
        ids = [int(scope[4:]) for _, scope in heads if scope[4:].isdigit()]
        gone = sorted(set(ids) - set(Run.objects.filter(pk__in=ids).values_list("pk", flat=True)))
        if gone:
            yield gone


def _count_chains(report: PruneReport, scopes: list[str]) -> None:
    report.audit_chains += len(scopes)
    report.audit_entries += sum(AuditChain.objects.filter(scope__in=scopes).values_list("seq", flat=True))


def _sweep_audit(report: PruneReport, now: datetime, size: int) -> None:
    """The chains of runs pruned earlier (audit retention longer than the run's), one
    transaction per ``size`` heads read."""
    if _audit_cutoff(now) is None:
        return
    for gone in _gone_run_chains(size):
        with transaction.atomic():
            _prune_audit(report, now, gone=gone)


def _cut_candidates(cutoff: datetime) -> list[str]:
    """The long-lived chains whose oldest entry is older than ``cutoff``: one index probe
    per chain head (by the (scope, seq) constraint's index), not a scan of old entries,
    most of which belong to run chains."""
    oldest = AuditEntry.objects.filter(scope=OuterRef("scope")).order_by("seq").values("created_at")[:1]
    heads = AuditChain.objects.filter(seq__gt=0).exclude(scope__startswith="run:").exclude(scope=RETENTION_SCOPE)
    return sorted(heads.annotate(oldest=Subquery(oldest)).filter(oldest__lt=cutoff).values_list("scope", flat=True))


def _count_cuts(report: PruneReport, now: datetime) -> None:
    """Dry run: the long-lived chains a prune would cut and the entries it would delete."""
    cutoff = _audit_cutoff(now)
    if cutoff is None:
        return
    scopes = _cut_candidates(cutoff)
    report.audit_checkpoints += len(scopes)
    report.audit_cut_entries += AuditEntry.objects.filter(scope__in=scopes, created_at__lt=cutoff).count()


def _cut_long_lived(
    report: PruneReport, now: datetime, *, max_batches: int | None, on_batch: Callable[[PruneReport], None] | None
) -> None:
    """Cut the long-lived chains' entries past the audit retention, ``BALLAST_AUDIT_CUT_BATCH``
    entries per transaction (each its own checkpoint), counting the transactions against
    ``max_batches`` like the run batches (``report.more`` when the bound stops it)."""
    cutoff = _audit_cutoff(now)
    if cutoff is None:
        return
    limit = max(1, int(settings.BALLAST_AUDIT_CUT_BATCH))
    for scope in _cut_candidates(cutoff):
        while True:
            if max_batches is not None and report.batches >= max_batches:
                report.more = True
                return
            started = time.monotonic()
            outcome = audit_cut_chain(scope, before=cutoff, limit=limit)
            if outcome.refused:
                report.refused_chains = sorted(set(report.refused_chains) | {scope})
            if not outcome.deleted:
                break
            report.audit_checkpoints += 1
            report.audit_cut_entries += outcome.deleted
            report.batches += 1
            report.longest_batch_seconds = max(report.longest_batch_seconds, time.monotonic() - started)
            if on_batch is not None:
                on_batch(report)
            if outcome.deleted < limit:
                break
