"""Outbound HTTP calls a step's cancel aborts at once: network backends whose sockets a cancel shuts down.

A provider SDK (openai, anthropic, through httpx2 and httpcore2, their own forks of
httpx and httpcore) or the ``http_request`` tool (httpx) makes one blocking HTTP call;
the step's thread sits in ``recv`` until the far side answers, seconds or minutes
later, and a ``threading.Event`` cannot interrupt it. So their connection pools get a
network backend (:func:`noting`, :func:`abortable_transport`) whose streams note, on
every read and write, the call in progress on their thread (:func:`aborting_on`); when
the step's cancel event is set (runs.vocabulary.CancelEvent), that call's sockets are
shut down from the setter's thread: the blocked ``recv`` returns at once, the request
ends with a connection error and the server sees the client go. Other calls of the same
client, on other threads, use other connections and go on. A shut-down connection is
never reused (httpcore drops a connection whose read failed).
"""
from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore2 as httpcore
import httpx2 as httpx

_current = threading.local()  # .call: the _Call of this thread's request in progress, if any


class _Call:
    """One outbound call that a cancel may abort: the streams it used, and whether it was aborted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: set[_Stream] = set()
        self.aborted = False

    def used(self, stream: _Stream) -> None:
        with self._lock:
            if self.aborted:
                stream.shut_down()
            else:
                self._streams.add(stream)

    def abort(self) -> None:
        """Shut down every socket the call used (from any thread); later use fails too."""
        with self._lock:
            self.aborted = True
            streams = list(self._streams)
        for stream in streams:
            stream.shut_down()


class _Stream:
    """A network stream (httpcore's or httpcore2's: the pools call these methods, they
    check no type) that tells the call in progress on its thread that it is used."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _note(self) -> None:
        call = getattr(_current, "call", None)
        if call is not None:
            call.used(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._note()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._note()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shut_down(self) -> None:
        """Shut the socket down both ways: a ``recv`` blocked on it in another thread
        returns now (closing the descriptor would not wake it). Never raises."""
        sock = self._inner.get_extra_info("socket")
        if sock is None:
            return
        with contextlib.suppress(OSError):
            # socket.socket's own shutdown, also for an SSLSocket (whose override would
            # first drop its TLS object under the reading thread).
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Backend:
    """A network backend (httpcore's or httpcore2's; any ``connect_tcp`` /
    ``connect_unix_socket`` / ``sleep``) whose streams are wrapped in :class:`_Stream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None) -> _Stream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def noting(backend: Any) -> Any:
    """``backend`` (an httpcore network backend) with its calls abortable by
    :func:`aborting_on`."""
    return _Backend(backend)


def abortable_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """An httpx transport (``limits`` as the SDK's default client has them) whose calls
    :func:`aborting_on` can abort. httpx takes no network backend, so it is set on the
    transport's httpcore pool before any connection exists."""
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool._network_backend = noting(httpcore.SyncBackend())  # read when each connection is made
    return transport


@contextlib.contextmanager
def aborting_on(cancel: threading.Event | None) -> Iterator[_Call]:
    """Within this block, an outbound call this thread makes through an
    :func:`abortable_transport` is aborted (its sockets shut down) as soon as ``cancel``
    is set, when it is a runs.vocabulary.CancelEvent; a plain event only marks the call
    aborted if set before the block. Yields the call (``aborted`` tells the caller why
    its request failed)."""
    call = _Call()
    forget = None
    if cancel is not None:
        on_set = getattr(cancel, "on_set", None)
        if on_set is not None:
            forget = on_set(call.abort)
        elif cancel.is_set():
            call.abort()
    previous = getattr(_current, "call", None)
    _current.call = call
    try:
        yield call
    finally:
        _current.call = previous
        if forget is not None:
            forget()
