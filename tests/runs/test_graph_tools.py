"""Published graphs as an agent's tools (runs.subgraphs.tools): a model's call is a durable child run pinned to a version, its arguments checked against the child's input schema before anything is created, its output the tool's result, its failure an error result the model sees, its cost rolled up, cancel propagated both ways, and calls of missing, unpublished or cyclic graphs and clashing names refused when publishing."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from builder.services import GraphInvalid, graph_draft_save, graph_publish
from graphs.models import Graph
from runs.models import Run, RunStatus, Step, StepStatus
from runs.nodes.graph_tools import GraphTool, graph_calls
from runs.services import run_cancel
from runs.subgraphs.costs import run_totals
from tests.support.specs import chain, continue_local, graph, node, publish, run_local, transform
from tests.support.subgraphs import N_INPUT, child_spec, gate_spec, tool_agent_spec, tool_children

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def _tool(graph_id: int, name: str = "double", **fields: Any) -> dict[str, Any]:
    return {"graph": graph_id, "name": name, **fields}


def _messages_of(run: Run, key: str) -> list[dict[str, Any]]:
    return Step.objects.get(run=run, node_id=f"agent#0/{key}").input["messages"]


def _priced_child(**extra: Any) -> dict[str, Any]:
    """start -> double -> ask (an llm call: spends) -> end returning ``{"doubled"}``."""
    extra.setdefault("input_schema", N_INPUT)
    return graph(
        [node("start", "start"), transform("double", doubled="n * 2"),
         node("ask", "llm", config={"prompt": "Say {{ n }}", "model": "mock-1", "max_tokens": 20}),
         node("end", "end", config={"output": ["doubled"]})],
        chain("start", "double", "ask", "end"), **extra,
    )  # fmt: skip


def test_the_model_calls_a_graph_tool_and_gets_the_child_runs_output() -> None:
    child = publish(_priced_child(description="Doubles n."))
    spec = tool_agent_spec([_tool(child.graph_id)], [{"id": "c1", "name": "double", "arguments": {"n": 21}}])
    run = run_local(spec, {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    [kid] = tool_children(run)
    assert kid.status == RunStatus.SUCCEEDED
    assert kid.graph_version_id == child.pk  # "latest" pinned at the call
    assert kid.input == {"n": 21}
    call = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert kid.parent_step_id == call.pk
    assert call.status == StepStatus.SUCCEEDED and call.output == {"doubled": 42}
    # The model's next turn was sent the child's output as the tool's result.
    [result] = [m for m in _messages_of(run, "turn-1") if m["role"] == "tool"]
    assert json.loads(result["content"]) == {"doubled": 42} and not result.get("is_error")
    assert run.output == {"answer": "done"}
    # The child's spend is its own and rolled up into the parent's totals.
    totals = run_totals(run)
    assert kid.cost_usd > 0
    assert totals["cost_usd"] == run.cost_usd + kid.cost_usd
    assert [(c["run_id"], c["step_id"], c["node_id"]) for c in totals["children"]] == [(kid.pk, call.pk, "agent#0/tool-0-c1")]


def test_the_tool_offered_to_the_model_has_the_child_versions_input_schema() -> None:
    child = publish(child_spec(description="Doubles n."))
    offered = graph_calls().definition(GraphTool(graph=child.graph_id, name="double"))
    assert offered.name == "double"
    assert offered.parameters == N_INPUT
    assert offered.description == "Doubles n."
    assert graph_calls().definition(GraphTool(graph=child.graph_id, name="d", description="Mine")).description == "Mine"


def test_a_pinned_version_is_called_after_a_newer_one_is_published() -> None:
    first = publish(child_spec(factor=2, name="tool-pinned"))
    publish(child_spec(factor=3, name="tool-pinned"))
    spec = tool_agent_spec([_tool(first.graph_id, version=1)], [{"id": "c1", "name": "double", "arguments": {"n": 5}}])
    run = run_local(spec, {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    [kid] = tool_children(run)
    assert kid.graph_version_id == first.pk and kid.output == {"doubled": 10}


def test_an_invalid_call_is_an_error_result_and_creates_nothing() -> None:
    child = publish(child_spec())
    spec = tool_agent_spec([_tool(child.graph_id)], [{"id": "bad", "name": "double", "arguments": {"n": "many"}}])
    run = run_local(spec, {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert not Run.objects.filter(parent_step__run=run).exists()
    call = Step.objects.get(run=run, node_id="agent#0/tool-0-bad")
    assert call.status == StepStatus.FAILED and call.error["code"] == "subgraph_input"
    assert "input.n" in call.error["details"]["fields"]
    [result] = [m for m in _messages_of(run, "turn-1") if m["role"] == "tool"]
    assert result["is_error"] is True and json.loads(result["content"])["error"]["code"] == "subgraph_input"


def test_a_failed_child_is_an_error_result_the_model_sees() -> None:
    broken = publish(graph(
        [node("start", "start"), transform("boom", q="n / 0"), node("end", "end")],
        chain("start", "boom", "end"), input_schema=N_INPUT,
    ))  # fmt: skip
    spec = tool_agent_spec([_tool(broken.graph_id, name="boom")], [{"id": "c1", "name": "boom", "arguments": {"n": 1}}])
    run = run_local(spec, {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    [kid] = tool_children(run)
    assert kid.status == RunStatus.FAILED
    call = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert call.status == StepStatus.FAILED
    assert call.error["code"] == "child_failed" and call.error["child_run"] == kid.pk
    [result] = [m for m in _messages_of(run, "turn-1") if m["role"] == "tool"]
    assert result["is_error"] is True and f"child run {kid.pk}" in json.loads(result["content"])["error"]["message"]


def test_a_graph_tool_beside_a_registered_tool_in_one_turn() -> None:
    child = publish(child_spec())
    calls = [{"id": "g", "name": "double", "arguments": {"n": 2}}, {"id": "t", "name": "record_effect", "arguments": {"label": "x"}}]
    run = run_local(tool_agent_spec([_tool(child.graph_id)], calls, tools=["record_effect"]), {"x": 1})
    assert run.status == RunStatus.SUCCEEDED, run.error
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in _messages_of(run, "turn-1") if m["role"] == "tool"}
    assert results["g"] == {"doubled": 4}
    assert len(tool_children(run)) == 1


def _waiting(**run_kwargs: Any) -> tuple[Run, Run]:
    """A parent whose agent waits for a graph tool's child, which waits at an approval gate."""
    gate = publish(gate_spec())
    run = run_local(tool_agent_spec([_tool(gate.graph_id, name="review")], [{"id": "c1", "name": "review", "arguments": {"n": 1}}]), {"x": 1})
    [kid] = tool_children(run)
    assert kid.status == RunStatus.WAITING, (kid.status, kid.error, run.error)
    return run, kid


