"""The shared HTTP client of tools: refuses private, loopback and metadata addresses, pins the vetted address, caps bodies.

A tool that reaches the network does so through :func:`open_response` (``http_request``
does). Every connection resolves its host once with the system resolver, checks every
address it resolved to (:func:`address_refusal`) and connects to the address it checked,
so a name that resolves to a public address at check time and to 127.0.0.1 a moment
later (DNS rebinding) cannot slip through: there is no second lookup. The TLS server
name and the ``Host`` header stay the URL's host name. Redirects are followed here, one
hop at a time, each hop's connection vetted the same way, at most
``settings.BALLAST_OUTBOUND_MAX_REDIRECTS`` of them; bodies are read while streaming up
to ``settings.BALLAST_OUTBOUND_MAX_RESPONSE_BYTES`` (:func:`read_body`).

``settings.BALLAST_OUTBOUND_ALLOW`` (env ``BALLAST_OUTBOUND_ALLOW``, comma separated)
names what may be reached anyway: IP addresses or CIDR networks (``127.0.0.1``,
``10.20.0.0/16``, ``::1``), host names (``intranet.example``) and host-name suffixes
(``*.corp.example``). A named host is trusted whatever it resolves to.

Environment proxies (``HTTP_PROXY`` ...) are not used: the proxy, not this process, would
resolve the target, and the check would be void. Provider SDK clients (OpenAI,
Anthropic, compatible servers) do not use this module: the base URL of a model server is
the operator's configuration, not a tool's input, and a local server on 127.0.0.1 keeps
working.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpcore
import httpx
from django.conf import settings

from core import metrics
from runs import abort

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Methods that may follow redirects: re-sending a body to another location is surprising.
REDIRECT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# NAT64's well-known prefix (RFC 6052) carries an IPv4 address in its last 32 bits.
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")


class OutboundRefused(Exception):
    """A request would reach an address tools may not reach.

    ``host`` is the URL's host, ``address`` the refused address (a string) and
    ``reason`` why (``loopback``, ``private``, ``link-local`` ...). Not worth retrying:
    the same name resolves the same way until an operator changes the allow-list.
    """

    def __init__(self, host: str, address: str, reason: str):
        shown = host if host == address else f"{host} ({address})"
        super().__init__(
            f"refused to connect to {shown}: a {reason} address; add it to BALLAST_OUTBOUND_ALLOW if tools may reach it"
        )
        self.host, self.address, self.reason = host, address, reason


class ResponseTooLarge(Exception):
    """The response body exceeded ``limit`` bytes (BALLAST_OUTBOUND_MAX_RESPONSE_BYTES)."""

    def __init__(self, url: str, limit: int):
        super().__init__(f"the response from {url} is larger than {limit} bytes (BALLAST_OUTBOUND_MAX_RESPONSE_BYTES)")
        self.url, self.limit = url, limit


class TooManyRedirects(Exception):
    """More than ``limit`` redirects (BALLAST_OUTBOUND_MAX_REDIRECTS)."""

    def __init__(self, url: str, limit: int):
        super().__init__(f"{url}: more than {limit} redirects (BALLAST_OUTBOUND_MAX_REDIRECTS)")
        self.url, self.limit = url, limit


@dataclass(frozen=True)
class AllowList:
    """What the operator allows tools to reach although it is not public (parsed
    BALLAST_OUTBOUND_ALLOW): ``networks`` (IP networks; an address is a /32 or /128),
    ``hosts`` (exact host names, lower case) and ``suffixes`` (``.corp.example`` from
    ``*.corp.example``)."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        """Parse allow-list entries; blanks are skipped. Raises ValueError for an entry
        that is neither an address, a network nor a host name."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        suffixes: list[str] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = entry[2:] if entry.startswith("*.") else entry
            if not name or any(c in name for c in "/:@ ") or name.startswith("."):
                raise ValueError(
                    f"BALLAST_OUTBOUND_ALLOW: {raw!r} is neither an IP address, a CIDR network nor a host name"
                )
            if entry.startswith("*."):
                suffixes.append("." + name)
            else:
                hosts.add(name.rstrip("."))
        return cls(tuple(networks), frozenset(hosts), tuple(suffixes))

    def allows_host(self, host: str) -> bool:
        """Whether the host name itself is allowed (then its addresses are not checked)."""
        name = host.lower().rstrip(".")
        return name in self.hosts or any(name.endswith(suffix) for suffix in self.suffixes)

    def allows_address(self, address: IPAddress) -> bool:
        """Whether the address lies in an allowed network (an IPv4-mapped IPv6 address
        counts as its IPv4 address)."""
        candidates = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(a.version == n.version and a in n for a in candidates for n in self.networks)


