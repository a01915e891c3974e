"""Graphs that call graphs (runs.subgraphs): a subgraph step runs a published graph as a child run pinned to a version, its input checked against the child's schema, its output handed back in one transaction, its cost rolled up, cancel propagated both ways, cycles and forbidden or unpublished callees refused when publishing."""
from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from builder.services import GraphInvalid, graph_draft_save, graph_publish
from builder.validation import validate_spec
from graphs.models import Graph, GraphVersion
from runs.models import Run, RunStatus, Step, StepStatus
from runs.services import run_cancel
from tests.support import engine
from tests.support.specs import chain, continue_local, graph, node, publish, run_local, transform
from tests.support.subgraphs import call_spec, child_of, child_spec, waiting_child

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def test_a_graph_calls_a_published_graph_and_continues_with_its_output() -> None:
    child = publish(child_spec())
    run = run_local(call_spec(child.graph_id, input={"n": "{{ input.x * 2 }}"}), {"x": 5})
    assert run.status == RunStatus.SUCCEEDED, run.error
    kid = child_of(run, "call")
    assert kid.status == RunStatus.SUCCEEDED
    assert kid.graph_version_id == child.pk  # "latest" pinned to the version published then
    assert kid.input == {"n": 10}
    assert run.state["result"] == kid.output
    assert run.state["after"] == kid.output["doubled"] + 1
    step = Step.objects.get(run=run, node_id="call")
    assert step.output == {"child_run": kid.pk, "output": kid.output}
    assert Run.objects.filter(parent_step__run=run).count() == 1


def test_a_pinned_version_is_called_even_after_a_newer_one_is_published() -> None:
    first = publish(child_spec(factor=2, name="pinned-child"))
    publish(child_spec(factor=3, name="pinned-child"))
    assert GraphVersion.objects.filter(graph=first.graph, is_test=False).count() == 2
    run = run_local(call_spec(first.graph_id, version=1, input={"n": "{{ input.x }}"}), {"x": 4})
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.state["result"] == {"doubled": 8}


def test_an_input_that_does_not_match_the_childs_schema_fails_the_step_naming_the_fields() -> None:
    child = publish(child_spec())
    run = run_local(call_spec(child.graph_id, input={"n": "'not a number'"}), {"x": 1})
    assert run.status == RunStatus.FAILED
    step = Step.objects.get(run=run, node_id="call")
    assert step.error["code"] == "subgraph_input"
    assert "input.n" in step.error["message"]
    assert not Run.objects.filter(parent_step__run=run).exists()


def test_a_failed_child_fails_the_waiting_step_with_its_error_and_a_resume_resumes_the_child() -> None:
    child = publish(graph(
        [node("start", "start"), transform("boom", q="input.n / input.zero"), node("end", "end")],
        chain("start", "boom", "end"),
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}, "zero": {"type": "integer"}}},
    ))  # fmt: skip
    run = run_local(call_spec(child.graph_id, input={"n": 1, "zero": 0}), {"x": 1})
    assert run.status == RunStatus.FAILED
    kid = child_of(run, "call")
    assert kid.status == RunStatus.FAILED
    step = Step.objects.get(run=run, node_id="call")
    assert step.status == StepStatus.FAILED
    assert step.error["code"] == "child_failed" and step.error["child_run"] == kid.pk
    assert f"child run {kid.pk}" in run.error["message"]
    # Resuming the parent resumes the same child (no second child), which fails again.
    with engine.local_mode() as queue:
        queue.extend(engine.run_resume(run.pk, actor="tester"))
        engine.drive_local(run.pk, queue=queue, timeout=30)
    assert Run.objects.filter(parent_step__run=run).count() == 1


def test_a_retry_policy_on_a_call_graph_node_is_warned_about_not_applied() -> None:
    # One child per step: a failed child fails the step whatever its retry policy says.
    child = publish(child_spec())
    spec = call_spec(child.graph_id, input={"n": 1})
    spec["nodes"][1]["retry"] = {"max_attempts": 3}
    result = validate_spec(spec)
    assert result.ok, result.as_dict()  # a warning, not an error
    assert [(w.node_id, w.field, w.code) for w in result.warnings] == [("call", "retry", "retry_not_applied")]
    spec["nodes"][1]["retry"] = {"max_attempts": 1}
    assert validate_spec(spec).warnings == []


def test_the_parent_waits_as_a_row_and_cancelling_it_cancels_the_child() -> None:
    run, kid = waiting_child()
    assert run.status == RunStatus.WAITING
    assert Step.objects.get(run=run, node_id="call").status == StepStatus.WAITING
    assert not Step.objects.filter(run=run, status=StepStatus.RUNNING).exists()  # no worker held
    assert run_cancel(run=run, actor="tester", reason="stop")
    kid.refresh_from_db()
    assert kid.status == RunStatus.CANCELLED
    assert "parent run" in kid.error["message"]


