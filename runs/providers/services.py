"""Audited writes of providers added in the app: check, create, update and delete a stored credential."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.chain import audit
from core.payloads import Payload, text_problem
from runs.models import ProviderCredential, ProviderKind
from runs.providers.credentials import (
    KIND_LABELS,
    MAX_KEY_CHARS,
    MAX_MODELS,
    NAME_PATTERN,
    CredentialInvalid,
    _env_names,
    _instances,
    encrypt_api_key,
)

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


def credential_clean(data: Mapping[str, Any], *, existing: ProviderCredential | None = None) -> dict[str, Any]:
    """Check and normalise the fields of a stored credential; returns them cleaned.

    ``data`` holds ``name`` (create only), ``kind``, ``label``, ``base_url``, ``api_key``
    (None or absent: keep the stored one; "": remove it), ``default_model`` and
    ``model_names`` (list of str); on update (``existing``) absent fields keep their
    stored values. Raises CredentialInvalid (``name_taken`` when the name is used by a
    stored credential or configured in settings/the environment)."""
    payload = Payload(data, existing)
    errors, out, current = payload.errors, payload.out, payload.current
    payload.name(NAME_PATTERN, "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", what="provider")
    kind = current("kind")
    if kind not in ProviderKind.values:
        errors["kind"] = [f"one of {', '.join(ProviderKind.values)}"]
    out["kind"] = kind
    for field_name, limit in (("label", 200), ("default_model", 200)):
        value = current(field_name)
        problem = text_problem(value, limit=limit)
        if problem is None and field_name == "default_model" and not value.strip():
            problem = "required: the model a node gets when it names none, and the one a connection test asks"
        if problem:
            errors[field_name] = [problem]
        else:
            out[field_name] = value.strip()
    base_url = current("base_url")
    problem = text_problem(base_url, limit=500) or (_url_problem(base_url.strip()) if base_url.strip() else None)
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
        bad = [m for m in cleaned if text_problem(m, limit=200)]
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
