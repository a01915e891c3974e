"""Providers added in the app: API keys encrypted at rest, a stored credential as a provider, the audited writes, the catalogue and the connection test.

Keys are encrypted with Fernet (the ``cryptography`` library: AES-128-CBC + HMAC-SHA256)
under ``settings.BALLAST_CREDENTIALS_KEY``: one or more Fernet keys, comma separated, in
a MultiFernet, so the first key encrypts and every key decrypts (rotation:
:func:`credentials_rotate`, ``manage.py rotate_credentials``). Unset, a key is generated
once into ``settings.BALLAST_CREDENTIALS_KEY_FILE`` (var/credentials-key.txt). The token
binds the key to its provider name, so a ciphertext copied onto another row does not
decrypt there.

A key leaves this module only inside the provider object that calls the vendor's SDK:
never in a return value meant for display, a log line, an error message (provider
messages go through :func:`runs.providers.base.redact` with the key) or an audit entry.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import IntegrityError, transaction
from django.dispatch import receiver
from django.utils import timezone

from runs.models import ProviderCredential, ProviderKind
from runs.nodes.base import NodeError
from runs.providers.anthropic_provider import AnthropicProvider
from runs.providers.base import LLMProvider, LLMRequest, Message, ProviderError, SDKProvider, redact
from runs.providers.openai_provider import OpenAIProvider

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


def credentials_rotate() -> int:
    """Re-encrypt every stored key with the first key of BALLAST_CREDENTIALS_KEY (the
    others must still decrypt them). Returns how many rows were re-encrypted. Raises
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


# --------------------------------------------------------------------------- validation


def _url_problem(url: str) -> str | None:
    if len(url) > 500:
        return "at most 500 characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:11434/v1"
    if parts.username or parts.password:
        return "must not contain a user or password: put the key in the API key field"
    if parts.query or parts.fragment:
        return "must not have a query string or fragment"
    return None


def _text_problem(value: Any, *, limit: int) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > limit:
        return f"at most {limit} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "must not contain control characters"
    return None


def credential_clean(data: Mapping[str, Any], *, existing: ProviderCredential | None = None) -> dict[str, Any]:
    """Check and normalise the fields of a stored credential; returns them cleaned.

    ``data`` holds ``name`` (create only), ``kind``, ``label``, ``base_url``, ``api_key``
    (None or absent: keep the stored one; "": remove it), ``default_model`` and
    ``model_names`` (list of str); on update (``existing``) absent fields keep their
    stored values. Raises CredentialInvalid (``name_taken`` when the name is used by a
    stored credential or configured in settings/the environment)."""
    errors: dict[str, list[str]] = {}

    def current(name: str, default: Any = "") -> Any:
        if name in data and data[name] is not None:
            return data[name]
        return getattr(existing, name, default) if existing is not None else default

    out: dict[str, Any] = {}
    if existing is None:
        name = data.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            errors["name"] = ["1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"]
        else:
            out["name"] = name
    elif "name" in data and data["name"] is not None and data["name"] != existing.name:
        errors["name"] = ["cannot be changed: delete this provider and add it again under the new name"]
    kind = current("kind")
    if kind not in ProviderKind.values:
        errors["kind"] = [f"one of {', '.join(ProviderKind.values)}"]
    out["kind"] = kind
    for field_name, limit in (("label", 200), ("default_model", 200)):
        value = current(field_name)
        problem = _text_problem(value, limit=limit)
        if problem is None and field_name == "default_model" and not value.strip():
            problem = "required: the model a node gets when it names none, and the one a connection test asks"
        if problem:
            errors[field_name] = [problem]
        else:
            out[field_name] = value.strip()
    base_url = current("base_url")
    problem = _text_problem(base_url, limit=500) or (_url_problem(base_url.strip()) if base_url.strip() else None)
    if problem is None and not base_url.strip() and kind == ProviderKind.OPENAI_COMPATIBLE:
        problem = "required for an OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1"
    if problem:
        errors["base_url"] = [problem]
    else:
        out["base_url"] = base_url.strip().rstrip("/")
    models = current("model_names", [])
    if not isinstance(models, (list, tuple)) or not all(isinstance(m, str) for m in models):
        errors["model_names"] = ["a list of model names"]
    else:
        cleaned = list(dict.fromkeys(m.strip() for m in models if m.strip()))
        bad = [m for m in cleaned if _text_problem(m, limit=200)]
        if bad or len(cleaned) > MAX_MODELS:
            errors["model_names"] = [f"at most {MAX_MODELS} names of at most 200 characters, without control characters"]
        elif cleaned and out.get("default_model") and out["default_model"] not in cleaned:
            errors["model_names"] = [f"must include the default model {out['default_model']!r} (or leave the list empty: any model)"]
        out["model_names"] = cleaned
    api_key = data.get("api_key")
    if api_key is not None:
        if not isinstance(api_key, str) or len(api_key) > MAX_KEY_CHARS or any(ord(ch) <= 32 or ord(ch) >= 127 for ch in api_key):
            # The message never quotes the value.
            errors["api_key"] = [f"printable ASCII without spaces, at most {MAX_KEY_CHARS} characters"]
        else:
            out["api_key"] = api_key
    will_have_key = bool(out.get("api_key")) if "api_key" in out else bool(existing is not None and existing.has_key)
    if "api_key" not in errors and not will_have_key and kind in (ProviderKind.OPENAI, ProviderKind.ANTHROPIC):
        errors["api_key"] = [f"required for {KIND_LABELS.get(kind, kind)} (only an OpenAI-compatible server may take none)"]
    if errors:
        raise CredentialInvalid(errors)
    if existing is None:
        _check_name_free(out["name"])
    return out


