"""As whom an entry is audited: the principal an API request runs under.

API views run inside :func:`acting_as` (or :func:`set_principal`); an entry written there
with ``actor_type="user"`` by a user who authenticated with an API token is recorded with
``actor_type="token"`` and the token's prefix, without every service having to know how the
user authenticated. The principal is a context variable: each request, thread and task
sees its own.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

# (actor_type, extra data) that overrides actor_type="user" while an API request runs.
_principal: contextvars.ContextVar[tuple[str, dict[str, Any]] | None] = contextvars.ContextVar("ballast_audit_principal", default=None)


@contextlib.contextmanager
def acting_as(actor_type: str | None, **data: Any) -> Iterator[None]:
    """Within this block, entries audited as ``actor_type="user"`` are recorded as
    ``actor_type`` (e.g. ``"token"``) with ``data`` (e.g. ``token="bal_ab12cd34"``) added.
    ``actor_type=None`` clears any principal set by an outer block."""
    token = _principal.set((actor_type, data) if actor_type else None)
    try:
        yield
    finally:
        _principal.reset(token)


def set_principal(actor_type: str | None, **data: Any) -> contextvars.Token:
    """Set the principal for the rest of this context (reset it with :func:`reset_principal`)."""
    return _principal.set((actor_type, data) if actor_type else None)


def reset_principal(token: contextvars.Token) -> None:
    """Undo :func:`set_principal`."""
    _principal.reset(token)


def as_principal(actor_type: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(actor_type, data)`` as the entry records them: an entry audited as ``"user"``
    inside :func:`acting_as` takes the principal's type, and its data the principal's
    (``data``'s own keys win); any other entry is returned unchanged."""
    principal = _principal.get()
    if principal is not None and actor_type == "user":
        principal_type, extra = principal
        return principal_type, {**extra, **data}
    return actor_type, data
