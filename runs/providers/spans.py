"""An LLM call as a span of its step attempt's trace (the OpenTelemetry GenAI semantic conventions), when traces are on.

Node kinds call :func:`complete` instead of ``provider.complete``: with traces off
(core.tracing) it is that call and nothing else.
"""
from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind

from core import tracing
from runs.providers.base import LLMProvider, LLMRequest, LLMResponse
from runs.vocabulary import NodeError


def complete(provider: LLMProvider, request: LLMRequest) -> LLMResponse:
    """``provider.complete(request)`` inside a ``chat <model>`` client span: attributes
    ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model`` /
    ``max_tokens`` / ``temperature``, then ``gen_ai.response.model``,
    ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` / ``output_tokens``
    and the call's price as ``ballast.cost_usd`` (USD, a float; left out when the price is
    unknown). A failed call sets ``error.type`` to its error code and re-raises.
    Returns and raises what ``provider.complete`` does."""
    if not tracing.enabled():
        return provider.complete(request)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider.name,
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.temperature": request.temperature,
    }
    with tracing.span(f"chat {request.model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        try:
            response = provider.complete(request)
        except NodeError as exc:
            tracing.set_error(span, exc.code, str(exc))
            raise
        usage = response.usage
        cost = provider.price(usage.model or response.model, usage)
        tracing.set_attributes(span, {
            "gen_ai.response.model": response.model,
            "gen_ai.response.finish_reasons": [str(response.stop_reason)],
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "ballast.cost_usd": None if cost is None else float(cost),
        })
        return response
