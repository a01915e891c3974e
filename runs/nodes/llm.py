"""The ``llm`` node kind: render a prompt from run state, call a provider, store text or validated JSON.

With ``output_schema`` the reply must be JSON that satisfies the schema; an invalid reply
is answered with the validation errors and asked again (``schema_retries`` times) inside
the same step, then the step fails with ``invalid_output``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import Field, field_validator

from runs.nodes.base import NodeContext, NodeResult
from runs.nodes.llm_call import (
    LLMCallConfig,
    LLMCallKind,
    count_tokens,
    llm_request,
    prompt_messages,
    provider_of,
    provider_or_none,
    request_tokens,
    worst_case_usd,
)
from runs.nodes.shared import expression_names
from runs.providers import spans
from runs.providers.base import MESSAGE_OVERHEAD_TOKENS, LLMRequest, LLMResponse, Message
from runs.sandbox import schemas, values
from runs.vocabulary import NodeError, Usage

# The re-ask message. Validation errors are capped so that its size, and so the
# budget's worst case in estimate_cost, stays bounded.
CORRECTION_PREFIX = "Your previous reply was not valid:"
CORRECTION_SUFFIX = "Reply again with only the corrected JSON value, no other text."
MAX_ERROR_CHARS = 1000
MAX_ERRORS = 10
# How much of a rejected reply is kept in the error details.
REJECTED_TEXT_CHARS = 2000

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


class LLMConfig(LLMCallConfig):
    """Config of an ``llm`` node: the model call (:class:`LLMCallConfig`) plus

    - ``output_key`` (default ``reply``): the state key the reply (text, or parsed JSON)
      is written to.
    - ``output_schema``: JSON Schema the reply must satisfy (draft 2020-12 unless
      ``$schema`` says otherwise), or None for free text.
    - ``schema_retries``: re-asks after an invalid reply, within the step.
    """

    output_schema: dict[str, Any] | None = Field(
        None, title="Reply schema", description="A JSON Schema the reply must match; leave empty for free text."
    )
    schema_retries: int = Field(
        2, ge=0, le=10, title="Re-asks after an invalid reply", description="How often the model is asked again when its reply does not match the schema."
    )

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            problems = schemas.schema_problems(schema)  # remote or dangling $refs too
            if problems:
                where, why = problems[0]
                raise ValueError(f"{where}: {why}" if where else why)
        return schema


class LLMNode(LLMCallKind[LLMConfig]):
    """Calls an LLM once (plus schema re-asks) and writes the reply to ``output_key``."""

    kind = "llm"
    config_model = LLMConfig
    description = "Ask a language model; store its reply (text or schema-checked JSON)."
    title, category = "LLM", "ai"  # builder palette (builder.selectors.node_kind_catalogue)

    def estimate_cost(self, config: LLMConfig, state: Mapping[str, Any]) -> tuple[Decimal | None, int]:
        """Worst case of one execution: the rendered prompt's tokens plus ``max_tokens``
        per call, for the first call and every schema re-ask (each re-ask resends the
        conversation, grown by a full-length reply and a bounded correction). Returns
        (USD or None when the price or provider is unknown, tokens)."""
        provider = provider_or_none(config)
        messages = prompt_messages(config, state, strict=False)
        request = LLMRequest(
            model=config.model, messages=messages, max_tokens=config.max_tokens, response_schema=config.output_schema
        )
        first_input = request_tokens(provider, request)
        calls = 1 + config.schema_retries if config.output_schema is not None else 1
        correction_bound = count_tokens(
            provider, "x" * (len(CORRECTION_PREFIX) + len(CORRECTION_SUFFIX) + MAX_ERROR_CHARS + 2)
        )
        growth = 2 * MESSAGE_OVERHEAD_TOKENS + config.max_tokens + correction_bound
        input_tokens = sum(first_input + k * growth for k in range(calls))
        output_tokens = calls * config.max_tokens
        return worst_case_usd(provider, config, input_tokens, output_tokens), input_tokens + output_tokens

    def execute(self, config: LLMConfig, ctx: NodeContext) -> NodeResult:
        """Render, call the provider (timeout = the step's time left), check the reply.

        Returns updates ``{output_key: text or parsed JSON}``, output ``{"text"|"json",
        "provider", "model", "stop_reason", "calls"[, "tool_calls"]}``, the summed usage of
        every call and its cost (None if the price is unknown).

        Raises NodeError: ``unknown_provider`` and ``template`` (not retryable),
        ``timeout`` when no time is left, any ProviderError of the provider, and
        ``invalid_output`` (not retryable; ``details`` has the errors, the last reply,
        and the usage and cost spent) when no reply satisfied ``output_schema``.
        """
        provider = provider_of(config)
        messages = prompt_messages(config, expression_names(ctx), strict=True)
        validator = None
        if config.output_schema is not None:
            validator = schemas.validator(config.output_schema)  # never fetches a $ref

        usage = Usage(provider=config.provider, model=config.model, price_version=provider.price_version(config.model))
        cost: Decimal | None = Decimal(0)
        calls = 1 + config.schema_retries if validator is not None else 1
        errors: list[str] = []
        response: LLMResponse | None = None
        for ask in range(calls):
            ctx.check_cancelled()
            request = llm_request(
                config,
                messages,
                ctx,
                response_schema=config.output_schema,
                # Each re-ask is a different request: it needs its own key, the same on
                # every attempt of the step.
                idempotency_key=ctx.idempotency_key if ask == 0 else f"{ctx.idempotency_key}:reask-{ask}",
            )
            try:
                response = spans.complete(provider, request)
            except NodeError as exc:
                if ask:
                    # A re-ask failed: the earlier calls of this attempt were paid for.
                    exc.usage, exc.cost_usd = usage, cost
                raise
            if ask == 0:
                # Price by the model that answered (an alias resolves to a dated version).
                usage.model = response.usage.model or usage.model
                usage.price_version = provider.price_version(usage.model)
            _add_usage(usage, response.usage)
            price = provider.price(usage.model, response.usage)
            cost = None if cost is None or price is None else cost + price

            if validator is None:
                return self._result(config, response, usage, cost, ask + 1, text=response.text)
            value, errors = _parse_and_validate(response.text, validator)
            if not errors:
                return self._result(config, response, usage, cost, ask + 1, value=value)
            messages += [
                Message(role="assistant", content=response.text),
                Message(role="user", content=_correction(errors)),
            ]

        assert response is not None
        raise NodeError(
            f"the model's reply did not satisfy output_schema after {calls} call(s): {errors[0]}",
            code="invalid_output",
            retryable=False,
            details={
                "errors": errors,
                "reply": response.text[:REJECTED_TEXT_CHARS],
                "usage": usage.as_dict(),
                "cost_usd": None if cost is None else str(cost),
            },
            usage=usage,
            cost_usd=cost,
        )

    def _result(
        self,
        config: LLMConfig,
        response: LLMResponse,
        usage: Usage,
        cost: Decimal | None,
        calls: int,
        *,
        text: str | None = None,
        value: Any = None,
    ) -> NodeResult:
        output: dict[str, Any] = {"text": text} if text is not None else {"json": value}
        output.update(provider=config.provider, model=response.model, stop_reason=response.stop_reason, calls=calls)
        if response.tool_calls:
            output["tool_calls"] = [c.as_dict() for c in response.tool_calls]
        reply = text if text is not None else value
        return NodeResult(updates={config.output_key: reply}, output=output, usage=usage, cost_usd=cost)


def _parse_and_validate(text: str, validator: Any) -> tuple[Any, list[str]]:
    """(parsed value, []) when ``text`` is JSON satisfying the schema, else (None, errors).

    A Markdown code fence around the JSON is tolerated: models add one even when told not to.
    """
    candidate = text.strip()
    fenced = _FENCE.match(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    try:
        value = values.loads(candidate)  # strict: NaN or Infinity in a reply is asked again
    except ValueError as exc:
        return None, [f"the reply is not JSON ({exc})"]
    try:
        found = sorted(validator.iter_errors(value), key=lambda e: e.json_path)
    except schemas.Unresolvable as exc:  # a version stored before validation refused such refs
        raise NodeError(f"output_schema cannot be applied: {exc}", code="invalid_config", retryable=False) from None
    return value, [f"{e.json_path}: {e.message}" for e in found[:MAX_ERRORS]]


def _correction(errors: list[str]) -> str:
    listed = "\n".join(f"- {e}" for e in errors)[:MAX_ERROR_CHARS]
    return f"{CORRECTION_PREFIX}\n{listed}\n{CORRECTION_SUFFIX}"


def _add_usage(total: Usage, more: Usage) -> None:
    total.input_tokens += more.input_tokens
    total.output_tokens += more.output_tokens
    total.cached_input_tokens += more.cached_input_tokens
    total.reasoning_tokens += more.reasoning_tokens
    total.cache_write_tokens += more.cache_write_tokens
    total.cache_write_1h_tokens += more.cache_write_1h_tokens
