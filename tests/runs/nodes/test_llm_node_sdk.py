"""The llm node with the real SDKs: native structured output plus validation and re-asks, what
a failed attempt spent (usage and cost on the error, recorded on the attempt), validation of
provider parameters and credentials, and the worst-case estimate at the model's price."""

from decimal import Decimal

import pytest
from genai_prices import extract_usage

from runs.models import Step, StepAttempt
from runs.nodes.base import NodeContext
from runs.nodes.llm import LLMNode
from runs.providers import get_provider, pricing
from runs.vocabulary import NodeError, Usage
from tests.support.llm_server import Fault, Reply, assert_stored_cost
from tests.support.specs import edge, graph, node, run_local

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}},
    "required": ["score"],
    "additionalProperties": False,
}


def ctx(attempt=1):
    return NodeContext(run_id=1, run_uuid="u", step_id=1, node_id="judge", iteration=0, attempt=attempt,
                       idempotency_key="r:judge:0", state={"text": "great"}, run_input={})


def judge(**fields):
    fields = {"provider": "openai", "model": "gpt-4o", "prompt": "Score: {{ text }}", "output_schema": SCHEMA,
              "max_tokens": 100, **fields}
    return LLMNode.config_model.model_validate(fields)


def genai_cost(call, provider="openai", flavor="chat"):
    return extract_usage(call.response, provider_id=provider, api_flavor=flavor).calc_price().total_price


def test_structured_output_is_native_and_validated_with_a_re_ask(sdk_providers):
    sdk_providers.set_script([
        Reply(text={"score": "high"}, usage={"input": 80, "output": 6}),
        Reply(text={"score": 9}, usage={"input": 140, "output": 5}),
    ])
    result = LLMNode().execute(judge(), ctx())
    assert result.updates == {"reply": {"score": 9}}
    assert result.output["calls"] == 2
    first, second = sdk_providers.calls()
    assert first.body["response_format"]["json_schema"]["strict"] is True
    assert second.body["messages"][-1]["content"].startswith("Your previous reply was not valid:")
    assert second.headers["idempotency-key"] == "r:judge:0:reask-1"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (220, 11)
    assert result.cost_usd == genai_cost(first) + genai_cost(second)
    assert result.usage.price_version == pricing.price_version()


def test_a_provider_error_on_a_re_ask_carries_what_was_spent(sdk_providers):
    sdk_providers.set_script([Reply(text="not json", usage={"input": 80, "output": 4})])
    sdk_providers.fail(Fault(status=503, message="busy", retry_after="3", after=1))
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(judge(), ctx())
    error = caught.value
    assert (error.code, error.retryable, error.retry_after) == ("provider_unavailable", True, 3.0)
    first = sdk_providers.calls()[0]
    assert error.usage.input_tokens == 80 and error.cost_usd == genai_cost(first)


def test_invalid_output_error_carries_usage_and_cost(sdk_providers):
    sdk_providers.set_script([Reply(text="nope")] * 3)
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(judge(schema_retries=1), ctx())
    error = caught.value
    assert error.code == "invalid_output" and error.usage.input_tokens > 0
    assert error.cost_usd == sum(genai_cost(c) for c in sdk_providers.calls())


@pytest.mark.django_db(transaction=True)
def test_every_attempt_records_its_spend_including_failed_ones(sdk_providers):
    # Attempt 1: an invalid reply, then the re-ask hits a 500 (retryable): the attempt
    # fails, but its first call was paid for and is recorded. Attempt 2 succeeds.
    sdk_providers.set_script([Reply(text="nope", usage={"input": 100, "output": 10}), Reply(text={"score": 7}, usage={"input": 150, "output": 5})])
    sdk_providers.fail(Fault(status=500, message="internal", after=1))
    spec = graph(
        [
            node("start", "start"),
            node("judge", "llm", retry={"max_attempts": 2, "backoff_seconds": 0},
                 config={"provider": "openai", "model": "gpt-4o-mini", "prompt": "Score it", "output_schema": SCHEMA, "max_tokens": 50}),
            node("end", "end"),
        ],
        [edge("start", "judge"), edge("judge", "end")],
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    step = Step.objects.get(run=run, node_id="judge")
    first, second = StepAttempt.objects.filter(step=step).order_by("number")
    calls = sdk_providers.calls()
    assert [c.status for c in calls] == [200, 500, 200, 200]
    assert (first.status, second.status) == ("failed", "succeeded")
    assert first.usage["input_tokens"] == 100
    assert_stored_cost(first.cost_usd, genai_cost(calls[0]))
    assert_stored_cost(second.cost_usd, genai_cost(calls[2]) + genai_cost(calls[3]))
    # Columns keep 6 decimal places: the run's total is rounded once, each attempt's
    # on its own (0.0000210 + 0.0000465 -> 0.000068 vs 0.000021 + 0.000046).
    assert abs(run.cost_usd - (first.cost_usd + second.cost_usd)) <= Decimal("0.000001")
    assert step.cost_usd == second.cost_usd


def test_validation_reports_parameters_and_key_variables_a_provider_refuses(sdk_providers):
    anthropic = judge(provider="anthropic", model="claude-haiku-4-5", temperature=0.2)
    assert [(i.field, i.code) for i in LLMNode().check("j", anthropic, {"text"})] == [("config.temperature", "unsupported")]
    sneaky = judge(api_key_env="BALLAST_SECRET_KEY")
    assert [(i.field, i.code) for i in LLMNode().check("j", sneaky, {"text"})] == [("config.api_key_env", "unsupported")]
    assert LLMNode().check("j", judge(), {"text"}) == []


def test_estimate_is_prompt_plus_max_tokens_at_the_models_price(sdk_providers):
    config = judge(output_schema=None, max_tokens=1000)
    usd, tokens = LLMNode().estimate_cost(config, {"text": "x" * 3000})
    openai = get_provider("openai")
    input_tokens = tokens - 1000
    assert input_tokens >= 1000  # 3000 characters: at least a token per 3
    assert usd == openai.price("gpt-4o", Usage("openai", "gpt-4o", input_tokens=input_tokens, output_tokens=1000))
    assert usd > Decimal("0.01")  # 1000 output tokens at $10/M alone
    unknown = judge(output_schema=None, model="my-finetune-7b")
    assert LLMNode().estimate_cost(unknown, {"text": "x"})[0] is None
