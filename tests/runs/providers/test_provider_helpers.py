"""Shared provider helpers: redaction, Retry-After, the conservative token estimate, settings,
the registry passing names and settings, and the mock's turn-scripted replies."""

import email.utils

import pytest
from pydantic import ValidationError

from runs.providers import get_provider
from runs.providers.base import LLMRequest, Message
from runs.providers.mock import MockProvider
from runs.providers.openai_provider import OpenAIProvider
from runs.providers.sdk import conservative_tokens, redact
from runs.retry_after import parse_retry_after


@pytest.mark.parametrize(
    "text, secrets, expected",
    [
        ("key abcdefghijkl used", ["abcdefghijkl"], "key [REDACTED] used"),
        ("Incorrect API key provided: sk-proj-AbC123xyz789", [], "Incorrect API key provided: [REDACTED]"),
        ("bad sk-ant-api03-XYZxyz0123 here", [], "bad [REDACTED] here"),
        ("header Authorization: Bearer eyJhbGciOi.J9x", [], "header Authorization: [REDACTED]"),
        ('{"api_key": "hunter2hunter2"}', [], '{"api_key": "[REDACTED]"}'),
        ("short x stays", ["x"], "short x stays"),
        ("nothing secret", [], "nothing secret"),
    ],
)
def test_redact(text, secrets, expected):
    assert redact(text, secrets) == expected


def test_parse_retry_after():
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "100000"}) == 600.0  # capped
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == pytest.approx(30)


def test_conservative_tokens_err_high():
    assert conservative_tokens("") == 0
    prose = "The quick brown fox jumps over the lazy dog. " * 20
    assert conservative_tokens(prose) >= len(prose) / 3.5  # ~4 chars per token really
    assert conservative_tokens("日本語のテキスト") == 8  # one token per CJK character


def test_registry_builds_each_name_with_its_settings(settings):
    settings.BALLAST_PROVIDERS = {"mock": "runs.providers.mock.MockProvider", "groq": "runs.providers.openai_provider.OpenAIProvider"}
    settings.BALLAST_PROVIDER_SETTINGS = {"groq": {"base_url": "https://api.groq.com/openai/v1", "api_key_env": "GROQ_API_KEY"}}
    groq = get_provider("groq")
    assert isinstance(groq, OpenAIProvider) and groq.name == "groq"
    assert groq.base_url == "https://api.groq.com/openai/v1"
    assert groq.allowed_key_envs() == {"GROQ_API_KEY"}
    assert groq.price_provider() is None  # priced by URL: genai-prices knows Groq's
    assert get_provider("mock").name == "mock"


def test_provider_settings_typos_fail_loudly():
    with pytest.raises(ValidationError):
        OpenAIProvider(name="openai", config={"base_ulr": "http://x"})


def test_mock_turn_rules_script_an_agent_loop():
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"name": "kb_search", "arguments": {"query": "x"}}]},
        {"turn": 1, "reply": "answer"},
    ]
    mock = MockProvider()
    first = [Message("user", "q")]
    r0 = mock.complete(LLMRequest(model="mock-1", messages=first, options={"script": script}))
    assert [c.name for c in r0.tool_calls] == ["kb_search"]
    second = first + [Message("assistant", "", tool_calls=r0.tool_calls), Message("tool", "[]", tool_call_id="call_1")]
    r1 = mock.complete(LLMRequest(model="mock-1", messages=second, options={"script": script}))
    assert (r1.text, r1.tool_calls) == ("answer", [])
    assert mock.validate_options({"script": [{"turn": -1, "reply": "x"}]})
