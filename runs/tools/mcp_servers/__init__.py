"""Tools of MCP servers added in the app, beside the registered ones: ``mcp__<server>__<tool>``, looked up from the server's stored tool list, called through the SDK.

A server's tools are what its last listing stored (``McpServer.tools``, read again on
save and on "Test connection"): looking a tool up reads that row, never the server, so
validation and ``GET /api/v1/tools/`` stay fast and work while a server is down. A
disabled server's tools are unknown.

A tool is not safe to repeat (a crash mid-call parks the step for a person) unless the
node says so (``repeat_safe`` on a tool node, ``repeat_safe_tools`` on an agent) or the
operator trusts the server's annotations (``trust_annotations``) and the tool says
``readOnlyHint`` or ``idempotentHint``. Arguments are checked against the tool's input
schema (JSON Schema, no remote ``$ref``) before anything is sent; the step's idempotency
key travels in the call's ``_meta`` (``ballast/idempotency_key``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import BaseModel, ConfigDict

from core.fields import field_path
from runs.models import McpServer, McpTransport
from runs.providers import credentials_module
from runs.sandbox import schemas
from runs.tools import RegisteredTool, ToolContext, _to_json
from runs.tools.outbound import OutboundRefused
from runs.vocabulary import NodeError

if TYPE_CHECKING:
    # The SDK costs about a second to import: only a call or a listing loads it (lazy below).
    from runs.tools.mcp_servers.client import Endpoint

PREFIX = "mcp__"
SEPARATOR = "__"
# Letters, digits and single hyphens: a server name never holds the separator, so a tool
# name splits back into server and tool however the server named its tools.
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,39}$")
_REQUIRED = re.compile(r"^(.*) is a required property$")


class _AnyArguments(BaseModel):
    """The placeholder arguments model of an MCP tool: its arguments are checked against
    the server's JSON Schema instead (:meth:`McpTool.argument_problems`)."""

    model_config = ConfigDict(extra="allow")


def sdk() -> tuple[ModuleType, ModuleType]:
    """(runs.tools.mcp_servers.client, runs.tools.mcp_servers.pool), imported on first use:
    they import the MCP SDK (seconds of a worker's start on a loaded host), which only a call
    or a listing needs, not every process that validates graphs or lists tools."""
    from runs.tools.mcp_servers import client, pool  # function-level: the SDK's import cost

    return client, pool


def tool_name(server: str, tool: str) -> str:
    """The name nodes and agents use for ``tool`` of ``server``: ``mcp__<server>__<tool>``."""
    return f"{PREFIX}{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an MCP tool name, or None when ``name`` is not one."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition(SEPARATOR)
    if not sep or not tool or not SERVER_NAME.match(server):
        return None
    return server, tool


def endpoint_of(server: McpServer) -> Endpoint:
    """How to reach ``server`` (its headers decrypted). Raises NodeError
    ``mcp_not_allowed`` (not retryable) for a stdio command the operator no longer allows
    (BALLAST_MCP_STDIO_COMMANDS is checked at save and again here), and the credential
    error of an undecryptable header token."""
    if server.transport == McpTransport.STDIO and server.command not in settings.BALLAST_MCP_STDIO_COMMANDS:
        raise NodeError(
            f"MCP server {server.name!r}: command {server.command!r} is not in BALLAST_MCP_STDIO_COMMANDS",
            code="mcp_not_allowed",
            retryable=False,
        )
    headers: dict[str, str] = {}
    if server.headers_encrypted:
        # The credentials module imports the provider SDKs (seconds of a worker's start),
        # needed only when a server with headers is called: imported on first use.
        headers = (
            credentials_module().decrypt_secret(server.headers_encrypted, bound_to=server.audit_scope, label=f"MCP server {server.name!r}")
            or {}
        )
    client, _pool = sdk()
    return client.Endpoint(
        name=server.name,
        transport=server.transport,
        command=server.command,
        args=tuple(server.args),
        url=server.url,
        headers=headers,
    )


def _fn(args: BaseModel, ctx: ToolContext) -> Any:  # pragma: no cover - McpTool.call replaces it
    raise NotImplementedError


