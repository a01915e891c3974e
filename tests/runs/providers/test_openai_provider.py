"""OpenAIProvider with the real ``openai`` SDK over HTTP against the local protocol server:
request shape, tool calls both ways, structured output, usage, errors, timeouts, credentials."""


import pytest

from runs.providers import get_provider
from runs.providers.base import INVALID_ARGUMENTS_KEY, LLMRequest, Message, ProviderError, ToolDefinition
from runs.providers.openai_provider import is_strict_compatible
from tests.support.bounded import TIME_SLACK, finishes_within
from tests.support.llm_server import TEST_KEY, Fault, Reply

CHAT = "/v1/chat/completions"
LOOKUP = ToolDefinition(
    "order_lookup",
    "Look an order up.",
    {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def ask(prompt="Hello", **kwargs):
    messages = [Message("system", "Be brief."), Message("user", prompt)]
    return LLMRequest(model=kwargs.pop("model", "gpt-4o"), messages=messages, **kwargs)


@pytest.fixture
def openai(sdk_providers):
    return get_provider("openai")


def test_text_reply_usage_and_request(openai, sdk_providers):
    sdk_providers.set_script([Reply(text="Hi!", usage={"input": 1200, "cached": 200, "output": 300, "reasoning": 100})])
    response = openai.complete(ask(temperature=0.2, max_tokens=50, idempotency_key="run:node:0"))
    assert (response.text, response.stop_reason, response.tool_calls, response.model) == ("Hi!", "stop", [], "gpt-4o")
    usage = response.usage
    assert (usage.provider, usage.model) == ("openai", "gpt-4o")
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, usage.reasoning_tokens) == (1200, 200, 300, 100)

    [call] = sdk_providers.calls(CHAT)
    assert call.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert call.body["temperature"] == 0.2
    assert call.body["max_completion_tokens"] == 50 and "max_tokens" not in call.body
    assert call.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert call.headers["idempotency-key"] == "run:node:0"
    # Ballast's retry policy governs: the SDK never retried on its own.
    assert call.headers["x-stainless-retry-count"] == "0"


def test_compatible_server_gets_max_tokens_and_is_priced_by_url(sdk_providers, settings):
    settings.BALLAST_PROVIDER_SETTINGS = {"ollama": {"base_url": sdk_providers.openai_base_url, "api_key_env": "OPENAI_API_KEY"}}
    settings.BALLAST_PROVIDERS = {**settings.BALLAST_PROVIDERS, "ollama": "runs.providers.openai_provider.OpenAIProvider"}
    ollama = get_provider("ollama")
    response = ollama.complete(ask(model="llama3.2", max_tokens=64))
    assert response.usage.provider == "ollama"
    [call] = sdk_providers.calls(CHAT)
    assert call.body["max_tokens"] == 64 and "max_completion_tokens" not in call.body
    # A local server's model has no public price: unknown, never $0.
    assert ollama.price("llama3.2", response.usage) is None
    assert ollama.price("gpt-4o", response.usage) is None  # not OpenAI's API: no OpenAI price either
    assert ollama.price_version("llama3.2") == ""


def test_tool_calls_out_and_results_back(openai, sdk_providers):
    sdk_providers.set_script(
        [
            Reply(tool_calls=[{"name": "order_lookup", "arguments": {"order_id": "A-1"}}, {"name": "order_lookup", "arguments": {"order_id": "B-2"}}]),
            Reply(text="Both found."),
        ]
    )
    first = openai.complete(ask("Check A-1 and B-2", tools=[LOOKUP]))
    assert first.stop_reason == "tool_calls" and first.text == ""
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("order_lookup", {"order_id": "A-1"}), ("order_lookup", {"order_id": "B-2"})]
    messages = ask("Check A-1 and B-2").messages + [
        Message("assistant", "", tool_calls=first.tool_calls),
        Message("tool", '{"found": true}', tool_call_id=first.tool_calls[0].id),
        Message("tool", '{"error": {"code": "tool_error", "message": "down"}}', tool_call_id=first.tool_calls[1].id, is_error=True),
    ]
    second = openai.complete(LLMRequest(model="gpt-4o", messages=messages, tools=[LOOKUP]))
    assert second.text == "Both found."

    sent = sdk_providers.calls(CHAT)
    assert sent[0].body["tools"] == [
        {"type": "function", "function": {"name": "order_lookup", "description": "Look an order up.", "parameters": LOOKUP.parameters}}
    ]
    assistant, result_a, result_b = sent[1].body["messages"][2:]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    assert assistant["tool_calls"][0] == {"id": first.tool_calls[0].id, "type": "function", "function": {"name": "order_lookup", "arguments": '{"order_id":"A-1"}'}}
    assert result_a == {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"found": true}'}
    assert result_b["tool_call_id"] == first.tool_calls[1].id


