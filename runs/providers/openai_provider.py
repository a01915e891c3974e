"""OpenAIProvider: OpenAI's Chat Completions API, and any OpenAI-compatible server by base URL, through the official ``openai`` SDK.

One class serves every OpenAI-compatible name registered in settings (``openai``,
``ollama``, ``groq``, ``openrouter`` ...): the name's BALLAST_PROVIDER_SETTINGS entry gives
its ``base_url``, credentials and price source. Reference: the OpenAI API reference,
"Create chat completion" (https://platform.openai.com/docs/api-reference/chat/create):
messages, ``tools``/``tool_calls``, ``response_format`` json_schema (Structured Outputs),
``max_completion_tokens`` and ``usage`` with ``prompt_tokens_details.cached_tokens`` and
``completion_tokens_details.reasoning_tokens``.

The SDK's own retries are off (``max_retries=0``): Ballast's retry policy decides, and
honours the Retry-After the error carries. Calls are not streamed: the reply is stored
whole, and a non-streamed answer is bounded by the read timeout.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from runs import abort
from runs.providers.base import (
    INVALID_ARGUMENTS_KEY,
    LLMRequest,
    LLMResponse,
    Message,
    ProviderError,
    StopReason,
    ToolCall,
)
from runs.providers.sdk import SDKProvider, SDKSettings
from runs.sandbox import values
from runs.vocabulary import Usage

log = logging.getLogger("ballast.providers")

# finish_reason -> Ballast stop reason.
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "max_tokens",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAISettings(SDKSettings):
    """Settings of an OpenAI(-compatible) provider name; see :class:`SDKSettings`.

    - ``max_tokens_param``: the request field bounding output tokens. OpenAI wants
      ``max_completion_tokens`` (reasoning models reject ``max_tokens``); many compatible
      servers only know ``max_tokens``. None: the former for OpenAI's API, the latter for
      any other base URL.
    """

    max_tokens_param: Literal["max_completion_tokens", "max_tokens"] | None = None


class _Options(BaseModel):
    # The pass-through request fields a node may set in ``options``; unknown keys are an
    # error so a typo is caught before a run starts.
    model_config = ConfigDict(extra="forbid")

    top_p: float | None = Field(None, ge=0, le=1)
    seed: int | None = None
    stop: list[str] | None = Field(None, max_length=4)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    parallel_tool_calls: bool | None = None
    prompt_cache_key: str | None = Field(None, max_length=200)


class OpenAIProvider(SDKProvider):
    """Chat Completions through ``openai.OpenAI`` (sync client, no SDK retries).

    Usage: ``input_tokens`` = ``prompt_tokens`` (cached included),
    ``cached_input_tokens`` = ``prompt_tokens_details.cached_tokens``, ``output_tokens``
    = ``completion_tokens`` (reasoning included), ``reasoning_tokens`` =
    ``completion_tokens_details.reasoning_tokens``. Priced by genai-prices.
    """

    name = "openai"
    settings_model: ClassVar[type[SDKSettings]] = OpenAISettings
    options_model = _Options
    default_base_url = "https://api.openai.com/v1"
    default_api_key_env = "OPENAI_API_KEY"
    default_price_provider = "openai"

    settings: OpenAISettings

    def _make_client(self, api_key: str) -> Any:
        import openai
        from openai._constants import DEFAULT_CONNECTION_LIMITS  # the SDK's own pool size

        # The SDK's default client, on a transport whose calls a step's cancel aborts.
        http_client = openai.DefaultHttpxClient(transport=abort.abortable_transport(DEFAULT_CONNECTION_LIMITS))
        return openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.settings.timeout, http_client=http_client)

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        import openai

        return (openai.APIError,)

    def send(self, client: Any, params: dict[str, Any], *, timeout: float, headers: dict[str, str]) -> Any:
        """``chat.completions.create``: one chat completion, not streamed."""
        return client.chat.completions.create(**params, timeout=timeout, extra_headers=headers)

    # ----------------------------------------------------------------- request
    def request_params(self, request: LLMRequest, options: _Options | None = None) -> dict[str, Any]:
        """The ``chat.completions.create`` keyword arguments of ``request`` (JSON-able)."""
        params: dict[str, Any] = {"model": request.model, "messages": [_message(m) for m in request.messages]}
        max_param = self.settings.max_tokens_param or (
            "max_completion_tokens" if self.base_url == self.default_base_url else "max_tokens"
        )
        params[max_param] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.response_schema is not None and self.settings.structured_output:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "output",
                    "schema": request.response_schema,
                    # Strict mode only takes a subset of JSON Schema; ask for it only when
                    # the schema is in that subset, else the API answers 400.
                    "strict": is_strict_compatible(request.response_schema),
                },
            }
        if options is not None:
            params.update(options.model_dump(exclude_none=True))
        return params

    # ----------------------------------------------------------------- response
    def parse(self, completion: Any, request: LLMRequest) -> LLMResponse:
        """The LLMResponse of a ChatCompletion (first choice)."""
        if not completion.choices:
            raise ProviderError(f"{self.name}: the answer has no choices", retryable=True)
        choice = completion.choices[0]
        message = choice.message
        text = message.content or ""
        if not text and getattr(message, "refusal", None):
            text = message.refusal
        calls: list[ToolCall] = []
        for raw in message.tool_calls or []:
            function = getattr(raw, "function", None)
            if function is None:  # a custom (free-text) tool call: Ballast offers none
                continue
            calls.append(ToolCall(id=raw.id or f"call_{len(calls) + 1}", name=function.name, arguments=_arguments(function.arguments)))
        stop: StopReason = _STOP_REASONS.get(choice.finish_reason or "", "tool_calls" if calls else "stop")
        if getattr(message, "refusal", None) and not message.content:
            stop = "content_filter"
        model = completion.model or request.model
        return LLMResponse(text=text, tool_calls=calls, usage=self.usage(completion.usage, model, request, text, calls), stop_reason=stop, model=model)

    def usage(self, raw: Any, model: str, request: LLMRequest, text: str, calls: list[ToolCall]) -> Usage:
        """Ballast Usage from the ``usage`` block; estimated (and logged) when a compatible
        server sends none, so the call is never recorded as free."""
        if raw is None:
            log.warning("%s: the answer carried no usage block; tokens estimated", self.name)
            output = self.count_tokens(text) + sum(self.count_tokens(json.dumps(c.as_dict())) for c in calls)
            return Usage(provider=self.name, model=model, input_tokens=self.count_request_tokens(request), output_tokens=output)
        prompt_details = getattr(raw, "prompt_tokens_details", None)
        completion_details = getattr(raw, "completion_tokens_details", None)
        return Usage(
            provider=self.name,
            model=model,
            input_tokens=raw.prompt_tokens or 0,
            output_tokens=raw.completion_tokens or 0,
            cached_input_tokens=(getattr(prompt_details, "cached_tokens", None) or 0) if prompt_details else 0,
            reasoning_tokens=(getattr(completion_details, "reasoning_tokens", None) or 0) if completion_details else 0,
        )


def _message(message: Message) -> dict[str, Any]:
    """One Ballast message as a Chat Completions message param."""
    if message.role == "tool":
        # Chat Completions has no error flag on tool results: the agent writes failures
        # as {"error": ...} content, which every model reads.
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c.arguments)}}
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _arguments(raw: str | None) -> dict[str, Any]:
    """Decoded tool-call arguments; text that is not a JSON object is kept under
    INVALID_ARGUMENTS_KEY so the model can be told what went wrong."""
    if not raw:
        return {}
    try:
        value = values.loads(raw)  # NaN is not JSON: the model is told, as for any bad text
    except ValueError:
        return {INVALID_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: raw}


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    if set(arguments) == {INVALID_ARGUMENTS_KEY}:
        return str(arguments[INVALID_ARGUMENTS_KEY])
    return json.dumps(arguments, separators=(",", ":"))


def is_strict_compatible(schema: Any) -> bool:
    """Whether ``schema`` is in the subset OpenAI's strict Structured Outputs accept: every
    object lists all its properties as required and forbids additional ones (checked
    recursively through properties, items, $defs and anyOf)."""
    if isinstance(schema, list):
        return all(is_strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != set(properties):
            return False
    for key in ("properties", "$defs", "definitions"):
        if isinstance(schema.get(key), dict) and not all(is_strict_compatible(s) for s in schema[key].values()):
            return False
    for key in ("items", "anyOf"):
        if key in schema and not is_strict_compatible(schema[key]):
            return False
    return True