def allow_list() -> AllowList:
    """The allow-list from settings, read on every call (tests and operators may change it)."""
    return AllowList.parse(settings.BALLAST_OUTBOUND_ALLOW)


def address_refusal(address: IPAddress) -> str | None:
    """Why tools may not reach ``address``, or None when it is a public address.

    Refused: unspecified (0.0.0.0, ::), loopback, private (10/8, 172.16/12, 192.168/16,
    fc00::/7 ...), link-local (169.254/16 with cloud metadata at 169.254.169.254,
    fe80::/10), multicast, reserved, site-local and anything else not globally routable
    (100.64/10, documentation ranges). An IPv6 address that carries an IPv4 address
    (IPv4-mapped ``::ffff:a.b.c.d``, NAT64, 6to4, Teredo) is judged by that IPv4 address
    as well.
    """
    embedded: list[IPAddress] = []
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            embedded.append(address.ipv4_mapped)
        if address in NAT64_PREFIX:
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address.sixtofour is not None:
            embedded.append(address.sixtofour)
        if address.teredo is not None:
            embedded.extend(address.teredo)
    # An IPv4-mapped address is that IPv4 address on the wire: judge it alone (Python
    # calls the whole ::ffff:0:0/96 block reserved). The other forms are judged both ways.
    mapped = isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None
    for candidate in embedded if mapped else [*embedded, address]:
        if candidate.is_unspecified:
            return "unspecified"
        if candidate.is_loopback:
            return "loopback"
        if candidate.is_link_local:
            return "link-local"
        if candidate.is_multicast:
            return "multicast"
        if isinstance(candidate, ipaddress.IPv6Address) and candidate.is_site_local:
            return "site-local"
        if candidate.is_reserved:  # before private: Python counts 240.0.0.0/4 as both
            return "reserved"
        if candidate.is_private:
            return "private"
        if not candidate.is_global:
            return "non-public"
    return None


def vet_addresses(host: str, addresses: Iterable[str], allowed: AllowList) -> None:
    """Raise OutboundRefused unless every one of ``addresses`` (what ``host`` resolved
    to) is public or allowed. Every one, not just the first: a name that also resolves to
    a private address could be answered by it on the next connection."""
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone id
        reason = address_refusal(address)
        if reason is not None and not allowed.allows_address(address):
            metrics.OUTBOUND_REFUSED.labels(reason=reason).inc()
            raise OutboundRefused(host, str(address), reason)


class VettingBackend(httpcore.SyncBackend):
    """httpcore's network backend with a checked, pinned connect: resolve ``host`` once,
    vet every address, connect to the vetted ones in the resolver's order. TLS is then
    started by httpcore with the URL's host name as server name, as usual."""

    def __init__(self, allowed: AllowList):
        self.allowed = allowed

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Resolve, vet and connect. Raises OutboundRefused (nothing was sent),
        httpcore.ConnectError when resolution or every connect fails,
        httpcore.ConnectTimeout."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not self.allowed.allows_host(host):
            vet_addresses(host, addresses, self.allowed)
        last: Exception | None = None
        deadline = None if timeout is None else time.monotonic() + timeout
        for address in addresses:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            try:
                # A literal address: the base backend connects without another lookup.
                return super().connect_tcp(address, port, left, local_address, socket_options)
            except httpcore.ConnectError as exc:  # try the next address, as create_connection does
                last = exc
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")


