"""The provider registry: name -> LLMProvider instance, from settings.BALLAST_PROVIDERS, then from providers added in the app.

Providers are imported lazily by dotted path, so an SDK (openai, anthropic) is imported
only by a process that actually uses that provider. Each name gets its own instance,
built with that name's settings.BALLAST_PROVIDER_SETTINGS entry, so one provider class
serves several names (``openai`` and an OpenAI-compatible ``ollama``).
"""

from __future__ import annotations

from functools import cache
from types import ModuleType
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from runs.models import ProviderCredential
from runs.providers.base import LLMProvider


class UnknownProvider(KeyError):
    """No provider is registered under that name in settings.BALLAST_PROVIDERS."""


def credentials_module() -> ModuleType:
    """runs.providers.credentials (keys added in the app, encrypted), imported on first use:
    it imports the ORM and the provider SDKs, which a process that only validates graphs or
    lists providers by settings never needs. The one lazy import of it (MCP server headers
    use it too)."""
    from runs.providers import credentials  # the ORM and the SDKs only when needed

    return credentials


def get_provider(name: str) -> LLMProvider:
    """Return the (shared, thread-safe) provider ``name``: the one registered in
    settings.BALLAST_PROVIDERS (no database query), else the provider added in the app
    under that name (one query; ``runs.providers.credentials``; the two never share a
    name).

    Raises UnknownProvider when neither has ``name``; an import error of a registered
    path or invalid provider settings propagate (a deployment mistake, not a user error).
    """
    if name in settings.BALLAST_PROVIDERS:
        return _registered(name)
    stored = credentials_module().stored_provider(name)
    if stored is None:
        raise UnknownProvider(name)
    return stored


@cache
def _registered(name: str) -> LLMProvider:
    path = settings.BALLAST_PROVIDERS.get(name)
    if path is None:
        raise UnknownProvider(name)
    config = getattr(settings, "BALLAST_PROVIDER_SETTINGS", {}).get(name)
    return import_string(path)(name=name, config=config)


def provider_names() -> list[str]:
    """Every provider name a node may use: those registered in settings (settings order),
    then those added in the app (by name; one query)."""
    names = list(settings.BALLAST_PROVIDERS)
    stored = ProviderCredential.objects.exclude(name__in=names).order_by("name").values_list("name", flat=True)
    return names + list(stored)


@receiver(setting_changed)
def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    # Tests swap BALLAST_PROVIDERS with override_settings; a cached instance from the
    # old mapping would otherwise outlive the override.
    if setting in ("BALLAST_PROVIDERS", "BALLAST_PROVIDER_SETTINGS"):
        _registered.cache_clear()
