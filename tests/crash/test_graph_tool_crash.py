"""An agent's graph tool across crashes (runs.subgraphs.tools), with REAL qcluster processes SIGKILLed: around the commit of the tool-call child step that creates the child run, and while the child runs. Each time: exactly one child run, its output reaches the model, and no committed step executed again."""
from __future__ import annotations

from collections import Counter

import pytest

from runs.models import Run, RunStatus, Step, StepStatus
from runs.services import run_start
from tests.support.cluster import describe_db, wait_for_status
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.subgraphs import N_INPUT, tool_agent_spec
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

CALL = "agent#0/tool-0-c1"


def _start() -> Run:
    """child: start -> c_one (effect) -> c_two (effect) -> end; parent: start -> agent (the
    mock calls graph tool ``work`` with ``{n: 7}``, then answers) -> end."""
    child = publish(graph(
        [node("start", "start"), effect("c_one"), effect("c_two"), node("end", "end", config={"output": ["n"]})],
        chain("start", "c_one", "c_two", "end"), input_schema=N_INPUT,
    ))  # fmt: skip
    parent = publish(tool_agent_spec([{"graph": child.graph_id, "name": "work"}], [{"id": "c1", "name": "work", "arguments": {"n": 7}}]))
    return run_start(version=parent, run_input={"x": 1})


def _children(run: Run) -> list[Run]:
    return list(Run.objects.filter(parent_step__run_id=run.pk))


def _finish(run: Run, cluster_factory, crashed) -> Run:
    fresh = cluster_factory("fresh").start()
    done = wait_for_status(run, ("succeeded", "failed"), timeout=90, clusters=[crashed, fresh])
    assert done.status == RunStatus.SUCCEEDED, describe_db(run.pk)
    [kid] = _children(done)
    assert kid.status == RunStatus.SUCCEEDED and kid.input == {"n": 7}
    call = Step.objects.get(run=done, node_id=CALL)
    assert call.status == StepStatus.SUCCEEDED and call.output == kid.output == {"n": 7}
    assert kid.parent_step_id == call.pk
    return done


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_a_worker_killed_around_the_commit_that_creates_the_child_leaves_one_child(cluster_factory, effects_file, point):
    run = _start()
    crashed = cluster_factory("crashed", workers=1).start(fault=f"{point}:{CALL}")
    report = crashed.wait_for_fault()
    crashed.kill()
    assert report["node_id"] == CALL
    # Before the commit nothing of the call exists; after it, the waiting child step and its child do.
    assert len(_children(run)) == (0 if point == "before_commit" else 1)
    _finish(run, cluster_factory, crashed)
    assert Counter(e["label"] for e in read_effects(str(effects_file))) == Counter({"c_one": 1, "c_two": 1})


def test_a_worker_killed_while_the_child_runs_resumes_it_without_a_second_child(cluster_factory, effects_file):
    run = _start()
    crashed = cluster_factory("crashed", workers=1).start(fault="during_execute:c_two")
    crashed.wait_for_fault()
    crashed.kill()
    [kid] = _children(run)
    # The agent waits as rows: its step suspended, the tool call waiting for the child.
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert Step.objects.get(run=run, node_id=CALL).status == StepStatus.WAITING
    assert Step.objects.get(run=run, node_id="agent").status == StepStatus.SUSPENDED
    done = _finish(run, cluster_factory, crashed)
    assert [k.pk for k in _children(done)] == [kid.pk]
    effects = read_effects(str(effects_file))
    assert Counter(e["label"] for e in effects)["c_one"] == 1
    assert len({e["key"] for e in effects if e["label"] == "c_two"}) == 1  # the in-flight step kept its idempotency key
    # Model turns that committed were not called again: one turn-0 and one turn-1.
    assert sorted(Step.objects.filter(run=done, parent__isnull=False).values_list("child_key", flat=True)) == ["tool-0-c1", "turn-0", "turn-1"]