def test_arguments_that_are_not_json_are_kept_for_the_model(openai, sdk_providers):
    sdk_providers.set_script([Reply(tool_calls=[{"name": "order_lookup", "raw_arguments": '{"order_id": "A-'}])])
    [call] = openai.complete(ask(tools=[LOOKUP])).tool_calls
    assert call.arguments == {INVALID_ARGUMENTS_KEY: '{"order_id": "A-'}


def test_cut_off_reply_reports_max_tokens(openai, sdk_providers):
    sdk_providers.set_script([Reply(text="Once upon a", stop="max_tokens")])
    assert openai.complete(ask(max_tokens=3)).stop_reason == "max_tokens"


STRICT = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"], "additionalProperties": False}
LOOSE = {"type": "object", "properties": {"score": {"type": "integer"}, "why": {"type": "string"}}, "required": ["score"]}


@pytest.mark.parametrize("schema, strict", [(STRICT, True), (LOOSE, False)])
def test_structured_output_uses_native_json_schema(openai, sdk_providers, schema, strict):
    sdk_providers.set_script([Reply(text={"score": 7})])
    response = openai.complete(ask(response_schema=schema))
    assert response.text == '{"score": 7}'
    [call] = sdk_providers.calls(CHAT)
    assert call.body["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": strict}}


def test_structured_output_can_be_turned_off_for_servers_without_it(sdk_providers, settings):
    settings.BALLAST_PROVIDER_SETTINGS = {
        **settings.BALLAST_PROVIDER_SETTINGS,
        "openai": {**settings.BALLAST_PROVIDER_SETTINGS["openai"], "structured_output": False},
    }
    get_provider("openai").complete(ask(response_schema=STRICT))
    assert "response_format" not in sdk_providers.calls(CHAT)[0].body


def test_strict_compatibility_is_checked_recursively():
    nested = {"type": "object", "properties": {"a": LOOSE}, "required": ["a"], "additionalProperties": False}
    assert is_strict_compatible(STRICT) and not is_strict_compatible(LOOSE) and not is_strict_compatible(nested)
    assert is_strict_compatible({"type": "array", "items": STRICT})


def test_options_pass_through_and_unknown_options_are_rejected(openai, sdk_providers):
    assert openai.validate_options({"seed": 7, "top_p": 0.5}) == []
    assert openai.validate_options({"sede": 7})
    openai.complete(ask(options={"seed": 7, "reasoning_effort": "low"}))
    body = sdk_providers.calls(CHAT)[0].body
    assert body["seed"] == 7 and body["reasoning_effort"] == "low"
    with pytest.raises(ProviderError) as caught:
        openai.complete(ask(options={"script": []}))
    assert (caught.value.code, caught.value.retryable) == ("provider_rejected", False)


