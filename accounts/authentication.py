"""Who is calling: API token authentication (HTTP and WebSocket), roles, and login-failure audit.

Roles are Django groups (``manage.py create_login`` creates them): ``builders`` edit and
publish graphs, ``operators`` start, cancel, resume, retry and fork runs (of graphs that
name no operators of their own), ``approvers`` decide approvals (so do a graph's named
approvers and staff). Superusers hold every role. Staff are the admins who see every run,
every pending approval and the audit log. Who may read or act on a run, and who may
decide an approval, is ``accounts.policy``. Any authenticated user may read graphs;
anonymous callers get nothing (401 over HTTP, a refused WebSocket handshake).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from axes.signals import user_locked_out
from channels.auth import AuthMiddlewareStack
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http.request import split_domain_port, validate_host
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from accounts.models import ApiToken
from accounts.roles import APPROVERS, BUILDERS, OPERATORS, ROLES, has_role, is_admin  # noqa: F401  (re-exported)
from accounts.throttling import client_address, token_failure_blocked, token_failure_record, token_throttled
from accounts.tokens import PREFIX_LENGTH, hash_key
from audit.chain import audit
from audit.principals import reset_principal, set_principal
from core.principals import register_request_principal

# --------------------------------------------------------------------------- tokens


class TokenPrincipal:
    """The principal of an API request (core.principals.RequestPrincipal): none until the request
    is authenticated, then the API token's prefix when it came with one, so its audit
    entries are recorded as ``actor_type="token"``."""

    def enter(self) -> Any:
        """Clear the context's principal for this request (the handle restores it)."""
        return set_principal(None)

    def authenticated(self, request: Any) -> None:
        """A request authenticated with an API token is audited as that token."""
        if isinstance(request.auth, ApiToken):
            set_principal("token", token=request.auth.prefix)

    def leave(self, handle: Any) -> None:
        """Restore the principal :meth:`enter` cleared."""
        reset_principal(handle)


# Registered on import: the accounts app's ready() imports this module in every web
# process, and DRF's settings name its TokenAuthentication, so it is in place before any view runs.
register_request_principal(TokenPrincipal())


def token_for_key(key: str) -> ApiToken | None:
    """The active token with this key (its user active too), or None. Records the use
    (``last_used_at``) at most every BALLAST_TOKEN_TOUCH_SECONDS, so reads stay reads."""
    if not key or len(key) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key), revoked_at__isnull=True).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    touch = timedelta(seconds=getattr(settings, "BALLAST_TOKEN_TOUCH_SECONDS", 60))
    if token.last_used_at is None or now - token.last_used_at > touch:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


class TokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <key>`` (or ``Bearer <key>``). ``request.auth`` is the ApiToken.

    No header: not this scheme (None). A malformed header or an unknown, revoked or
    inactive user's key: 401, counted per client address and per key prefix and audited
    (``auth.login_failed``, never the key); past the rate of failures
    (``token_failure_address``, ``token_failure_prefix``), 429 with ``Retry-After``
    before the key is even looked up (:mod:`accounts.throttling`).
    """

    keywords = (b"token", b"bearer")

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in self.keywords:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: use 'Authorization: Token <key>'.")
        try:
            key = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token header: the key must be ASCII.") from None
        # Refused before the key is looked up while this address or this key's prefix
        # has failed too often (429 with Retry-After): probing gets nothing back.
        address, prefix = client_address(request), key[:PREFIX_LENGTH]
        wait = token_failure_blocked(address=address, prefix=prefix)
        if wait is not None:
            raise token_throttled(wait)
        token = token_for_key(key)
        if token is None:
            token_failure_record(address=address, prefix=prefix, path=request.path)
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return 'Token realm="api"'


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes TokenAuthentication in the OpenAPI schema (drf-spectacular)."""

    target_class = "accounts.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; create a key with `manage.py create_token <username>`.",
        }


# --------------------------------------------------------------------------- roles


class _RolePermission(permissions.BasePermission):
    role = ""
    message = ""

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, self.role)


