"""Graphs that call graphs across crashes (runs.subgraphs), with REAL qcluster processes SIGKILLed: before and after the parent step's commit that creates the child, while the child runs, and while the child's result is handed to the parent. Each time: exactly one child run, and no committed step executed again."""
from __future__ import annotations

from collections import Counter

import pytest

from runs.models import Run, RunStatus, Step
from runs.services import run_start
from tests.support.cluster import describe_db, wait_for_status, wait_until
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

N_INPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _graphs() -> Run:
    """parent: start -> p_before (effect) -> call (child) -> p_after (effect) -> end;
    child: start -> c_one (effect) -> c_two (effect) -> end. Returns the started parent."""
    child = publish(graph(
        [node("start", "start"), effect("c_one"), effect("c_two"), node("end", "end")],
        chain("start", "c_one", "c_two", "end"), input_schema=N_INPUT,
    ))  # fmt: skip
    parent = publish(graph(
        [node("start", "start"), effect("p_before"),
         node("call", "subgraph", config={"graph": child.graph_id, "input": {"n": "{{ input.x }}"}, "output_key": "result"}),
         effect("p_after"), node("end", "end")],
        chain("start", "p_before", "call", "p_after", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    ))  # fmt: skip
    return run_start(version=parent, run_input={"x": 7})


def _children(run: Run) -> list[Run]:
    return list(Run.objects.filter(parent_step__run_id=run.pk))


def _finish_with_fresh_cluster(run: Run, cluster_factory, crashed) -> Run:
    fresh = cluster_factory("fresh").start()
    done = wait_for_status(run, ("succeeded", "failed"), timeout=90, clusters=[crashed, fresh])
    assert done.status == RunStatus.SUCCEEDED, describe_db(run.pk)
    return done


def _effects_once(effects_file) -> Counter:
    """Every effect label, counted; committed steps' effects must appear once."""
    return Counter(e["label"] for e in read_effects(str(effects_file)))


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_a_parent_worker_killed_around_the_commit_that_creates_the_child_leaves_one_child(cluster_factory, effects_file, point):
    run = _graphs()
    crashed = cluster_factory("crashed", workers=1).start(fault=f"{point}:call")
    report = crashed.wait_for_fault()
    crashed.kill()
    assert report["node_id"] == "call"
    # Before the commit nothing of the call exists; after it, the waiting step and its child do.
    assert len(_children(run)) == (0 if point == "before_commit" else 1)
    done = _finish_with_fresh_cluster(run, cluster_factory, crashed)
    [kid] = _children(done)
    assert kid.status == RunStatus.SUCCEEDED and kid.input == {"n": 7}
    assert done.state["result"] == kid.output
    assert Step.objects.get(run=done, node_id="call").output["child_run"] == kid.pk
    counts = _effects_once(effects_file)
    assert counts == Counter({"p_before": 1, "c_one": 1, "c_two": 1, "p_after": 1}), counts


def test_a_worker_killed_while_the_child_runs_resumes_it_without_a_second_child(cluster_factory, effects_file):
    run = _graphs()
    crashed = cluster_factory("crashed", workers=1).start(fault="during_execute:c_two")
    crashed.wait_for_fault()
    crashed.kill()
    [kid] = _children(run)
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING  # the parent waits as a row
    assert Step.objects.get(run=run, node_id="call").status == "waiting"
    done = _finish_with_fresh_cluster(run, cluster_factory, crashed)
    assert [k.pk for k in _children(done)] == [kid.pk]
    counts = _effects_once(effects_file)
    # c_two was in flight (at-least-once, same idempotency key); everything committed ran once.
    assert counts["p_before"] == 1 and counts["c_one"] == 1 and counts["p_after"] == 1, counts
    keys = {e["key"] for e in read_effects(str(effects_file)) if e["label"] == "c_two"}
    assert len(keys) == 1  # a re-run of the in-flight step kept its idempotency key


def test_a_worker_killed_while_handing_the_result_to_the_parent_hands_it_once(cluster_factory, effects_file):
    run = _graphs()
    crashed = cluster_factory("crashed", workers=1).start(fault="subgraph_handover_before_commit:call")
    crashed.wait_for_fault()
    crashed.kill()
    [kid] = _children(run)
    assert kid.status == RunStatus.SUCCEEDED
    # The hand-over rolled back: the parent step still waits and the child still owes it.
    assert Step.objects.get(run=run, node_id="call").status == "waiting"
    assert Run.objects.get(pk=kid.pk).parent_due_at is not None
    done = _finish_with_fresh_cluster(run, cluster_factory, crashed)
    wait_until(lambda: Run.objects.get(pk=kid.pk).parent_due_at is None, 30, "the child's result handed over", run_id=run.pk)
    assert [k.pk for k in _children(done)] == [kid.pk]
    assert _effects_once(effects_file) == Counter({"p_before": 1, "c_one": 1, "c_two": 1, "p_after": 1})
