"""MCP server API views (staff only): list, add, change, delete, and "Test connection", which lists the server's tools again.

Header values are write-only: accepted by POST and PATCH, never returned. A server's tools
appear in ``GET /api/v1/tools/`` as ``mcp__<server>__<tool>`` from its stored list.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.authentication import IsAdmin
from core.api import ERROR_BODY, ApiError, ApiView, bad_request, conflict
from runs.models import McpServer, McpTransport
from runs.tools.mcp_servers import SERVER_NAME, services, tool_name, tools_of

TAG = ["mcp"]
CONFLICT = OpenApiResponse(ERROR_BODY, description="The name is taken.")


class McpToolOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The name nodes and agents use: mcp__<server>__<tool>.")
    tool = serializers.CharField(help_text="The tool's name on its server.")
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.JSONField()
    annotations = serializers.JSONField(help_text="The server's own hints (readOnlyHint, idempotentHint...).")
    repeat_safe = serializers.BooleanField()


class McpServerOutput(serializers.Serializer):
    """An MCP server added in the app. Never carries a header value."""

    name = serializers.CharField()
    label = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    transport = serializers.ChoiceField(choices=McpTransport.choices)
    command = serializers.CharField(allow_blank=True)
    args = serializers.ListField(child=serializers.CharField())
    url = serializers.CharField(allow_blank=True)
    has_headers = serializers.BooleanField()
    trust_annotations = serializers.BooleanField()
    enabled = serializers.BooleanField()
    tools = McpToolOutput(many=True)
    tools_listed_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_blank=True)


class _ServerFields(serializers.Serializer):
    label = serializers.CharField(max_length=200, required=False, allow_blank=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    transport = serializers.ChoiceField(choices=McpTransport.choices)
    command = serializers.CharField(
        max_length=500, required=False, allow_blank=True, help_text="stdio: one of BALLAST_MCP_STDIO_COMMANDS."
    )
    args = serializers.ListField(
        child=serializers.CharField(max_length=1000, allow_blank=True, trim_whitespace=False),
        max_length=services.MAX_ARGS,
        required=False,
    )
    url = serializers.CharField(
        max_length=500, required=False, allow_blank=True, help_text="http: the Streamable HTTP endpoint."
    )
    headers = serializers.DictField(
        child=serializers.CharField(max_length=4000, allow_blank=True, trim_whitespace=False),
        required=False,
        write_only=True,
        help_text="http: headers sent with every request (Authorization...). Write-only: stored encrypted, never returned. On PATCH, absent keeps them and {} removes them.",
    )
    trust_annotations = serializers.BooleanField(
        required=False, help_text="Whether the server's readOnlyHint/idempotentHint make a tool safe to repeat."
    )
    enabled = serializers.BooleanField(required=False)


class McpServerCreateInput(_ServerFields):
    name = serializers.CharField(
        max_length=40, help_text="Letters, digits and '-'; tools are named mcp__<name>__<tool>."
    )


class McpServerUpdateInput(_ServerFields):
    name = serializers.CharField(max_length=40, required=False, help_text="Cannot change.")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for item in self.fields.values():
            item.required = False


class McpTestOutput(serializers.Serializer):
    """The outcome of listing the server's tools now. A server that is down or refuses is
    ``ok: false`` with its message, not an HTTP error of this API."""

    ok = serializers.BooleanField()
    message = serializers.CharField()
    latency_ms = serializers.IntegerField()
    server = McpServerOutput()


def _out(server: McpServer) -> dict[str, Any]:
    tools = {t.tool: t for t in tools_of(server)}
    return {
        **services.public_fields(server),
        "tools": [
            {
                "name": tool_name(server.name, item["name"]),
                "tool": item["name"],
                "description": item.get("description") or "",
                "input_schema": item.get("input_schema") or {},
                "annotations": item.get("annotations") or {},
                "repeat_safe": tools[item["name"]].repeat_safe,
            }
            for item in server.tools or []
        ],
        "tools_listed_at": server.tools_listed_at,
        "last_error": server.last_error,
    }


def _stored(name: str) -> McpServer:
    server = McpServer.objects.filter(name=name).first() if SERVER_NAME.match(name) else None
    if server is None:
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No MCP server named {name!r}.")
    return server


def _invalid(exc: services.McpServerInvalid) -> ApiError:
    field, messages = next(iter(exc.fields.items()))
    message = f"{field}: {messages[0]}"
    if exc.code == "name_taken":
        return conflict("name_taken", message, exc.fields)
    return bad_request("invalid", f"Invalid input: {message}", exc.fields)


class McpServerCollectionApi(ApiView):
    """GET: every MCP server with its stored tools. POST: add one, then list its tools."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="mcp_servers_list", responses=McpServerOutput(many=True))
    def get(self, request: Any) -> Response:
        return Response(McpServerOutput([_out(s) for s in McpServer.objects.order_by("name")], many=True).data)

    @extend_schema(
        tags=TAG,
        operation_id="mcp_servers_create",
        request=McpServerCreateInput,
        responses={201: McpServerOutput, 409: CONFLICT},
    )
    def post(self, request: Any) -> Response:
        data = self.validated(McpServerCreateInput, request.data)
        try:
            server = services.mcp_server_create(data=data, user=request.user)
        except services.McpServerInvalid as exc:
            raise _invalid(exc) from None
        return Response(McpServerOutput(_out(server)).data, status=status.HTTP_201_CREATED)


class McpServerDetailApi(ApiView):
    """GET one server; PATCH: change it (then list its tools again); DELETE: remove it."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="mcp_servers_read", responses=McpServerOutput)
    def get(self, request: Any, name: str) -> Response:
        return Response(McpServerOutput(_out(_stored(name))).data)

    @extend_schema(tags=TAG, operation_id="mcp_servers_update", request=McpServerUpdateInput, responses=McpServerOutput)
    def patch(self, request: Any, name: str) -> Response:
        server = _stored(name)
        data = self.validated(McpServerUpdateInput, request.data)
        try:
            server = services.mcp_server_update(server=server, data=data, user=request.user)
        except services.McpServerInvalid as exc:
            raise _invalid(exc) from None
        except McpServer.DoesNotExist:
            raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No MCP server named {name!r}.") from None
        return Response(McpServerOutput(_out(server)).data)

    @extend_schema(tags=TAG, operation_id="mcp_servers_delete", request=None, responses={204: None})
    def delete(self, request: Any, name: str) -> Response:
        if not services.mcp_server_delete(server=_stored(name), user=request.user):
            raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No MCP server named {name!r}.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class McpServerTestApi(ApiView):
    """POST: connect and list the server's tools now (bounded by BALLAST_MCP_CONNECT_TIMEOUT
    and BALLAST_MCP_CALL_TIMEOUT), storing them; answers with the outcome and the server."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="mcp_servers_test", request=None, responses=McpTestOutput)
    def post(self, request: Any, name: str) -> Response:
        server = _stored(name)
        result = services.mcp_server_refresh(server=server)
        return Response(
            McpTestOutput(
                {"ok": result.ok, "message": result.message, "latency_ms": result.latency_ms, "server": _out(server)}
            ).data
        )
