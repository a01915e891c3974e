"""AnthropicProvider: Anthropic's Messages API through the official ``anthropic`` SDK.

Reference: the Anthropic API reference, "Messages" (https://docs.anthropic.com/en/api/messages):
a ``system`` prompt, alternating user/assistant ``messages`` whose content blocks carry
``tool_use`` (assistant) and ``tool_result`` (user) blocks, ``tools`` with an
``input_schema``, structured output through ``output_config.format`` (json_schema), and
``usage`` with ``input_tokens`` (uncached input only), ``cache_creation_input_tokens``,
``cache_read_input_tokens``, ``output_tokens`` and ``output_tokens_details.thinking_tokens``.

SDK 2.x speaks API version 2026-10-21, which rejects ``temperature``/``top_p``/``top_k``:
validation reports a temperature on an Anthropic node instead of a 400 at run time. The
SDK's own retries are off (``max_retries=0``); overload (529), 429 and 5xx answers come
back as retryable errors with the Retry-After the API sent.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from runs import abort
from runs.providers.base import INVALID_ARGUMENTS_KEY, LLMRequest, LLMResponse, Message, StopReason, ToolCall
from runs.providers.sdk import SDKProvider
from runs.vocabulary import Usage

# stop_reason -> Ballast stop reason.
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class _Options(BaseModel):
    # Pass-through request fields a node may set in ``options``.
    model_config = ConfigDict(extra="forbid")

    stop_sequences: list[str] | None = Field(None, max_length=8)
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


class AnthropicProvider(SDKProvider):
    """Messages through ``anthropic.Anthropic`` (sync client, no SDK retries).

    Usage is normalised to Ballast's convention (input includes cached input):
    ``input_tokens`` = ``input_tokens`` + ``cache_creation_input_tokens`` +
    ``cache_read_input_tokens`` (as genai-prices' own Anthropic extractor sums them),
    ``cached_input_tokens`` = ``cache_read_input_tokens``, ``cache_write_tokens`` =
    ``cache_creation_input_tokens`` (``cache_write_1h_tokens`` =
    ``cache_creation.ephemeral_1h_input_tokens``), ``reasoning_tokens`` =
    ``output_tokens_details.thinking_tokens``. Priced by genai-prices, cache writes at
    the model's cache-write prices.
    """

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_api_key_env = "ANTHROPIC_API_KEY"
    default_price_provider = "anthropic"
    # Messages API 2026-10-21 answers 400 to any temperature: refused before the call.
    supports_temperature: ClassVar[bool] = False
    options_model = _Options

    def _make_client(self, api_key: str) -> Any:
        import anthropic
        from anthropic._constants import DEFAULT_CONNECTION_LIMITS  # the SDK's own pool size

        # The SDK's default client, on a transport whose calls a step's cancel aborts.
        http_client = anthropic.DefaultHttpxClient(transport=abort.abortable_transport(DEFAULT_CONNECTION_LIMITS))
        return anthropic.Anthropic(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.settings.timeout, http_client=http_client)

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        import anthropic

        return (anthropic.APIError,)

    def send(self, client: Any, params: dict[str, Any], *, timeout: float, headers: dict[str, str]) -> Any:
        """``messages.create``: one Messages call, not streamed."""
        return client.messages.create(**params, timeout=timeout, extra_headers=headers)

    # ----------------------------------------------------------------- request
    def request_params(self, request: LLMRequest, options: _Options | None = None) -> dict[str, Any]:
        """The ``messages.create`` keyword arguments of ``request`` (JSON-able)."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system" and m.content)
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": _messages(request.messages),
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        output_config: dict[str, Any] = {}
        if request.response_schema is not None and self.settings.structured_output:
            output_config["format"] = {"type": "json_schema", "schema": request.response_schema}
        if options is not None:
            if options.effort:
                output_config["effort"] = options.effort
            if options.stop_sequences:
                params["stop_sequences"] = options.stop_sequences
        if output_config:
            params["output_config"] = output_config
        return params

    # ----------------------------------------------------------------- response
    def parse(self, message: Any, request: LLMRequest) -> LLMResponse:
        """The LLMResponse of a Message: text blocks joined, tool_use blocks as calls."""
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                arguments = block.input if isinstance(block.input, dict) else {INVALID_ARGUMENTS_KEY: str(block.input)}
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
            # thinking and server-tool blocks carry nothing the node stores.
        stop: StopReason = _STOP_REASONS.get(message.stop_reason or "", "tool_calls" if calls else "stop")
        model = message.model or request.model
        return LLMResponse(text="".join(texts), tool_calls=calls, usage=self.usage(message.usage, model), stop_reason=stop, model=model)

    def usage(self, raw: Any, model: str) -> Usage:
        """Ballast Usage of a Messages ``usage`` block (see the class docstring)."""
        cache_read = getattr(raw, "cache_read_input_tokens", None) or 0
        cache_write = getattr(raw, "cache_creation_input_tokens", None) or 0
        # The one-hour writes cost more than the five-minute ones (the breakdown is absent
        # from older answers: all writes are then five-minute ones, as the API's default).
        breakdown = getattr(raw, "cache_creation", None)
        cache_write_1h = (getattr(breakdown, "ephemeral_1h_input_tokens", None) or 0) if breakdown else 0
        details = getattr(raw, "output_tokens_details", None)
        return Usage(
            provider=self.name,
            model=model,
            input_tokens=(raw.input_tokens or 0) + cache_read + cache_write,
            output_tokens=raw.output_tokens or 0,
            cached_input_tokens=cache_read,
            cache_write_tokens=cache_write,
            cache_write_1h_tokens=min(cache_write_1h, cache_write),
            reasoning_tokens=(getattr(details, "thinking_tokens", None) or 0) if details else 0,
        )


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Ballast messages (system ones excluded) as Messages API params.

    Tool results become ``tool_result`` blocks of a user turn; consecutive results are
    merged into one turn, as the API requires every result of one assistant turn in the
    user turn that follows it.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
                "is_error": message.is_error,
            }
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) and out[-1].get("_results"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_results": True})
            continue
        if message.role == "assistant":
            content: list[dict[str, Any]] = []
            if message.content:
                content.append({"type": "text", "text": message.content})
            for call in message.tool_calls or []:
                arguments = {} if INVALID_ARGUMENTS_KEY in call.arguments else call.arguments
                content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
            if not content:
                # The API refuses an empty assistant turn; an empty reply is still a turn.
                content.append({"type": "text", "text": "(no reply)"})
            out.append({"role": "assistant", "content": content})
            continue
        out.append({"role": "user", "content": message.content})
    for item in out:
        item.pop("_results", None)
    return out
