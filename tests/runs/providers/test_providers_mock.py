"""Tests of the provider interface, the provider registry and the offline MockProvider."""

import threading
from decimal import Decimal

import pytest

from runs.providers import UnknownProvider, get_provider
from runs.providers.base import LLMProvider, LLMRequest, Message, ModelPrice, ProviderError, ToolDefinition
from runs.providers.mock import MOCK_PRICES, MockProvider
from runs.vocabulary import NodeError, StepCancelled, Usage
from tests.support.bounded import TIME_SLACK, assert_took_at_least, finishes_within, stopwatch


def request(prompt="hello", *, system=None, **kwargs):
    messages = [Message(role="system", content=system)] if system else []
    messages.append(Message(role="user", content=prompt))
    return LLMRequest(model=kwargs.pop("model", "mock-1"), messages=messages, **kwargs)


@pytest.fixture
def mock():
    return MockProvider()


# --- registry -----------------------------------------------------------------------
def test_registry_returns_cached_mock_instance():
    provider = get_provider("mock")
    assert isinstance(provider, MockProvider)
    assert provider.name == "mock"
    assert get_provider("mock") is provider


@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_registry_unknown_provider():
    with pytest.raises(UnknownProvider):
        get_provider("nope")


class OtherProvider(MockProvider):
    name = "other"


@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_registry_follows_settings_overrides(settings):
    settings.BALLAST_PROVIDERS = {"other": f"{__name__}.OtherProvider"}
    assert isinstance(get_provider("other"), OtherProvider)
    with pytest.raises(UnknownProvider):
        get_provider("mock")


# --- errors and pricing -------------------------------------------------------------
@pytest.mark.parametrize(
    "status, code, retryable",
    [
        (429, "rate_limited", True),
        (408, "timeout", True),
        (500, "provider_unavailable", True),
        (503, "provider_unavailable", True),
        (400, "provider_rejected", False),
        (401, "provider_rejected", False),
        (None, "provider_error", True),
    ],
)
def test_provider_error_classification(status, code, retryable):
    error = ProviderError("boom", status=status, retry_after=2.0 if status == 429 else None)
    assert isinstance(error, NodeError)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert error.as_dict()["code"] == code
    if status == 429:
        assert error.as_dict()["retry_after"] == 2.0


def test_provider_error_explicit_code_and_retryable_win():
    error = ProviderError("x", status=503, code="overloaded", retryable=False)
    assert (error.code, error.retryable) == ("overloaded", False)


def test_price_is_per_million_tokens_and_none_when_unknown(mock):
    usage = Usage(provider="mock", model="mock-1", input_tokens=1_000_000, output_tokens=500_000)
    assert mock.price("mock-1", usage) == Decimal("2")  # $1 in + $2/M * 0.5M out
    assert mock.price("mock-large", usage) == Decimal("25")
    assert mock.price("gpt-unknown", usage) is None


def test_cached_input_tokens_are_priced_at_the_cached_rate():
    price = ModelPrice(input=Decimal("4"), output=Decimal("8"), cached_input=Decimal("1"))
    usage = Usage(provider="p", model="m", input_tokens=1_000_000, cached_input_tokens=250_000, output_tokens=0)
    assert price.cost(usage) == Decimal("3.25")  # 0.75M * 4 + 0.25M * 1


def test_base_provider_knows_no_prices_or_models():
    class Bare(LLMProvider):
        name = "bare"

        def complete(self, request):
            raise NotImplementedError

    bare = Bare()
    assert bare.price("x", Usage(provider="bare", model="x", input_tokens=10)) is None
    assert bare.models() is None
    assert bare.validate_options({"anything": 1}) == []


def test_count_tokens_estimate(mock):
    assert mock.count_tokens("") == 0
    assert mock.count_tokens("a") == 1
    assert mock.count_tokens("abcd") == 1
    assert mock.count_tokens("abcde") == 2


def test_request_tokens_include_tools_and_schema(mock):
    plain = request("hi")
    tools = request("hi", tools=[ToolDefinition("lookup", "Look something up", {"type": "object"})])
    schema = request("hi", response_schema={"type": "object", "properties": {"a": {"type": "string"}}})
    assert mock.count_request_tokens(tools) > mock.count_request_tokens(plain)
    assert mock.count_request_tokens(schema) > mock.count_request_tokens(plain)


# --- mock replies -------------------------------------------------------------------
def test_echo_without_script(mock):
    response = mock.complete(request("What is 2+2?", system="Be brief."))
    assert response.text == "Echo: What is 2+2?"
    assert response.stop_reason == "stop"
    assert response.model == "mock-1"
    assert response.tool_calls == []
    assert response.usage.provider == "mock"
    assert response.usage.input_tokens > mock.count_tokens("What is 2+2?")  # system + framing
    assert response.usage.output_tokens == mock.count_tokens("Echo: What is 2+2?")