# --- errors ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fault, code, retryable, retry_after",
    [
        (Fault(status=429, retry_after="7", message="Rate limit reached"), "rate_limited", True, 7.0),
        (Fault(status=429, message="slow down"), "rate_limited", True, None),
        (Fault(status=500, message="internal"), "provider_unavailable", True, None),
        (Fault(status=503, retry_after="2", message="overloaded"), "provider_unavailable", True, 2.0),
        (Fault(status=400, message="This model's maximum context length is 128000 tokens"), "provider_rejected", False, None),
        (Fault(status=404, message="The model `gpt-9` does not exist"), "provider_rejected", False, None),
    ],
)
def test_http_errors_map_to_retryable_or_not(openai, sdk_providers, fault, code, retryable, retry_after):
    sdk_providers.fail(fault)
    with pytest.raises(ProviderError) as caught:
        openai.complete(ask())
    error = caught.value
    assert (error.code, error.retryable, error.status, error.retry_after) == (code, retryable, fault.status, retry_after)
    assert fault.message in error.message  # the provider's own words
    assert error.details["request_id"] == "req_test"
    assert len(sdk_providers.calls(CHAT)) == 1  # no hidden SDK retry


def test_auth_error_is_not_retryable_and_redacts_the_key(openai, sdk_providers, monkeypatch):
    wrong = "sk-proj-WRONGwrongWRONGwrong0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", wrong)
    with pytest.raises(ProviderError) as caught:
        openai.complete(ask())
    error = caught.value
    assert (error.code, error.retryable, error.status) == ("provider_rejected", False, 401)
    assert "Incorrect API key provided" in error.message
    assert wrong not in str(error.as_dict()) and "WRONGwrong" not in str(error.as_dict())
    assert "[REDACTED]" in error.message


def test_slow_answer_times_out_at_the_request_timeout(openai, sdk_providers):
    # An answer far later than any wait for a core, so only the timeout can end the call early.
    sdk_providers.fail(Fault(delay=30))
    with finishes_within(3 * TIME_SLACK, "a request with a 0.5 s timeout to a 30 s answer"), pytest.raises(ProviderError) as caught:
        openai.complete(ask(timeout=0.5))
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)


def test_connection_refused_is_retryable(settings, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    settings.BALLAST_PROVIDER_SETTINGS = {"openai": {"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 2}}
    with pytest.raises(ProviderError) as caught:
        get_provider("openai").complete(ask())
    assert (caught.value.code, caught.value.retryable, caught.value.status) == ("provider_error", True, None)


# --- credentials ------------------------------------------------------------------------
def test_missing_key_fails_before_any_request(openai, sdk_providers, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ProviderError) as caught:
        openai.complete(ask())
    assert (caught.value.code, caught.value.retryable) == ("credentials", False)
    assert "OPENAI_API_KEY" in caught.value.message
    assert sdk_providers.calls() == []


def test_node_may_name_an_allowed_key_variable_only(openai, sdk_providers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-the-right-one-000000")
    monkeypatch.setenv("BALLAST_TEST_OTHER_KEY", TEST_KEY)
    assert openai.complete(ask(api_key_env="BALLAST_TEST_OTHER_KEY")).text == "Echo: Hello"
    with pytest.raises(ProviderError) as caught:
        openai.complete(ask(api_key_env="DATABASE_URL"))
    assert caught.value.code == "credentials" and "DATABASE_URL" in caught.value.message
    assert openai.config_issues(model="gpt-4o", temperature=None, api_key_env="DATABASE_URL")
    assert openai.config_issues(model="gpt-4o", temperature=None, api_key_env="BALLAST_TEST_OTHER_KEY") == []


def test_key_in_settings_is_a_secret(sdk_providers, settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    settings.BALLAST_PROVIDER_SETTINGS = {"openai": {**settings.BALLAST_PROVIDER_SETTINGS["openai"], "api_key": TEST_KEY}}
    provider = get_provider("openai")
    assert provider.complete(ask()).text == "Echo: Hello"
    assert TEST_KEY not in repr(provider.settings)