def _check_name_free(name: str) -> None:
    if name in settings.BALLAST_PROVIDERS:
        source = "the environment (BALLAST_OPENAI_COMPATIBLE)" if name in _env_names() else "settings"
        raise CredentialInvalid({"name": [f"{name!r} is already configured in {source}; choose another name"]}, code="name_taken")
    if ProviderCredential.objects.filter(name=name).exists():
        raise CredentialInvalid({"name": [f"a provider named {name!r} exists"]}, code="name_taken")


def _env_names() -> set[str]:
    return set(getattr(settings, "BALLAST_PROVIDERS_FROM_ENV", ()))


# --------------------------------------------------------------------------- writes


def public_fields(credential: ProviderCredential) -> dict[str, Any]:
    """What may be shown of a credential (audit entries, API): everything but the key."""
    return {
        "name": credential.name,
        "kind": credential.kind,
        "label": credential.label,
        "base_url": credential.base_url,
        "default_model": credential.default_model,
        "models": list(credential.model_names),
        "has_key": credential.has_key,
    }


def _actor(user: Any) -> tuple[str, str]:
    if user is None:
        return "system", "system"
    return user.get_username(), "user"


def provider_credential_create(*, data: Mapping[str, Any], user: Any = None) -> ProviderCredential:
    """Store a new provider (fields as in :func:`credential_clean`), its key encrypted;
    audited as ``provider.create`` (without the key) in the same transaction. Raises
    CredentialInvalid."""
    from runs.engine.audit import audit

    clean = credential_clean(data)
    actor, actor_type = _actor(user)
    now = timezone.now()
    try:
        with transaction.atomic():
            credential = ProviderCredential.objects.create(
                name=clean["name"],
                kind=clean["kind"],
                label=clean["label"],
                base_url=clean["base_url"],
                api_key_encrypted=encrypt_api_key(name=clean["name"], api_key=clean.get("api_key", "")),
                default_model=clean["default_model"],
                model_names=clean["model_names"],
                created_by=user,
                updated_by=user,
                created_at=now,
                updated_at=now,
            )
            audit(actor, "provider.create", credential, actor_type=actor_type, **public_fields(credential))
    except IntegrityError:
        # Another request created the same name between the check and the insert.
        raise CredentialInvalid({"name": [f"a provider named {clean['name']!r} exists"]}, code="name_taken") from None
    return credential


def provider_credential_update(*, credential: ProviderCredential, data: Mapping[str, Any], user: Any = None) -> ProviderCredential:
    """Change a stored provider: fields absent from ``data`` (or None) keep their values;
    ``api_key`` replaces the key ("" removes it). Audited as ``provider.update`` with the
    names of the changed fields (``api_key`` when the key changed; never a value).
    Raises CredentialInvalid, ProviderCredential.DoesNotExist when it was deleted."""
    from runs.engine.audit import audit

    actor, actor_type = _actor(user)
    with transaction.atomic():
        row = ProviderCredential.objects.select_for_update().get(pk=credential.pk)
        clean = credential_clean(data, existing=row)
        changed = [f for f in ("kind", "label", "base_url", "default_model", "model_names") if getattr(row, f) != clean[f]]
        for f in changed:
            setattr(row, f, clean[f])
        if "api_key" in clean:
            row.api_key_encrypted = encrypt_api_key(name=row.name, api_key=clean["api_key"])
            changed.append("api_key")
        if changed:
            row.updated_by = user
            row.updated_at = timezone.now()
            row.save()
            audit(actor, "provider.update", row, actor_type=actor_type, changed=["models" if f == "model_names" else f for f in changed], **public_fields(row))
    return row


def provider_credential_delete(*, credential: ProviderCredential, user: Any = None) -> bool:
    """Delete a stored provider (audited as ``provider.delete``). Graphs naming it stop
    validating and their llm steps fail with ``unknown_provider``. Returns False when it
    was already gone."""
    from runs.engine.audit import audit

    actor, actor_type = _actor(user)
    with transaction.atomic():
        row = ProviderCredential.objects.select_for_update().filter(pk=credential.pk).first()
        if row is None:
            return False
        fields = public_fields(row)
        audit(actor, "provider.delete", row, actor_type=actor_type, **fields)
        row.delete()
    _instances.pop(fields["name"], None)
    return True


# --------------------------------------------------------------------------- catalogue


def default_model_of(provider: LLMProvider) -> str | None:
    """The model a settings-configured provider is tested with when none is named: the
    mock's ``mock-1``, else the first of the models its settings list, else None."""
    from runs.providers.mock import MockProvider

    if isinstance(provider, MockProvider):
        return "mock-1"
    models = provider.models()
    return sorted(models)[0] if models else None


def _describe(name: str, provider: LLMProvider) -> dict[str, Any]:
    """Catalogue entry of a provider configured in settings or the environment."""
    from runs.providers.mock import MockProvider

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
    from runs.providers import get_provider

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

