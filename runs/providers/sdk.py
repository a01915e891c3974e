"""The skeleton the SDK providers (OpenAI and OpenAI-compatible, Anthropic) share: settings,
credentials, one SDK client per (process, key, base URL), error mapping, genai-prices
pricing, secret redaction and a conservative token estimate."""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from runs import abort
from runs.providers import pricing
from runs.providers.base import LLMProvider, LLMRequest, LLMResponse, ProviderError, compact_json
from runs.retry_after import parse_retry_after
from runs.vocabulary import StepCancelled, Usage

_SECRET_PATTERNS = [
    # Provider key shapes (OpenAI sk-..., sk-proj-..., Anthropic sk-ant-...), bearer
    # tokens and "api_key=..." echoes in error bodies.
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/=*]{6,}"),
    re.compile(r"(?i)(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
]
REDACTED = "[REDACTED]"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret in ``secrets`` and anything shaped like an API key or
    bearer token replaced by ``[REDACTED]``. Used on every provider message that may end
    up in an error, an event or a log line."""
    for secret in secrets:
        # Very short "secrets" (a placeholder key "x") would shred ordinary text.
        if secret and len(secret) >= 6:
            text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + REDACTED, text)
    return text


def conservative_tokens(text: str) -> int:
    """A token estimate that errs high for real tokenizers, for budgets: one token per
    three ASCII characters and one per non-ASCII character (BPE vocabularies average 3.5-4.5
    ASCII characters per token on prose and code, and CJK text is close to a token per
    character). 0 for ""."""
    if not text:
        return 0
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return math.ceil(ascii_chars / 3) + (len(text) - ascii_chars)


class SDKSettings(BaseModel):
    """Settings of one SDK-backed provider name (settings.BALLAST_PROVIDER_SETTINGS[name]).

    - ``base_url``: the API root (None: the vendor's public API). An OpenAI-compatible
      server (Ollama, vLLM, LM Studio, OpenRouter, Groq, Together) is a base URL.
    - ``api_key``: a key given in settings (read from the environment in settings.py);
      never put one in a graph.
    - ``api_key_env``: the environment variable read when neither the node nor
      ``api_key`` gives a key.
    - ``allowed_api_key_envs``: further variables a node's ``api_key_env`` may name.
      Anything else is refused, so a graph cannot send e.g. the database password to a
      provider as its "key".
    - ``api_key_required``: False for local servers that take no key.
    - ``timeout``: seconds per call when the step sets no deadline.
    - ``price_provider``: genai-prices provider id to price models with (None: the
      vendor's for the public API; for another base URL, whatever genai-prices matches
      to that URL, else the price is unknown).
    - ``models``: the models nodes may use (None: any; unknown models are then priced
      as unknown, not rejected).
    - ``headers``: extra HTTP headers on every call (OpenRouter's ``HTTP-Referer`` ...).
    - ``structured_output``: use the API's native structured output for a node's
      ``output_schema`` (False for servers without it; the llm node's validation and
      re-asks still hold the reply to the schema).
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    allowed_api_key_envs: list[str] = Field(default_factory=list)
    api_key_required: bool = True
    timeout: float = Field(120.0, gt=0, le=3600)
    price_provider: str | None = None
    models: list[str] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    structured_output: bool = True


class SDKProvider(LLMProvider):
    """The skeleton of the providers that call a vendor SDK over HTTP: settings,
    credentials, one client per process and key, :meth:`complete`, error mapping, pricing.

    Subclasses set ``default_base_url``, ``default_api_key_env``, ``default_price_provider``,
    ``options_model`` and (for extra settings) ``settings_model``, and implement only what
    is SDK-specific: :meth:`_make_client`, :meth:`sdk_errors`, :meth:`request_params`,
    :meth:`send` and :meth:`parse` (and :meth:`check_request` for what the API refuses).
    """

    settings_model: ClassVar[type[SDKSettings]] = SDKSettings
    default_base_url: ClassVar[str] = ""
    default_api_key_env: ClassVar[str] = ""
    default_price_provider: ClassVar[str] = ""
    # Whether the API takes a sampling temperature.
    supports_temperature: ClassVar[bool] = True

    def __init__(self, *, name: str | None = None, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, config=config)
        # A mistyped setting fails the first use of the provider, loudly.
        self.settings = self.settings_model.model_validate(dict(self.config))
        # Keep no plain copy of a key given in settings (``settings.api_key`` is a SecretStr).
        self.config = self.settings.model_dump(exclude={"api_key"})
        self._clients: dict[tuple[int, str, str], Any] = {}
        self._clients_lock = threading.Lock()

    # ----------------------------------------------------------------- credentials
    @property
    def base_url(self) -> str:
        """The API root this provider talks to."""
        return self.settings.base_url or self.default_base_url

    def default_key_env(self) -> str:
        """The environment variable read when a node names none."""
        return self.settings.api_key_env or self.default_api_key_env

    def allowed_key_envs(self) -> set[str]:
        """Environment variables a node's ``api_key_env`` may name."""
        return {self.default_key_env(), *self.settings.allowed_api_key_envs} - {""}

    def api_key(self, api_key_env: str | None) -> str:
        """The API key for a call: the node's variable, else ``api_key`` from settings, else
        the default variable. Raises ProviderError(code="credentials", not retryable) when
        the variable is not allowed or not set; the message names the variable, never a
        value."""
        if api_key_env:
            if api_key_env not in self.allowed_key_envs():
                raise ProviderError(
                    f"provider {self.name!r} may not read api_key_env {api_key_env!r} "
                    f"(allowed: {', '.join(sorted(self.allowed_key_envs())) or 'none'})",
                    code="credentials",
                    retryable=False,
                )
            value = os.environ.get(api_key_env, "")
            if not value:
                raise ProviderError(
                    f"environment variable {api_key_env} (api_key_env) is not set", code="credentials", retryable=False
                )
            return value
        if self.settings.api_key is not None and self.settings.api_key.get_secret_value():
            return self.settings.api_key.get_secret_value()
        env = self.default_key_env()
        value = os.environ.get(env, "") if env else ""
        if value:
            return value
        if not self.settings.api_key_required:
            return "unused"  # the SDKs insist on some key; keyless servers ignore it
        raise ProviderError(
            f"no API key for provider {self.name!r}: set the environment variable {env or '(none configured)'}",
            code="credentials",
            retryable=False,
        )

    def client(self, api_key: str) -> Any:
        """The SDK client for ``api_key``, made once per process (qcluster forks workers;
        a connection pool must not be shared across a fork) and shared by its threads."""
        key = (os.getpid(), api_key, self.base_url)
        client = self._clients.get(key)
        if client is None:
            with self._clients_lock:
                client = self._clients.get(key)
                if client is None:
                    client = self._make_client(api_key)
                    self._clients[key] = client
        return client

    def _make_client(self, api_key: str) -> Any:
        """Build the SDK client (``max_retries=0``: Ballast's retry policy governs)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- one call
    def complete(self, request: LLMRequest) -> LLMResponse:
        """One call: options parsed, the request checked, the key found, then the SDK
        call with the step's time left and the configured and idempotency headers, its
        answer parsed.

        Raises ProviderError: ``provider_rejected`` (status 400: invalid ``options``, or a
        parameter the API refuses; not retryable), ``credentials`` (no usable key; not
        retryable), and whatever :meth:`error_from_sdk` maps an SDK error to (4xx
        ``provider_rejected``; 429 ``rate_limited`` and 5xx ``provider_unavailable``
        retryable with ``retry_after``; ``timeout`` and ``provider_error`` retryable).
        StepCancelled when the step was cancelled before or during the call (its
        connection is then shut down at once: runs.abort).
        """
        options = self.request_options(request)
        self.check_request(request)
        api_key = self.api_key(request.api_key_env)
        params = self.request_params(request, options)
        timeout = self.request_timeout(request)
        if request.cancel_event is not None and request.cancel_event.is_set():
            raise StepCancelled()
        # The step's cancel shuts the call's connection down at once (runs.abort):
        # a cancelled run's call stops, and bills, no further.
        with abort.aborting_on(request.cancel_event) as call:
            try:
                answer = self.send(self.client(api_key), params, timeout=timeout, headers=self.request_headers(request))
            except self.sdk_errors() as exc:
                if call.aborted:
                    raise StepCancelled() from None
                # ``from None``: the SDK exception holds the request; nothing of it is needed
                # beyond the mapped, redacted message.
                raise self.error_from_sdk(exc, api_key=api_key, timeout=timeout) from None
        return self.parse(answer, request)

    def check_request(self, request: LLMRequest) -> None:
        """Refuse what the API would answer 400 for (ProviderError, status 400); the default
        refuses a temperature when ``supports_temperature`` is False."""
        if request.temperature is not None and not self.supports_temperature:
            raise ProviderError(f"provider {self.name!r} does not take a temperature", status=400)

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        """The SDK's exception classes that :meth:`error_from_sdk` maps (imported lazily)."""
        raise NotImplementedError

    def request_params(self, request: LLMRequest, options: Any) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``request`` and its parsed ``options``."""
        raise NotImplementedError

    def send(self, client: Any, params: dict[str, Any], *, timeout: float, headers: dict[str, str]) -> Any:
        """Make the SDK call; returns the SDK's answer object."""
        raise NotImplementedError

    def parse(self, answer: Any, request: LLMRequest) -> LLMResponse:
        """The LLMResponse of the SDK's answer (usage normalised, see :class:`Usage`)."""
        raise NotImplementedError

    def request_timeout(self, request: LLMRequest) -> float:
        """Seconds this call may take: the step's time left, else the provider default."""
        if request.timeout is not None:
            return max(0.001, min(request.timeout, self.settings.timeout))
        return self.settings.timeout

    def request_headers(self, request: LLMRequest) -> dict[str, str]:
        """Extra headers of one call: configured ones plus ``Idempotency-Key`` (the same on
        every attempt of the step, so a provider or gateway that de-duplicates can)."""
        headers = dict(self.settings.headers)
        if request.idempotency_key:
            headers["Idempotency-Key"] = request.idempotency_key
        return headers

    # ----------------------------------------------------------------- validation
    def models(self) -> set[str] | None:
        return set(self.settings.models) if self.settings.models is not None else None

    def config_issues(self, *, model: str, temperature: float | None, api_key_env: str | None) -> list[tuple[str, str]]:
        issues = []
        if api_key_env and api_key_env not in self.allowed_key_envs():
            issues.append(
                (
                    "api_key_env",
                    f"provider {self.name!r} may not read {api_key_env!r} "
                    f"(allowed: {', '.join(sorted(self.allowed_key_envs())) or 'none'})",
                )
            )
        if temperature is not None and not self.supports_temperature:
            issues.append(("temperature", f"provider {self.name!r} does not take a temperature"))
        return issues

    # ----------------------------------------------------------------- errors
    def error_from_sdk(self, exc: Exception, *, api_key: str, timeout: float) -> ProviderError:
        """Map an SDK exception to a ProviderError, credentials redacted.

        Timeouts -> ``timeout``; connection errors -> ``provider_error``; HTTP answers by
        status (429 ``rate_limited`` and 5xx/529 ``provider_unavailable`` are retryable with
        the Retry-After the provider sent; other 4xx are ``provider_rejected`` with the
        provider's own message). Both SDKs share these exception shapes (``status_code``,
        ``response.headers``, ``body``).
        """
        secrets = [api_key]
        kind = type(exc).__name__
        status = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        if status is None:
            if "Timeout" in kind:
                return ProviderError(
                    f"{self.name}: no answer within {timeout:g}s", code="timeout", retryable=True, details={"error": kind}
                )
            return ProviderError(
                redact(f"{self.name}: {kind}: {exc}", secrets), retryable=True, details={"error": kind}
            )
        if status < 400:
            # A 2xx answer the SDK could not parse (APIResponseValidationError): a
            # misbehaving server or proxy, worth another try.
            return ProviderError(f"{self.name}: HTTP {status} answer the SDK could not read ({kind})", retryable=True)
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            body = body["error"]  # Anthropic's envelope: {"type": "error", "error": {...}}
        error_type = None
        if isinstance(body, Mapping):
            message = body.get("message") or compact_json(body)
            error_type = body.get("type") or body.get("code")
        else:
            message = str(body or getattr(exc, "message", "") or exc)
        message = redact(str(message)[:2000], secrets)
        headers = getattr(response, "headers", None)
        details: dict[str, Any] = {"status": status}
        if error_type:
            details["type"] = str(error_type)
        request_id = headers.get("request-id") or headers.get("x-request-id") if headers is not None else None
        if request_id:
            details["request_id"] = request_id
        code = None
        if status == 529:  # Anthropic: overloaded
            code = "provider_overloaded"
        return ProviderError(
            f"{self.name} answered HTTP {status}" + (f" ({error_type})" if error_type else "") + f": {message}",
            status=status,
            retry_after=parse_retry_after(headers),
            code=code,
            details=details,
        )

    # ----------------------------------------------------------------- pricing
    def price_provider(self) -> str | None:
        """The genai-prices provider id of this provider's models (None: match by URL)."""
        if self.settings.price_provider:
            return self.settings.price_provider
        return None if self.settings.base_url and self.settings.base_url != self.default_base_url else self.default_price_provider

    def price(self, model: str, usage: Usage, *, at: datetime | None = None) -> Decimal | None:
        """Cost from genai-prices (None when it does not know the model)."""
        return pricing.cost(usage, model=model, provider_id=self.price_provider(), api_url=self.base_url, at=at)

    def price_version(self, model: str) -> str:
        if pricing.find_model(model, provider_id=self.price_provider(), api_url=self.base_url) is None:
            return ""
        return pricing.price_version()

    def count_tokens(self, text: str) -> int:
        """Conservative estimate (see :func:`conservative_tokens`): budgets err high."""
        return conservative_tokens(text)
