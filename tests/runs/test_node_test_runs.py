"""One-node test runs (runs.services.node_test_run) on the real engine: what they record,
and that one left unfinished by a dead web process is finished by the ordinary engine."""
from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEntry
from builder.services import graph_create, graph_node_test
from runs.models import Run, RunEvent, Step, StepAttempt
from tests.support.specs import chain, graph, node, transform

pytestmark = pytest.mark.django_db(transaction=True)


def draft() -> Any:
    spec = graph(
        [node("start", "start"), transform("calc", total="base + len(items)"), node("end", "end")],
        chain("start", "calc", "end"),
        state={"items": {"reducer": "append", "default": ["seed"]}},
        input_schema={"type": "object", "properties": {"base": {"type": "integer"}}},
    )
    return graph_create(name=spec["name"], draft=spec)


def test_a_test_run_starts_at_the_node_with_the_given_state_and_records_everything() -> None:
    run = graph_node_test(graph=draft(), node_id="calc", state={"base": 10, "input": {"base": 10}}, actor="tester")
    assert run.is_test and run.status == "succeeded"
    steps = list(Step.objects.filter(run=run).order_by("id").values_list("node_id", "status", "max_attempts"))
    assert steps == [("calc", "succeeded", 1), ("test_end", "succeeded", 1)]
    calc = Step.objects.get(run=run, node_id="calc")
    assert calc.updates == {"total": 11}  # the declared default of items counted: ["seed"]
    assert run.input == {"base": 10} and run.state["input"] == {"base": 10} and run.state["total"] == 11
    assert StepAttempt.objects.filter(step__run=run).count() == 2
    kinds = list(RunEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))
    assert kinds[0] == "run_created" and kinds[-1] == "run_succeeded"
    assert AuditEntry.objects.filter(scope=f"run:{run.pk}", action="run.test_node", actor="tester").count() == 1


def test_a_test_run_its_web_process_never_drove_is_finished_by_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The web process died right after the test run committed (its step pending, no
    queue entry): the pending-step recovery hands it on and the engine finishes it from
    the snapshot version like any run."""
    import runs.engine.loop as loop
    from tests.support.specs import continue_local

    monkeypatch.setattr(loop, "drive_local", lambda *args, **kwargs: None)
    run = graph_node_test(graph=draft(), node_id="calc", state={"base": 1})
    assert run.status == "queued" and Step.objects.get(run=run).status == "pending"
    monkeypatch.undo()
    run = continue_local(Run.objects.get(pk=run.pk))
    assert run.status == "succeeded" and run.state["total"] == 2
