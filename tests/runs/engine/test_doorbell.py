"""The queue message is a doorbell: a worker claims the step due longest from Ballast's tables.

Broker order, duplicate deliveries and lost entries cannot delay or repeat work; a dead
worker's steps are handed back once each, in their place in the due order; recovery
after a cluster's death rings for what is missing, not for every pending step. The
doorbells here are delivered by calling the django-q2 task itself (runs.tasks), in the
order a shuffling broker would choose.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs import tasks
from runs.engine import api as engine
from runs.models import RunEvent, RunEventKind, Step, StepAttempt, Worker
from runs.services import run_start
from tests.support.bounded import TIME_SLACK, assert_took_under, stopwatch
from tests.support.leases import dead_owner, pay_version, run_at_pay
from tests.support.specs import chain, graph, node, publish

pytestmark = pytest.mark.django_db(transaction=True)


def one_step_version():
    """start -> end: a doorbell's claim runs the whole run (the end is kept in-worker)."""
    return publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))


def started_order(step_ids: list[int]) -> list[int]:
    """``step_ids`` in the order their first attempt started (attempt rows by id)."""
    rows = StepAttempt.objects.filter(step_id__in=step_ids, number=1).order_by("id").values_list("step_id", flat=True)
    return list(rows)


def test_doorbells_claim_the_oldest_due_step_whatever_the_delivery_order():
    version = one_step_version()
    with engine.local_mode() as queue:
        runs = [run_start(version=version, run_input={}) for _ in range(4)]
    starts = [Step.objects.get(run=run, node_id="start") for run in runs]
    assert list(queue) == [s.pk for s in starts]
    # Due times out of creation order: the claim order must follow them.
    now = timezone.now()
    ages = [2, 4, 1, 3]  # seconds overdue
    for step, age in zip(starts, ages, strict=True):
        Step.objects.filter(pk=step.pk).update(due_at=now - timedelta(seconds=age))
    expected = [s.pk for _, s in sorted(zip(ages, starts, strict=True), key=lambda pair: -pair[0])]
    delivered = [starts[0].pk, starts[3].pk, starts[2].pk, starts[1].pk]  # the broker's order, not the due order
    with engine.local_mode():
        for hint in delivered:
            tasks.step_execute(hint)
    assert started_order([s.pk for s in starts]) == expected
    assert expected != delivered
    assert all(Step.objects.get(pk=s.pk).status == "succeeded" for s in starts)


def test_a_duplicate_or_late_doorbell_does_nothing():
    version = one_step_version()
    with engine.local_mode():
        run = run_start(version=version, run_input={})
        start = Step.objects.get(run=run, node_id="start")
        tasks.step_execute(start.pk)
        run.refresh_from_db()
        assert run.status == "succeeded"
        before = (RunEvent.objects.count(), StepAttempt.objects.count(), Step.objects.count())
        tasks.step_execute(start.pk)  # delivered again (django-q2 redelivery after `retry`)
        tasks.step_execute(start.pk)
    assert (RunEvent.objects.count(), StepAttempt.objects.count(), Step.objects.count()) == before
    assert Step.objects.get(pk=start.pk).attempt == 1


def test_a_doorbell_never_claims_a_step_that_is_not_due():
    version = one_step_version()
    with engine.local_mode():
        held = run_start(version=version, run_input={})
        later = run_start(version=version, run_input={})
    held_start = Step.objects.get(run=held, node_id="start")
    later_start = Step.objects.get(run=later, node_id="start")
    # One not released by the scheduler (no due time), one in its retry backoff.
    Step.objects.filter(pk=held_start.pk).update(due_at=None)
    Step.objects.filter(pk=later_start.pk).update(available_at=timezone.now() + timedelta(hours=1))
    with engine.local_mode():
        tasks.step_execute(held_start.pk)
        tasks.step_execute(later_start.pk)
    assert Step.objects.get(pk=held_start.pk).status == "pending"
    assert Step.objects.get(pk=later_start.pk).status == "pending"
    assert not StepAttempt.objects.exists()


def test_a_doorbell_drains_due_steps_within_its_budget(settings):
    version = one_step_version()
    with engine.local_mode():
        runs = [run_start(version=version, run_input={}) for _ in range(3)]
    settings.BALLAST_DOORBELL_DRAIN_SECONDS = 0
    with engine.local_mode():
        tasks.step_execute(0)  # the hint names no step at all: the claim needs none
    assert [Step.objects.get(run=run, node_id="start").status for run in runs] == ["succeeded", "pending", "pending"]
    settings.BALLAST_DOORBELL_DRAIN_SECONDS = 30
    with engine.local_mode():
        tasks.step_execute(0)
    assert all(Step.objects.get(run=run, node_id="end").status == "succeeded" for run in runs)


def test_a_dead_workers_steps_are_handed_back_once_each_and_first_in_line(settings):
    settings.BALLAST_DOORBELL_DRAIN_SECONDS = 0  # one chain per doorbell: see which step it takes
    # Three runs whose 'pay' step a worker held when it was SIGKILLed.
    owner = dead_owner()
    held = []
    for _ in range(3):
        _run, pay = run_at_pay()
        assert engine.step_claim(pay.pk, owner) is not None
        held.append(pay.pk)
    # The dead cluster's heartbeat row is still there: before doorbells, recovery
    # re-dispatched every pending step of every run when it saw a cluster die.
    now = timezone.now()
    host, pid, _start = owner.rsplit(":", 2)
    Worker.objects.create(name=owner, host=host, pid=int(pid), started_at=now, heartbeat_at=now)
    version = pay_version()
    with engine.local_mode() as queue:
        others = [run_start(version=version, run_input={}) for _ in range(5)]  # in flight, their doorbells queued
        queued = list(queue)
        first = engine.recover_once()
        second = engine.recover_once()
        assert sorted(first) == sorted(held) and len(first) == 3
        assert second == []
        assert list(queue) == queued + first  # one doorbell per step handed back, none for the others
        for step_id in held:
            assert RunEvent.objects.filter(step_id=step_id, kind=RunEventKind.STEP_RECOVERED).count() == 1
            assert list(StepAttempt.objects.filter(step_id=step_id).values_list("number", "status")) == [(1, "lost")]
        # The next doorbell, whichever step it names, takes a handed-back step: they
        # were due before the other runs' steps existed.
        tasks.step_execute(queue.popleft())
        first_run = Step.objects.get(pk=held[0])
        assert first_run.status == "succeeded" and first_run.attempt == 2
    assert all(Step.objects.get(run=run, node_id="start").status == "pending" for run in others)