def test_echo_uses_last_user_message(mock):
    req = LLMRequest(
        model="mock-1",
        messages=[
            Message(role="user", content="first"),
            Message(role="assistant", content="ok"),
            Message(role="user", content="second"),
        ],
    )
    assert mock.complete(req).text == "Echo: second"


def test_script_first_matching_rule_wins(mock):
    script = [
        {"when": "WEATHER", "reply": "sunny"},
        {"when": "weather in paris", "reply": "never reached"},
        {"when": r"re:^\d+ \+ \d+$", "reply": "arithmetic"},
        {"reply": "default"},
    ]
    assert mock.complete(request("What's the weather in Paris?", options={"script": script})).text == "sunny"
    assert mock.complete(request("2 + 3", options={"script": script})).text == "arithmetic"
    assert mock.complete(request("something else", options={"script": script})).text == "default"


def test_script_without_match_falls_back_to_echo(mock):
    script = [{"when": "never", "reply": "x"}]
    assert mock.complete(request("hi", options={"script": script})).text == "Echo: hi"


def test_object_reply_is_json_text(mock):
    script = [{"reply": {"sentiment": "positive", "score": 0.9}}]
    schema = {"type": "object"}
    response = mock.complete(request("rate it", options={"script": script}, response_schema=schema))
    assert response.text == '{"sentiment": "positive", "score": 0.9}'


def test_scripted_tool_calls(mock):
    script = [{"when": "search", "tool_calls": [{"name": "lookup", "arguments": {"q": "ballast"}}]}]
    response = mock.complete(request("please search", options={"script": script}))
    assert response.stop_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("call_1", "lookup", {"q": "ballast"})]
    assert response.text == ""
    assert response.usage.output_tokens > 0


def test_reply_longer_than_max_tokens_is_cut(mock):
    script = [{"reply": "x" * 100}]
    response = mock.complete(request("go", options={"script": script}, max_tokens=5))
    assert response.text == "x" * 20
    assert response.stop_reason == "max_tokens"
    assert response.usage.output_tokens == 5


def test_mock_is_deterministic(mock):
    req = request("same", options={"script": [{"reply": {"a": [1, 2]}}]})
    assert mock.complete(req) == mock.complete(req)


def test_models_and_unknown_model(mock):
    assert mock.models() == set(MOCK_PRICES) >= {"mock-1", "mock-large"}
    with pytest.raises(ProviderError) as caught:
        mock.complete(request("hi", model="gpt-9"))
    assert (caught.value.code, caught.value.retryable, caught.value.status) == ("unknown_model", False, 404)


def test_invalid_options_are_reported_and_rejected(mock):
    assert mock.validate_options({"script": [{"reply": "ok"}]}) == []
    problems = mock.validate_options({"scirpt": []})
    assert problems and "scirpt" in problems[0]
    assert mock.validate_options({"script": [{"when": "re:("}]})  # bad regex and no reply
    with pytest.raises(ProviderError) as caught:
        mock.complete(request("hi", options={"script": [{"when": "x"}]}))
    assert caught.value.retryable is False


# --- simulated failures and latency -------------------------------------------------
def test_fail_times_fails_early_attempts_then_succeeds(mock):
    options = {"fail_times": 2}
    for attempt in (1, 2):
        with pytest.raises(ProviderError) as caught:
            mock.complete(request("hi", options=options, attempt=attempt))
        assert (caught.value.status, caught.value.code, caught.value.retryable) == (503, "provider_unavailable", True)
    assert mock.complete(request("hi", options=options, attempt=3)).text == "Echo: hi"


def test_fail_status_429_simulates_rate_limit(mock):
    with pytest.raises(ProviderError) as caught:
        mock.complete(request("hi", options={"fail_times": 1, "fail_status": 429}))
    assert caught.value.code == "rate_limited"
    assert caught.value.retry_after == 1.0


def test_latency_within_timeout(mock):
    started = stopwatch()
    response = mock.complete(request("hi", options={"latency_ms": 50}, timeout=5))
    assert_took_at_least(started.elapsed, 0.05, "a 50 ms latency")
    assert response.text == "Echo: hi"


def test_latency_beyond_timeout_is_a_retryable_timeout(mock):
    with finishes_within(2 * TIME_SLACK, "a 60 s latency under a 0.05 s timeout"), pytest.raises(ProviderError) as caught:
        mock.complete(request("hi", options={"latency_ms": 60_000}, timeout=0.05))
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)


def test_cancellation_interrupts_latency(mock):
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    with finishes_within(2 * TIME_SLACK, "a 60 s latency cancelled at 0.05 s"), pytest.raises(StepCancelled):
        mock.complete(request("hi", options={"latency_ms": 60_000}, cancel_event=cancel))
