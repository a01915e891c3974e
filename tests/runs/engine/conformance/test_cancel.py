"""Store conformance for a run cancelled while its steps run: their commits end them
cancelled (never a success after ``run_cancelled``), keep what they spent, start nothing.

Every test runs on the portable path and on the database's fast path (conftest.py): a
fast path must fall back for a run that is no longer running, so both must agree.
"""
from __future__ import annotations

from decimal import Decimal

import pytest

from runs.models import Run, RunEvent, Step, StepAttempt, StepStatus
from runs.nodes.base import NodeResult
from runs.services import run_cancel
from runs.vocabulary import NodeError, StepCancelled, Usage
from tests.support import engine
from tests.support.conformance import W2, W, started, step
from tests.support.specs import edge, graph, node, transform

pytestmark = pytest.mark.django_db(transaction=True)


def fanout(n: int) -> dict:
    ids = [f"b{k}" for k in range(1, n + 1)]
    return graph(
        [node("start", "start"), *[transform(i, hits="1") for i in ids], node("join", "join"), node("end", "end")],
        [edge("start", i) for i in ids] + [edge(i, "join") for i in ids] + [edge("join", "end")],
        state={"hits": {"reducer": "add", "default": 0}},
    )


def test_steps_running_when_their_run_is_cancelled_end_cancelled(store_path):
    run, start_id = started(fanout(3))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert b1 is not None
    b2 = engine.step_claim(step(run, "b2").pk, W2)
    b3 = engine.step_claim(step(run, "b3").pk, W2)
    assert b2 is not None and b3 is not None
    assert run_cancel(run=run, actor="tester")
    cancelled_at = RunEvent.objects.get(run=run, kind="run_cancelled").seq
    spent = Usage(provider="mock", model="mock-1", input_tokens=10, output_tokens=5)
    with engine.local_mode() as queue:
        # b1 finishes as if nothing happened, b2 stopped at its cancel event, b3 failed otherwise.
        done = engine.step_commit(b1, NodeResult(updates={"hits": 1}, usage=spent, cost_usd=Decimal("0.25")))
        stopped = engine.step_fail(b2, StepCancelled())
        failed = engine.step_fail(b3, NodeError("flaky", code="flaky", retryable=True))
    assert done.committed and stopped.committed and failed.committed
    assert done.next_step is None and not done.dispatch and not failed.dispatch and list(queue) == []
    for b in ("b1", "b2", "b3"):
        row = step(run, b)
        assert (row.status, row.error["code"], row.output, row.lease_owner) == (StepStatus.CANCELLED, "cancelled", None, ""), b
        assert list(StepAttempt.objects.filter(step=row).values_list("status", flat=True)) == ["failed"], b
    run = Run.objects.get(pk=run.pk)
    assert run.status == "cancelled" and run.state.get("hits", 0) == 0  # no write of a cancelled step merged
    assert (run.input_tokens, run.output_tokens, run.cost_usd) == (10, 5, Decimal("0.25"))  # what b1 spent still counts
    assert StepAttempt.objects.get(step=step(run, "b1")).cost_usd == Decimal("0.25")
    assert not RunEvent.objects.filter(run=run, kind="step_succeeded", seq__gt=cancelled_at).exists()
    assert RunEvent.objects.filter(run=run, kind="step_failed", seq__gt=cancelled_at, data__error__code="cancelled").count() == 3
    assert not Step.objects.filter(run=run, node_id__in=("join", "end")).exists()


def test_a_lost_lease_of_a_cancelled_run_writes_nothing(store_path):
    run, start_id = started(fanout(2))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert b1 is not None
    assert run_cancel(run=run, actor="tester")
    stale = b1.__class__(**{**b1.__dict__, "attempt": b1.attempt + 1})  # another attempt's fence
    with engine.local_mode():
        assert not engine.step_commit(stale, NodeResult()).committed
    assert step(run, "b1").status == StepStatus.RUNNING  # left to recovery, as every lost lease


def test_a_lost_reply_hands_back_only_steps_no_thread_of_the_worker_holds(store_path):
    run, start_id = started(fanout(3))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert b1 is not None
    b2 = engine.step_claim(step(run, "b2").pk, W)
    b3 = engine.step_claim(step(run, "b3").pk, W)
    assert b2 is not None and b3 is not None
    # b2 runs on another step thread of W: it stays; b1 and b3 never began: handed back.
    released = engine.steps_release_kept(run.pk, W, in_hand={b2.step_id})
    assert sorted(released) == sorted([b1.step_id, b3.step_id])
    assert step(run, "b2").status == StepStatus.RUNNING and step(run, "b2").lease_owner == W
    assert step(run, "b1").status == step(run, "b3").status == StepStatus.PENDING
