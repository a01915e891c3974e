"""The retention job: pruning (runs.retention) fired by the engine from one due row, with no cron outside (README "Retention").

The due row is :class:`runs.models.RetentionJob` (one row). A worker cluster's start
(``manage.py qcluster``) makes it, due at once, when it is missing (:func:`retention_job_arm`).
It is a due source of the engine (registered from runs.apps): the claim by due time on
any worker fires it when ``next_due_at`` has passed (database clock), and the recovery
pass rings a doorbell for it, so an idle cluster wakes for it too. Nothing scans for it.

A firing (:func:`retention_fire_next`):

1. claims the row in one short transaction: locks it (``SELECT ... FOR UPDATE SKIP LOCKED``
   on PostgreSQL: a second worker skips it rather than wait; SQLite: IMMEDIATE transactions,
   one writer), re-reads it as due, and moves ``next_due_at`` a lease ahead
   (:data:`LEASE_SECONDS`) with ``running_by`` set. Once that commits, no other worker
   fires it: the row is not due. A worker that dies while pruning leaves it due again
   after the lease.
2. prunes with ``max_batches=BALLAST_RETENTION_MAX_BATCHES``, outside that transaction:
   each batch is its own short transaction (runs.retention), so no lock on the hot tables
   lives longer than one batch, and one firing keeps its worker for a few batches only.
3. re-arms the row (a compare-and-set on ``running_by``): :data:`REARM_SECONDS` ahead
   while the report says due runs are left, else BALLAST_RETENTION_INTERVAL_SECONDS;
   :data:`ERROR_RETRY_SECONDS` ahead after an error (recorded in ``last_report``, then
   raised for the engine to log).

BALLAST_RETENTION_INTERVAL_SECONDS = 0 turns the job off (no due row is ever reported;
``manage.py prune_runs`` from cron still works). With no retention configured anywhere a
firing finds nothing to do at the cost of a couple of queries per interval: it is left on.

Worker processes load this module (it is a due source), so it imports nothing of the web
stack, and runs.retention (the report selectors) only when it fires.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from runs.engine import api as engine
from runs.models import RetentionJob

log = logging.getLogger("ballast.retention")

# How far ahead a firing moves the due row while it prunes: a worker that died mid-prune
# leaves it due again after this (a live firing takes a few batches, seconds).
LEASE_SECONDS = 600
# While due runs are left after a firing's batches: fire again this soon (any worker).
REARM_SECONDS = 2
# After a firing that raised: try again this much later.
ERROR_RETRY_SECONDS = 60


def retention_interval() -> timedelta | None:
    """The time between two prunes (BALLAST_RETENTION_INTERVAL_SECONDS), or None: the job is off."""
    seconds = float(getattr(settings, "BALLAST_RETENTION_INTERVAL_SECONDS", 86400) or 0)
    return timedelta(seconds=seconds) if seconds > 0 else None


def retention_job_arm(now: datetime) -> RetentionJob | None:
    """Make the due row when it is missing, due at ``now`` (aware; the database clock),
    and bring a due time further off than one interval back to ``now`` plus the interval
    (the interval was shortened). Called at a cluster's start; several clusters starting at
    once make one row. Returns the row, or None when the job is off."""
    interval = retention_interval()
    if interval is None:
        return None
    job, _created = RetentionJob.objects.get_or_create(pk=RetentionJob.SINGLETON, defaults={"next_due_at": now})
    if job.next_due_at is None or job.next_due_at > now + max(interval, timedelta(seconds=LEASE_SECONDS)):
        # Never sooner than a lease: a running firing's row is a lease ahead.
        RetentionJob.objects.filter(pk=job.pk, next_due_at=job.next_due_at).update(next_due_at=now + interval)
        job.refresh_from_db()
    return job


def retention_earliest_due(now: datetime) -> datetime | None:
    """The due source's ``earliest_due``: the row's due time when it is due at ``now``,
    else None (also when the job is off or the row is missing). One read by primary key."""
    if retention_interval() is None:
        return None
    due = RetentionJob.objects.filter(pk=RetentionJob.SINGLETON, next_due_at__lte=now).values_list("next_due_at", flat=True).first()
    return due


def _claim(now: datetime, worker: str) -> bool:
    """Step 1 of a firing (module docstring): True when this worker now holds the row."""
    with transaction.atomic():
        rows = RetentionJob.objects.filter(pk=RetentionJob.SINGLETON, next_due_at__lte=now)
        if connection.features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        if not rows.exists():
            return False  # not due, or another worker's firing holds it
        RetentionJob.objects.filter(pk=RetentionJob.SINGLETON).update(
            next_due_at=now + timedelta(seconds=LEASE_SECONDS), running_by=worker, started_at=now
        )
    return True


def _finish(now: datetime, worker: str, next_due_at: datetime, report: dict) -> None:
    """Step 3: re-arm the row, unless another firing took it over after the lease."""
    done = RetentionJob.objects.filter(pk=RetentionJob.SINGLETON, running_by=worker).update(
        next_due_at=next_due_at, running_by="", finished_at=now, last_worker=worker, last_report=report
    )
    if not done:
        log.warning("retention: the firing of %s outlived its lease; another firing holds the row", worker)


def retention_fire_next(now: datetime, worker: str) -> bool:
    """The due source's ``fire_next``: when the row is due at ``now`` (database clock) and
    no other worker holds it, prune (at most BALLAST_RETENTION_MAX_BATCHES batches) and
    re-arm it (module docstring). True when it fired, False when it was not due or was
    held. An error of the prune is recorded in ``last_report`` and raised."""
    if retention_interval() is None or not _claim(now, worker):
        return False
    # Here, not at module level: runs.retention loads the report selectors, which a worker
    # needs only when the job fires.
    from runs.retention import prune

    started = time.monotonic()
    try:
        report = prune(now, max_batches=max(1, int(settings.BALLAST_RETENTION_MAX_BATCHES)))
    except Exception as exc:
        ended = now + timedelta(seconds=time.monotonic() - started)
        _finish(ended, worker, ended + timedelta(seconds=ERROR_RETRY_SECONDS), {"error": f"{type(exc).__name__}: {exc}"})
        raise
    ended = now + timedelta(seconds=time.monotonic() - started)
    interval = retention_interval() or timedelta(seconds=REARM_SECONDS)
    _finish(ended, worker, ended + (timedelta(seconds=REARM_SECONDS) if report.more else interval), report.as_dict())
    if report.runs or report.audit_chains or report.snapshot_versions or report.audit_checkpoints:
        log.info("retention: pruned %d run(s), %d test snapshot(s), %d audit chain(s), %d old audit entries at %d checkpoint(s) in %d batch(es)%s",
                 report.runs, report.snapshot_versions, report.audit_chains, report.audit_cut_entries, report.audit_checkpoints,
                 report.batches, "; more are due" if report.more else "")
    if report.refused_chains:
        log.warning("retention: %d audit chain(s) did not verify and were kept: %s",
                    len(report.refused_chains), ", ".join(report.refused_chains[:20]))
    return True


def register_with_engine() -> None:
    """Register the retention job as a due source of the engine (runs.apps, once per process)."""
    engine.register_due_source(engine.DueSource(name="retention", earliest_due=retention_earliest_due, fire_next=retention_fire_next))
