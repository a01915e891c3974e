"""Traces in one process: each step attempt is a span under its run's stored trace context, with its LLM and tool calls as child spans, and a run started through the API joins the caller's trace."""
from __future__ import annotations

import pytest

from core import tracing
from runs.engine import api as engine
from runs.models import Run, Step
from tests.support.specs import chain, edge, graph, node, run_local, transform
from tests.support.tracing import recorded_spans
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def ids(traceparent: str) -> tuple[str, str]:
    """(trace id, parent span id) of a stored traceparent."""
    return traceparent[3:35], traceparent[36:52]


def by_name(spans) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


def test_each_attempt_is_a_span_of_the_runs_trace_with_its_llm_and_tool_calls():
    spec = graph(
        [
            node("start", "start"),
            node("ask", "llm", config={"prompt": "Say hello", "model": "mock-1", "max_tokens": 50, "output_key": "reply"}),
            node("act", "tool", config={"tool": "record_effect", "args": {"label": "act"}}),
            node("end", "end"),
        ],
        chain("start", "ask", "act", "end"),
    )
    with recorded_spans() as exporter:
        run = run_local(spec, {})
    assert run.status == "succeeded"
    trace_id, parent = ids(run.traceparent)
    spans = by_name(exporter.get_finished_spans())
    [start] = spans["run start"]  # the stored context is this span's: no step's parent is missing
    assert format(start.context.span_id, "016x") == parent and start.parent is None
    steps = {n: spans[f"step {n}"] for n in ("start", "ask", "act", "end")}
    for name, found in steps.items():
        assert len(found) == 1, name  # one attempt each
        span = found[0]
        assert format(span.context.trace_id, "032x") == trace_id
        assert format(span.parent.span_id, "016x") == parent  # a child of the run's stored context
        assert span.attributes["ballast.run.id"] == run.pk and span.attributes["ballast.node.id"] == name
        assert span.attributes["ballast.step.attempt"] == 1 and span.attributes["ballast.committed"] is True
    [chat] = spans["chat mock-1"]
    assert chat.parent.span_id == steps["ask"][0].context.span_id
    ask = Step.objects.get(run=run, node_id="ask")
    assert chat.attributes["gen_ai.operation.name"] == "chat" and chat.attributes["gen_ai.provider.name"] == "mock"
    assert chat.attributes["gen_ai.request.model"] == "mock-1" and chat.attributes["gen_ai.response.model"] == "mock-1"
    assert chat.attributes["gen_ai.usage.input_tokens"] == ask.usage["input_tokens"] > 0
    assert chat.attributes["gen_ai.usage.output_tokens"] == ask.usage["output_tokens"] > 0
    assert chat.attributes["ballast.cost_usd"] == pytest.approx(float(ask.cost_usd)) and ask.cost_usd > 0
    [tool] = spans["execute_tool record_effect"]
    assert tool.parent.span_id == steps["act"][0].context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "record_effect"


def test_a_fan_outs_branches_and_a_retried_attempt_are_spans_of_one_trace():
    ids_ = ["b1", "b2", "b3"]
    spec = graph(
        [
            node("start", "start"),
            *[transform(i, hits="1") for i in ids_],
            node("flaky", "tool", config={"tool": "flaky", "args": {"fail_times": 1}}, retry={"max_attempts": 2, "backoff_seconds": 0}),
            node("join", "join"),
            node("end", "end", config={"output": ["hits"]}),
        ],
        [edge("start", i) for i in ids_] + [edge(i, "join") for i in ids_] + [edge("join", "flaky"), edge("flaky", "end")],
        state={"hits": {"reducer": "add", "default": 0}},
    )
    with recorded_spans() as exporter:
        run = run_local(spec, {})
    assert run.status == "succeeded"
    trace_id, _ = ids(run.traceparent)
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("step ")]
    assert sorted(s.name for s in spans) == ["step b1", "step b2", "step b3", "step end", "step flaky", "step flaky", "step join", "step start"]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id}
    first, second = sorted((s for s in spans if s.name == "step flaky"), key=lambda s: s.attributes["ballast.step.attempt"])
    assert not first.status.is_ok and first.attributes["error.type"] == "flaky"
    assert second.status.is_unset and second.attributes["ballast.step.attempt"] == 2
    [failed_call, _] = sorted((s for s in exporter.get_finished_spans() if s.name == "execute_tool flaky"), key=lambda s: s.start_time)
    assert not failed_call.status.is_ok and failed_call.attributes["error.type"] == "flaky"


def test_with_traces_off_nothing_is_recorded_and_the_run_still_has_a_trace_id():
    assert not tracing.enabled()
    run = run_local(graph([node("start", "start"), node("end", "end")], chain("start", "end")), {})
    assert run.status == "succeeded" and tracing.parse_traceparent(run.traceparent) == run.traceparent


def test_a_run_started_through_the_api_joins_the_callers_trace(world: World):
    client = world.clients["operator"]
    body = {"graph": world.approval_version.graph_id, "input": {"name": "Ada"}}
    with engine.local_mode():
        joined = client.post("/api/v1/runs/", body, format="json", HTTP_TRACEPARENT=CALLER.upper())
        malformed = client.post("/api/v1/runs/", body, format="json", HTTP_TRACEPARENT="00-" + "0" * 32 + "-00f067aa0ba902b7-01")
        none = client.post("/api/v1/runs/", body, format="json")
    assert joined.status_code == malformed.status_code == none.status_code == 201
    assert Run.objects.get(pk=joined.json()["id"]).traceparent == CALLER  # stored lower case, as the standard writes it
    assert joined.json()["traceparent"] == CALLER  # and shown with the run, to find its trace
    fresh = [Run.objects.get(pk=r.json()["id"]).traceparent for r in (malformed, none)]
    assert all(tracing.parse_traceparent(t) == t for t in fresh)  # a new trace each: an invalid header is ignored
    assert len({ids(t)[0] for t in [CALLER, *fresh]}) == 3


def test_with_traces_on_a_run_started_through_the_api_begins_with_a_run_start_span_under_the_caller(world: World):
    body = {"graph": world.approval_version.graph_id, "input": {"name": "Ada"}}
    with recorded_spans() as exporter, engine.local_mode():
        response = world.clients["operator"].post("/api/v1/runs/", body, format="json", HTTP_TRACEPARENT=CALLER)
    assert response.status_code == 201
    run = Run.objects.get(pk=response.json()["id"])
    [start] = [s for s in exporter.get_finished_spans() if s.name == "run start"]
    assert ids(run.traceparent) == (ids(CALLER)[0], format(start.context.span_id, "016x"))  # the caller's trace, under run start
    assert format(start.parent.span_id, "016x") == ids(CALLER)[1]  # ... which is the caller's child