class IsBuilder(_RolePermission):
    """Member of ``builders`` (or superuser): may create, edit, publish, import, delete graphs."""

    role = BUILDERS
    message = "Only builders may change graphs."


class IsOperator(_RolePermission):
    """Member of ``operators`` (or superuser). Runs are not guarded by it: a graph may name
    its own operators, so run actions check ``accounts.policy.can_act`` per graph."""

    role = OPERATORS
    message = "Only operators may start or change runs."


class IsAdmin(permissions.BasePermission):
    """Staff or superuser."""

    message = "Only administrators may see this."

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_admin(request.user)


# --------------------------------------------------------------------------- login failures


@receiver(user_login_failed, dispatch_uid="ballast_audit_login_failed")
def _audit_login_failure(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    # A failed password sign-in (login page, admin): audited in the "auth" chain with the
    # name tried, never the password (Django masks it). django-axes counts the same
    # signal per username and per address. Bad API tokens are audited and counted by
    # accounts.throttling.token_failure_record, not through this signal, so they never
    # lock an address out of password sign-in.
    name = str(credentials.get("username") or "?")[:200]
    data: dict[str, Any] = {}
    if request is not None:
        data["ip"] = client_address(request)
        data["path"] = request.path[:200]
    audit(name, "auth.login_failed", None, actor_type="anonymous", **data)


@receiver(user_locked_out, dispatch_uid="ballast_audit_locked_out")
def _audit_lockout(sender: Any, request: Any = None, username: str | None = None, ip_address: str | None = None, **kwargs: Any) -> None:
    # django-axes refused a sign-in: the user or the address reached AXES_FAILURE_LIMIT
    # failures within the cool-off. Audited for every refused try (each is a request
    # that got the lockout page), with the name tried and the address.
    audit(str(username or "?")[:200], "auth.locked_out", None, actor_type="anonymous",
          ip=str(ip_address or ""), path=(request.path[:200] if request is not None else ""))


# --------------------------------------------------------------------------- WebSockets


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def origin_allowed(origin: str | None) -> bool:
    """Whether a WebSocket ``Origin`` may carry the session cookie: absent (not a
    browser), or its host in ALLOWED_HOSTS. A foreign page must not ride the cookie
    (cross-site WebSocket hijacking); token clients do not depend on this."""
    if not origin:
        return True
    from urllib.parse import urlparse

    host = urlparse(origin).netloc
    if not host:
        return False
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


@sync_to_async
def _token_user(key: str, address: str, path: str) -> Any:
    # The same failure counters as HTTP: a throttled address or prefix is refused
    # without a look-up (the handshake is refused, as for any bad token).
    prefix = key[:PREFIX_LENGTH]
    if token_failure_blocked(address=address, prefix=prefix) is not None:
        return None
    token = token_for_key(key)
    if token is None:
        token_failure_record(address=address, prefix=prefix, path=path, via="websocket")
        return None
    return token.user, token


class WebSocketAuthMiddleware:
    """Inner half of :func:`websocket_auth`: keeps the session user only for an allowed
    Origin, else authenticates ``?token=<key>`` or ``Authorization: Token <key>``.
    ``scope["user"]`` ends up a user or AnonymousUser; consumers refuse the anonymous."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = dict(scope)
        if not origin_allowed(_header(scope, b"origin")):
            scope["user"] = AnonymousUser()
        key = None
        auth = _header(scope, b"authorization")
        if auth:
            parts = auth.split()
            if len(parts) == 2 and parts[0].lower() in ("token", "bearer"):
                key = parts[1]
        if key is None:
            values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            key = values[0] if values else None
        if key:
            client = scope.get("client") or ("", 0)
            found = await _token_user(key, str(client[0] or "")[:100], str(scope.get("path", ""))[:200])
            scope["user"] = found[0] if found else AnonymousUser()
            scope["auth_token"] = found[1] if found else None
        return await self.inner(scope, receive, send)


def websocket_auth(inner: Any) -> Any:
    """Session auth (Channels' AuthMiddlewareStack) plus token auth around ``inner``."""
    return AuthMiddlewareStack(WebSocketAuthMiddleware(inner))
