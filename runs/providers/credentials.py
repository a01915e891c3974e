"""Providers added in the app: API keys encrypted at rest, a stored credential as a provider, the catalogue and the connection test.

The audited writes (create, update, delete) are in :mod:`runs.providers.services`, so the
node kinds, which resolve providers through this module, never import the audit writer.

Keys are encrypted with Fernet (the ``cryptography`` library: AES-128-CBC + HMAC-SHA256)
under ``settings.BALLAST_CREDENTIALS_KEY``: one or more Fernet keys, comma separated, in
a MultiFernet, so the first key encrypts and every key decrypts (rotation:
:func:`credentials_rotate`, ``manage.py rotate_credentials``). Unset, a key is generated
once into ``settings.BALLAST_CREDENTIALS_KEY_FILE`` (var/credentials-key.txt). The token
binds the key to its provider name, so a ciphertext copied onto another row does not
decrypt there.

A key leaves this module only inside the provider object that calls the vendor's SDK:
never in a return value meant for display, a log line, an error message (provider
messages go through :func:`runs.providers.sdk.redact` with the key) or an audit entry.

Names: a stored credential may not take a name that settings or the environment
configure (``settings.BALLAST_PROVIDERS``: ``mock``, ``openai``, ``anthropic``, the
``BALLAST_OPENAI_COMPATIBLE`` names), so every process resolves a name to the same
provider and the registry answers those names without a database query.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import transaction
from django.dispatch import receiver

from runs.models import McpServer, ProviderCredential, ProviderKind
from runs.providers import get_provider
from runs.providers.anthropic_provider import AnthropicProvider
from runs.providers.base import LLMProvider, LLMRequest, Message, ProviderError
from runs.providers.mock import MockProvider
from runs.providers.openai_provider import OpenAIProvider
from runs.providers.sdk import SDKProvider, redact
from runs.vocabulary import NodeError

log = logging.getLogger("ballast.providers")

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_KEY_CHARS = 1000
MAX_MODELS = 500
KIND_LABELS = {"mock": "Mock (offline)", **dict(ProviderKind.choices)}


class CredentialUnreadable(ProviderError):
    """A stored key that no key of BALLAST_CREDENTIALS_KEY decrypts (code ``credentials``,
    not retryable): the key it was encrypted with was removed, or the row was tampered with."""

    def __init__(self, name: str):
        super().__init__(
            f"the stored API key of provider {name!r} cannot be decrypted with BALLAST_CREDENTIALS_KEY "
            "(was the key it was saved with removed?); save the key again",
            code="credentials",
            retryable=False,
        )


class CredentialInvalid(ValueError):
    """Bad input for a stored credential. ``fields``: ``{field: [message, ...]}``;
    ``code``: ``invalid``, or ``name_taken`` when the name is in use (a conflict)."""

    def __init__(self, fields: dict[str, list[str]], *, code: str = "invalid"):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()))
        self.fields = fields
        self.code = code


# --------------------------------------------------------------------------- encryption


def _parse_keys(raw: str, source: str) -> list[Fernet]:
    keys = [part.strip() for part in re.split(r"[,\s]+", raw) if part.strip()]
    if not keys:
        raise ImproperlyConfigured(f"{source}: no key given")
    fernets = []
    for index, key in enumerate(keys, 1):
        try:
            fernets.append(Fernet(key))
        except ValueError:
            # Never echo the value: it may be a real key with a typo.
            raise ImproperlyConfigured(
                f"{source}: key {index} is not a Fernet key (32 url-safe base64-encoded bytes; make one with "
                "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
            ) from None
    return fernets


def _key_file_text() -> str:
    """The generated key file's content, creating the file first if there is none.

    Creation is atomic and never overwrites (written to a private temporary file, then
    hard-linked into place), so two processes starting together agree on one key."""
    path = settings.BALLAST_CREDENTIALS_KEY_FILE
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(Fernet.generate_key().decode() + "\n")
            try:
                os.link(tmp, path)
                log.warning(
                    "BALLAST_CREDENTIALS_KEY is not set: generated a key for stored provider credentials into %s "
                    "(set BALLAST_CREDENTIALS_KEY when several machines share the database)",
                    path,
                )
            except FileExistsError:
                pass  # another process made it first: use theirs
        finally:
            os.unlink(tmp)
    with open(path) as handle:
        return handle.read()


@cache
def cipher() -> MultiFernet:
    """The MultiFernet of BALLAST_CREDENTIALS_KEY (else of the generated key file).
    Raises ImproperlyConfigured for a malformed key (the message never shows it)."""
    configured = getattr(settings, "BALLAST_CREDENTIALS_KEY", "")
    if configured:
        return MultiFernet(_parse_keys(configured, "BALLAST_CREDENTIALS_KEY"))
    return MultiFernet(_parse_keys(_key_file_text(), str(settings.BALLAST_CREDENTIALS_KEY_FILE)))


@receiver(setting_changed)
def _reset_cipher(*, setting: str, **kwargs: Any) -> None:
    if setting in ("BALLAST_CREDENTIALS_KEY", "BALLAST_CREDENTIALS_KEY_FILE"):
        cipher.cache_clear()
        _instances.clear()


def encrypt_api_key(*, name: str, api_key: str) -> str:
    """The Fernet token (str) storing ``api_key`` for provider ``name``; "" for no key."""
    if not api_key:
        return ""
    plain = json.dumps({"name": name, "key": api_key}, separators=(",", ":"))
    return cipher().encrypt(plain.encode()).decode("ascii")


def decrypt_api_key(credential: ProviderCredential) -> str:
    """The plain API key of ``credential`` ("" when it has none). Raises
    CredentialUnreadable when no configured key decrypts it or it belongs to another name."""
    if not credential.api_key_encrypted:
        return ""
    try:
        plain = json.loads(cipher().decrypt(credential.api_key_encrypted.encode("ascii")))
    except (InvalidToken, ValueError, UnicodeError):
        raise CredentialUnreadable(credential.name) from None
    if not isinstance(plain, dict) or plain.get("name") != credential.name or not isinstance(plain.get("key"), str):
        raise CredentialUnreadable(credential.name)
    return plain["key"]


def encrypt_secret(value: Any, *, bound_to: str) -> str:
    """The Fernet token (str) storing the JSON value ``value`` (an MCP server's headers)
    under the providers' keys, bound to ``bound_to`` (a scope such as ``mcp_server:x``) so
    that a token copied onto another row does not decrypt there; "" for an empty value."""
    if not value:
        return ""
    plain = json.dumps({"bound_to": bound_to, "value": value}, separators=(",", ":"))
    return cipher().encrypt(plain.encode()).decode("ascii")


def decrypt_secret(token: str, *, bound_to: str, label: str) -> Any:
    """The value :func:`encrypt_secret` stored in ``token`` (None for ""). Raises
    NodeError ``credentials`` (not retryable) naming ``label`` when no configured key
    decrypts it or it was made for another scope; the message never shows the value."""
    if not token:
        return None
    try:
        plain = json.loads(cipher().decrypt(token.encode("ascii")))
    except (InvalidToken, ValueError, UnicodeError):
        plain = None
    if not isinstance(plain, dict) or plain.get("bound_to") != bound_to:
        raise NodeError(
            f"the stored secret of {label} cannot be decrypted with BALLAST_CREDENTIALS_KEY "
            "(was the key it was saved with removed?); save it again",
            code="credentials",
            retryable=False,
        )
    return plain["value"]


def credentials_rotate() -> int:
    """Re-encrypt every stored key (and MCP server headers) with the first key of
    BALLAST_CREDENTIALS_KEY (the others must still decrypt them). Returns how many rows
    were re-encrypted. Raises
    CredentialUnreadable (nothing changed) when a key can no longer be decrypted."""
    fernet = cipher()
    done = 0
    with transaction.atomic():
        for row in ProviderCredential.objects.select_for_update().exclude(api_key_encrypted="").order_by("pk"):
            try:
                token = fernet.rotate(row.api_key_encrypted.encode("ascii")).decode("ascii")
            except InvalidToken:
                raise CredentialUnreadable(row.name) from None
            # Same plaintext, new ciphertext: updated_at stays, so nothing else changes.
            ProviderCredential.objects.filter(pk=row.pk).update(api_key_encrypted=token)
            done += 1
        # MCP servers' headers share the cipher (encrypt_secret): rotated with the keys.
        for server in McpServer.objects.select_for_update().exclude(headers_encrypted="").order_by("pk"):
            try:
                token = fernet.rotate(server.headers_encrypted.encode("ascii")).decode("ascii")
            except InvalidToken:
                raise CredentialUnreadable(f"mcp server {server.name}") from None
            McpServer.objects.filter(pk=server.pk).update(headers_encrypted=token)
            done += 1
    _instances.clear()
    return done


# --------------------------------------------------------------------------- resolution


class _StoredKey:
    """Mixin for SDK providers built from a stored credential: the key comes from the
    database only (no environment variable: ``api_key_env`` on a node is refused), and
    an undecryptable key fails the call with a clear, non-retryable error."""

    default_api_key_env = ""
    unreadable: CredentialUnreadable | None = None

    def api_key(self, api_key_env: str | None) -> str:
        if not api_key_env and self.unreadable is not None:
            raise self.unreadable
        if not api_key_env and self.settings.api_key is None and self.settings.api_key_required:  # type: ignore[attr-defined]
            raise ProviderError(
                f"provider {self.name!r} has no stored API key: add one in the admin", code="credentials", retryable=False  # type: ignore[attr-defined]
            )
        return super().api_key(api_key_env)  # type: ignore[misc]


class StoredOpenAIProvider(_StoredKey, OpenAIProvider):
    """An ``openai`` or ``openai_compatible`` provider added in the app."""


class StoredAnthropicProvider(_StoredKey, AnthropicProvider):
    """An ``anthropic`` provider added in the app."""


def provider_from_credential(credential: ProviderCredential) -> SDKProvider:
    """A provider instance for ``credential`` (not cached; see :func:`stored_provider`).

    ``openai`` and ``anthropic`` are the vendors' APIs (an optional base URL is a proxy:
    prices stay the vendor's); ``openai_compatible`` is a server at ``base_url`` whose
    prices genai-prices may know by URL, else unknown. An undecryptable key does not
    raise here (validation must still work): the provider's calls fail instead."""
    unreadable = None
    try:
        key = decrypt_api_key(credential)
    except CredentialUnreadable as exc:
        key, unreadable = "", exc
    config: dict[str, Any] = {
        "base_url": credential.base_url or None,
        "api_key": key or None,
        "models": list(credential.model_names) or None,
    }
    if credential.kind == ProviderKind.ANTHROPIC:
        provider: SDKProvider = StoredAnthropicProvider(name=credential.name, config={**config, "price_provider": "anthropic"})
    elif credential.kind == ProviderKind.OPENAI:
        provider = StoredOpenAIProvider(
            name=credential.name,
            config={**config, "price_provider": "openai", "max_tokens_param": "max_completion_tokens"},
        )
    else:
        provider = StoredOpenAIProvider(name=credential.name, config={**config, "api_key_required": bool(key) or unreadable is not None})
    provider.unreadable = unreadable  # type: ignore[attr-defined]
    return provider


# name -> ((pk, updated_at, ciphertext), provider): one instance per credential version per
# process, so its SDK clients (connection pools) are reused across calls.
_instances: dict[str, tuple[tuple[Any, ...], SDKProvider]] = {}


def stored_provider(name: str) -> SDKProvider | None:
    """The provider of the stored credential ``name``, or None when there is none (one
    query). A changed credential (another process saved it) gives a new instance."""
    if not NAME_PATTERN.match(name):
        return None
    credential = ProviderCredential.objects.filter(name=name).first()
    if credential is None:
        return None
    stamp = (credential.pk, credential.updated_at, credential.api_key_encrypted)
    cached = _instances.get(name)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    provider = provider_from_credential(credential)
    _instances[name] = (stamp, provider)
    return provider


def _env_names() -> set[str]:
    return set(getattr(settings, "BALLAST_PROVIDERS_FROM_ENV", ()))


# --------------------------------------------------------------------------- catalogue


def default_model_of(provider: LLMProvider) -> str | None:
    """The model a settings-configured provider is tested with when none is named: the
    mock's ``mock-1``, else the first of the models its settings list, else None."""
    if isinstance(provider, MockProvider):
        return "mock-1"
    models = provider.models()
    return sorted(models)[0] if models else None


def _describe(name: str, provider: LLMProvider) -> dict[str, Any]:
    """Catalogue entry of a provider configured in settings or the environment."""
    base_url = getattr(provider, "base_url", None)
    if isinstance(provider, MockProvider):
        kind = "mock"
    elif isinstance(provider, AnthropicProvider):
        kind = ProviderKind.ANTHROPIC.value
    elif isinstance(provider, OpenAIProvider) and base_url == provider.default_base_url:
        kind = ProviderKind.OPENAI.value
    elif isinstance(provider, OpenAIProvider):
        kind = ProviderKind.OPENAI_COMPATIBLE.value
    else:
        kind = "custom"
    ready = True
    if isinstance(provider, SDKProvider):
        try:
            provider.api_key(None)
        except ProviderError:
            ready = False
    models = provider.models()
    labels = {"mock": "Mock (offline)", "openai": "OpenAI", "anthropic": "Anthropic"}
    return {
        "name": name,
        "kind": kind,
        "label": labels.get(name) or f"{name} ({KIND_LABELS.get(kind, kind)})",
        "models": sorted(models) if models is not None else [],
        "default_model": default_model_of(provider),
        "base_url": base_url,
        "source": "environment" if name in _env_names() else "settings",
        "ready": ready,
    }


def provider_catalogue() -> list[dict[str, Any]]:
    """Every provider a node may name: settings and environment ones (settings order),
    then the stored ones by name. Each item: ``name``, ``kind`` (``mock``, ``openai``,
    ``anthropic``, ``openai_compatible``), ``label``, ``models`` (may be empty: any
    model), ``default_model`` (or None), ``base_url`` (or None), ``source``
    (``settings``, ``environment``, ``app``) and ``ready`` (a key is available). Never a
    key. A stored credential whose name settings took later is left out (settings win)."""
    items = []
    for name in settings.BALLAST_PROVIDERS:
        try:
            items.append(_describe(name, get_provider(name)))
        except Exception:  # a broken settings entry must not hide every other provider
            log.exception("provider %r is misconfigured", name)
    for credential in ProviderCredential.objects.exclude(name__in=list(settings.BALLAST_PROVIDERS)).order_by("name"):
        items.append(catalogue_item(credential))
    return items


def catalogue_item(credential: ProviderCredential) -> dict[str, Any]:
    """Catalogue entry (see :func:`provider_catalogue`) of a stored credential."""
    models = list(credential.model_names)
    return {
        "name": credential.name,
        "kind": credential.kind,
        "label": credential.label or f"{credential.name} ({KIND_LABELS.get(credential.kind, credential.kind)})",
        "models": models,
        "default_model": credential.default_model,
        "base_url": credential.base_url or None,
        "source": "app",
        "ready": credential.has_key or credential.kind == ProviderKind.OPENAI_COMPATIBLE,
    }


# --------------------------------------------------------------------------- connection test


@dataclass
class ConnectionResult:
    """Outcome of :func:`connection_test`: ``ok``; ``message`` for a person (the
    provider's own error message on failure, keys redacted); ``error`` ``{"code",
    "status"?}`` on failure; ``model`` asked; ``latency_ms`` of the call."""

    ok: bool
    provider: str
    model: str
    message: str
    latency_ms: int
    error: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "provider": self.provider,
            "model": self.model,
            "message": self.message,
            "latency_ms": self.latency_ms,
            "error": self.error,
        }


