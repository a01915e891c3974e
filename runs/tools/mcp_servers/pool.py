"""Open MCP sessions kept per process between tool calls, so a call does not pay a server's start (a stdio process) or handshake each time.

A session is checked out by one call at a time and given back after a call that ended
normally (an answer, even the tool's own error); after a timeout, a cancel or a broken
connection it is closed instead, so a server in an unknown state is never reused. Before a
reused session carries a call it answers a ping within BALLAST_MCP_CONNECT_TIMEOUT, else
it is closed and a fresh one opened: a server that died while idle costs the call a new
start, never a call that may have been sent. Sessions idle for
BALLAST_MCP_SESSION_IDLE_SECONDS are closed (a stdio server's process stopped) by a
sweeper thread; 0 turns pooling off (a session per call, as ``client.call_tool``). At
most ``MAX_IDLE_PER_SERVER`` idle sessions are kept per server.

The sessions live on one event loop per process, in a thread of its own (anyio's blocking
portal); a worker thread hands it a call and waits on the answer, looking at the step's
cancel signal between waits. A process forked from one that had a pool starts its own.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession

from runs.tools.mcp_servers import client

MAX_IDLE_PER_SERVER = 4
SWEEP_SECONDS = 5.0


@dataclass
class _Held:
    """One open session: its context (closing it ends the session and the transport), the
    session, and when it was last given back (``time.monotonic``)."""

    context: AbstractContextManager[ClientSession]
    session: ClientSession
    idle_since: float = field(default_factory=time.monotonic)


def _key(endpoint: client.Endpoint) -> tuple[Any, ...]:
    return (endpoint.name, endpoint.transport, endpoint.command, endpoint.args, endpoint.url, tuple(sorted(endpoint.headers.items())))


@asynccontextmanager
async def _session(endpoint: client.Endpoint, connect_timeout: float, read_timeout: float) -> AsyncIterator[ClientSession]:
    async with client._streams(endpoint, connect_timeout=connect_timeout, read_timeout=read_timeout) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(connect_timeout):
                await session.initialize()
            yield session


class SessionPool:
    """The process's pool (:data:`POOL`). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._portal: BlockingPortal | None = None
        self._portal_context: AbstractContextManager[BlockingPortal] | None = None
        self._idle: dict[tuple[Any, ...], list[_Held]] = {}

    # ----------------------------------------------------------------- the loop
    def _portal_now(self) -> BlockingPortal:
        with self._lock:
            if self._pid != os.getpid():  # new, or forked: the parent's loop thread is not ours
                self._portal, self._portal_context, self._idle = None, None, {}
                self._pid = os.getpid()
            if self._portal is None:
                self._portal_context = start_blocking_portal(name="ballast-mcp-sessions")
                self._portal = self._portal_context.__enter__()
                threading.Thread(target=self._sweep_forever, args=(os.getpid(),), name="ballast-mcp-sweeper", daemon=True).start()
            return self._portal

    def _sweep_forever(self, pid: int) -> None:
        while self._pid == pid:
            time.sleep(SWEEP_SECONDS)
            self.sweep()

    # ----------------------------------------------------------------- sessions
    def _open(self, endpoint: client.Endpoint, *, connect_timeout: float, call_timeout: float) -> _Held:
        portal = self._portal_now()
        context = portal.wrap_async_context_manager(_session(endpoint, connect_timeout, call_timeout))
        try:
            session = context.__enter__()
        except BaseException as exc:  # noqa: BLE001 (classified)
            raise client.classify(exc, endpoint, sent=False, connect_timeout=connect_timeout, call_timeout=call_timeout) from exc
        return _Held(context, session)

    def _close(self, held: _Held) -> None:
        """Close in the background: stopping a stdio server may take its grace period."""

        def close() -> None:
            with contextlib.suppress(BaseException):
                held.context.__exit__(None, None, None)

        threading.Thread(target=close, name="ballast-mcp-close", daemon=True).start()

    def _checkout(self, endpoint: client.Endpoint, *, connect_timeout: float, call_timeout: float) -> _Held:
        key = _key(endpoint)
        while True:
            with self._lock:
                idle = self._idle.get(key) or []
                held = idle.pop() if idle else None
            if held is None:
                return self._open(endpoint, connect_timeout=connect_timeout, call_timeout=call_timeout)
            ping = self._portal_now().start_task_soon(held.session.send_ping)
            try:
                ping.result(timeout=connect_timeout)
                return held
            except BaseException:  # noqa: BLE001 (a dead or stuck session: close it, try the next)
                ping.cancel()
                self._close(held)

    def _checkin(self, endpoint: client.Endpoint, held: _Held, idle_seconds: float) -> None:
        held.idle_since = time.monotonic()
        with self._lock:
            idle = self._idle.setdefault(_key(endpoint), [])
            if self._pid == os.getpid() and len(idle) < MAX_IDLE_PER_SERVER and idle_seconds > 0:
                idle.append(held)
                return
        self._close(held)

    def sweep(self, idle_seconds: float | None = None) -> int:
        """Close sessions idle longer than ``idle_seconds`` (default the setting); returns how many."""
        if idle_seconds is None:
            # Function-level: the sweeper thread reads the setting as it is now.
            from django.conf import settings

            idle_seconds = float(settings.BALLAST_MCP_SESSION_IDLE_SECONDS)
        now = time.monotonic()
        stale: list[_Held] = []
        with self._lock:
            for key, idle in list(self._idle.items()):
                keep = [h for h in idle if now - h.idle_since < idle_seconds]
                stale.extend(h for h in idle if h not in keep)
                self._idle[key] = keep
        for held in stale:
            self._close(held)
        return len(stale)

    def close_all(self) -> None:
        """Close every idle session now (tests, process exit)."""
        self.sweep(idle_seconds=-1)

    # ----------------------------------------------------------------- calls
    def call_tool(
        self,
        endpoint: client.Endpoint,
        tool: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str,
        connect_timeout: float,
        call_timeout: float,
        idle_seconds: float,
        cancelled: threading.Event | None = None,
    ) -> client.CallOutcome:
        """As :func:`client.call_tool`, on a pooled session. Raises McpUnavailable
        (``sent`` False when no session could be opened), McpProtocolError, McpCancelled,
        OutboundRefused."""
        held = self._checkout(endpoint, connect_timeout=connect_timeout, call_timeout=call_timeout)
        portal = self._portal_now()
        future = portal.start_task_soon(client._call, held.session, tool, arguments, idempotency_key)
        deadline = time.monotonic() + call_timeout
        while True:
            try:
                outcome = future.result(timeout=client.CANCEL_POLL_SECONDS)
            except TimeoutError:
                if cancelled is not None and cancelled.is_set():
                    future.cancel()
                    self._close(held)
                    raise client.McpCancelled(f"the call to MCP server {endpoint.name!r} was abandoned: the step was cancelled") from None
                if time.monotonic() > deadline:
                    future.cancel()
                    self._close(held)
                    where = endpoint.url if endpoint.transport == "http" else endpoint.command
                    raise client.McpUnavailable(
                        f"MCP server {endpoint.name!r} ({where}) did not answer the call within {call_timeout:g}s", sent=True, timed_out=True
                    ) from None
                continue
            except BaseException as exc:  # noqa: BLE001 (classified)
                error = client.classify(exc, endpoint, sent=True, connect_timeout=connect_timeout, call_timeout=call_timeout)
                if isinstance(error, client.McpProtocolError):
                    self._checkin(endpoint, held, idle_seconds)  # the server answered: the session is sound
                else:
                    self._close(held)
                raise error from exc
            self._checkin(endpoint, held, idle_seconds)
            return outcome


POOL = SessionPool()
atexit.register(POOL.close_all)
