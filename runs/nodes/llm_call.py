"""The LLM call the ``llm`` and ``agent`` kinds share: its config base, checks, prompt, request and worst-case price."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import Field

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind
from runs.nodes.shared import STATE_KEY_PATTERN, check_template
from runs.providers import UnknownProvider, get_provider
from runs.providers.base import (
    MESSAGE_OVERHEAD_TOKENS,
    LLMProvider,
    LLMRequest,
    Message,
    ToolDefinition,
    estimate_tokens,
)
from runs.sandbox.expressions import ExpressionError
from runs.sandbox.templating import render_template
from runs.vocabulary import NodeError, Usage

# The name of an environment variable (never its value: keys stay out of graphs).
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class LLMCallConfig(NodeConfig):
    """The fields of one model call, shared by the ``llm`` and ``agent`` node configs.

    - ``provider``/``model``: a registered provider name and one of its models.
    - ``system``/``prompt``: templates rendered against the run state (the conversation's
      first messages).
    - ``temperature``: None = the provider's default.
    - ``max_tokens``: upper bound of output tokens per call (budgets rely on it).
    - ``options``: provider-specific options (the mock's ``script``, ``latency_ms`` ...),
      checked by the provider before a run starts.
    - ``api_key_env``: the environment variable holding the provider's API key (None: the
      provider's configured default); the provider only reads variables its settings
      allow.
    - ``output_key``: the state key the node's result is written to (each kind sets its
      own default).
    """

    provider: str = Field("mock", min_length=1, title="Provider", description="A registered LLM provider.")
    model: str = Field("mock-1", min_length=1, title="Model", description="One of the provider's models.")
    system: str | None = Field(None, title="System prompt", description="Template over the state, sent first as the system message.")
    prompt: str = Field(min_length=1, title="Prompt", description="Template over the state, e.g. Summarise {{ text }}.")
    temperature: float | None = Field(None, ge=0, le=2, title="Temperature", description="0 to 2; leave empty for the provider's default.")
    max_tokens: int = Field(1024, ge=1, le=1_000_000, title="Maximum output tokens", description="Upper bound of the reply's tokens per call; budgets rely on it.")
    options: dict[str, Any] = Field(default_factory=dict, title="Provider options", description="Provider-specific settings as JSON, checked before a run starts.")
    api_key_env: str | None = Field(
        None,
        pattern=ENV_NAME_PATTERN,
        title="API key environment variable",
        description="Name of the environment variable holding the API key (never the key itself); leave empty for the provider's default.",
    )
    output_key: str = Field("reply", pattern=STATE_KEY_PATTERN, title="Output state key", description="The state key the reply is written to.")


LLMCallConfigT = TypeVar("LLMCallConfigT", bound=LLMCallConfig)


class LLMCallKind(NodeKind[LLMCallConfigT]):
    """The part of the ``llm`` and ``agent`` kinds that is the same: they write
    ``output_key`` and validate their model call with :func:`llm_call_issues`."""

    def writes(self, config: LLMCallConfigT) -> set[str]:
        return {config.output_key}

    def check(self, node_id: str, config: LLMCallConfigT, known_names: set[str]) -> list[Issue]:
        """The model call's issues (see :func:`llm_call_issues`)."""
        return llm_call_issues(node_id, config, known_names)


def llm_call_issues(node_id: str, config: LLMCallConfig, known_names: set[str]) -> list[Issue]:
    """Validation issues of a node's model call: unknown provider (``unknown_provider``),
    a model the provider does not list (``unknown_model``), invalid ``options``
    (``invalid_option``), what the provider refuses (``unsupported``: a temperature it
    does not take, a credential variable its settings do not allow), and template
    problems of ``system`` and ``prompt``."""
    issues: list[Issue] = []
    provider = provider_or_none(config)
    if provider is None:
        issues.append(Issue(node_id, "config.provider", f"unknown provider {config.provider!r}", code="unknown_provider"))
    else:
        models = provider.models()
        if models is not None and config.model not in models:
            issues.append(
                Issue(
                    node_id,
                    "config.model",
                    f"unknown model {config.model!r} for provider {config.provider!r} (known: {', '.join(sorted(models))})",
                    code="unknown_model",
                )
            )
        for problem in provider.validate_options(config.options):
            issues.append(Issue(node_id, "config.options", problem, code="invalid_option"))
        for field, problem in provider.config_issues(
            model=config.model, temperature=config.temperature, api_key_env=config.api_key_env
        ):
            issues.append(Issue(node_id, f"config.{field}", problem, code="unsupported"))
    for field, source in (("system", config.system), ("prompt", config.prompt)):
        if source is not None:
            issues.extend(check_template(node_id, f"config.{field}", source, known_names))
    return issues


