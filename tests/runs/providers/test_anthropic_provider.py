"""AnthropicProvider with the real ``anthropic`` SDK over HTTP against the local protocol server:
Messages API shape, tool_use/tool_result, structured output, usage normalisation, errors."""


import pytest

from runs.providers import get_provider
from runs.providers.base import LLMRequest, Message, ProviderError, ToolDefinition
from tests.support.bounded import TIME_SLACK, finishes_within
from tests.support.llm_server import TEST_KEY, Fault, Reply

MESSAGES = "/v1/messages"
MODEL = "claude-sonnet-4-6"
SEARCH = ToolDefinition("kb_search", "Search articles.", {"type": "object", "properties": {"query": {"type": "string"}}})


def ask(prompt="Hello", **kwargs):
    messages = [Message("system", "Be brief."), Message("user", prompt)]
    return LLMRequest(model=kwargs.pop("model", MODEL), messages=messages, **kwargs)


@pytest.fixture
def anthropic(sdk_providers):
    return get_provider("anthropic")


def test_text_reply_request_and_usage_normalised(anthropic, sdk_providers):
    sdk_providers.set_script(
        [Reply(text="Hi!", usage={"input": 1000, "cached": 600, "cache_write": 100, "output": 250, "reasoning": 80})]
    )
    response = anthropic.complete(ask(max_tokens=300, idempotency_key="run:n:0"))
    assert (response.text, response.stop_reason, response.model) == ("Hi!", "stop", MODEL)
    usage = response.usage
    # The API's input_tokens (300) exclude cache reads and writes; Ballast's include them.
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.reasoning_tokens) == (1000, 600, 250, 80)
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (100, 0)
    [call] = sdk_providers.calls(MESSAGES)
    assert call.response["usage"]["input_tokens"] == 300
    assert call.body["system"] == "Be brief."
    assert call.body["messages"] == [{"role": "user", "content": "Hello"}]
    assert call.body["max_tokens"] == 300
    assert call.headers["anthropic-version"] == "2026-10-21"
    assert TEST_KEY in (call.headers.get("authorization", "") + call.headers.get("x-api-key", ""))
    assert call.headers["idempotency-key"] == "run:n:0"
    assert call.headers["x-stainless-retry-count"] == "0"


def test_tool_use_and_tool_results_in_one_user_turn(anthropic, sdk_providers):
    sdk_providers.set_script(
        [
            Reply(text="Let me look.", tool_calls=[{"name": "kb_search", "arguments": {"query": "refund"}}, {"name": "kb_search", "arguments": {"query": "shipping"}}]),
            Reply(text="Found it."),
        ]
    )
    first = anthropic.complete(ask(tools=[SEARCH]))
    assert first.stop_reason == "tool_calls" and first.text == "Let me look."
    assert [c.arguments for c in first.tool_calls] == [{"query": "refund"}, {"query": "shipping"}]
    messages = ask().messages + [
        Message("assistant", first.text, tool_calls=first.tool_calls),
        Message("tool", '[{"id": "kb-2"}]', tool_call_id=first.tool_calls[0].id),
        Message("tool", '{"error": {"code": "tool_error"}}', tool_call_id=first.tool_calls[1].id, is_error=True),
    ]
    assert anthropic.complete(LLMRequest(model=MODEL, messages=messages, tools=[SEARCH])).text == "Found it."

    first_call, second_call = sdk_providers.calls(MESSAGES)
    assert first_call.body["tools"] == [{"name": "kb_search", "description": "Search articles.", "input_schema": SEARCH.parameters}]
    user, assistant, results = second_call.body["messages"]
    assert assistant["content"][0] == {"type": "text", "text": "Let me look."}
    assert assistant["content"][1] == {"type": "tool_use", "id": first.tool_calls[0].id, "name": "kb_search", "input": {"query": "refund"}}
    assert results["role"] == "user"
    assert [(b["tool_use_id"], b["is_error"]) for b in results["content"]] == [(first.tool_calls[0].id, False), (first.tool_calls[1].id, True)]


def test_structured_output_uses_output_config(anthropic, sdk_providers):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    sdk_providers.set_script([Reply(text={"ok": True})])
    assert anthropic.complete(ask(response_schema=schema)).text == '{"ok": true}'
    assert sdk_providers.calls(MESSAGES)[0].body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}


def test_temperature_is_refused_before_any_request(anthropic, sdk_providers):
    # API version 2026-10-21 answers 400 to any temperature; validation says so first.
    assert anthropic.config_issues(model=MODEL, temperature=0.3, api_key_env=None) == [
        ("temperature", "provider 'anthropic' does not take a temperature")
    ]
    with pytest.raises(ProviderError) as caught:
        anthropic.complete(ask(temperature=0.3))
    assert (caught.value.code, caught.value.retryable) == ("provider_rejected", False)
    assert sdk_providers.calls() == []


@pytest.mark.parametrize(
    "fault, code, retryable, retry_after",
    [
        (Fault(status=529, message="Overloaded", retry_after="4"), "provider_overloaded", True, 4.0),
        (Fault(status=429, message="Number of request tokens has exceeded your per-minute rate limit", retry_after="12"), "rate_limited", True, 12.0),
        (Fault(status=500, message="Internal server error"), "provider_unavailable", True, None),
        (Fault(status=400, message="prompt is too long: 210000 tokens > 200000 maximum"), "provider_rejected", False, None),
    ],
)
def test_http_errors(anthropic, sdk_providers, fault, code, retryable, retry_after):
    sdk_providers.fail(fault)
    with pytest.raises(ProviderError) as caught:
        anthropic.complete(ask())
    error = caught.value
    assert (error.code, error.retryable, error.status, error.retry_after) == (code, retryable, fault.status, retry_after)
    assert error.message.endswith(fault.message)
    assert len(sdk_providers.calls(MESSAGES)) == 1


def test_auth_error_redacts_the_key(anthropic, sdk_providers, monkeypatch):
    wrong = "sk-ant-api03-WRONGwrongWRONG0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", wrong)
    with pytest.raises(ProviderError) as caught:
        anthropic.complete(ask())
    assert (caught.value.status, caught.value.retryable) == (401, False)
    assert wrong not in str(caught.value.as_dict()) and "WRONGwrong" not in caught.value.message


def test_slow_answer_times_out(anthropic, sdk_providers):
    # An answer far later than any wait for a core, so only the timeout can end the call early.
    sdk_providers.fail(Fault(delay=30))
    with finishes_within(3 * TIME_SLACK, "a request with a 0.5 s timeout to a 30 s answer"), pytest.raises(ProviderError) as caught:
        anthropic.complete(ask(timeout=0.5))
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)


def test_effort_option_and_unknown_options(anthropic, sdk_providers):
    assert anthropic.validate_options({"effort": "low"}) == []
    assert anthropic.validate_options({"temperature": 1})
    anthropic.complete(ask(options={"effort": "low", "stop_sequences": ["END"]}))
    body = sdk_providers.calls(MESSAGES)[0].body
    assert body["output_config"] == {"effort": "low"} and body["stop_sequences"] == ["END"]
