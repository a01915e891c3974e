"""The provider registry: name -> LLMProvider instance, from settings.BALLAST_PROVIDERS.

Providers are imported lazily by dotted path, so an SDK (openai, anthropic) is imported
only by a process that actually uses that provider. Each name gets its own instance,
built with that name's settings.BALLAST_PROVIDER_SETTINGS entry, so one provider class
serves several names (``openai`` and an OpenAI-compatible ``ollama``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from runs.providers.base import LLMProvider


class UnknownProvider(KeyError):
    """No provider is registered under that name in settings.BALLAST_PROVIDERS."""


@cache
def get_provider(name: str) -> LLMProvider:
    """Return the (shared, thread-safe) provider registered as ``name``.

    Raises UnknownProvider when ``name`` is not in settings.BALLAST_PROVIDERS; an import
    error of a registered path or invalid provider settings propagate (a deployment
    mistake, not a user error).
    """
    path = settings.BALLAST_PROVIDERS.get(name)
    if path is None:
        raise UnknownProvider(name)
    config = getattr(settings, "BALLAST_PROVIDER_SETTINGS", {}).get(name)
    return import_string(path)(name=name, config=config)


def provider_names() -> list[str]:
    """Registered provider names, in settings order."""
    return list(settings.BALLAST_PROVIDERS)


@receiver(setting_changed)
def _reset_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    # Tests swap BALLAST_PROVIDERS with override_settings; a cached instance from the
    # old mapping would otherwise outlive the override.
    if setting in ("BALLAST_PROVIDERS", "BALLAST_PROVIDER_SETTINGS"):
        get_provider.cache_clear()