def test_cancelling_the_child_fails_the_waiting_parent_step() -> None:
    run, kid = waiting_child()
    assert run_cancel(run=kid, actor="tester", reason="not needed")
    run = continue_local(run)
    assert run.status == RunStatus.FAILED
    step = Step.objects.get(run=run, node_id="call")
    assert step.error["code"] == "child_cancelled"
    assert "not needed" in step.error["message"]


def test_a_child_of_a_child_runs_and_hands_its_output_up() -> None:
    leaf = publish(child_spec())
    middle = publish(call_spec(leaf.graph_id, input={"n": "{{ input.n + 1 }}"}, name="middle",
                               input_schema={"type": "object", "properties": {"n": {"type": "integer"}}}))  # fmt: skip
    run = run_local(call_spec(middle.graph_id, input={"n": "{{ input.x }}"}), {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    mid = child_of(run, "call")
    assert child_of(mid, "call").status == RunStatus.SUCCEEDED
    assert run.state["result"]["result"] == {"doubled": 4}  # the middle graph returns its whole state


def test_calls_nested_past_the_depth_limit_fail_the_deepest_step(settings: Any) -> None:
    settings.BALLAST_SUBGRAPH_MAX_DEPTH = 1
    leaf = publish(child_spec())
    middle = publish(call_spec(leaf.graph_id, input={"n": 1}, name="too-deep-middle"))
    run = run_local(call_spec(middle.graph_id, input={"x": 1}), {"x": 1})
    assert run.status == RunStatus.FAILED
    mid = child_of(run, "call")
    assert Step.objects.get(run=mid, node_id="call").error["code"] == "subgraph_too_deep"
    assert Step.objects.get(run=run, node_id="call").error["code"] == "child_failed"
    assert not Run.objects.filter(parent_step__run=mid).exists()


def test_cost_rolls_up_from_child_runs() -> None:
    from runs.subgraphs.costs import run_totals

    priced = publish(graph(
        [node("start", "start"), node("ask", "llm", config={"prompt": "Say {{ n }}", "model": "mock-1", "max_tokens": 50}),
         node("end", "end", config={"output": ["reply"]})],
        chain("start", "ask", "end"), input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    ))  # fmt: skip
    spec = call_spec(priced.graph_id, input={"n": "{{ input.x }}"})
    spec["nodes"].insert(1, node("think", "llm", config={"prompt": "Think about {{ input.x }}", "model": "mock-1", "max_tokens": 50}))
    spec["edges"] = chain("start", "think", "call", "after", "end")
    run = run_local(spec, {"x": 2})
    assert run.status == RunStatus.SUCCEEDED, run.error
    kid = child_of(run, "call")
    assert kid.cost_usd > 0 and run.cost_usd > 0
    totals = run_totals(run)
    # The parent's own spend stays its own (reports by graph count each run once); its totals add the child's.
    assert totals["cost_usd"] == run.cost_usd + kid.cost_usd
    assert totals["input_tokens"] == run.input_tokens + kid.input_tokens > run.input_tokens
    assert [(c["run_id"], c["cost_usd"]) for c in totals["children"]] == [(kid.pk, kid.cost_usd)]
    # A parent with a budget hands the child what is left of it.
    budgeted = run_local(run.graph_version, {"x": 3}, budget_usd=Decimal("5"))
    assert child_of(budgeted, "call").budget_usd == Decimal("5") - Run.objects.get(pk=budgeted.pk).cost_usd


def test_the_validate_api_reports_a_call_of_an_unpublished_graph() -> None:
    from tests.support.world import client_with_token

    client = client_with_token(get_user_model().objects.create_superuser("root", "root@localhost", "pw"))
    empty = Graph.objects.create(name="nothing-yet", draft={})
    body = client.post("/api/v1/graphs/validate/", call_spec(empty.pk, input={}), format="json").json()
    assert body["valid"] is False
    [issue] = [e for e in body["errors"] if e["node"] == "call"]
    assert issue["code"] == "subgraph_unpublished" and issue["path"] == "nodes[1].config.graph"
    assert "nothing-yet" in issue["message"]


def _draft(graph_obj: Graph, spec: dict[str, Any]) -> None:
    graph_draft_save(graph=graph_obj, spec=spec, base_revision=graph_obj.draft_revision)


def test_a_cycle_through_published_graphs_is_refused_when_publishing() -> None:
    a = publish(child_spec(name="cycle-a"))
    b = publish(call_spec(a.graph_id, name="cycle-b", input={"n": 1}))
    # a now calls b, which calls a: refused, naming the cycle.
    spec = call_spec(b.graph_id, name="cycle-a", input={}, input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    _draft(a.graph, spec)
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=a.graph_id))
    issue = next(i for i in exc.value.issues if i.code == "subgraph_cycle")
    assert issue.node_id == "call"
    assert "cycle-a -> cycle-b -> cycle-a" in issue.message


def test_a_graph_calling_itself_or_an_unpublished_graph_is_refused() -> None:
    own = publish(child_spec(name="self-caller"))
    _draft(own.graph, call_spec(own.graph_id, name="self-caller", input={"n": 1}))
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=own.graph_id))
    assert [i.code for i in exc.value.issues if i.node_id == "call"] == ["subgraph_cycle"]
    empty = Graph.objects.create(name="never-published", draft={})
    other = publish(child_spec(name="caller-of-empty"))
    _draft(other.graph, call_spec(empty.pk, name="caller-of-empty", input={}))
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=other.graph_id))
    assert [i.code for i in exc.value.issues if i.node_id == "call"] == ["subgraph_unpublished"]


