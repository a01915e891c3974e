"""Budgets against real model prices: a step whose worst case (estimated prompt tokens plus
max_tokens at the model's price) could overrun the run's remaining USD or token budget is
never started; the run fails as budget_exceeded and keeps what it committed."""

from decimal import Decimal

import pytest

from runs.models import RunEvent, Step
from runs.nodes.llm import LLMNode
from tests.support.llm_server import Reply
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)


def llm(node_id, **config):
    config = {"provider": "openai", "model": "gpt-4o", "prompt": "Summarise: {{ text }}", "max_tokens": 500,
              "output_key": node_id, **config}
    return node(node_id, "llm", config=config)


def worst_case(**config):
    cfg = LLMNode.config_model.model_validate({"provider": "openai", "model": "gpt-4o", "prompt": "Summarise: {{ text }}",
                                         "max_tokens": 500, **config})
    return LLMNode().estimate_cost(cfg, {"text": "word " * 200})


def test_second_call_is_refused_before_it_could_overspend(sdk_providers):
    sdk_providers.set_script([Reply(text="short", usage={"input": 300, "output": 20})])
    first_usd, _ = worst_case()
    second_usd, _ = worst_case(max_tokens=20_000)
    assert second_usd > first_usd
    budget = first_usd + second_usd / 2  # room for the first worst case, not for the second
    spec = graph(
        [node("start", "start"), llm("one"), llm("two", max_tokens=20_000), node("end", "end")],
        chain("start", "one", "two", "end"),
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        settings={"budget_usd": str(budget)},
    )
    run = run_local(spec, {"text": "word " * 200})
    assert run.status == "failed"
    assert run.error["code"] == "budget_exceeded"
    assert "may cost up to" in run.error["message"]
    assert len(sdk_providers.calls()) == 1  # "two" never reached the provider
    steps = {s.node_id: s for s in Step.objects.filter(run=run)}
    assert steps["one"].status == "succeeded" and steps["one"].cost_usd > 0  # kept
    assert steps["two"].status == "cancelled" and steps["two"].error["code"] == "budget_exceeded"
    assert run.cost_usd <= budget
    event = RunEvent.objects.get(run=run, kind="run_failed")
    assert event.data["error"]["code"] == "budget_exceeded"


def test_token_budget(sdk_providers):
    _, tokens = worst_case()
    spec = graph(
        [node("start", "start"), llm("one"), node("end", "end")],
        chain("start", "one", "end"),
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        settings={"budget_tokens": tokens - 1},
    )
    run = run_local(spec, {"text": "word " * 200})
    assert (run.status, run.error["code"]) == ("failed", "budget_exceeded")
    assert sdk_providers.calls() == []


def test_unknown_price_cannot_be_run_under_a_usd_budget(sdk_providers):
    spec = graph(
        [node("start", "start"), llm("one", model="my-finetune-7b"), node("end", "end")],
        chain("start", "one", "end"),
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        settings={"budget_usd": "100"},
    )
    run = run_local(spec, {"text": "hi"})
    assert run.status == "failed" and "no known price" in run.error["message"]
    assert sdk_providers.calls() == []


def test_worst_case_covers_what_the_call_really_costs(sdk_providers):
    # The server reports what a real tokenizer would count (~4 characters per token) and
    # a full-length reply: the estimate must not be lower.
    text = "The quick brown fox jumps over the lazy dog. " * 100
    real_input = len("Summarise: " + text) // 4 + 8
    sdk_providers.set_script([Reply(text="x", usage={"input": real_input, "output": 500})])
    cfg = LLMNode.config_model.model_validate({"provider": "openai", "model": "gpt-4o", "prompt": "Summarise: {{ text }}", "max_tokens": 500})
    usd, tokens = LLMNode().estimate_cost(cfg, {"text": text})
    spec = graph(
        [node("start", "start"), llm("one"), node("end", "end")],
        chain("start", "one", "end"),
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        settings={"budget_usd": str(usd)},
    )
    run = run_local(spec, {"text": text})
    assert run.status == "succeeded", run.error
    assert Decimal(0) < run.cost_usd <= usd
    assert run.input_tokens + run.output_tokens <= tokens
