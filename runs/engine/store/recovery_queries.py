"""Recovery's reads and writes: worker rows, expired leases, orphaned pending steps.

``owner_is_dead`` arguments are callables ``(lease owner) -> bool`` (runs.engine.workers);
an owner whose liveness cannot be determined must count as alive. Every write is a
compare-and-set: a live worker's lease is never taken back.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from audit.chain import audit
from core import metrics
from runs.engine.store import clock
from runs.engine.store.claims import due_steps
from runs.engine.store.events import create as create_event
from runs.engine.store.graphs import step_repeat_safe
from runs.engine.store.writes import lock_run, park
from runs.engine.workers import owner_is_alive_here
from runs.models import AttemptStatus, HostHeartbeat, Run, RunEventKind, Step, StepAttempt, StepStatus, Worker
from runs.nodes.base import ChildCall

OwnerIsDead = Callable[[str], bool]
OwnerIsAlive = Callable[[str], bool]
log = logging.getLogger("ballast.recovery")


def worker_heartbeat(name: str, host: str, pid: int, started_at: datetime) -> None:
    """Register or refresh a worker row (its heartbeat says a qcluster is alive)."""
    now = clock.now()
    if not Worker.objects.filter(name=name).update(heartbeat_at=now):
        Worker.objects.update_or_create(name=name, defaults={"host": host, "pid": pid, "started_at": started_at, "heartbeat_at": now})


def worker_remove(name: str) -> None:
    """Forget a worker that is shutting down cleanly."""
    Worker.objects.filter(name=name).delete()


def workers_forget_dead(owner_is_dead: OwnerIsDead, *, silent_seconds: float) -> list[str]:
    """Delete the rows of clusters that died (a dead pid on this host, or no heartbeat for
    ``silent_seconds``) and return their names: their prefetched queue entries are lost."""
    cutoff = clock.now() - timedelta(seconds=silent_seconds)
    dead = [name for name, beat in Worker.objects.values_list("name", "heartbeat_at") if beat < cutoff or owner_is_dead(name)]
    if dead:
        Worker.objects.filter(name__in=dead).delete()
    return dead


def workers_alive(within_seconds: float) -> bool:
    """Whether any worker sent a heartbeat in the last ``within_seconds``."""
    return Worker.objects.filter(heartbeat_at__gte=clock.now() - timedelta(seconds=within_seconds)).exists()


# The host heartbeat upsert: the beat, and the start of the current unbroken series of
# beats (a gap longer than the silent window starts a new one). On PostgreSQL every time
# is the database's clock in the statement; on SQLite (one host) the caller's.
_HOST_BEAT_PG = """
    INSERT INTO runs_hostheartbeat (host, beat_at, up_since) VALUES (%(host)s, statement_timestamp(), statement_timestamp())
    ON CONFLICT (host) DO UPDATE SET beat_at = statement_timestamp(),
        up_since = CASE WHEN runs_hostheartbeat.beat_at < statement_timestamp() - make_interval(secs => %(silent)s)
                        THEN statement_timestamp() ELSE runs_hostheartbeat.up_since END
"""
_HOST_BEAT_SQLITE = """
    INSERT INTO runs_hostheartbeat (host, beat_at, up_since) VALUES (%(host)s, %(now)s, %(now)s)
    ON CONFLICT (host) DO UPDATE SET beat_at = %(now)s,
        up_since = CASE WHEN runs_hostheartbeat.beat_at < %(cutoff)s THEN %(now)s ELSE runs_hostheartbeat.up_since END
"""
# Other hosts silent for the window, judged only by a host that has itself beaten
# without a break for the window and beats now: after an outage that stopped every
# host's beats (the database restarted), no host is dead before it could beat again.
_SILENT_HOSTS_PG = """
    SELECT h.host FROM runs_hostheartbeat h JOIN runs_hostheartbeat me ON me.host = %(me)s
    WHERE h.host <> me.host AND h.beat_at < statement_timestamp() - make_interval(secs => %(silent)s)
      AND me.up_since < statement_timestamp() - make_interval(secs => %(silent)s)
      AND me.beat_at >= statement_timestamp() - make_interval(secs => %(silent)s)
"""
_SILENT_HOSTS_SQLITE = """
    SELECT h.host FROM runs_hostheartbeat h JOIN runs_hostheartbeat me ON me.host = %(me)s
    WHERE h.host <> me.host AND h.beat_at < %(cutoff)s AND me.up_since < %(cutoff)s AND me.beat_at >= %(cutoff)s
