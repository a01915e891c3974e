"""The MCP server of the ``mcp`` benchmark (bench/mcp_overhead.py): one tool, ``work``, that sleeps and reports its own time; stdio or Streamable HTTP.

``python -P bench/mcp_server.py stdio`` or ``python -P bench/mcp_server.py http PORT``.
"""
from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("ballast-bench")


@server.tool()
def work(ms: float) -> dict[str, float]:
    """Sleep ``ms`` milliseconds; return ``{"own_ms": the time the tool itself took}``."""
    started = time.perf_counter()
    time.sleep(ms / 1000)
    return {"own_ms": (time.perf_counter() - started) * 1000}


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