def provider_of(config: LLMCallConfig) -> LLMProvider:
    """The config's provider. Raises NodeError(code="unknown_provider", not retryable)."""
    try:
        return get_provider(config.provider)
    except UnknownProvider:
        raise NodeError(f"unknown provider {config.provider!r}", code="unknown_provider", retryable=False) from None


def provider_or_none(config: LLMCallConfig) -> LLMProvider | None:
    """The config's provider, or None when no provider has that name (estimates, checks)."""
    try:
        return get_provider(config.provider)
    except UnknownProvider:
        return None


def prompt_messages(config: LLMCallConfig, names: Mapping[str, Any], *, strict: bool = True) -> list[Message]:
    """The system (if any, and not blank once rendered) and user messages of a config's
    ``system`` and ``prompt`` templates, rendered against ``names``.

    ``strict``: raise NodeError(code="template", not retryable) on a template error;
    otherwise (cost estimates) fall back to the unrendered source.
    """

    def render(field: str, source: str) -> str:
        try:
            return render_template(source, names)
        except ExpressionError as exc:
            if not strict:
                return source
            raise NodeError(
                f"config.{field}: {exc.message}", code="template", retryable=False, details={"error_code": exc.code}
            ) from exc

    messages = []
    if config.system:
        system = render("system", config.system)
        if system.strip():
            messages.append(Message(role="system", content=system))
    messages.append(Message(role="user", content=render("prompt", config.prompt)))
    return messages


def llm_request(
    config: LLMCallConfig,
    messages: list[Message],
    ctx: NodeContext,
    *,
    idempotency_key: str,
    tools: list[ToolDefinition] | None = None,
    response_schema: dict[str, Any] | None = None,
) -> LLMRequest:
    """The request of one model call of a step: the config's model and parameters, the
    step's time left as timeout, its attempt and cancel event, and ``idempotency_key``
    (the same on every attempt of that call).

    Raises NodeError(code="timeout", retryable) when the step has no time left.
    """
    timeout = ctx.time_left()
    if timeout is not None and timeout <= 0:
        raise NodeError("the step ran out of time before the model answered", code="timeout")
    return LLMRequest(
        model=config.model,
        messages=list(messages),
        tools=list(tools or []),
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        response_schema=response_schema,
        timeout=timeout,
        idempotency_key=idempotency_key,
        attempt=ctx.attempt,
        options=dict(config.options),
        cancel_event=ctx.cancel_event,
        api_key_env=config.api_key_env,
    )


def request_tokens(provider: LLMProvider | None, request: LLMRequest) -> int:
    """Estimated input tokens of ``request``: the provider's count, or a generic estimate
    of the messages when the provider is unknown."""
    if provider is not None:
        return provider.count_request_tokens(request)
    return sum(MESSAGE_OVERHEAD_TOKENS + estimate_tokens(m.content) for m in request.messages)


def count_tokens(provider: LLMProvider | None, text: str) -> int:
    """Estimated tokens of ``text`` by the provider's count (a generic estimate without one)."""
    return provider.count_tokens(text) if provider is not None else estimate_tokens(text)


def worst_case_usd(provider: LLMProvider | None, config: LLMCallConfig, input_tokens: int, output_tokens: int) -> Decimal | None:
    """USD of that many tokens on the config's model at worst, or None when the provider
    or the model's price is unknown.

    A provider may write any input to its prompt cache (Anthropic bills the writes at
    1.25 times input, two times for one-hour writes), so the worst case is the dearest of
    plain input, five-minute cache writes and one-hour cache writes."""
    if provider is None:
        return None
    plain = Usage(provider=config.provider, model=config.model, input_tokens=input_tokens, output_tokens=output_tokens)
    worst = provider.price(config.model, plain)
    if worst is None:
        return None
    for hour in (0, input_tokens):
        written = Usage(
            provider=config.provider,
            model=config.model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_write_tokens=input_tokens,
            cache_write_1h_tokens=hour,
        )
        cost = provider.price(config.model, written)
        if cost is not None and cost > worst:
            worst = cost
    return worst
