"""A real MCP server for the tests, written with the SDK's MCPServer (FastMCP): ``add``, ``record``, ``fail`` and ``slow``, over stdio or Streamable HTTP.

Run it as a script, ``python -P mcp_server_script.py stdio LOG`` or ``... http PORT LOG``
(``-P``: this directory is not put on sys.path, so the names of tests/support never stand
in for the SDK's imports). Every call of ``record``, ``slow`` and ``add`` appends a JSON line to the file
LOG: ``{"tool", "arguments", "meta", "authorization", "pid"}``, what the server saw.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

LOG = sys.argv[-1]
server = MCPServer("ballast-tests")


def _seen(tool: str, arguments: dict[str, Any], ctx: Context) -> None:
    meta = ctx.request_context.meta
    headers = ctx.headers or {}
    record = {
        "tool": tool,
        "arguments": arguments,
        "meta": dict(meta) if meta else {},
        "authorization": headers.get("authorization"),
        "pid": os.getpid(),
    }
    with open(LOG, "a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def add(a: int, b: int, ctx: Context) -> int:
    """Add two integers."""
    _seen("add", {"a": a, "b": b}, ctx)
    return a + b


@server.tool()
def record(text: str, ctx: Context) -> dict[str, Any]:
    """Record ``text`` (a side effect the tests count)."""
    _seen("record", {"text": text}, ctx)
    return {"recorded": text}


@server.tool()
def fail(reason: str) -> str:
    """Report a failure as the tool's own error (isError)."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def slow(seconds: float, ctx: Context) -> str:
    """Answer after ``seconds``."""
    _seen("slow", {"seconds": seconds}, ctx)
    time.sleep(seconds)
    return "done"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
