"""The Content-Security-Policy header of every page: scripts from the app's own origin only."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Scripts and connections (the API, the same host's WebSockets: CSP 3's 'self' covers ws:
# and wss: of the page's host) from the app's origin only. The page context is a JSON
# script tag (type application/json), which CSP does not run, so no script needs
# 'unsafe-inline', and none evals: the forms validate JSON Schemas with an interpreting
# validator (frontend/src/lib/formValidator.ts), not ajv's generated code.
# Styles may be inline for the admin's templates (style attributes); the
# React pages set element styles through the CSSOM, which CSP does not restrict.
POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# drf-spectacular's Swagger UI and Redoc pages start from inline scripts: they get no header.
EXEMPT_PREFIXES = ("/api/docs/", "/api/redoc/")


class ContentSecurityPolicyMiddleware:
    """Adds :data:`POLICY` as ``Content-Security-Policy`` to every response that does not
    set one, except the API documentation pages (:data:`EXEMPT_PREFIXES`)."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        if not request.path.startswith(EXEMPT_PREFIXES):
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
