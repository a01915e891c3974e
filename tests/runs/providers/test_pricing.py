"""Costs from genai-prices, checked against the library's own numbers for real models: the
provider's usage mapping of the very responses the server sent must price the same as
genai-prices' extractors do. Unknown models cost "unknown" (None), never $0."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage as GenaiUsage
from genai_prices import calc_price, extract_usage

from runs.providers import get_provider, pricing
from runs.providers.base import LLMRequest, Message
from runs.vocabulary import Usage
from tests.support.llm_server import Reply

CASES = [
    # provider, model, path, genai-prices API flavor, usage the server reports
    ("openai", "gpt-4o", "/v1/chat/completions", "chat", {"input": 12_000, "cached": 4_096, "output": 800}),
    ("openai", "gpt-4o-mini", "/v1/chat/completions", "chat", {"input": 3_000, "output": 1_200}),
    ("openai", "gpt-5-mini", "/v1/chat/completions", "chat", {"input": 5_000, "cached": 1_024, "output": 2_000, "reasoning": 1_500}),
    ("openai", "gpt-4.1", "/v1/chat/completions", "chat", {"input": 700, "output": 90}),
    ("anthropic", "claude-sonnet-4-6", "/v1/messages", "default", {"input": 9_000, "cached": 6_000, "output": 700}),
    ("anthropic", "claude-haiku-4-5", "/v1/messages", "default", {"input": 2_500, "output": 400, "reasoning": 150}),
    ("anthropic", "claude-opus-4-8", "/v1/messages", "default", {"input": 1_000, "output": 3_000}),
    # Prompt-cache writes have their own price (1.25 times input; one-hour writes 2 times).
    ("anthropic", "claude-sonnet-4-5", "/v1/messages", "default", {"input": 100_000, "cache_write": 100_000, "output": 200}),
    ("anthropic", "claude-haiku-4-5", "/v1/messages", "default", {"input": 30_000, "cached": 8_000, "cache_write": 12_000, "output": 300}),
    ("anthropic", "claude-opus-4-8", "/v1/messages", "default",
     {"input": 50_000, "cached": 10_000, "cache_write": 25_000, "cache_write_1h": 15_000, "output": 900, "reasoning": 200}),
]


@pytest.mark.parametrize("provider_name, model, path, flavor, usage", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_cost_matches_genai_prices(sdk_providers, provider_name, model, path, flavor, usage):
    sdk_providers.set_script([Reply(text="ok", usage=usage)])
    provider = get_provider(provider_name)
    response = provider.complete(LLMRequest(model=model, messages=[Message("user", "hi")]))
    ours = provider.price(response.model, response.usage)

    [call] = sdk_providers.calls(path)
    theirs = extract_usage(call.response, provider_id=provider_name, api_flavor=flavor).calc_price().total_price
    assert ours == theirs
    assert ours > 0
    assert provider.price_version(model) == pricing.price_version()


def test_figures_by_hand_for_gpt_4o():
    # $2.50/M input, $1.25/M cached input, $10/M output (genai-prices' gpt-4o prices).
    usage = Usage("openai", "gpt-4o", input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000)
    assert pricing.cost(usage, model="gpt-4o", provider_id="openai") == Decimal("1.5") + Decimal("0.5") + Decimal("1")


def test_cache_writes_by_hand_for_claude_sonnet_4_5():
    # Issue 28: 100,000 cache-write tokens and 200 output tokens. $3.75/M cache writes
    # (not the $3/M of plain input: that priced them at $0.303) plus $15/M output.
    usage = Usage("anthropic", "claude-sonnet-4-5", input_tokens=100_000, cache_write_tokens=100_000, output_tokens=200)
    assert pricing.cost(usage, model="claude-sonnet-4-5", provider_id="anthropic") == Decimal("0.378")
    # One-hour writes at $6/M: 40,000 of them.
    usage.cache_write_1h_tokens = 40_000
    assert pricing.cost(usage, model="claude-sonnet-4-5", provider_id="anthropic") == Decimal("0.468")


def test_more_cache_reads_and_writes_than_input_cannot_price_below_zero():
    usage = Usage("anthropic", "claude-sonnet-4-5", input_tokens=1_000, cached_input_tokens=800, cache_write_tokens=900,
                  cache_write_1h_tokens=5_000)
    theirs = calc_price(GenaiUsage(input_tokens=1_000, cache_read_tokens=800, cache_write_tokens=200, cache_write_1h_tokens=200,
                                   cache_write_5m_tokens=0), "claude-sonnet-4-5", provider_id="anthropic").total_price
    assert pricing.cost(usage, model="claude-sonnet-4-5", provider_id="anthropic") == theirs > 0


def test_long_context_tiers_are_priced_by_the_library():
    usage = Usage("openai", "gpt-5.5", input_tokens=400_000, output_tokens=10_000)
    theirs = calc_price(GenaiUsage(input_tokens=400_000, output_tokens=10_000), "gpt-5.5", provider_id="openai").total_price
    assert pricing.cost(usage, model="gpt-5.5", provider_id="openai") == theirs


def test_unknown_model_is_unknown_not_free(sdk_providers):
    openai = get_provider("openai")
    usage = Usage("openai", "my-finetune-7b", input_tokens=1000, output_tokens=1000)
    assert openai.price("my-finetune-7b", usage) is None
    assert openai.price_version("my-finetune-7b") == ""
    assert pricing.cost(usage, model="gpt-4o") is None  # no provider and no URL: no guess


def test_price_version_names_the_library_and_its_version():
    import genai_prices

    assert pricing.price_version() == f"genai-prices {genai_prices.__version__}"


def test_prices_are_taken_as_of_the_call():
    usage = Usage("openai", "gpt-4o", input_tokens=1000, output_tokens=1000)
    then = datetime(2025, 1, 1, tzinfo=UTC)
    assert pricing.cost(usage, model="gpt-4o", provider_id="openai", at=then) == calc_price(
        GenaiUsage(input_tokens=1000, output_tokens=1000), "gpt-4o", provider_id="openai", genai_request_timestamp=then
    ).total_price
