"""A step's first claim as one statement on PostgreSQL (issue 11 item 5: the fixed per-run cost).

claims.step_claim takes fastpath_postgresql.CLAIM_SQL for a pending top-level step on its
first attempt in a queued or running run without a budget; everything else, SQLite and
``BALLAST_FAST_COMMIT = False`` take the portable claim. Both must write the same rows.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.engine import loop as engine_loop
from runs.engine.store.events import CounterBusy
from runs.models import Run, RunEvent, RunStatus, Step, StepAttempt
from tests.support import engine
from tests.support.conformance import started
from tests.support.specs import chain, graph, node, transform

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement claim is PostgreSQL's"),
]
W = "host:1:1"


def _spec():
    return graph([node("start", "start"), transform("t", x="x + 1"), node("end", "end")], chain("start", "t", "end"),
                 state={"x": {"default": 0}})


def _claim(fast: bool):
    run, start_id = started(_spec(), {"q": "v"})
    with override_settings(BALLAST_FAST_COMMIT=fast), CaptureQueriesContext(connection) as queries:
        claimed = engine.step_claim(start_id, W)
    return run, start_id, claimed, [q["sql"] for q in queries.captured_queries]


def _rows(run_id: int, step_id: int) -> dict:
    run = Run.objects.get(pk=run_id)
    step = Step.objects.get(pk=step_id)
    return {
        "run": (run.status, run.version, run.started_at is not None, run.step_count),
        "step": (step.status, step.attempt, step.lease_owner, step.lease_expires_at is not None, step.started_at is not None),
        "attempts": list(StepAttempt.objects.filter(step_id=step_id).values_list("number", "worker", "status", "price_version")),
        "events": [
            (e.seq, e.kind, e.step_id == step_id if e.step_id else None, e.data)
            for e in RunEvent.objects.filter(run_id=run_id).exclude(kind="run_created").order_by("id")
        ],
    }


def test_the_first_claim_is_one_statement_and_writes_what_the_portable_claim_writes():
    run_p, start_p, claimed_p, _ = _claim(fast=False)
    run_f, start_f, claimed_f, sql = _claim(fast=True)
    assert len(sql) == 1 and sql[0].lstrip().startswith("WITH pick AS"), [s[:60] for s in sql]
    assert _rows(run_f.pk, start_f) == _rows(run_p.pk, start_p)
    assert [e for e in RunEvent.objects.filter(run_id=run_f.pk).order_by("id").values_list("seq", flat=True)] == [1, 2, 3]
    a, b = claimed_f, claimed_p
    assert (a.node_id, a.kind, a.attempt, a.max_attempts, a.iteration, a.depth, a.worker, a.parent_id, a.children) == (
        b.node_id, b.kind, b.attempt, b.max_attempts, b.iteration, b.depth, b.worker, b.parent_id, b.children)
    assert a.state == b.state and a.state["x"] == 0
    assert a.run_input == b.run_input == {"q": "v"}
    assert a.budget_remaining_usd is None and a.budget_remaining_tokens is None
    # The snapshot the start's commit takes the fast path from: the run as the claim left it.
    snap_a, snap_b = a.snapshot, b.snapshot
    assert snap_a is not None and snap_b is not None
    assert (snap_a.version, snap_a.status, snap_a.step_count, snap_a.scheduler, snap_a.state_sizes, snap_a.state) == (
        snap_b.version, snap_b.status, snap_b.step_count, snap_b.scheduler, snap_b.state_sizes, snap_b.state)
    assert snap_a.version == Run.objects.get(pk=snap_a.pk).version
    # And the run goes on from the fast claim: the start and t commit (the end is next).
    with engine.local_mode() as queue:
        outcome = engine.step_commit(claimed_f, engine.execute_node(claimed_f))
        assert outcome.next_step is not None
        queue.clear()
        engine.step_commit(outcome.next_step, engine.execute_node(outcome.next_step))
    run_f.refresh_from_db()
    assert run_f.status == RunStatus.RUNNING and run_f.state["x"] == 1


def test_a_claim_the_fast_statement_cannot_decide_takes_the_portable_path():
    # A budget: the portable claim checks it (and a second delivery then finds nothing).
    run, start_id = started(_spec())
    Run.objects.filter(pk=run.pk).update(budget_tokens=1000)
    with CaptureQueriesContext(connection) as queries:
        claimed = engine.step_claim(start_id, W)
    assert claimed is not None and claimed.budget_remaining_tokens == 1000
    assert any('"attempt" = ("runs_step"."attempt" + 1)' in q["sql"] for q in queries.captured_queries)
    assert engine.step_claim(start_id, "host:2:2") is None  # a duplicate delivery claims nothing
    assert StepAttempt.objects.filter(step_id=start_id).count() == 1


def test_a_busy_event_counter_writes_nothing_and_the_claim_waits_its_turn():
    import threading

    import psycopg

    from runs.engine.store import claims

    run, start_id = started(_spec())
    params = connection.get_connection_params()
    with psycopg.connect(**params) as other:
        other.execute("SELECT last FROM runs_runeventcounter WHERE run_id = %s FOR UPDATE", [run.pk])
        with pytest.raises(CounterBusy):
            claims._fast_claim(start_id, W, timezone.now())
        assert Step.objects.get(pk=start_id).status == "pending"
        assert StepAttempt.objects.filter(step_id=start_id).count() == 0
        # step_claim retries after a moment; it claims once the other transaction ends.
        result: list = []
        thread = threading.Thread(target=lambda: (result.append(engine.step_claim(start_id, W)), connection.close()))
        thread.start()
        thread.join(0.3)
        assert thread.is_alive() and not result
        other.rollback()
    thread.join(10)
    assert result and result[0] is not None and result[0].attempt == 1
    assert list(RunEvent.objects.filter(run_id=run.pk).order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]


def test_a_doorbell_picks_and_claims_the_oldest_due_step_in_one_statement():

    first, first_start = started(_spec())
    second, second_start = started(_spec())
    with CaptureQueriesContext(connection) as queries:
        claimed = engine_loop.step_claim_due(W)
    picks = [q["sql"] for q in queries.captured_queries if "WITH pick AS" in q["sql"]]
    assert claimed is not None and claimed.step_id == first_start and claimed.snapshot is not None
    assert len(picks) == 1 and "SKIP LOCKED" in picks[0]
    # Not due any more: the next doorbell takes the second run's start, the one after finds nothing.
    assert engine_loop.step_claim_due("host:2:2").step_id == second_start
    with CaptureQueriesContext(connection) as queries:
        assert engine_loop.step_claim_due(W) is None
    assert len([q for q in queries.captured_queries if "WITH pick AS" in q["sql"]]) == 1
    assert not any("FOR NO KEY UPDATE SKIP LOCKED" in q["sql"] and '"runs_step"' in q["sql"] for q in queries.captured_queries)


def test_a_due_step_the_one_statement_cannot_claim_is_claimed_by_the_portable_pick():

    run, start_id = started(_spec())
    Run.objects.filter(pk=run.pk).update(budget_usd=5)
    claimed = engine_loop.step_claim_due(W)
    assert claimed is not None and claimed.step_id == start_id and claimed.budget_remaining_usd == 5
    assert StepAttempt.objects.filter(step_id=start_id).count() == 1
    assert engine_loop.step_claim_due(W) is None
