"""MCP tool-call overhead: wall time of one call through Ballast's MCP client (runs.tools.mcp_servers.client) minus the tool's own time, over stdio and Streamable HTTP.

``python -m bench mcp [--n CALLS]``. Two ways per transport: a session per call (open:
stdio starts the server's process, HTTP connects through the outbound guard; ``initialize``;
``tools/call`` with the idempotency key in ``_meta``; close), and pooled sessions (what a
worker does with BALLAST_MCP_SESSION_IDLE_SECONDS > 0: a ping, then the call, on a session
kept open). The tool (bench/mcp_server.py ``work``) sleeps 10 ms and reports its own time;
the figure is the rest, per call, median and p95 over ``--n`` calls (default 20 stdio per
call, 100 otherwise) after two warm-up calls. The database plays no part (the step's own commit is measured by the
other cases).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.core import Reporter, log, summary
from bench.loopback import accepts, free_port

SERVER = str(Path(__file__).with_name("mcp_server.py"))
TOOL_MS = 10.0


def _overheads(endpoint, calls: int, *, pooled: bool = False) -> list[float]:
    from runs.tools.mcp_servers import client
    from runs.tools.mcp_servers.pool import POOL

    out = []
    for i in range(calls + 2):  # two warm-up calls
        started = time.perf_counter()
        if pooled:
            outcome = POOL.call_tool(
                endpoint, "work", {"ms": TOOL_MS}, idempotency_key=f"bench-{i}", connect_timeout=60, call_timeout=60, idle_seconds=600
            )
        else:
            outcome = client.call_tool(endpoint, "work", {"ms": TOOL_MS}, idempotency_key=f"bench-{i}", connect_timeout=60, call_timeout=60)
        wall = (time.perf_counter() - started) * 1000
        if i >= 2:
            out.append(wall - float(outcome.structured["own_ms"]))
    return out


def case_mcp(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    from django.conf import settings

    from runs.tools.mcp_servers.client import Endpoint

    load = os.getloadavg()
    note = f"per call, minus the tool's own {TOOL_MS:g} ms; a session per call; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"
    stdio = Endpoint(name="bench", transport="stdio", command=sys.executable, args=("-P", SERVER, "stdio"))
    samples = _overheads(stdio, n or 20)
    median, p95 = summary(samples)
    log(f"mcp stdio: overhead {median:.1f} ms median, {p95:.1f} ms p95")
    rep.emit("mcp.stdio_overhead", n=len(samples), runs=1, samples=samples, unit="ms/call", note=note)
    pooled_note = note.replace("a session per call", "pooled sessions (runs.tools.mcp_servers.pool), each reused one pinged first")
    samples = _overheads(stdio, n or 100, pooled=True)
    median, p95 = summary(samples)
    log(f"mcp stdio pooled: overhead {median:.1f} ms median, {p95:.1f} ms p95")
    rep.emit("mcp.stdio_pooled_overhead", n=len(samples), runs=1, samples=samples, unit="ms/call", note=pooled_note)

    port = free_port()
    process = subprocess.Popen([sys.executable, "-P", SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not accepts(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the benchmark's MCP HTTP server did not start")
            time.sleep(0.05)
        settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]  # the guard still resolves and vets; loopback is allowed
        http = Endpoint(name="bench", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        samples = _overheads(http, n or 100)
        pooled = _overheads(http, n or 100, pooled=True)
    finally:
        from runs.tools.mcp_servers.pool import POOL

        POOL.close_all()
        process.terminate()
        process.wait(30)
    median, p95 = summary(samples)
    log(f"mcp http: overhead {median:.1f} ms median, {p95:.1f} ms p95")
    rep.emit("mcp.http_overhead", n=len(samples), runs=1, samples=samples, unit="ms/call", note=note)
    median, p95 = summary(pooled)
    log(f"mcp http pooled: overhead {median:.1f} ms median, {p95:.1f} ms p95")
    rep.emit("mcp.http_pooled_overhead", n=len(pooled), runs=1, samples=pooled, unit="ms/call", note=pooled_note)