def test_the_agent_waits_as_a_row_and_cancelling_the_parent_cancels_the_child() -> None:
    from runs.selectors import run_waiting_for

    run, kid = _waiting()
    assert run.status == RunStatus.WAITING
    assert run_waiting_for(run=run) == "child_run"
    assert Step.objects.get(run=run, node_id="agent").status == StepStatus.SUSPENDED
    assert Step.objects.get(run=run, node_id="agent#0/tool-0-c1").status == StepStatus.WAITING
    assert not Step.objects.filter(run=run, status=StepStatus.RUNNING).exists()  # no worker held
    assert run_cancel(run=run, actor="tester", reason="stop")
    kid.refresh_from_db()
    assert kid.status == RunStatus.CANCELLED and "parent run" in kid.error["message"]


def test_cancelling_the_child_is_an_error_result_and_the_agent_goes_on() -> None:
    run, kid = _waiting()
    assert run_cancel(run=kid, actor="tester", reason="not needed")
    run = continue_local(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    call = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert call.error["code"] == "child_cancelled" and "not needed" in call.error["message"]
    assert Run.objects.filter(parent_step__run=run).count() == 1


def test_the_run_api_links_the_tool_calls_child() -> None:
    from tests.support.world import client_with_token

    child = publish(child_spec())
    run = run_local(tool_agent_spec([_tool(child.graph_id)], [{"id": "c1", "name": "double", "arguments": {"n": 3}}]), {"x": 1})
    [kid] = tool_children(run)
    client = client_with_token(get_user_model().objects.create_superuser("root", "root@localhost", "pw"))
    body = client.get(f"/api/v1/runs/{run.pk}/").json()
    [linked] = body["children"]
    assert (linked["run"], linked["step"], linked["node_id"]) == (kid.pk, kid.parent_step_id, "agent#0/tool-0-c1")
    agent_step = Step.objects.get(run=run, node_id="agent")
    detail = client.get(f"/api/v1/steps/{agent_step.pk}/").json()
    by_key = {c["child_key"]: c for c in detail["children"]}
    assert by_key["tool-0-c1"]["child_run"] == kid.pk
    assert by_key["turn-0"]["child_run"] is None
    assert client.get(f"/api/v1/runs/{kid.pk}/").json()["parent"]["step"] == kid.parent_step_id


# --------------------------------------------------------------------------- validation


def _publish_issues(graph_obj: Graph, spec: dict[str, Any]) -> list[Any]:
    graph_draft_save(graph=graph_obj, spec=spec, base_revision=graph_obj.draft_revision)
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=graph_obj.pk))
    return [i for i in exc.value.issues if i.node_id == "agent"]


