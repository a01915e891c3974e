"""The hook an API request's audit principal is set through: core knows no app, so the app owning tokens registers it."""
from __future__ import annotations

from typing import Any, Protocol


class RequestPrincipal(Protocol):
    """As whom an API request's audit entries are written: entered before the request is
    handled, told once it is authenticated, left after the response."""

    def enter(self) -> Any:
        """Clear any principal of the context; return what :meth:`leave` restores."""

    def authenticated(self, request: Any) -> None:
        """Set the principal of an authenticated ``request`` (e.g. its API token)."""

    def leave(self, handle: Any) -> None:
        """Restore the principal :meth:`enter` replaced."""


class _NoPrincipal:
    """The principal hook until an app registers one: nothing to set."""

    def enter(self) -> Any:
        return None

    def authenticated(self, request: Any) -> None:
        return None

    def leave(self, handle: Any) -> None:
        return None


_request_principal: RequestPrincipal = _NoPrincipal()


def register_request_principal(principal: RequestPrincipal) -> None:
    """Make ``principal`` the hook ``core.api.ApiView`` runs every request under (accounts
    registers its token principal: core knows no app, so the app plugs itself in)."""
    global _request_principal
    _request_principal = principal


def request_principal() -> RequestPrincipal:
    """The registered hook (a no-op until an app registers one)."""
    return _request_principal
