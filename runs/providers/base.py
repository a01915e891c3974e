"""The one LLM provider interface: request/response shapes, errors, pricing and token estimates.

Every provider (the offline mock, OpenAI and OpenAI-compatible servers, Anthropic) turns
an :class:`LLMRequest` into an :class:`LLMResponse` and knows the price of its models.
Node kinds talk only to this interface, so a provider SDK is imported by its own module
and nowhere else. The skeleton the SDK providers share (settings, credentials, redaction,
a conservative token estimate) is runs/providers/sdk.py; Retry-After: runs/retry_after.py.
"""

from __future__ import annotations

import json
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError

from core.fields import field_path
from runs.vocabulary import NodeError, Usage

Role = Literal["system", "user", "assistant", "tool"]

# Normalised stop reasons (providers map their own names onto these).
StopReason = Literal["stop", "tool_calls", "max_tokens", "content_filter"]

# Chat formats wrap every message in a few tokens of framing (role markers, separators);
# counting them keeps estimates on the safe side for budgets.
MESSAGE_OVERHEAD_TOKENS = 4
MILLION = Decimal(1_000_000)

# A tool call whose arguments were not a JSON object is kept (the model is told what
# went wrong) with its raw text under this key, instead of failing the whole turn.
INVALID_ARGUMENTS_KEY = "__invalid_arguments__"


@dataclass(frozen=True)
class ToolCall:
    """A tool invocation requested by the model: ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Message:
    """One chat message.

    - ``tool_calls``: on an assistant message, the calls the model asked for.
    - ``tool_call_id``: on a ``tool`` message, which call this is the result of.
    - ``is_error``: on a ``tool`` message, the call failed and ``content`` says why.
    """

    role: Role
    content: str
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class ToolDefinition:
    """A tool offered to the model: ``parameters`` is the JSON Schema of its arguments object."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class LLMRequest:
    """One completion request.

    - ``temperature``: None = the provider's default.
    - ``max_tokens``: upper bound on output tokens (the budget's worst case relies on it).
    - ``response_schema``: JSON Schema the reply must follow (structured output), or None.
    - ``timeout``: seconds the provider may take (None = no limit of ours).
    - ``idempotency_key``: stable across attempts of the same call; providers that support
      one pass it on, so a retried request is recognised.
    - ``attempt``: the step's attempt number (1-based), for logging and fault simulation.
    - ``options``: provider-specific options, as written in the node config (JSON).
    - ``cancel_event``: set when the step is cancelled or its lease lost; providers check
      it where they can (while waiting, between stream chunks).
    - ``api_key_env``: name of the environment variable holding the API key (from the
      node config; the key itself never travels in a request object), or None for the
      provider's configured default.
    """

    model: str
    messages: list[Message]
    tools: list[ToolDefinition] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int = 1024
    response_schema: dict[str, Any] | None = None
    timeout: float | None = None
    idempotency_key: str | None = None
    attempt: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    cancel_event: threading.Event | None = None
    api_key_env: str | None = None

    def last_user_message(self) -> str:
        """Content of the last ``user`` message ("" if there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""


@dataclass
class LLMResponse:
    """A provider's answer: ``text`` (may be "" when the model only calls tools), requested
    ``tool_calls``, the call's token ``usage``, a normalised ``stop_reason`` and the model
    that actually answered (providers may resolve aliases to dated versions)."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    stop_reason: StopReason
    model: str


class ProviderError(NodeError):
    """A provider call failed.

    - ``status``: the HTTP status the provider answered with (None: no answer at all).
    - ``retry_after``: seconds the provider asked us to wait, if it said so.
    - ``retryable``/``code``: derived from ``status`` unless given: 429 is ``rate_limited``,
      408 ``timeout`` and 5xx ``provider_unavailable`` (all retryable); other 4xx are
      ``provider_rejected`` (not retryable); no status is ``provider_error`` (retryable:
      connection problems are usually transient).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        code: str | None = None,
        details: Any = None,
    ):
        default_code, default_retryable = _classify_status(status)
        super().__init__(
            message,
            code=code or default_code,
            retryable=default_retryable if retryable is None else retryable,
            details=details,
        )
        self.status = status
        self.retry_after = retry_after

    def as_dict(self) -> dict[str, Any]:
        data = super().as_dict()
        if self.status is not None:
            data["status"] = self.status
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        return data


def _classify_status(status: int | None) -> tuple[str, bool]:
    """(code, retryable) for an HTTP status of a provider answer."""
    if status is None:
        return "provider_error", True
    if status == 429:
        return "rate_limited", True
    if status == 408:
        return "timeout", True
    if status >= 500:
        return "provider_unavailable", True
    return "provider_rejected", False


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens. ``cached_input`` None = cached input costs as much as input.

    Reasoning tokens are billed as output and providers count them inside output tokens,
    so they carry no separate price.
    """

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None

    def cost(self, usage: Usage) -> Decimal:
        """Price of ``usage`` in USD (exact Decimal, not rounded)."""
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            Decimal(usage.input_tokens - cached) * self.input
            + Decimal(cached) * cached_price
            + Decimal(usage.output_tokens) * self.output
        ) / MILLION