def test_a_graph_tool_of_a_missing_or_unpublished_graph_is_refused() -> None:
    empty = Graph.objects.create(name="tool-never-published", draft={})
    caller = publish(child_spec(name="tool-caller"))
    spec = tool_agent_spec([_tool(999_999, name="gone"), _tool(empty.pk, name="empty")], [], name="tool-caller")
    issues = _publish_issues(caller.graph, spec)
    assert [(i.code, i.field) for i in issues] == [
        ("subgraph_missing", "config.graph_tools[0].graph"),
        ("subgraph_unpublished", "config.graph_tools[1].graph"),
    ]


def test_a_graph_tool_that_leads_back_to_its_graph_is_refused() -> None:
    own = publish(child_spec(name="tool-self"))
    [issue] = _publish_issues(own.graph, tool_agent_spec([_tool(own.graph_id)], [], name="tool-self"))
    assert issue.code == "subgraph_cycle" and issue.field == "config.graph_tools[0].graph"
    # Through another graph's subgraph node: a's agent calls b, whose subgraph node calls a.
    from tests.support.subgraphs import call_spec

    a = publish(child_spec(name="tool-cycle-a"))
    b = publish(call_spec(a.graph_id, name="tool-cycle-b", input={"n": 1}))
    [issue] = _publish_issues(a.graph, tool_agent_spec([_tool(b.graph_id, name="b")], [], name="tool-cycle-a"))
    assert issue.code == "subgraph_cycle" and "tool-cycle-a -> tool-cycle-b -> tool-cycle-a" in issue.message


def test_a_subgraph_node_calling_a_graph_whose_agent_calls_back_is_refused() -> None:
    from tests.support.subgraphs import call_spec

    a = publish(child_spec(name="node-cycle-a"))
    b = publish(tool_agent_spec([_tool(a.graph_id)], [], name="node-cycle-b"))
    graph_draft_save(graph=a.graph, spec=call_spec(b.graph_id, name="node-cycle-a", input={}), base_revision=a.graph.draft_revision)
    with pytest.raises(GraphInvalid) as exc:
        graph_publish(graph=Graph.objects.get(pk=a.graph_id))
    assert "node-cycle-a -> node-cycle-b -> node-cycle-a" in next(i for i in exc.value.issues if i.code == "subgraph_cycle").message


def test_clashing_tool_names_and_an_agent_without_tools_are_invalid() -> None:
    from builder.validation import validate_spec

    child = publish(child_spec())
    spec = tool_agent_spec([_tool(child.graph_id, name="record_effect"), _tool(child.graph_id, name="twice"), _tool(child.graph_id, name="twice")],
                           [], tools=["record_effect"])  # fmt: skip
    issues = [i for i in validate_spec(spec).issues if i.node_id == "agent"]
    assert [(i.code, i.field) for i in issues] == [
        ("tool_name_clash", "config.graph_tools[0].name"),
        ("tool_name_clash", "config.graph_tools[2].name"),
    ]
    bare = tool_agent_spec([], [])
    assert any("at least one tool" in i.message for i in validate_spec(bare).issues if i.node_id == "agent")
    bad_name = tool_agent_spec([_tool(child.graph_id, name="has space")], [])
    assert any(i.field.startswith("config.graph_tools[0].name") for i in validate_spec(bad_name).issues if i.node_id == "agent")


def test_an_agent_with_graph_tools_is_not_tested_on_its_own() -> None:
    from tests.support.world import client_with_token

    child = publish(child_spec())
    caller = publish(tool_agent_spec([_tool(child.graph_id)], [], name="tool-node-test"))
    client = client_with_token(get_user_model().objects.create_superuser("root", "root@localhost", "pw"))
    answer = client.post(f"/api/v1/graphs/{caller.graph_id}/nodes/agent/test/", {"state": {"x": 1}}, format="json")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "not_testable", answer.content
    assert "graph tools" in answer.json()["error"]["message"]
