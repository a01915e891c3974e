"""Child steps (the agent node's durable shape): spawn, suspend, replay, never re-run a finished child; on every commit path (conftest.py)."""
from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from runs.models import Step
from runs.services import run_start
from tests.support import engine
from tests.support.leases import begun
from tests.support.specs import chain, graph, node, publish, run_local
from tests.support.tools import read_effects

pytestmark = pytest.mark.django_db(transaction=True)


def spawner_graph(**config):
    return graph([node("start", "start"), node("agent", "spawner", config=config), node("end", "end")], chain("start", "agent", "end"))


def test_children_run_in_rounds_and_parent_replays_with_their_results(effects_file, store_path):
    run = run_local(spawner_graph(rounds=[["turn-0"], ["tool-a", "tool-b"], ["turn-1"]]))
    assert run.status == "succeeded", run.error
    assert run.state["children"] == {"turn-0": "succeeded", "tool-a": "succeeded", "tool-b": "succeeded", "turn-1": "succeeded"}
    parent = Step.objects.get(run=run, node_id="agent")
    children = list(Step.objects.filter(parent=parent).order_by("id").values_list("child_key", "status"))
    assert children == [("turn-0", "succeeded"), ("tool-a", "succeeded"), ("tool-b", "succeeded"), ("turn-1", "succeeded")]
    labels = [e["label"] for e in read_effects()]
    assert sorted(labels) == ["tool-a", "tool-b", "turn-0", "turn-1"]  # each child executed once
    keys = {e["key"] for e in read_effects()}
    assert keys == {f"{run.uuid}:agent#0/{label}:0" for label in labels}  # one idempotency key per child


def test_failed_child_is_reported_to_the_parent_not_the_run(effects_file, store_path):
    run = run_local(spawner_graph(rounds=[["a", "b"]], fail=["b"]))
    assert run.status == "succeeded", run.error
    assert run.state["children"] == {"a": "succeeded", "b": "failed"}


def test_parallelism_bound_applies_to_children(effects_file, store_path):
    spec = spawner_graph(rounds=[[f"c{i}" for i in range(6)]])
    spec["settings"] = {"max_parallelism": 2}
    run = run_local(spec)
    assert run.status == "succeeded" and len(run.state["children"]) == 6


def test_crashed_unsafe_child_parks_and_finished_children_never_rerun(effects_file, store_path):
    version = publish(spawner_graph(rounds=[["safe"], ["pay"]], unsafe=["pay"]))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
    # Commit step by step, never keeping a successor, until the 'pay' child is queued;
    # then a worker claims it and dies mid-call.
    pending = list(queue)
    while pending:
        step = Step.objects.get(pk=pending.pop(0))
        if step.child_key == "pay":
            begun(engine.step_claim(step.pk, "deadhost:1:1"))  # dies in the middle of its call
            break
        claimed = engine.step_claim(step.pk, "livehost:1:1")
        pending += engine.step_commit(claimed, engine.execute_node(claimed), keep_next=False).dispatch
    pay = Step.objects.get(run=run, child_key="pay")
    assert pay.status == "running"
    Step.objects.filter(pk=pay.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    engine.recover_once()
    pay.refresh_from_db()
    run.refresh_from_db()
    assert pay.status == "parked" and run.status == "waiting"
    request = ApprovalRequest.objects.get(run=run, purpose="recovery")
    from approvals.services import approval_decide

    with engine.local_mode() as queue:
        approval_decide(approval_id=request.pk, decision="skip", actor="tester", output={"paid": "manually"})
        engine.drive_local(run.pk, queue=queue, timeout=20)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert [e["label"] for e in read_effects()] == ["safe"]  # neither re-ran