"""


# Hosts whose heartbeat is fresh (newer than the silent window) on the database's clock.
_BEATING_HOSTS_PG = "SELECT host FROM runs_hostheartbeat WHERE beat_at >= statement_timestamp() - make_interval(secs => %(silent)s)"
_BEATING_HOSTS_SQLITE = "SELECT host FROM runs_hostheartbeat WHERE beat_at >= %(cutoff)s"


def _host_params(silent_seconds: float) -> dict[str, Any]:
    if connection.vendor == "postgresql":
        return {"silent": silent_seconds}
    now = clock.now()
    adapt = connection.ops.adapt_datetimefield_value
    return {"now": adapt(now), "cutoff": adapt(now - timedelta(seconds=silent_seconds))}


def host_beat(host: str, *, silent_seconds: float) -> None:
    """Write ``host``'s heartbeat now (database clock): one upsert, in autocommit.
    ``silent_seconds``: the window after which a host counts as dead (a longer gap since
    its last beat starts a new series, ``HostHeartbeat.up_since``)."""
    sql = _HOST_BEAT_PG if connection.vendor == "postgresql" else _HOST_BEAT_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(sql, {"host": host, **_host_params(silent_seconds)})


def host_forget(host: str) -> None:
    """Delete ``host``'s heartbeat row (its last cluster stops cleanly; another cluster
    there writes it again with its next beat)."""
    HostHeartbeat.objects.filter(host=host).delete()


def silent_hosts(me: str, *, silent_seconds: float) -> set[str]:
    """The hosts other than ``me`` whose heartbeat is older than ``silent_seconds`` on the
    database's clock: dead, as far as ``me`` can judge. Empty unless ``me`` beats now and
    has beaten without a break for the window (see ``HostHeartbeat.up_since``); a host
    without a heartbeat row (an in-process runner, a host that stopped cleanly) is never
    in it. One query on a table of one row per host."""
    sql = _SILENT_HOSTS_PG if connection.vendor == "postgresql" else _SILENT_HOSTS_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(sql, {"me": me, **_host_params(silent_seconds)})
        return {row[0] for row in cursor.fetchall()}


def beating_hosts(*, silent_seconds: float) -> set[str]:
    """The hosts whose heartbeat is newer than ``silent_seconds`` on the database's clock
    (their qcluster's main process beats now). Unlike :func:`silent_hosts` it needs no
    judge: a host with no row, or a stale one, is simply not in it. One query on a table
    of one row per host."""
    sql = _BEATING_HOSTS_PG if connection.vendor == "postgresql" else _BEATING_HOSTS_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(sql, _host_params(silent_seconds))
        return {row[0] for row in cursor.fetchall()}


def hosts_hold_leases(hosts: set[str]) -> bool:
    """Whether a running step is leased to a worker on one of ``hosts``."""
    if not hosts:
        return False
    held = Q()
    for host in hosts:
        held |= Q(lease_owner__startswith=f"{host}:")
    return Step.objects.filter(held, status=StepStatus.RUNNING).exists()


def pids_to_watch(host: str) -> set[int]:
    """Pids on ``host`` whose exit should start a recovery pass at once: the lease owners
    of running steps there (worker ids ``host:pid:start``) and the main processes of the
    clusters registered there (Worker rows). Two indexed reads."""
    pids: set[int] = set()
    owners = Step.objects.filter(status=StepStatus.RUNNING, lease_owner__startswith=f"{host}:").values_list("lease_owner", flat=True).distinct()
    for owner in owners:
        try:
            pids.add(int(owner.rsplit(":", 2)[1]))
        except (IndexError, ValueError):
            continue
    pids.update(Worker.objects.filter(host=host).values_list("pid", flat=True))
    return pids


def steps_leased_to(owners: list[str]) -> list[int]:
    """Ids of running steps whose lease belongs to one of ``owners`` (worker ids)."""
    return list(Step.objects.filter(status=StepStatus.RUNNING, lease_owner__in=owners).order_by("id").values_list("id", flat=True))


def live_owner_grace() -> timedelta:
    """How long past its expiry a lease held by an owner known to be alive is left alone
    (settings.BALLAST_LIVE_OWNER_GRACE_SECONDS, default 60): a process that certainly runs
    on this host, or, for recovery's passes, a process of a host whose heartbeat is fresh
    (runs.engine.recovery.owner_alive_predicate).

    Why: a live worker's lease is never stolen (DESIGN.md, Recovery). Its heartbeat can
    be late without the worker being lost: on SQLite it waits up to the busy timeout (20 s)
    for the writer lock, and on a loaded machine a 5 s test lease lapsed that way while
    the step's own commit was waiting too, so the step ran twice inside one live cluster.
    The grace still bounds a process that is alive but hung (django-q2's task timeout
    kills it in the end). An owner on another host gets the grace only while its host
    beats (database clock): a worker whose step holds the GIL for a minute is late with
    its lease, its host is not lost; a host cut off, killed or stopped falls silent
    within BALLAST_HOST_SILENT_SECONDS and gets none, so its steps are taken over then."""
    return timedelta(seconds=float(getattr(settings, "BALLAST_LIVE_OWNER_GRACE_SECONDS", 60)))


def lease_lapsed(owner: str, expires: datetime | None, now: datetime, *, owner_is_alive: OwnerIsAlive = owner_is_alive_here) -> bool:
    """Whether a running step's lease (``owner``, ``expires``) has run out for recovery:
    its expiry passed, plus live_owner_grace() when ``owner_is_alive`` says its owner is a
    process that certainly runs on this host."""
    if expires is None or expires >= now:
        return False
    return expires < now - live_owner_grace() or not owner_is_alive(owner)


def expired_step_ids(owner_is_dead: OwnerIsDead, *, run_id: int | None = None, owner_is_alive: OwnerIsAlive = owner_is_alive_here) -> list[int]:
    """Running steps whose lease lapsed (lease_lapsed), or whose owner process on this host is dead."""
    now = clock.now()
    qs = Step.objects.filter(status=StepStatus.RUNNING)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    rows = qs.values_list("id", "lease_owner", "lease_expires_at")
    return [pk for pk, owner, expires in rows if lease_lapsed(owner, expires, now, owner_is_alive=owner_is_alive) or owner_is_dead(owner)]


def _repeat_safe(run: Run, step: Step) -> bool:
    child = ChildCall(step.child_key, step.kind, step.input or {}) if step.parent_id is not None else None
    return step_repeat_safe(run.graph_version_id, step.node_id, child=child)


def step_recover(step_id: int, *, recovered_by: str, owner_is_dead: OwnerIsDead, owner_is_alive: OwnerIsAlive = owner_is_alive_here) -> list[int]:
    """Take back a step whose worker died: re-queue it (same idempotency key), or park
    the run if the node is not safe to repeat and the attempt had begun (its
    ``effect_attempt`` mark). One transaction, audited as the worker.

    Returns step ids to dispatch. Does nothing if the lease is live, or lapsed less than
    live_owner_grace() ago with its owner still running on this host (never steals).
    """
    now = clock.now()
    with transaction.atomic():
        step = Step.objects.filter(pk=step_id, status=StepStatus.RUNNING).first()
        if step is None:
            return []
        expired = lease_lapsed(step.lease_owner, step.lease_expires_at, now, owner_is_alive=owner_is_alive)
        if not expired and not owner_is_dead(step.lease_owner):
            return []
        run = lock_run(step.run_id)
        # An attempt that never began its side effect (leased, e.g. in its predecessor's
        # commit, and never started: no effect_attempt mark, runs.engine.store.claims) runs again.
        began = step.effect_attempt == step.attempt
        target = StepStatus.PENDING if not began or _repeat_safe(run, step) or run.is_terminal else StepStatus.PARKED
        # The fence includes the mark: a worker that marks meanwhile makes this miss (the
        # next pass decides again), and a worker whose lease this takes back cannot mark.
        if not Step.objects.filter(
            pk=step_id, status=StepStatus.RUNNING, attempt=step.attempt, lease_owner=step.lease_owner, effect_attempt=step.effect_attempt
        ).update(
            status=target,
            lease_owner="",
            lease_expires_at=None,
            dispatched_at=now if target == StepStatus.PENDING else None,
            # Handed back in the place it had: due since it first became due (a step
            # leased at its creation: since then), so the next doorbell takes it first.
            due_at=Coalesce(F("due_at"), F("created_at")) if target == StepStatus.PENDING else None,
        ):
            return []
        StepAttempt.objects.filter(step_id=step_id, number=step.attempt, status=AttemptStatus.RUNNING).update(
            status=AttemptStatus.LOST, finished_at=now, error={"code": "worker_lost", "message": f"worker {step.lease_owner} died"}
        )
        data = {"node_id": step.node_id, "attempt": step.attempt, "owner": step.lease_owner, "lease_expired": expired}
        # One line per step taken back, by whoever won the compare-and-set above, and
        # only once the take-back committed (re-dispatch passes log no step again).
        why = "lease expired" if expired else "owner process or host gone"
        outcome = "re-queued" if target == StepStatus.PENDING else "parked for a decision (not safe to repeat)"
        cause = "handed_back" if step.lease_owner == recovered_by else ("lease_expired" if expired else "owner_gone")
        transaction.on_commit(lambda: metrics.LEASES_TAKEN_OVER.labels(cause=cause).inc())
        transaction.on_commit(
            lambda: log.warning(
                "step %s (run %s, node %s, attempt %s) taken back from worker %s (%s): %s",
                step_id, run.pk, step.node_id, step.attempt, step.lease_owner, why, outcome,
            )
        )
        if target == StepStatus.PENDING:
            create_event(run_id=run.pk, step_id=step_id, kind=RunEventKind.STEP_RECOVERED, data=data)
            audit(recovered_by, "step.rerun", step, actor_type="worker", **data)
            return [step_id]
        park(run, step, by=recovered_by, reason="interrupted by a worker crash; not safe to repeat", data=data, cause="worker_lost")
        return []


def due_pending_steps(*, stale_seconds: float, everything: bool = False, run_id: int | None = None) -> list[int]:
    """Pending steps that no queue entry is known to hold, within each run's parallelism.

    A step is due when it is available (backoff passed) and was never dispatched, was
    dispatched before its backoff ended, or was dispatched more than ``stale_seconds``
    ago and still not claimed (a lost queue entry). ``everything`` re-dispatches all
    pending steps (on worker start: the queue may have lost them). Marks the chosen
    steps dispatched; returns their ids (dispatch after commit).
    """
    now = clock.now()
    stale = now - timedelta(seconds=stale_seconds)
    with transaction.atomic():
        deadlines = _ring_for_deadlines(now, stale, run_id)
        qs = Step.objects.filter(status=StepStatus.PENDING).filter(Q(available_at__isnull=True) | Q(available_at__lte=now))
        if run_id is not None:
            qs = qs.filter(run_id=run_id)
        if not everything:
            qs = qs.filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale) | Q(dispatched_at__lt=F("available_at")))
        candidates = list(qs.order_by("id").values_list("id", "run_id", "dispatched_at")[:1000])
        if not candidates:
            return deadlines
        run_ids = {rid for _pk, rid, _dispatched in candidates}
        limits = dict(Run.objects.filter(pk__in=run_ids).values_list("id", "max_parallelism"))
        busy: dict[int, int] = {}
        for rid, status, dispatched in Step.objects.filter(run_id__in=run_ids, status__in=(StepStatus.RUNNING, StepStatus.PENDING)).values_list(
            "run_id", "status", "dispatched_at"
        ):
            if status == StepStatus.RUNNING or (dispatched is not None and dispatched >= stale):
                busy[rid] = busy.get(rid, 0) + 1
        chosen = []
        for pk, rid, dispatched in candidates:
            counted = dispatched is not None and dispatched >= stale
            if not counted and busy.get(rid, 0) >= limits.get(rid, 1):
                continue
            if not counted:
                busy[rid] = busy.get(rid, 0) + 1
            chosen.append(pk)
        if chosen:
            # A step released here (backoff over, parallelism freed) is due since its
            # backoff ended; one already due keeps its place.
            Step.objects.filter(pk__in=chosen).update(dispatched_at=now, due_at=Coalesce(F("due_at"), F("available_at"), Value(now)))
        return deadlines + chosen


def _ring_for_deadlines(now: datetime, stale: datetime, run_id: int | None) -> list[int]:
    """Waiting steps whose deadline (``due_at``) passed and that no doorbell was rung for
    since (or whose doorbell went stale): marked dispatched now; their ids are returned
    so the caller rings for them. The doorbell's claim fires the deadline
    (claims.step_claim_due -> runs.engine.store.deadlines); this pass only rings, as it does
    for a retry whose backoff ended, so no scanner of deadlines exists apart from it."""
    qs = Step.objects.filter(status=StepStatus.WAITING, due_at__lte=now).filter(
        Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=F("due_at")) | Q(dispatched_at__lt=stale)
    )
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    ids = list(qs.order_by("due_at", "id").values_list("id", flat=True)[:1000])
    if ids:
        Step.objects.filter(pk__in=ids).update(dispatched_at=now)
    return ids


def due_count(now: datetime | None = None) -> int:
    """How many pending steps a doorbell could claim now (claims.due_steps)."""
    return due_steps(now or clock.now()).count()


def due_summary() -> tuple[int, float | None]:
    """(how many pending steps a doorbell could claim now, seconds the one due longest
    has been due on the database's clock, or None when none is): the queue depth and its
    oldest age (ballast_queue_depth, ballast_queue_oldest_due_age_seconds)."""
    now = clock.now()
    due = due_steps(now)
    count = due.count()
    oldest = clock.db_time(due.values_list("due_at", flat=True).first()) if count else None
    return count, None if oldest is None else max(0.0, (now - oldest).total_seconds())


def due_step_ids(*, limit: int, exclude: Sequence[int] = ()) -> list[int]:
    """Up to ``limit`` ids of steps a doorbell could claim now, oldest due first, except
    ``exclude``: the hints recovery's made-up doorbells carry."""
    return list(due_steps(clock.now()).exclude(pk__in=list(exclude)).values_list("id", flat=True)[:limit])