class LLMProvider(ABC):
    """Base class of a provider (one module per provider, registered by dotted path).

    Subclasses set ``name``, implement :meth:`complete`, and usually fill ``prices`` or
    override :meth:`price`. The registry builds one instance per registered name with
    ``cls(name=<registry name>, config=settings.BALLAST_PROVIDER_SETTINGS.get(name))``, so
    one class can serve several names (``openai``, ``ollama``, ``groq``: one SDK, other
    base URLs). Instances are shared by every thread of a worker, so they must be
    thread-safe: keep per-call data in locals, not on ``self``.
    """

    name: str = ""
    # The pydantic model of the ``options`` a node may give this provider (unknown keys
    # should be an error, so a typo is caught before a run starts); None takes anything.
    options_model: ClassVar[type[BaseModel] | None] = None
    # model -> price; a fixed price list for this provider's models (the mock's).
    prices: ClassVar[Mapping[str, ModelPrice]] = {}
    # Names the price data of ``prices`` (recorded with every cost computed from it).
    prices_version: ClassVar[str] = ""

    def __init__(self, *, name: str | None = None, config: Mapping[str, Any] | None = None) -> None:
        if name:
            self.name = name
        self.config: Mapping[str, Any] = dict(config or {})

    @abstractmethod
    def complete(self, request: LLMRequest) -> LLMResponse:
        """Run one completion. Raises :class:`ProviderError` (or :class:`StepCancelled`)."""

    def models(self) -> set[str] | None:
        """Model names this provider accepts, or None when it cannot list them (then
        validation does not reject unknown models)."""
        return None

    def price(self, model: str, usage: Usage, *, at: datetime | None = None) -> Decimal | None:
        """Cost of ``usage`` on ``model`` in USD, or None when the price is unknown (never a
        made-up 0: an unknown price must show as unknown in cost reports and budgets).
        ``at``: when the call was made (price data with a history prices it as of then;
        None = now)."""
        price = self.prices.get(model)
        return None if price is None else price.cost(usage)

    def price_version(self, model: str) -> str:
        """Names the price data :meth:`price` uses for ``model`` ("" when it has none)."""
        return self.prices_version if model in self.prices else ""

    def count_tokens(self, text: str) -> int:
        """Estimated token count of ``text`` (about 4 characters per token; at least 1 for
        non-empty text). Providers with a real tokenizer override this."""
        return estimate_tokens(text)

    def count_request_tokens(self, request: LLMRequest) -> int:
        """Estimated input tokens of ``request``: every message with its framing, plus the
        tool definitions and the response schema (providers put both in the prompt)."""
        total = 0
        for message in request.messages:
            total += MESSAGE_OVERHEAD_TOKENS + self.count_tokens(message.content)
            if message.tool_calls:
                total += self.count_tokens(compact_json([c.as_dict() for c in message.tool_calls]))
        for tool in request.tools:
            total += self.count_tokens(
                compact_json({"name": tool.name, "description": tool.description, "parameters": tool.parameters})
            )
        if request.response_schema is not None:
            total += self.count_tokens(compact_json(request.response_schema))
        return total

    def validate_options(self, options: Mapping[str, Any]) -> list[str]:
        """Problems with a node's provider ``options`` (one ``path: message`` each) by
        :attr:`options_model`, checked before a run starts ([] without a model)."""
        if self.options_model is None:
            return []
        try:
            self.options_model.model_validate(dict(options))
        except ValidationError as exc:
            return option_errors(exc)
        return []

    def request_options(self, request: LLMRequest) -> Any:
        """``request.options`` parsed by :attr:`options_model` (the raw dict without one).
        Raises ProviderError(status 400, ``provider_rejected``, not retryable) when they
        are invalid: validation reports them before a run starts, but a request can be
        made by hand."""
        if self.options_model is None:
            return dict(request.options)
        try:
            return self.options_model.model_validate(request.options)
        except ValidationError as exc:
            raise ProviderError(f"invalid {self.name} options: " + "; ".join(option_errors(exc)), status=400) from None

    def config_issues(self, *, model: str, temperature: float | None, api_key_env: str | None) -> list[tuple[str, str]]:
        """Problems with a node's provider-related config, as ``(field, message)`` pairs
        (``field`` is ``temperature`` or ``api_key_env``), checked before a run starts.
        The default accepts anything; SDK providers check the credential variable is one
        they may read and that the API takes the parameters."""
        return []


def option_errors(exc: ValidationError) -> list[str]:
    """Pydantic errors of provider options as ``path: message`` lines (``stop[0]: ...``)."""
    messages = []
    for error in exc.errors(include_url=False):
        where = field_path(error.get("loc", ()))
        messages.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return messages


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` without a tokenizer: ceil(characters / 4), 0 for ""."""
    return math.ceil(len(text) / 4) if text else 0


def compact_json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True, default=str)
