"""A doorbell's claim (runs.engine.loop.step_claim_due, runs.engine.store.claims): the step due
longest is claimed whatever the delivery order, a duplicate or late doorbell claims
nothing, a step not due is never claimed, concurrent claimers skip each other's rows and
a claim never waits for a committer holding its run; on every claim path (the portable
claim, and PostgreSQL's one-statement claim: conftest.py).

The doorbells are delivered by calling the django-q2 task itself (runs.tasks), in the
order a shuffling broker would choose.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs import tasks
from runs.engine import loop as engine_loop
from runs.engine import sources
from runs.engine.store import clock
from runs.models import RunEvent, Step, StepAttempt
from runs.services import run_start
from tests.support import engine
from tests.support.bounded import assert_took_under, stopwatch
from tests.support.leases import run_at_pay
from tests.support.specs import chain, graph, node, publish

pytestmark = pytest.mark.django_db(transaction=True)


def one_step_version():
    """start -> end: a doorbell's claim runs the whole run (the end is kept in-worker)."""
    return publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))


def started_order(step_ids: list[int]) -> list[int]:
    """``step_ids`` in the order their first attempt started (attempt rows by id)."""
    rows = StepAttempt.objects.filter(step_id__in=step_ids, number=1).order_by("id").values_list("step_id", flat=True)
    return list(rows)


def test_doorbells_claim_the_oldest_due_step_whatever_the_delivery_order(store_path):
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


def test_a_due_step_is_picked_after_a_bounded_number_of_due_source_rows(store_path, monkeypatch):
    # 1,000 schedules due at once must not keep a due step waiting behind every tick
    # (issue 26): a claim fires at most SOURCE_ROWS_PER_PICK source rows, then picks.
    waiting = [40]  # due rows of a source of this test's own

    def fire_next(now, worker):
        if waiting[0] == 0:
            return False
        waiting[0] -= 1
        return True

    monkeypatch.setitem(sources._sources, "test-rows", sources.DueSource(
        "test-rows", earliest_due=lambda now: now if waiting[0] else None, fire_next=fire_next))
    version = one_step_version()
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start = Step.objects.get(run=run, node_id="start")
    claimed = engine_loop.step_claim_due("w:1:1")
    assert claimed is not None and claimed.step_id == start.pk
    assert waiting[0] == 40 - engine_loop.SOURCE_ROWS_PER_PICK
    # No step is due now (the start is leased): the claim fires every row left, then finds nothing.
    assert engine_loop.step_claim_due("w:1:1") is None
    assert waiting[0] == 0


def test_a_duplicate_or_late_doorbell_does_nothing(store_path):
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


def test_a_doorbell_never_claims_a_step_that_is_not_due(store_path):
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


def test_a_doorbell_claims_a_step_its_writer_released_a_moment_ahead_of_the_claimers_clock(store_path):
    """Each process reads the database's clock only to within its round trip: a writer
    whose reading ran ahead releases a step "due now" a few milliseconds after the
    claimer's now. Its doorbell must claim it (before the clock's slack, it found nothing
    and the step waited 30 s for recovery to ring again), and a step due well beyond that
    slack is still left alone."""
    version = one_step_version()
    with engine.local_mode():
        ahead = run_start(version=version, run_input={})
        beyond = run_start(version=version, run_input={})
    ahead_start = Step.objects.get(run=ahead, node_id="start")
    beyond_start = Step.objects.get(run=beyond, node_id="start")
    now = clock.now()
    Step.objects.filter(pk=ahead_start.pk).update(due_at=now + clock.DUE_SLACK / 5)
    Step.objects.filter(pk=beyond_start.pk).update(due_at=now + timedelta(minutes=5))
    with engine.local_mode():
        tasks.step_execute(ahead_start.pk)
        tasks.step_execute(beyond_start.pk)
    assert Step.objects.get(pk=ahead_start.pk).status == "succeeded"
    assert Step.objects.get(pk=beyond_start.pk).status == "pending"
    assert not StepAttempt.objects.filter(step=beyond_start).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED: PostgreSQL")
def test_concurrent_claims_skip_each_others_rows(store_path):
    """Two claimers in two connections at once take two different steps (SKIP LOCKED), the
    two oldest due, and neither waits for the other's transaction."""
    import threading

    from django.db import connections, transaction

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
                claimed = engine_loop.step_claim_due("slow:1:1")
                got["slow"] = claimed.step_id if claimed else None
                inside.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=slow_claimer)
    thread.start()
    assert inside.wait(10)
    try:
        claimed = engine_loop.step_claim_due("fast:1:1")  # must not block on the slow one's row lock
        got["fast"] = claimed.step_id if claimed else None
    finally:
        release.set()
        thread.join(10)
    assert got == {"slow": starts[0], "fast": starts[1]}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row lock modes: PostgreSQL")
def test_a_claim_never_waits_for_a_committer_holding_its_run(store_path):
    """A committer holds its run row locked (writes.lock_run) while it updates step rows; a
    claim of another step of that run inserts attempt and event rows whose foreign-key
    checks lock the run row in key-share mode. Were the run locked FOR UPDATE, the claim
    would wait for the committer, and with the stray lock a SKIP LOCKED pick can keep on a
    step the committer updates, the two deadlock (seen under load). NO KEY UPDATE lets the
    claim finish while the run stays locked."""
    import threading

    from django.db import connections, transaction

    from runs.engine.store.writes import lock_run

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
        claimed = engine_loop.step_claim_due("claimer:1:1")
        took = started.elapsed
    finally:
        release.set()
        holder.join(15)
    assert claimed is not None and claimed.step_id == pay.pk
    assert_took_under(took, 5, "the claim beside a committer holding its run")

