"""Store conformance: claim, fenced commit, stale leases, successors, joins, retries, child
steps and recovery, identical on every commit path (see conftest.py).

Transactional tests: the fast paths run only outside a transaction block, as in a worker.
Hand-offs go to ``engine.local_mode()``'s deque, so what each call dispatches is visible.
"""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.models import AttemptStatus, Run, RunEvent, RunEventKind, RunStatus, Step, StepAttempt, StepStatus
from runs.nodes.base import NodeResult
from runs.vocabulary import NodeError
from tests.support import engine
from tests.support.conformance import W2, W, kinds, last_event_id, started, step, version
from tests.support.specs import chain, edge, graph, node, transform

pytestmark = pytest.mark.django_db(transaction=True)



def linear(*ids: str, **extra):
    return graph([node("start", "start"), *[transform(i, **{i: "1"}) for i in ids], node("end", "end")], chain("start", *ids, "end"), **extra)












# --------------------------------------------------------------------------- claim


def test_claim_is_a_compare_and_set_with_a_lease(store_path):
    run, start_id = started(linear("a"))
    claimed = engine.step_claim(start_id, W)
    assert claimed is not None and claimed.attempt == 1 and claimed.worker == W
    row = Step.objects.get(pk=start_id)
    assert (row.status, row.lease_owner, row.attempt) == (StepStatus.RUNNING, W, 1)
    assert row.lease_expires_at > timezone.now()
    assert list(StepAttempt.objects.filter(step_id=start_id).values_list("number", "status", "worker")) == [(1, AttemptStatus.RUNNING, W)]
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert kinds(run) == [RunEventKind.RUN_CREATED, RunEventKind.RUN_STARTED, RunEventKind.STEP_STARTED]
    # A duplicate delivery, by this worker or another, finds nothing to claim.
    assert engine.step_claim(start_id, W) is None
    assert engine.step_claim(start_id, W2) is None
    assert Step.objects.get(pk=start_id).attempt == 1


# --------------------------------------------------------------------------- fenced commit


