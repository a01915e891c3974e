"""MockProvider: a deterministic, offline LLM for examples and tests (scripted replies, simulated prices).

Options (``LLMRequest.options``, written in the llm node's ``options``):

- ``script``: a list of rules ``{"when": ..., "turn": ..., "reply": ..., "tool_calls": [...]}``;
  the first rule that matches answers. ``when`` matches the last user message: a
  case-insensitive substring, or a Python regular expression when it starts with ``re:``.
  ``turn`` matches the model turn of a conversation: the number of assistant messages in
  the request (0 for the first call; an agent's turn after its first tool results is 1).
  A rule without ``when`` and ``turn`` always matches (a default). ``reply`` is a string
  or a JSON value (sent back as JSON text). ``tool_calls`` items are ``{"name",
  "arguments", "id"?}`` (default ids ``call_1``, ``call_2``, ... within the reply).
  When no rule matches, or there is no script, the reply is ``"Echo: <last user message>"``.
- ``latency_ms``: wait this long before answering (gives up at the request timeout, and
  stops at once when the step is cancelled).
- ``fail_times``: answer with a retryable error while the step's attempt number is
  <= this, to exercise retry policies deterministically; ``fail_status`` picks the HTTP
  status of that error (default 503; 429 simulates rate limiting).

Replies longer than ``max_tokens`` are cut and end with stop reason ``max_tokens``, as a
real model's would, so an output never costs more than the budget's worst case.
"""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runs.providers.base import LLMProvider, LLMRequest, LLMResponse, ModelPrice, ProviderError, StopReason, ToolCall
from runs.vocabulary import StepCancelled, Usage

# SIMULATED prices in USD per million tokens: no money is spent; they exist so budget
# and cost-reporting paths run end to end with the mock.
MOCK_PRICES: dict[str, ModelPrice] = {
    "mock-1": ModelPrice(input=Decimal("1"), output=Decimal("2"), cached_input=Decimal("0.5")),
    "mock-large": ModelPrice(input=Decimal("10"), output=Decimal("30"), cached_input=Decimal("5")),
}

REGEX_PREFIX = "re:"


class _ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    when: str | None = None
    turn: int | None = Field(None, ge=0)
    reply: str | dict[str, Any] | list[Any] | int | float | bool | None = None
    tool_calls: list[_ScriptedCall] | None = None

    @field_validator("when")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(REGEX_PREFIX):
            try:
                re.compile(value[len(REGEX_PREFIX) :])
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _answers_something(self) -> _Rule:
        if self.reply is None and not self.tool_calls:
            raise ValueError("a rule needs a reply or tool_calls")
        return self

    def matches(self, message: str, turn: int) -> bool:
        if self.turn is not None and self.turn != turn:
            return False
        if self.when is None:
            return True
        if self.when.startswith(REGEX_PREFIX):
            return re.search(self.when[len(REGEX_PREFIX) :], message) is not None
        return self.when.casefold() in message.casefold()


class _Options(BaseModel):
    # Unknown keys are an error so a typo ("scirpt") does not silently echo.
    model_config = ConfigDict(extra="forbid")

    script: list[_Rule] | None = None
    latency_ms: float = Field(0, ge=0, le=600_000)
    fail_times: int = Field(0, ge=0)
    fail_status: int = Field(503, ge=400, le=599)


class MockProvider(LLMProvider):
    """Deterministic offline provider "mock" with models ``mock-1`` and ``mock-large``.

    Same request, same response: no randomness, no clock in the output. Usage is
    estimated with :meth:`count_request_tokens` and :meth:`count_tokens` (never 0 for
    non-empty text); prices are the simulated :data:`MOCK_PRICES`.
    """

    name = "mock"
    options_model = _Options
    prices = MOCK_PRICES
    prices_version = "mock-prices-1 (simulated)"

    def models(self) -> set[str]:
        return set(MOCK_PRICES)

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` from its script (or echo).

        Raises ProviderError: ``provider_rejected`` (status 400) for invalid options,
        ``unknown_model`` (404) for a model not in MOCK_PRICES, ``timeout`` when
        ``latency_ms`` exceeds the request timeout, and the simulated failure of
        ``fail_times``. Raises StepCancelled when the cancel event is set while waiting.
        """
        options: _Options = self.request_options(request)
        if request.model not in MOCK_PRICES:
            raise ProviderError(f"unknown model {request.model!r} for provider mock", status=404, code="unknown_model")

        self._wait(options.latency_ms / 1000, request)

        if request.attempt <= options.fail_times:
            raise ProviderError(
                f"simulated failure (attempt {request.attempt} of fail_times={options.fail_times})",
                status=options.fail_status,
                retry_after=1.0 if options.fail_status == 429 else None,
            )

        last_user = request.last_user_message()
        turn = sum(1 for m in request.messages if m.role == "assistant")
        rule = next((r for r in options.script or [] if r.matches(last_user, turn)), None)
        if rule is None:
            text, calls = f"Echo: {last_user}", []
        else:
            text = _reply_text(rule.reply)
            calls = [
                ToolCall(id=c.id or f"call_{i}", name=c.name, arguments=c.arguments)
                for i, c in enumerate(rule.tool_calls or [], start=1)
            ]

        stop_reason: StopReason = "tool_calls" if calls else "stop"
        if self.count_tokens(text) > request.max_tokens:
            # ~4 characters per token: keep exactly max_tokens worth of characters.
            text = text[: request.max_tokens * 4]
            stop_reason = "max_tokens"

        output_tokens = self.count_tokens(text)
        if calls:
            output_tokens += self.count_tokens(json.dumps([c.as_dict() for c in calls], separators=(",", ":")))
        usage = Usage(
            provider=self.name,
            model=request.model,
            input_tokens=self.count_request_tokens(request),
            output_tokens=output_tokens,
        )
        return LLMResponse(text=text, tool_calls=calls, usage=usage, stop_reason=stop_reason, model=request.model)

    def _wait(self, seconds: float, request: LLMRequest) -> None:
        """Simulate latency, bounded by the request timeout and cut short by cancellation."""
        if seconds <= 0:
            return
        timed_out = request.timeout is not None and seconds > request.timeout
        delay = min(seconds, request.timeout) if request.timeout is not None else seconds
        if request.cancel_event is not None:
            if request.cancel_event.wait(delay):
                raise StepCancelled()
        else:
            time.sleep(delay)
        if timed_out:
            raise ProviderError(f"mock did not answer within {request.timeout:.3f}s", code="timeout", retryable=True)


def _reply_text(reply: Any) -> str:
    if reply is None:
        return ""
    if isinstance(reply, str):
        return reply
    return json.dumps(reply, ensure_ascii=False)
