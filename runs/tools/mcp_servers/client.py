"""Talking to an MCP server through the official ``mcp`` SDK: list its tools and call one, bounded in time, over stdio or Streamable HTTP.

Each operation opens a session, does its one thing and closes it: a stdio server is a
child process started for the call and stopped when the session closes (the SDK closes
its stdin, then terminates it), so a worker never keeps a server's process past a step.
The worker is synchronous; each operation runs on its own ``anyio.run`` event loop in the
calling thread.

Bounds: connecting and the ``initialize`` handshake within ``connect_timeout``; a call
within ``call_timeout``; the step's cancel signal (``cancelled``) ends either at once. A
server that cannot be started or reached, or does not answer, raises
:class:`McpUnavailable`; one that answers with a JSON-RPC error, :class:`McpProtocolError`.

HTTP goes through the outbound guard of :mod:`runs.tools.outbound`: every connection
resolves its host once, refuses private, loopback and metadata addresses unless
``BALLAST_OUTBOUND_ALLOW`` names them, and connects to the address it checked (the SDK's
``httpx2`` stack, with our vetting network backend under it). Environment proxies are not
used. The SDK follows a redirect only within the endpoint's origin.
"""

from __future__ import annotations

import functools
import math
import socket
import ssl
import threading
import typing
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpcore2
import httpx2
from httpcore2._backends.anyio import AnyIOBackend
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams, RequestParamsMeta
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

from runs.tools.outbound import AllowList, OutboundRefused, allow_list, vet_addresses

T = TypeVar("T")
# Metadata key of the step's idempotency key in a call's ``_meta`` (a reverse-DNS prefix,
# as the MCP spec asks of implementation-defined keys).
IDEMPOTENCY_META_KEY = "ballast/idempotency_key"
# How often a running operation looks at the step's cancel signal (seconds).
CANCEL_POLL_SECONDS = 0.05


class McpUnavailable(Exception):
    """The server could not be started or reached, or did not answer in time. ``sent``:
    whether the call may have reached the server (False: refused before the tool could
    run, so repeating it is harmless); ``timed_out``: it did not answer in time."""

    def __init__(self, message: str, *, sent: bool, timed_out: bool = False):
        super().__init__(message)
        self.sent = sent
        self.timed_out = timed_out


class McpProtocolError(Exception):
    """The server answered a request with an error (an unknown tool, arguments it
    refused, an internal error): the request reached it, and it did not run the tool."""


class McpCancelled(Exception):
    """The step's cancel signal was set while the operation ran; it was abandoned."""


@dataclass(frozen=True)
class Endpoint:
    """Where a server is and how to reach it: ``transport`` "stdio" (``command`` with
    ``args``) or "http" (``url``, sent ``headers`` on every request)."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CallOutcome:
    """A tool call's answer: ``is_error`` (the tool reported a failure),
    ``structured`` (its structured content, or None) and ``content`` (its content blocks
    as JSON objects)."""

    is_error: bool
    structured: Any
    content: list[dict[str, Any]]


# --------------------------------------------------------------------------- the guarded HTTP stack


class VettingAsyncBackend(AnyIOBackend):
    """httpcore2's anyio backend with a checked, pinned connect, as
    :class:`runs.tools.outbound.VettingBackend` is for httpcore: resolve the host once,
    vet every address, connect to the vetted ones in the resolver's order."""

    def __init__(self, allowed: AllowList):
        self.allowed = allowed

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Resolve, vet and connect. Raises OutboundRefused (nothing was sent),
        httpcore2.ConnectError when resolution or every connect fails."""
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not self.allowed.allows_host(host):
            vet_addresses(host, addresses, self.allowed)
        last: Exception | None = None
        for address in addresses:
            try:
                # A literal address: anyio connects without another lookup.
                return await super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        raise httpcore2.ConnectError(f"cannot connect to {host}:{port}: {last}")


class VettingAsyncTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport on a connection pool whose every connection goes through
    :class:`VettingAsyncBackend`; environment proxies and certificate settings from the
    environment are not read."""

    def __init__(self, allowed: AllowList):
        context = _ssl_context()
        super().__init__(verify=context, trust_env=False)
        # httpx2 builds its pool without a way to pass a network backend: replace it with
        # the same pool on ours. The refusal test fails if this breaks.
        self._pool = httpcore2.AsyncConnectionPool(ssl_context=context, max_connections=4, network_backend=VettingAsyncBackend(allowed))


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The default client TLS context (CA bundle loaded), made once per process: loading
    the bundle twice per call took most of its connection time, and a client context is
    safe to share between connections and threads."""
    return httpx2.create_ssl_context(trust_env=False)


def _http_client(endpoint: Endpoint, *, connect_timeout: float, read_timeout: float) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=VettingAsyncTransport(allow_list()),
        headers=endpoint.headers,
        timeout=httpx2.Timeout(connect_timeout, read=read_timeout),
        trust_env=False,
        follow_redirects=False,
    )


def _streams(endpoint: Endpoint, *, connect_timeout: float, read_timeout: float) -> AbstractAsyncContextManager[Any]:
    if endpoint.transport == "stdio":
        return stdio_client(StdioServerParameters(command=endpoint.command, args=list(endpoint.args)))
    client = _http_client(endpoint, connect_timeout=connect_timeout, read_timeout=read_timeout)
    return _http_streams(endpoint.url, client)


class _http_streams:  # noqa: N801 (an async context manager used like the SDK's functions)
    """The SDK's Streamable HTTP streams over ``client``, closing the client after them."""

    def __init__(self, url: str, client: httpx2.AsyncClient):
        self.client = client
        self.inner = streamable_http_client(url, http_client=client)

    async def __aenter__(self) -> Any:
        await self.client.__aenter__()
        try:
            return await self.inner.__aenter__()
        except BaseException:
            await self.client.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> bool | None:
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            await self.client.__aexit__(None, None, None)