def test_fenced_commit_writes_output_state_successor_and_events(store_path):
    run, start_id = started(linear("a", "b"))
    with engine.local_mode() as queue:
        first = engine.step_commit(engine.step_claim(start_id, W), NodeResult())
        assert first.committed and first.dispatch == [] and not queue
    a = first.next_step
    assert a is not None and a.node_id == "a" and a.attempt == 1 and a.worker == W
    assert a.snapshot is not None and a.snapshot.version == version(run)  # the run as that commit left it
    before, mark = version(run), last_event_id(run)

    with engine.local_mode() as queue, CaptureQueriesContext(connection) as queries:
        outcome = engine.step_commit(a, engine.execute_node(a))
    store_path.assert_took(queries)
    assert outcome.committed and outcome.run_status == RunStatus.RUNNING and not queue
    b = outcome.next_step
    assert b is not None and b.node_id == "b" and (b.attempt, b.worker) == (1, W)
    row = step(run, "a")
    assert (row.status, row.lease_owner, row.lease_expires_at) == (StepStatus.SUCCEEDED, "", None)
    assert row.finished_at is not None and row.updates == {"a": 1}
    assert list(StepAttempt.objects.filter(step=row).values_list("number", "status")) == [(1, AttemptStatus.SUCCEEDED)]
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state["a"] == 1 and fresh.step_count == 3 and fresh.version == before + 1
    assert b.snapshot is not None and b.snapshot.version == fresh.version and b.state["a"] == 1
    assert step(run, "b").status == StepStatus.RUNNING and step(run, "b").lease_owner == W
    assert kinds(run, mark) == [RunEventKind.STEP_SUCCEEDED, RunEventKind.STEP_CREATED, RunEventKind.STEP_STARTED]

    end = engine.step_commit(b, engine.execute_node(b)).next_step
    done = engine.step_commit(end, engine.execute_node(end))
    assert done.run_status == RunStatus.SUCCEEDED and done.next_step is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_start_and_end_steps_commit_through_the_sequential_path(store_path):
    # The per-run fixed cost (issue 11): the start step's first claim leaves a snapshot,
    # and the end step's commit finishes the run, both through the path under test.
    finished = []

    def on_finished(sender, run, status, **kwargs):
        finished.append((run.pk, status, transaction.get_connection().in_atomic_block))

    from runs.signals import run_finished

    run_finished.connect(on_finished)
    try:
        run, start_id = started(linear("a"))
        claimed = engine.step_claim(start_id, W)
        assert claimed.snapshot is not None and claimed.snapshot.version == version(run)
        with engine.local_mode() as queue, CaptureQueriesContext(connection) as queries:
            first = engine.step_commit(claimed, NodeResult())
        store_path.assert_took(queries)
        assert first.committed and first.next_step is not None and not queue
        a = first.next_step
        end = engine.step_commit(a, engine.execute_node(a)).next_step
        assert end is not None and end.node_id == "end" and end.snapshot is not None
        mark = last_event_id(run)
        with engine.local_mode() as queue, CaptureQueriesContext(connection) as queries:
            done = engine.step_commit(end, engine.execute_node(end))
        store_path.assert_took(queries)
    finally:
        run_finished.disconnect(on_finished)
    assert done.committed and done.run_status == RunStatus.SUCCEEDED and done.next_step is None and not queue
    assert done.dispatch == []
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and fresh.finished_at is not None and fresh.error is None
    assert fresh.state["a"] == 1 and fresh.step_count == 3
    row = step(run, "end")
    assert (row.status, row.lease_owner, row.lease_expires_at) == (StepStatus.SUCCEEDED, "", None)
    assert list(StepAttempt.objects.filter(step=row).values_list("number", "status")) == [(1, AttemptStatus.SUCCEEDED)]
    events = list(RunEvent.objects.filter(run=run, id__gt=mark).order_by("id").values_list("kind", "step_id", "data"))
    assert [(k, s) for k, s, _ in events] == [(RunEventKind.STEP_SUCCEEDED, row.pk), (RunEventKind.RUN_SUCCEEDED, row.pk)]
    assert events[1][2] == {"cancelled_steps": []}
    assert finished == [(run.pk, RunStatus.SUCCEEDED, True)]  # sent inside the commit's transaction


def test_an_end_step_with_a_stale_snapshot_or_lease_finishes_nothing_twice(store_path):
    # Lease lost (recovery gave the step to W2), snapshot still current: nothing is written.
    lost, lost_start = started(linear())
    end = engine.step_commit(engine.step_claim(lost_start, W), NodeResult()).next_step
    assert end is not None and end.snapshot is not None and end.snapshot.version == version(lost)
    Step.objects.filter(pk=end.step_id).update(lease_owner=W2)
    mark = last_event_id(lost)
    assert not engine.step_commit(end, engine.execute_node(end)).committed
    assert Run.objects.get(pk=lost.pk).status == RunStatus.RUNNING and kinds(lost, mark) == []

    run, start_id = started(linear())
    first = engine.step_commit(engine.step_claim(start_id, W), NodeResult())
    end = first.next_step
    assert end is not None and end.node_id == "end" and end.snapshot is not None
    # Another writer moved the run: the fast path's version check fails, the portable
    # path re-reads the run and finishes it once.
    Run.objects.filter(pk=run.pk).update(version=end.snapshot.version + 3)
    done = engine.step_commit(end, engine.execute_node(end))
    assert done.committed and done.run_status == RunStatus.SUCCEEDED
    assert kinds(run).count(RunEventKind.RUN_SUCCEEDED) == 1
    # The same attempt again (a duplicate): its lease is gone, nothing is written.
    again = engine.step_commit(end, engine.execute_node(end))
    assert not again.committed
    assert kinds(run).count(RunEventKind.RUN_SUCCEEDED) == 1 and kinds(run).count(RunEventKind.STEP_SUCCEEDED) == 2