@dataclass(frozen=True)
class McpTool(RegisteredTool):
    """A tool of an MCP server, as the registry's tools are: ``server`` and ``tool`` (its
    name there), ``input_schema`` (the server's JSON Schema of its arguments) and
    ``annotations`` (the server's hints, protocol names)."""

    server: str = ""
    tool: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        """The server's input schema (what models and the builder are shown)."""
        return self.input_schema

    def argument_problems(self, raw: Mapping[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
        """``(location, message)`` per way ``raw`` breaks the input schema; a missing
        required property is located at its own name."""
        try:
            found = schemas.errors(self.input_schema, dict(raw))
        except schemas.SchemaUnusable as exc:
            return [((), f"the server's input schema cannot be applied: {exc}")]
        problems = []
        for error in found:
            loc = tuple(error.absolute_path)
            if error.validator == "required":
                missing = _REQUIRED.match(error.message)
                names = [p for p in error.validator_value if missing and repr(p) == missing.group(1)]
                loc = (*loc, *names[:1])
            problems.append((loc, error.message))
        return problems

    def call(self, raw_args: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Check ``raw_args`` against the input schema, call the tool on its server with
        the step's idempotency key in ``_meta``, and return its structured content when it
        has some, else ``{"content": [blocks]}``.

        Raises NodeError: ``tool_arguments`` (not retryable; nothing was sent, ``details``
        names the fields), ``mcp_unavailable`` (retryable: the server could not be started
        or reached, or did not answer within BALLAST_MCP_CONNECT_TIMEOUT /
        BALLAST_MCP_CALL_TIMEOUT or the step's time left; ``not_sent`` when the call never
        reached it), ``mcp_error`` (not retryable: the server refused the request),
        ``mcp_tool_error`` (not retryable: the tool reported a failure), ``outbound_refused``,
        ``mcp_not_allowed``, ``unknown_tool`` (the server was disabled or deleted), and
        ``cancelled`` when the step's cancel signal ends the call."""
        problems = self.argument_problems(raw_args)
        if problems:
            errors = [{"field": _field(loc), "message": message} for loc, message in problems]
            summary = "; ".join(f"{e['field'] or '(arguments)'}: {e['message']}" for e in errors)
            raise NodeError(
                f"invalid arguments for tool {self.name!r}: {summary}",
                code="tool_arguments",
                retryable=False,
                details={"errors": errors},
            )
        server = McpServer.objects.filter(name=self.server, enabled=True).first()
        if server is None:
            raise NodeError(
                f"MCP server {self.server!r} is disabled or was deleted", code="unknown_tool", retryable=False
            )
        ctx.check_cancelled()
        client, pool = sdk()
        call_timeout = float(settings.BALLAST_MCP_CALL_TIMEOUT)
        if ctx.timeout is not None:
            call_timeout = max(0.001, min(call_timeout, ctx.timeout))
        idle_seconds = float(settings.BALLAST_MCP_SESSION_IDLE_SECONDS)
        try:
            endpoint = endpoint_of(server)
            common: dict[str, Any] = {
                "idempotency_key": ctx.idempotency_key,
                "connect_timeout": float(settings.BALLAST_MCP_CONNECT_TIMEOUT),
                "call_timeout": call_timeout,
                "cancelled": ctx.cancelled,
            }
            if idle_seconds > 0:
                outcome = pool.POOL.call_tool(endpoint, self.tool, dict(raw_args), idle_seconds=idle_seconds, **common)
            else:
                outcome = client.call_tool(endpoint, self.tool, dict(raw_args), **common)
        except client.McpCancelled:
            ctx.check_cancelled()
            raise NodeError("the MCP call was abandoned", code="cancelled", retryable=False) from None
        except client.McpUnavailable as exc:
            raise NodeError(
                str(exc), code="mcp_unavailable", retryable=True, not_sent=not exc.sent, details={"server": self.server}
            ) from None
        except client.McpProtocolError as exc:
            raise NodeError(str(exc), code="mcp_error", retryable=False, details={"server": self.server}) from None
        except OutboundRefused as exc:
            raise NodeError(
                f"MCP server {self.server!r}: {exc}", code="outbound_refused", retryable=False, not_sent=True
            ) from None
        if outcome.is_error:
            text = " ".join(str(b.get("text", "")) for b in outcome.content if b.get("type") == "text").strip()
            raise NodeError(
                f"tool {self.name!r} reported an error: {text or '(no message)'}",
                code="mcp_tool_error",
                retryable=False,
                details={"server": self.server, "content": outcome.content},
            )
        result = outcome.structured if outcome.structured is not None else {"content": outcome.content}
        return _to_json(self.name, result)


def _field(loc: tuple[Any, ...]) -> str:
    # The same path style as the registry's tools (core.fields).
    return field_path(loc)


def tools_of(server: McpServer) -> list[McpTool]:
    """The tools of ``server``'s stored listing, in its order."""
    trusted = server.trust_annotations
    out = []
    for item in server.tools or []:
        annotations = item.get("annotations") or {}
        safe = bool(trusted and (annotations.get("readOnlyHint") or annotations.get("idempotentHint")))
        out.append(
            McpTool(
                name=tool_name(server.name, item["name"]),
                description=item.get("description") or "",
                args_model=_AnyArguments,
                fn=_fn,
                repeat_safe=safe,
                server=server.name,
                tool=item["name"],
                input_schema=item.get("input_schema") or {"type": "object"},
                annotations=annotations,
            )
        )
    return out


def find_tool(name: str) -> McpTool | None:
    """The MCP tool named ``name`` (``mcp__<server>__<tool>``) of an enabled server's
    stored listing, or None (not an MCP name, no such server or tool, server disabled)."""
    parts = split_name(name)
    if parts is None:
        return None
    server = McpServer.objects.filter(name=parts[0], enabled=True).first()
    if server is None:
        return None
    return next((t for t in tools_of(server) if t.tool == parts[1]), None)


def all_mcp_tools() -> list[McpTool]:
    """Every tool of every enabled server, by server name, then in the server's order."""
    return [t for server in McpServer.objects.filter(enabled=True).order_by("name") for t in tools_of(server)]