# --------------------------------------------------------------------------- operations


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    """The exceptions inside (nested) exception groups, or ``exc`` itself."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def classify(exc: BaseException, endpoint: Endpoint, *, sent: bool, connect_timeout: float, call_timeout: float) -> BaseException:
    """The exception to raise for ``exc`` (possibly an exception group) from an operation on
    ``endpoint``: OutboundRefused and McpProtocolError as they are, a JSON-RPC error answer
    after the handshake (``sent``) as McpProtocolError, KeyboardInterrupt and SystemExit
    as they are, anything else as McpUnavailable (``timed_out`` for a timeout)."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, (OutboundRefused, McpProtocolError, McpUnavailable)):
            return leaf
    for leaf in leaves:
        # A JSON-RPC error answer from a server that is up; the SDK also reports a
        # connection closed under it, or a request that timed out, as codes of its own.
        if isinstance(leaf, MCPError) and leaf.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT) and sent:
            return McpProtocolError(f"MCP server {endpoint.name!r} answered with an error: {leaf.message}")
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return exc
    where = endpoint.url if endpoint.transport == "http" else endpoint.command
    if any(isinstance(leaf, TimeoutError) or (isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT) for leaf in leaves):
        limit = call_timeout if sent else connect_timeout
        stage = "did not answer the call" if sent else "did not finish connecting"
        return McpUnavailable(f"MCP server {endpoint.name!r} ({where}) {stage} within {limit:g}s", sent=sent, timed_out=True)
    first = leaves[0] if leaves else exc
    stage = "failed during the call" if sent else "could not be reached"
    return McpUnavailable(f"MCP server {endpoint.name!r} ({where}) {stage}: {type(first).__name__}: {first}", sent=sent)


def _run(
    endpoint: Endpoint,
    work: Callable[[ClientSession], Awaitable[T]],
    *,
    connect_timeout: float,
    call_timeout: float,
    cancelled: threading.Event | None,
) -> T:
    """Open a session on ``endpoint``, run ``work(session)`` and close it, on an event loop
    of its own. Raises McpUnavailable, McpProtocolError, McpCancelled, OutboundRefused."""
    phase = {"initialized": False}
    result: list[T] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def watch_cancel() -> None:
                while not (cancelled is not None and cancelled.is_set()):
                    await anyio.sleep(CANCEL_POLL_SECONDS)
                tg.cancel_scope.cancel()

            async def operate() -> None:
                with anyio.fail_after(connect_timeout + call_timeout):
                    async with _streams(
                        endpoint, connect_timeout=connect_timeout, read_timeout=call_timeout
                    ) as streams:
                        async with ClientSession(streams[0], streams[1]) as session:
                            with anyio.fail_after(connect_timeout):
                                await session.initialize()
                            phase["initialized"] = True
                            with anyio.fail_after(call_timeout):
                                result.append(await work(session))
                tg.cancel_scope.cancel()

            if cancelled is not None:
                tg.start_soon(watch_cancel)
            tg.start_soon(operate)

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 (classified; anything else is re-raised)
        raise classify(exc, endpoint, sent=phase["initialized"], connect_timeout=connect_timeout, call_timeout=call_timeout) from exc
    if not result:
        raise McpCancelled(f"the call to MCP server {endpoint.name!r} was abandoned: the step was cancelled")
    return result[0]


def list_tools(endpoint: Endpoint, *, connect_timeout: float, timeout: float) -> list[dict[str, Any]]:
    """Every tool the server offers, following ``nextCursor`` pages:
    ``[{"name", "description", "input_schema", "annotations"}]`` (annotations with the
    protocol's names, ``readOnlyHint``...; {} when the server gives none). Raises as
    :func:`_run`."""

    async def work(session: ClientSession) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _page in range(100):  # a server that pages forever is cut off
            listed = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            for item in listed.tools:
                annotations = (
                    item.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if item.annotations
                    else {}
                )
                tools.append(
                    {
                        "name": item.name,
                        "description": item.description or item.title or "",
                        "input_schema": item.input_schema,
                        "annotations": annotations,
                    }
                )
            cursor = listed.next_cursor
            if not cursor:
                break
        return tools

    return _run(endpoint, work, connect_timeout=connect_timeout, call_timeout=timeout, cancelled=None)


def call_tool(
    endpoint: Endpoint,
    tool: str,
    arguments: dict[str, Any],
    *,
    idempotency_key: str,
    connect_timeout: float,
    call_timeout: float,
    cancelled: threading.Event | None = None,
) -> CallOutcome:
    """Call ``tool`` with ``arguments``; the idempotency key travels in the request's
    ``_meta`` as ``ballast/idempotency_key``. ``call_timeout`` (seconds, finite) bounds the
    call after the handshake. Raises as :func:`_run`."""
    call_timeout = call_timeout if math.isfinite(call_timeout) else 3600.0

    async def work(session: ClientSession) -> CallOutcome:
        return await _call(session, tool, arguments, idempotency_key)

    return _run(endpoint, work, connect_timeout=connect_timeout, call_timeout=call_timeout, cancelled=cancelled)


async def _call(session: ClientSession, tool: str, arguments: dict[str, Any], idempotency_key: str) -> CallOutcome:
    """``tools/call`` on an initialized session, the idempotency key in ``_meta``."""
    meta = typing.cast(RequestParamsMeta, {IDEMPOTENCY_META_KEY: idempotency_key})  # a TypedDict with extra items
    answer = await session.call_tool(tool, arguments, meta=meta)
    blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in answer.content]
    return CallOutcome(is_error=bool(answer.is_error), structured=answer.structured_content, content=blocks)