def test_calling_a_graph_the_user_may_not_run_is_refused() -> None:
    User = get_user_model()
    alice = User.objects.create_user("alice", password="pw")
    secret = publish(child_spec(name="secret"))
    secret.graph.operators.add(User.objects.create_user("owner", password="pw"))
    caller = publish(child_spec(name="alice-graph"))
    caller.graph.operators.add(alice)
    _draft(caller.graph, call_spec(secret.graph_id, name="alice-graph", input={"n": 1}))
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=caller.graph_id), user=alice)
    assert [i.code for i in exc.value.issues if i.node_id == "call"] == ["subgraph_forbidden"]
    # At run time too: a run started by alice of a graph that calls it fails the step.
    version = publish(call_spec(secret.graph_id, name="published-by-system", input={"n": 1}))
    version.graph.operators.add(alice)
    run = run_local(version, {"x": 1}, user=alice)
    assert run.status == RunStatus.FAILED
    assert Step.objects.get(run=run, node_id="call").error["code"] == "subgraph_forbidden"


def test_the_run_api_shows_parent_children_and_rolled_up_totals() -> None:
    from tests.support.world import client_with_token

    admin = get_user_model().objects.create_superuser("root", "root@localhost", "pw")
    client = client_with_token(admin)
    run, kid = waiting_child()
    Run.objects.filter(pk=kid.pk).update(cost_usd=Decimal("0.125"), input_tokens=7)
    body = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["parent"] is None
    assert body["waiting_for"] == "child_run"  # not "approval": no person is asked
    assert kid.pk not in [r["id"] for r in client.get("/api/v1/runs/?waiting_for=child_run").json()["results"]]
    assert [r["id"] for r in client.get("/api/v1/runs/?waiting_for=child_run").json()["results"]] == [run.pk]
    assert [r["id"] for r in client.get("/api/v1/runs/?waiting_for=approval").json()["results"]] == [kid.pk]
    assert [(c["run"], c["node_id"], c["status"], c["depth"]) for c in body["children"]] == [(kid.pk, "call", "waiting", 1)]
    assert Decimal(body["totals"]["cost_usd"]) == Decimal("0.125")
    assert body["totals"]["input_tokens"] == 7
    child_body = client.get(f"/api/v1/runs/{kid.pk}/").json()
    assert child_body["parent"] == {"run": run.pk, "step": kid.parent_step_id, "node_id": "call", "graph_name": run.graph_version.graph.name}
    assert child_body["children"] == []


def _race_cancel_and_finish(run: Run, kid: Run) -> list[BaseException]:
    """Cancel ``run`` on one thread while another approves ``kid``'s gate and drives it to
    its end, both released at once; returns what they raised."""
    request = ApprovalRequest.objects.get(run=kid, status="pending")
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def cancel() -> None:
        try:
            barrier.wait()
            run_cancel(run=run, actor="tester", reason="stop")
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(exc)
        finally:
            connection.close()

    def finish() -> None:
        try:
            barrier.wait()
            with engine.local_mode() as queue:
                approval_decide(approval_id=request.pk, decision="approve", actor="tester")
                engine.drive_local(kid.pk, queue=queue, timeout=30)
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=cancel), threading.Thread(target=finish)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of concurrent transactions: SQLite serialises writers")
def test_cancelling_the_parent_while_the_child_finishes_never_deadlocks_and_hands_nothing_over() -> None:
    # The parent's cancel locks the parent run, then each child; the child's end locks only
    # the child; the hand-over locks the parent, then the child: one order, so no deadlock.
    # Either may win (both orders show up over a few rounds).
    for _ in range(4):
        run, kid = waiting_child()
        errors = _race_cancel_and_finish(run, kid)
        # A decision that came after the cancel is refused (the child's gate closed with it).
        assert all(type(e).__name__ == "AlreadyDecided" for e in errors), errors
        with engine.local_mode() as queue:
            engine.drive_local(run.pk, queue=queue, timeout=30)
        run.refresh_from_db()
        kid.refresh_from_db()
        assert run.status == RunStatus.CANCELLED
        assert kid.status in (RunStatus.CANCELLED, RunStatus.SUCCEEDED)
        assert Step.objects.get(run=run, node_id="call").status == StepStatus.CANCELLED
        assert not Step.objects.filter(run=run, node_id="after").exists()  # nothing ran after the cancel
        assert kid.parent_due_at is None  # a child's end owed to a cancelled step is settled, not left due