def test_a_taken_back_steps_doorbell_rings_before_the_rest_of_the_pass(monkeypatch):
    # A cut host's backend can hold row locks the rest of a pass waits on (the re-dispatch
    # scan's updates): the step taken over must not wait behind them for its doorbell.
    from django.db import OperationalError

    from runs.engine import recovery, recovery_queries

    _run, pay = run_at_pay()
    assert engine.step_claim(pay.pk, dead_owner()) is not None

    def stuck(**kwargs: object) -> list[int]:
        raise OperationalError("canceling statement due to lock timeout")

    monkeypatch.setattr(recovery_queries, "due_pending_steps", stuck)
    with engine.local_mode() as queue, pytest.raises(OperationalError):
        recovery.recover_once()
    assert list(queue) == [pay.pk]
    assert Step.objects.get(pk=pay.pk).status == "pending"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED: PostgreSQL")
def test_concurrent_claims_skip_each_others_rows():
    """Two claimers in two connections at once take two different steps (SKIP LOCKED), the
    two oldest due, and neither waits for the other's transaction."""
    import threading

    from django.db import connections, transaction

    from runs.engine import claims

    version = one_step_version()
    with engine.local_mode():
        runs = [run_start(version=version, run_input={}) for _ in range(3)]
    starts = [Step.objects.get(run=run, node_id="start").pk for run in runs]
    inside = threading.Event()
    release = threading.Event()
    got: dict[str, int | None] = {}

    def slow_claimer() -> None:
        try:
            with transaction.atomic():
                claimed = claims.step_claim_due("slow:1:1")
                got["slow"] = claimed.step_id if claimed else None
                inside.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=slow_claimer)
    thread.start()
    assert inside.wait(10)
    try:
        claimed = claims.step_claim_due("fast:1:1")  # must not block on the slow one's row lock
        got["fast"] = claimed.step_id if claimed else None
    finally:
        release.set()
        thread.join(10)
    assert got == {"slow": starts[0], "fast": starts[1]}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY: PostgreSQL")
def test_an_idle_pusher_is_woken_by_the_doorbell_not_by_its_poll(monkeypatch):
    """The PostgreSQL broker's empty pull waits on LISTEN: a doorbell rung from another
    connection wakes it at once (django-q2's ORM broker would sleep `poll` and pull again)."""
    import threading
    import time

    from django.db import connections
    from django_q.brokers import get_broker

    from runs.engine import dispatch

    monkeypatch.setattr(dispatch, "LISTEN_TIMEOUT", 3.0)
    broker = get_broker()
    assert type(broker).__name__ == "NotifyingOrmBroker"
    broker.purge_queue()
    assert broker.dequeue() is None  # listening from now on (waited up to LISTEN_TIMEOUT)
    # From here a wait that only the doorbell can cut short, far longer than any wait for a core.
    monkeypatch.setattr(dispatch, "LISTEN_TIMEOUT", 30.0)

    def ring() -> None:
        try:
            time.sleep(0.1)  # scenario: the bell rings while the pull is already waiting
            dispatch.enqueue([12345])
        finally:
            connections.close_all()

    ringer = threading.Thread(target=ring)
    started = stopwatch()
    ringer.start()
    first = broker.dequeue()  # empty now: waits, and the doorbell ends the wait
    woke = started.elapsed
    ringer.join(5)
    # Rung at 0.1 s; without the wake-up this pull would return only at LISTEN_TIMEOUT.
    assert_took_under(woke, 2 * TIME_SLACK, "the pull the doorbell ends")
    taken = first or broker.dequeue()
    assert taken is not None and len(taken) == 1
    broker.acknowledge(taken[0][0])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row lock modes: PostgreSQL")
def test_a_claim_never_waits_for_a_committer_holding_its_run():
    """A committer holds its run row locked (writes.lock_run) while it updates step rows; a
    claim of another step of that run inserts attempt and event rows whose foreign-key
    checks lock the run row in key-share mode. Were the run locked FOR UPDATE, the claim
    would wait for the committer, and with the stray lock a SKIP LOCKED pick can keep on a
    step the committer updates, the two deadlock (seen under load). NO KEY UPDATE lets the
    claim finish while the run stays locked."""
    import threading

    from django.db import connections, transaction

    from runs.engine import claims
    from runs.engine.writes import lock_run

    run, pay = run_at_pay()
    locked = threading.Event()
    release = threading.Event()

    def committer() -> None:
        try:
            with transaction.atomic():
                lock_run(run.pk)
                locked.set()
                release.wait(15)
        finally:
            connections.close_all()

    holder = threading.Thread(target=committer)
    holder.start()
    assert locked.wait(10)
    try:
        started = stopwatch()
        claimed = claims.step_claim_due("claimer:1:1")
        took = started.elapsed
    finally:
        release.set()
        holder.join(15)
    assert claimed is not None and claimed.step_id == pay.pk
    assert_took_under(took, 5, "the claim beside a committer holding its run")
