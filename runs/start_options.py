"""Options of POST /api/v1/runs/ that an app above runs handles (triggers: ``callback_url``), registered from its AppConfig.ready: runs imports no app above it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

# handler(run=, user=, value=, data=) -> keys added to the start's answer; it runs in the
# start's transaction (a raise rolls the run back) and raises ServiceError for bad input.
StartOption = Callable[..., dict[str, Any]]

_options: dict[str, StartOption] = {}


def register(field: str, handler: StartOption) -> None:
    """Handle ``field`` of a start request with ``handler`` (registering it again replaces it)."""
    _options[field] = handler


def apply(*, run: Any, user: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Run the handler of each registered field present (not None) in ``data`` for the new
    ``run``; returns the keys they add to the answer. A field with no handler is ignored."""
    extra: dict[str, Any] = {}
    for field, handler in _options.items():
        if data.get(field) is not None:
            extra |= handler(run=run, user=user, value=data[field], data=data)
    return extra


def requested(data: dict[str, Any]) -> bool:
    """Whether ``data`` carries any registered option."""
    return any(data.get(field) is not None for field in _options)
