"""Audited writes of MCP servers added in the app: check, create, update, delete, and read a server's tool list again.

Creates, updates and deletes are audited (``mcp_server.create`` / ``.update`` /
``.delete``, never a header value) in the same transaction as the change. After a create
or an update the server's tools are listed again (:func:`mcp_server_refresh`), outside
that transaction: a server that is down still saves, with its error kept in
``last_error`` and its last good tool list kept.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.chain import audit
from core.payloads import Payload, text_problem
from runs.models import McpServer, McpTransport
from runs.providers import credentials_module
from runs.tools.mcp_servers import SERVER_NAME, endpoint_of, sdk
from runs.tools.outbound import OutboundRefused
from runs.vocabulary import NodeError

MAX_ARGS = 50
MAX_HEADERS = 20
HEADER_NAME_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class McpServerInvalid(ValueError):
    """Bad input for an MCP server. ``fields``: ``{field: [message, ...]}``; ``code``:
    ``invalid``, or ``name_taken`` when the name is in use (a conflict)."""

    def __init__(self, fields: dict[str, list[str]], *, code: str = "invalid"):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()))
        self.fields = fields
        self.code = code


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, e.g. https://mcp.example.com/mcp"
    if parts.username or parts.password:
        return "must not contain a user or password: send credentials as a header"
    if parts.fragment:
        return "must not have a fragment"
    return None


def _headers_problem(headers: Any) -> str | None:
    if not isinstance(headers, Mapping) or len(headers) > MAX_HEADERS:
        return f"an object of at most {MAX_HEADERS} header names to values"
    for name, value in headers.items():
        if not isinstance(name, str) or not name or len(name) > 100 or not set(name) <= HEADER_NAME_CHARS:
            return "header names are 1 to 100 letters, digits or !#$%&'*+-.^_`|~"
        # The message never quotes a value: it may be a token.
        if (
            not isinstance(value, str)
            or len(value) > 4000
            or any(ord(ch) < 32 and ch != "\t" or ord(ch) == 127 for ch in value)
        ):
            return f"the value of {name!r} must be text of at most 4000 characters without control characters"
    return None


def mcp_server_clean(data: Mapping[str, Any], *, existing: McpServer | None = None) -> dict[str, Any]:
    """Check and normalise the fields of an MCP server; returns them cleaned.

    ``data`` holds ``name`` (create only), ``label``, ``transport`` ("stdio" or "http"),
    ``command`` and ``args`` (stdio: the command must be one of
    ``settings.BALLAST_MCP_STDIO_COMMANDS``), ``url`` (http), ``headers`` (http, an object;
    None or absent: keep the stored ones; {}: remove them), ``trust_annotations`` and
    ``enabled``; on update (``existing``) absent fields keep their stored values. Raises
    McpServerInvalid with every field's problem (``name_taken`` for a used name)."""
    payload = Payload(data, existing)
    errors, out, current = payload.errors, payload.out, payload.current
    payload.name(SERVER_NAME, "1 to 40 letters, digits or '-', starting with a letter or digit", what="server")
    transport = current("transport", "")
    if transport not in McpTransport.values:
        errors["transport"] = [f"one of {', '.join(McpTransport.values)}"]
    out["transport"] = transport
    label = current("label", "")
    problem = text_problem(label, limit=200)
    if problem:
        errors["label"] = [problem]
    out["label"] = label.strip() if isinstance(label, str) else ""
    for flag, default in (("trust_annotations", False), ("enabled", True)):
        value = current(flag, default)
        if not isinstance(value, bool):
            errors[flag] = ["true or false"]
        out[flag] = value
    command, args, url = current("command", ""), current("args", []), current("url", "")
    if transport == McpTransport.STDIO:
        problem = text_problem(command, limit=500)
        if problem is None and not command.strip():
            problem = "required for a stdio server"
        if problem is None and command.strip() not in settings.BALLAST_MCP_STDIO_COMMANDS:
            allowed = ", ".join(settings.BALLAST_MCP_STDIO_COMMANDS) or "none are allowed"
            problem = f"not in the operator's allow-list BALLAST_MCP_STDIO_COMMANDS ({allowed})"
        if problem:
            errors["command"] = [problem]
        if (
            not isinstance(args, (list, tuple))
            or len(args) > MAX_ARGS
            or any(text_problem(a, limit=1000) for a in args)
        ):
            errors["args"] = [
                f"a list of at most {MAX_ARGS} strings of at most 1000 characters, without control characters"
            ]
        out.update(
            command=command.strip() if isinstance(command, str) else "",
            args=list(args) if isinstance(args, (list, tuple)) else [],
            url="",
        )
    elif transport == McpTransport.HTTP:
        problem = text_problem(url, limit=500)
        if problem is None:
            problem = _url_problem(url.strip()) if url.strip() else "required for an HTTP server"
        if problem:
            errors["url"] = [problem]
        out.update(command="", args=[], url=url.strip() if isinstance(url, str) else "")
    headers = data.get("headers")
    if headers is not None:
        problem = _headers_problem(headers)
        if problem is None and headers and transport != McpTransport.HTTP:
            problem = "only an HTTP server takes headers"
        if problem:
            errors["headers"] = [problem]
        else:
            out["headers"] = dict(headers)
    elif existing is not None and existing.has_headers and transport != McpTransport.HTTP:
        out["headers"] = {}  # a server moved to stdio drops the headers it no longer sends
    if errors:
        raise McpServerInvalid(errors)
    if existing is None and McpServer.objects.filter(name=out["name"]).exists():
        raise McpServerInvalid({"name": [f"an MCP server named {out['name']!r} exists"]}, code="name_taken")
    return out


