"""The queue message is a doorbell: a worker claims the step due longest from Ballast's tables.

(The claim itself, over every claim path: conformance/test_due_claims.py.) A dead
worker's steps are handed back once each, in their place in the due order; recovery
after a cluster's death rings for what is missing, not for every pending step. The
doorbells here are delivered by calling the django-q2 task itself (runs.tasks), in the
order a shuffling broker would choose.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from runs import tasks
from runs.models import RunEvent, RunEventKind, Step, StepAttempt, Worker
from runs.services import run_start
from tests.support import engine
from tests.support.bounded import TIME_SLACK, assert_took_under, stopwatch
from tests.support.leases import dead_owner, pay_version, run_at_pay
from tests.support.specs import chain, graph, node, publish

pytestmark = pytest.mark.django_db(transaction=True)


def one_step_version():
    """start -> end: a doorbell's claim runs the whole run (the end is kept in-worker)."""
    return publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))


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

    from runs.engine import recovery
    from runs.engine.store import recovery_queries

    _run, pay = run_at_pay()
    assert engine.step_claim(pay.pk, dead_owner()) is not None

    def stuck(**kwargs: object) -> list[int]:
        raise OperationalError("canceling statement due to lock timeout")

    monkeypatch.setattr(recovery_queries, "due_pending_steps", stuck)
    with engine.local_mode() as queue, pytest.raises(OperationalError):
        recovery.recover_once()
    assert list(queue) == [pay.pk]
    assert Step.objects.get(pk=pay.pk).status == "pending"


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
