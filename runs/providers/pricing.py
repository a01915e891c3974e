"""USD prices of real models from genai-prices (the maintained price library), with the price data's version.

genai-prices (https://github.com/pydantic/genai-prices) ships a snapshot of the public
price lists of OpenAI, Anthropic, Groq, OpenRouter, Together and others, including
cached-input, reasoning and tiered (long-context) prices and their history (prices that
changed on a date are kept with that date). Ballast prices every LLM call with it:

- :func:`cost` turns a Ballast :class:`~runs.vocabulary.Usage` into USD (exact Decimal)
  or None when the library does not know the model ("unknown", never $0).
- :func:`price_version` names the data used (``genai-prices 0.2.3``, plus the snapshot
  time when prices were auto-updated), stored with every cost so a recompute after a
  price change is visible.

Usage mapping (the library's own extractors map API responses the same way): Ballast's
``input_tokens`` includes cached tokens (genai-prices' ``input_tokens``), its
``cached_input_tokens`` are ``cache_read_tokens``, its ``cache_write_tokens`` are
``cache_write_tokens`` (of which ``cache_write_1h_tokens`` are ``cache_write_1h_tokens``
and the rest ``cache_write_5m_tokens``, as the library's Anthropic extractor maps a
``cache_creation`` breakdown), ``output_tokens`` includes ``reasoning_tokens``
(``output_reasoning_tokens``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from runs.vocabulary import Usage

log = logging.getLogger("ballast.providers")

LIBRARY = "genai-prices"


def price_version() -> str:
    """The price data in use: ``genai-prices <version>`` for the bundled snapshot, with
    ``@<UTC timestamp>`` appended when prices were refreshed at run time."""
    import genai_prices
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    version = f"{LIBRARY} {genai_prices.__version__}"
    if snapshot.from_auto_update:
        version += "@" + snapshot.timestamp.strftime("%Y-%m-%dT%H:%M:%S")
    return version


def genai_usage(usage: Usage) -> Any:
    """The genai-prices ``Usage`` of a Ballast usage (token counts only; clamped so a
    provider reporting more cached reads and writes than total input cannot make a
    negative price)."""
    from genai_prices import Usage as GenaiUsage

    total = max(usage.input_tokens, 0)
    cached = min(max(usage.cached_input_tokens, 0), total)
    written = min(max(usage.cache_write_tokens, 0), total - cached)
    written_1h = min(max(usage.cache_write_1h_tokens, 0), written)
    reasoning = min(max(usage.reasoning_tokens, 0), max(usage.output_tokens, 0))
    values: dict[str, int] = {"input_tokens": total, "output_tokens": max(usage.output_tokens, 0)}
    if cached:
        values["cache_read_tokens"] = cached
    if written:
        values["cache_write_tokens"] = written
    if written_1h:
        values["cache_write_1h_tokens"] = written_1h
        values["cache_write_5m_tokens"] = written - written_1h
    if reasoning:
        values["output_reasoning_tokens"] = reasoning
    return GenaiUsage(**values)


def find_model(model: str, *, provider_id: str | None = None, api_url: str | None = None) -> Any | None:
    """The genai-prices model matching ``model`` at ``provider_id`` (or, without one, at the
    provider whose API URL pattern matches ``api_url``); None when unknown."""
    return _find(model, provider_id, None if provider_id else api_url)


@lru_cache(maxsize=1024)
def _find(model: str, provider_id: str | None, api_url: str | None) -> Any | None:
    from genai_prices import data_snapshot

    if not provider_id and not api_url:
        return None
    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, api_url)
    except LookupError:
        return None


def cost(
    usage: Usage,
    *,
    model: str,
    provider_id: str | None = None,
    api_url: str | None = None,
    at: datetime | None = None,
) -> Decimal | None:
    """USD cost of ``usage`` on ``model`` (exact Decimal), or None when genai-prices does not
    know the model at that provider.

    ``at`` is when the call was made (prices that changed over time are taken as they
    were then; None = now). Never raises for an unknown model; a usage the library cannot
    price (a malformed count) is logged and priced as unknown.
    """
    found = find_model(model, provider_id=provider_id, api_url=api_url)
    if found is None:
        return None
    provider, model_info = found
    try:
        calc = model_info.calc_price(genai_usage(usage), provider, genai_request_timestamp=at)
    except ValueError as exc:
        log.warning("genai-prices could not price %s/%s: %s", provider.id, model, exc)
        return None
    return Decimal(calc.total_price)


def cache_clear() -> None:
    """Forget model lookups (after genai-prices loaded new price data)."""
    _find.cache_clear()