class VettingTransport(httpx.HTTPTransport):
    """httpx's transport on a connection pool whose every connection goes through
    :class:`VettingBackend`. Environment proxies and certificate settings from the
    environment are not read (``trust_env=False``)."""

    def __init__(self, allowed: AllowList, *, verify: ssl.SSLContext | bool = True):
        super().__init__(trust_env=False)
        # httpx (pinned <0.29) builds its pool without a way to pass a network backend;
        # replace it with the same pool on ours. The refusal tests fail if this breaks.
        self._pool = httpcore.ConnectionPool(
            ssl_context=verify
            if isinstance(verify, ssl.SSLContext)
            else httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=4,
            # Its calls abortable by the step's cancel (runs.abort.aborting_on).
            network_backend=abort.noting(VettingBackend(allowed)),
        )


def outbound_client(
    *, timeout: float, allowed: AllowList | None = None, verify: ssl.SSLContext | bool = True
) -> httpx.Client:
    """A client for one tool call: vetted, pinned connections (``timeout`` seconds per
    network phase; ``allowed`` defaults to :func:`allow_list`), no automatic redirects
    (:func:`open_response` follows them), no environment proxies. ``verify``: certificate
    checks (True: the default CA bundle; an SSLContext for a private CA). Use it as a
    context manager. Raises ValueError for a malformed BALLAST_OUTBOUND_ALLOW."""
    allowed = allow_list() if allowed is None else allowed
    return httpx.Client(
        transport=VettingTransport(allowed, verify=verify), timeout=timeout, follow_redirects=False, trust_env=False
    )


@contextmanager
def open_response(client: httpx.Client, request: httpx.Request, *, follow_redirects: bool) -> Iterator[httpx.Response]:
    """Send ``request`` and yield the final response, its body not read yet.

    With ``follow_redirects`` (only honoured for GET, HEAD and OPTIONS), a redirect is
    followed to its location, each hop connected through the vetting backend, up to
    BALLAST_OUTBOUND_MAX_REDIRECTS hops; a redirect's own body is never read. Otherwise a
    redirect is the response. Raises OutboundRefused (the first hop or any later one),
    TooManyRedirects, and httpx's transport errors.
    """
    limit = int(settings.BALLAST_OUTBOUND_MAX_REDIRECTS)
    follow = follow_redirects and request.method in REDIRECT_METHODS
    hops = 0
    while True:
        response = client.send(request, stream=True)
        if not (follow and response.next_request is not None):
            break
        response.close()
        hops += 1
        if hops > limit:
            raise TooManyRedirects(str(request.url), limit)
        request = response.next_request
    try:
        yield response
    finally:
        response.close()


def read_body(response: httpx.Response, *, keep_bytes: int, deadline: float) -> tuple[bytes, bool]:
    """Read the (decoded) body while streaming: at most ``keep_bytes`` are kept, and
    reading stops there (``truncated`` True). A body that would need more than
    BALLAST_OUTBOUND_MAX_RESPONSE_BYTES read before that raises ResponseTooLarge; so does
    a Content-Length above it. ``deadline`` (time.monotonic) bounds the whole read
    (httpx.ReadTimeout), so a server trickling bytes cannot hold the step.

    Returns ``(body, truncated)``.
    """
    cap = int(settings.BALLAST_OUTBOUND_MAX_RESPONSE_BYTES)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap and keep_bytes > cap:
        raise ResponseTooLarge(str(response.url), cap)
    body = bytearray()
    for chunk in response.iter_bytes():
        body.extend(chunk)
        if len(body) > keep_bytes and keep_bytes <= cap:
            return bytes(body), True  # the caller keeps no more: stop reading
        if len(body) > cap:
            raise ResponseTooLarge(str(response.url), cap)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("response body took longer than the timeout")
    return bytes(body), False
