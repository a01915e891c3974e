"""JSON that only Python's lenient parser accepts (NaN, Infinity) never becomes a value, and
an agent's tool that returns something JSON cannot carry is told to the model as an error."""
from __future__ import annotations

import json

import pytest

from runs.models import Step, StepAttempt
from runs.nodes.base import NodeContext
from runs.nodes.llm import LLMNode
from runs.providers.base import INVALID_ARGUMENTS_KEY
from runs.providers.openai_provider import _arguments
from runs.sandbox import values
from tests.support.specs import edge, graph, node, run_local

NUMBER_SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


def ctx() -> NodeContext:
    return NodeContext(run_id=1, run_uuid="u", step_id=1, node_id="ask", iteration=0, attempt=1, idempotency_key="k", state={}, run_input={})


@pytest.mark.parametrize("text", ['{"score": NaN}', '{"score": Infinity}', '[-Infinity]'])
def test_strict_loads_refuses_what_no_json_column_stores(text):
    with pytest.raises(ValueError, match="is not valid JSON"):
        values.loads(text)
    assert json.loads(text)  # what Python alone would have accepted


def test_a_structured_reply_with_nan_is_asked_again():
    script = [{"when": "previous reply was not valid", "reply": {"score": 4.5}}, {"reply": '{"score": NaN}'}]
    config = LLMNode.config_model.model_validate({"prompt": "rate", "output_schema": NUMBER_SCHEMA, "options": {"script": script}})
    result = LLMNode().execute(config, ctx())
    assert result.updates == {"reply": {"score": 4.5}} and result.output["calls"] == 2


def test_tool_call_arguments_with_nan_are_not_a_json_object():
    assert _arguments('{"limit": NaN}') == {INVALID_ARGUMENTS_KEY: '{"limit": NaN}'}
    assert _arguments('{"limit": 2}') == {"limit": 2}


@pytest.mark.django_db(transaction=True)
def test_an_agent_tool_result_that_is_not_json_is_told_to_the_model(effects_file):
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"id": "c1", "name": "not_json", "arguments": {"value": "nan"}}]},
        {"turn": 1, "reply": "The tool gave me nothing I can use."},
    ]
    spec = graph(
        [
            node("start", "start"),
            node("agent", "agent", config={"prompt": "go", "tools": ["not_json"], "options": {"script": script}}),
            node("end", "end"),
        ],
        [edge("start", "agent"), edge("agent", "end")],
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    tool = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert tool.status == "failed" and tool.error["code"] == "invalid_output" and tool.output is None
    assert tool.error["details"] == {"path": "output.items[1].price", "reason": "NaN is not a JSON number"}
    assert list(StepAttempt.objects.filter(step=tool).values_list("status", flat=True)) == ["failed"]
    fed_back = Step.objects.get(run=run, node_id="agent#0/turn-1").input["messages"][-1]
    assert fed_back["is_error"] and json.loads(fed_back["content"])["error"]["code"] == "invalid_output"
    assert "output.items[1].price" in json.loads(fed_back["content"])["error"]["message"]