def test_a_stale_lease_writes_nothing(store_path):
    run, start_id = started(linear("a", "b"))
    stale = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert stale is not None and stale.snapshot is not None
    # Recovery gives the step to another worker while the first one still runs it.
    Step.objects.filter(pk=stale.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert engine.step_recover(stale.step_id, recovered_by="tester", owner_is_dead=lambda owner: False) == [stale.step_id]
    fresh = engine.step_claim(stale.step_id, W2)
    assert fresh is not None and fresh.attempt == 2
    before, mark, state = version(run), last_event_id(run), Run.objects.get(pk=run.pk).state

    with engine.local_mode() as queue:
        outcome = engine.step_commit(stale, NodeResult(updates={"stolen": True}))
        failed = engine.step_fail(stale, NodeError("late failure", code="late", retryable=True))
    assert not outcome.committed and not failed.committed and not queue
    row = step(run, "a")
    assert (row.status, row.attempt, row.lease_owner, row.output) == (StepStatus.RUNNING, 2, W2, None)
    assert version(run) == before and last_event_id(run) == mark and Run.objects.get(pk=run.pk).state == state
    assert not Step.objects.filter(run=run, node_id="b").exists()

    assert engine.step_commit(fresh, NodeResult(updates={"mine": True})).committed
    assert Run.objects.get(pk=run.pk).state.get("mine") is True and "stolen" not in Run.objects.get(pk=run.pk).state


def test_a_stale_snapshot_commits_through_the_portable_path(store_path):
    run, start_id = started(linear("a", "b"))
    a = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert a is not None and a.snapshot is not None
    with transaction.atomic():  # another writer moves the run (re-pricing) behind the worker's back
        engine.run_lock(run.pk)
        engine.run_cost_adjust(run.pk, Decimal("0.5"))
    # A fast path's version check fails (it writes nothing); the portable commit re-reads.
    outcome = engine.step_commit(a, NodeResult(updates={"a": 1}))
    assert outcome.committed and outcome.next_step is not None
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.cost_usd == Decimal("0.5") and fresh.state["a"] == 1
    assert outcome.next_step.snapshot is not None and outcome.next_step.snapshot.version == fresh.version


# --------------------------------------------------------------------------- successors, joins


def test_successors_respect_max_parallelism(store_path):
    spec = graph(
        [node("start", "start"), transform("a", a="1"), transform("b", b="1"), transform("c", c="1"), node("join", "join"), node("end", "end")],
        [edge("start", x) for x in "abc"] + [edge(x, "join") for x in "abc"] + [edge("join", "end")],
        settings={"max_parallelism": 2},
    )
    run, start_id = started(spec)
    with engine.local_mode() as queue:
        outcome = engine.step_commit(engine.step_claim(start_id, W), NodeResult())
    kept = outcome.next_step
    assert kept is not None and kept.snapshot is None  # three branches: no sequential snapshot
    assert outcome.dispatch == list(queue) and len(queue) == 1
    held = Step.objects.filter(run=run, status=StepStatus.PENDING, dispatched_at__isnull=True)
    assert held.count() == 1  # the bound holds the third branch back, undispatched
    held_id = held.get().pk
    with engine.local_mode() as queue:
        second = engine.step_commit(kept, engine.execute_node(kept), keep_next=False)
    assert second.dispatch == [held_id] == list(queue)  # a slot freed: the held branch goes
    assert not Step.objects.filter(run=run, node_id="join").exists()


def test_join_waits_for_every_branch_that_can_still_reach_it(store_path):
    spec = graph(
        [node("start", "start"), node("gate", "condition", config={"expression": "x > 0"}), transform("left", l="1"),
         transform("right", r="2"), transform("slow", s="3"), node("join", "join"), node("end", "end"), node("end_skip", "end")],
        [edge("start", "gate"), edge("start", "right"), edge("gate", "left", "true"), edge("gate", "end_skip", "false"),
         edge("right", "slow"), edge("left", "join"), edge("slow", "join"), edge("join", "end")],
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    run, start_id = started(spec, {"x": 1})
    engine.step_commit(engine.step_claim(start_id, W), NodeResult(), keep_next=False)

    def commit(node_id, result=None):
        claimed = engine.step_claim(step(run, node_id).pk, W)
        return engine.step_commit(claimed, result or engine.execute_node(claimed), keep_next=False)

    commit("gate", NodeResult(route=["true"]))
    commit("left")
    assert not Step.objects.filter(run=run, node_id="join").exists()  # "slow" can still reach it
    commit("right")
    assert not Step.objects.filter(run=run, node_id="join").exists()
    commit("slow")
    assert Step.objects.filter(run=run, node_id="join").count() == 1
    commit("join")
    commit("end")
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and (fresh.state["l"], fresh.state["r"], fresh.state["s"]) == (1, 2, 3)
    assert not Step.objects.filter(run=run, node_id="end_skip").exists()


def test_a_branch_closed_by_a_condition_does_not_hold_the_join(store_path):
    spec = graph(
        [node("start", "start"), node("gate", "condition", config={"expression": "x > 0"}), transform("left", l="1"),
         transform("right", r="2"), node("join", "join"), node("end", "end"), node("end_skip", "end")],
        [edge("start", "gate"), edge("start", "right"), edge("gate", "left", "true"), edge("gate", "end_skip", "false"),
         edge("left", "join"), edge("right", "join"), edge("join", "end")],
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    run, start_id = started(spec, {"x": 0})
    engine.step_commit(engine.step_claim(start_id, W), NodeResult(), keep_next=False)
    for node_id, result in (("right", None), ("gate", NodeResult(route=["false"]))):
        claimed = engine.step_claim(step(run, node_id).pk, W)
        engine.step_commit(claimed, result or engine.execute_node(claimed), keep_next=False)
    assert Step.objects.filter(run=run, node_id="join").count() == 1
    assert not Step.objects.filter(run=run, node_id="left").exists()


# --------------------------------------------------------------------------- retries


def test_retry_per_policy_then_final_failure_fails_the_run(store_path):
    spec = linear("a")
    spec["nodes"][1]["retry"] = {"max_attempts": 2, "backoff_seconds": 0}
    run, start_id = started(spec)
    a = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    with engine.local_mode() as queue:
        retried = engine.step_fail(a, NodeError("flaky", code="flaky", retryable=True))
    assert retried.committed and retried.dispatch == [a.step_id] == list(queue)
    row = step(run, "a")
    assert (row.status, row.lease_owner, row.error["code"]) == (StepStatus.PENDING, "", "flaky")
    assert kinds(run)[-1] == RunEventKind.STEP_RETRYING
    again = engine.step_claim(a.step_id, W)
    assert again is not None and again.attempt == 2 and again.idempotency_key == a.idempotency_key
    final = engine.step_fail(again, NodeError("still flaky", code="flaky", retryable=True))
    assert final.committed and final.run_status == RunStatus.FAILED
    assert list(StepAttempt.objects.filter(step_id=a.step_id).values_list("number", "status")) == [(1, "failed"), (2, "failed")]
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.FAILED and fresh.error["code"] == "flaky" and fresh.error["node_id"] == "a"
    assert kinds(run)[-2:] == [RunEventKind.STEP_FAILED, RunEventKind.RUN_FAILED]


def test_a_not_retryable_error_fails_at_once(store_path):
    spec = linear("a")
    spec["nodes"][1]["retry"] = {"max_attempts": 3, "backoff_seconds": 0}
    run, start_id = started(spec)
    a = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert engine.step_fail(a, NodeError("bad input", code="invalid", retryable=False)).run_status == RunStatus.FAILED
    assert step(run, "a").status == StepStatus.FAILED


# --------------------------------------------------------------------------- child steps


def test_child_steps_suspend_the_parent_and_wake_it_with_their_results(store_path, effects_file):
    spec = graph(
        [node("start", "start"), node("agent", "spawner", config={"rounds": [["k1", "k2"]], "fail": ["k2"]}), node("end", "end")],
        chain("start", "agent", "end"),
    )
    run, start_id = started(spec)
    parent = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    spawned = engine.step_commit(parent, engine.execute_node(parent))
    assert step(run, "agent").status == StepStatus.SUSPENDED and step(run, "agent").lease_owner == ""
    children = Step.objects.filter(run=run, parent__isnull=False).order_by("child_key")
    assert [(c.child_key, c.node_id) for c in children] == [("k1", "agent#0/k1"), ("k2", "agent#0/k2")]
    first = spawned.next_step
    assert first is not None and first.parent_id == parent.step_id
    outcome = engine.step_commit(first, engine.execute_node(first))
    assert outcome.next_step is None and step(run, "agent").status == StepStatus.SUSPENDED  # a sibling is still open
    other = engine.step_claim(next(c.pk for c in children if c.pk != first.step_id), W)
    woken = engine.step_fail(other, NodeError("child failed", code="child_failed", retryable=False))
    assert woken.committed and woken.run_status == RunStatus.RUNNING  # a failed child does not fail the run
    assert woken.dispatch == [parent.step_id]
    replay = engine.step_claim(parent.step_id, W)
    assert replay is not None and replay.attempt == 2
    assert replay.children == {"k1": {"status": "succeeded", "output": {"key": "k1", "round": 0}}, "k2": {"status": "failed", "error": step(run, "agent#0/k2").error}}
    end = engine.step_commit(replay, engine.execute_node(replay)).next_step
    engine.step_commit(end, engine.execute_node(end))
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and fresh.state["children"] == {"k1": "succeeded", "k2": "failed"}


# --------------------------------------------------------------------------- recovery


def test_a_live_local_owner_keeps_a_lapsed_lease_for_the_grace_period(store_path, settings):
    # This test process is the owner: a process that certainly runs on this host. Its
    # heartbeat being late (waiting on SQLite's writer lock, say) must not make its step
    # run twice; past the grace a hung owner loses the step like any other.
    settings.BALLAST_LIVE_OWNER_GRACE_SECONDS = 30
    me = engine.current_worker()
    run, start_id = started(linear("a"))
    a = engine.step_commit(engine.step_claim(start_id, me), NodeResult()).next_step
    assert a is not None and a.worker == me
    Step.objects.filter(pk=a.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with engine.local_mode() as queue:
        assert engine.recover_once() == [] and not queue
    assert step(run, "a").status == StepStatus.RUNNING
    Step.objects.filter(pk=a.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=31))
    with engine.local_mode() as queue:
        assert engine.recover_once() == [a.step_id] == list(queue)
    assert step(run, "a").status == StepStatus.PENDING
    recovered = RunEvent.objects.get(run=run, kind=RunEventKind.STEP_RECOVERED)
    assert recovered.data["lease_expired"] is True and recovered.data["owner"] == me


def test_recovery_requeues_an_expired_lease_with_the_same_key_and_never_a_live_one(store_path):
    run, start_id = started(linear("a"))
    a = engine.step_commit(engine.step_claim(start_id, "otherhost:9:9"), NodeResult()).next_step
    with engine.local_mode() as queue:
        assert engine.recover_once() == [] and not queue  # a live lease on another host stays
    Step.objects.filter(pk=a.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with engine.local_mode() as queue:
        assert engine.recover_once() == [a.step_id] == list(queue)
    row = step(run, "a")
    assert (row.status, row.lease_owner) == (StepStatus.PENDING, "")
    assert list(StepAttempt.objects.filter(step=row).values_list("number", "status")) == [(1, AttemptStatus.LOST)]
    assert kinds(run)[-1] == RunEventKind.STEP_RECOVERED
    again = engine.step_claim(a.step_id, W)
    assert again is not None and again.attempt == 2 and again.idempotency_key == a.idempotency_key
    # The interrupted attempt's late commit lands nowhere; the new one does.
    assert not engine.step_commit(a, NodeResult(updates={"late": True})).committed
    assert engine.step_commit(again, engine.execute_node(again)).committed