def connection_test(provider: LLMProvider, *, model: str, timeout: float | None = None, secrets: Iterable[str] = ()) -> ConnectionResult:
    """Ask ``provider`` for a 1-token completion of ``model`` through its real SDK, within
    ``timeout`` seconds (default settings.BALLAST_PROVIDER_TEST_TIMEOUT). Never raises
    for a provider failure: it comes back as ``ok=False`` with the provider's message,
    redacted (``secrets`` are redacted too, as is anything shaped like a key)."""
    limit = settings.BALLAST_PROVIDER_TEST_TIMEOUT if timeout is None else timeout
    request = LLMRequest(model=model, messages=[Message(role="user", content="ping")], max_tokens=1, timeout=limit)
    started = time.monotonic()
    try:
        response = provider.complete(request)
    except NodeError as exc:
        latency = round((time.monotonic() - started) * 1000)
        error: dict[str, Any] = {"code": exc.code}
        if isinstance(exc, ProviderError) and exc.status is not None:
            error["status"] = exc.status
        return ConnectionResult(False, provider.name, model, redact(exc.message, secrets), latency, error)
    latency = round((time.monotonic() - started) * 1000)
    return ConnectionResult(
        True,
        provider.name,
        model,
        f"{provider.name} answered with model {response.model} in {latency} ms",
        latency,
        usage=response.usage.as_dict() if hasattr(response.usage, "as_dict") else {},
    )


def stored_connection_test(credential: ProviderCredential, *, model: str | None = None, timeout: float | None = None) -> ConnectionResult:
    """:func:`connection_test` of a stored credential (its default model unless ``model``)."""
    provider = provider_from_credential(credential)
    unreadable = getattr(provider, "unreadable", None)
    secrets = [] if unreadable is not None else [decrypt_api_key(credential)]
    return connection_test(provider, model=model or credential.default_model, timeout=timeout, secrets=secrets)

