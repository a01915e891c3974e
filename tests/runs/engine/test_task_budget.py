"""A doorbell task stops taking kept successors once its budget (half django-q2's timeout) is spent: they go back to the queue."""
from __future__ import annotations

import time

import pytest

from runs.engine import dispatch, loop
from runs.models import Step
from runs.services import run_start
from tests.support import engine
from tests.support.specs import chain, graph, node, publish, transform

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_kept_successor_past_the_task_budget_goes_back_to_the_queue():
    version = publish(graph([node("start", "start"), transform("t0", x="x + 1"), node("end", "end")], chain("start", "t0", "end"),
                            state={"x": {"default": 0}}))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        claimed = engine.step_claim(queue.popleft(), "w:1:1")
        # The step in hand always runs; the one its commit keeps for us would start after
        # the budget ended, so it is handed back instead.
        assert loop._run_chain(claimed, "w:1:1", task_end=time.monotonic() - 1) is False
        steps = dict(Step.objects.filter(run=run).values_list("node_id", "status"))
        assert steps == {"start": "succeeded", "t0": "pending"}
        t0 = Step.objects.get(run=run, node_id="t0")
        assert list(queue) == [t0.pk] and t0.attempt == 0 and t0.due_at is not None
        engine.drive_local(run.pk, queue=queue, timeout=60)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["x"] == 1


def test_the_budget_is_half_the_queue_timeout(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600}
    assert dispatch.task_budget_seconds() == 300
    with engine.local_mode():
        assert dispatch.task_budget_seconds() is None