def public_fields(server: McpServer) -> dict[str, Any]:
    """What may be shown of a server (audit entries, API): everything but header values."""
    return {
        "name": server.name,
        "label": server.label,
        "transport": server.transport,
        "command": server.command,
        "args": list(server.args),
        "url": server.url,
        "has_headers": server.has_headers,
        "trust_annotations": server.trust_annotations,
        "enabled": server.enabled,
    }


def _actor(user: Any) -> tuple[str, str]:
    if user is None:
        return "system", "system"
    return user.get_username(), "user"


def _encrypt_headers(server_name: str, headers: dict[str, str]) -> str:
    # credentials_module: imported on first use (it imports the provider SDKs).
    return credentials_module().encrypt_secret(headers, bound_to=f"mcp_server:{server_name}")


def mcp_server_create(*, data: Mapping[str, Any], user: Any = None, refresh: bool = True) -> McpServer:
    """Store a new MCP server (fields as in :func:`mcp_server_clean`), its headers
    encrypted; audited as ``mcp_server.create`` in the same transaction; then, with
    ``refresh``, its tools listed (:func:`mcp_server_refresh`). Raises McpServerInvalid."""
    clean = mcp_server_clean(data)
    actor, actor_type = _actor(user)
    now = timezone.now()
    try:
        with transaction.atomic():
            server = McpServer.objects.create(
                name=clean["name"],
                label=clean["label"],
                transport=clean["transport"],
                command=clean["command"],
                args=clean["args"],
                url=clean["url"],
                headers_encrypted=_encrypt_headers(clean["name"], clean.get("headers") or {}),
                trust_annotations=clean["trust_annotations"],
                enabled=clean["enabled"],
                created_by=user,
                updated_by=user,
                created_at=now,
                updated_at=now,
            )
            audit(actor, "mcp_server.create", server, actor_type=actor_type, **public_fields(server))
    except IntegrityError:
        # Another request created the same name between the check and the insert.
        raise McpServerInvalid({"name": [f"an MCP server named {clean['name']!r} exists"]}, code="name_taken") from None
    if refresh:
        mcp_server_refresh(server=server)
    return server


def mcp_server_update(
    *, server: McpServer, data: Mapping[str, Any], user: Any = None, refresh: bool = True
) -> McpServer:
    """Change a stored server: fields absent from ``data`` (or None) keep their values;
    ``headers`` replaces the headers ({} removes them). Audited as ``mcp_server.update``
    with the names of the changed fields (``headers`` when they changed; never a value);
    then, with ``refresh``, its tools listed again. Raises McpServerInvalid,
    McpServer.DoesNotExist when it was deleted."""
    actor, actor_type = _actor(user)
    with transaction.atomic():
        row = McpServer.objects.select_for_update().get(pk=server.pk)
        clean = mcp_server_clean(data, existing=row)
        fields = ("label", "transport", "command", "args", "url", "trust_annotations", "enabled")
        changed = [f for f in fields if getattr(row, f) != clean[f]]
        for f in changed:
            setattr(row, f, clean[f])
        if "headers" in clean:
            row.headers_encrypted = _encrypt_headers(row.name, clean["headers"])
            changed.append("headers")
        if changed:
            row.updated_by = user
            row.updated_at = timezone.now()
            row.save()
            audit(actor, "mcp_server.update", row, actor_type=actor_type, changed=changed, **public_fields(row))
    if refresh and row.enabled:
        mcp_server_refresh(server=row)
    return row


def mcp_server_delete(*, server: McpServer, user: Any = None) -> bool:
    """Delete a stored server (audited as ``mcp_server.delete``). Graphs naming its tools
    stop validating, and their steps fail with ``unknown_tool``. Returns False when it was
    already gone."""
    actor, actor_type = _actor(user)
    with transaction.atomic():
        row = McpServer.objects.select_for_update().filter(pk=server.pk).first()
        if row is None:
            return False
        audit(actor, "mcp_server.delete", row, actor_type=actor_type, **public_fields(row))
        row.delete()
    return True


@dataclass(frozen=True)
class RefreshResult:
    """A listing's outcome: ``ok``, ``message`` (the error when not ok), ``latency_ms``
    and the ``tools`` now stored (the previous list when the listing failed)."""

    ok: bool
    message: str
    latency_ms: int
    tools: list[dict[str, Any]]


def mcp_server_refresh(*, server: McpServer, timeout: float | None = None) -> RefreshResult:
    """List ``server``'s tools through the SDK (bounded by BALLAST_MCP_CONNECT_TIMEOUT and
    ``timeout``, default BALLAST_MCP_CALL_TIMEOUT) and store them with the time; on failure
    keep the last list and store the error in ``last_error``. Never raises for the
    server's own failures (down, refused, not allowed): they are the result."""
    client, _pool = sdk()

    started = time.monotonic()
    try:
        tools = client.list_tools(
            endpoint_of(server),
            connect_timeout=float(settings.BALLAST_MCP_CONNECT_TIMEOUT),
            timeout=float(timeout if timeout is not None else settings.BALLAST_MCP_CALL_TIMEOUT),
        )
    except (client.McpUnavailable, client.McpProtocolError, client.McpCancelled, OutboundRefused, NodeError) as exc:
        message = str(exc)
        McpServer.objects.filter(pk=server.pk).update(last_error=message[:2000])
        server.last_error = message[:2000]
        return RefreshResult(False, message, int((time.monotonic() - started) * 1000), list(server.tools or []))
    now = timezone.now()
    McpServer.objects.filter(pk=server.pk).update(tools=tools, tools_listed_at=now, last_error="")
    server.tools, server.tools_listed_at, server.last_error = tools, now, ""
    return RefreshResult(True, f"{len(tools)} tool(s)", int((time.monotonic() - started) * 1000), tools)
