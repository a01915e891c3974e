"""The vocabulary node kinds, providers and tools share: a node's failure (NodeError), an LLM call's token usage and a step's cancel signal.

A leaf: it imports no node kind, provider, tool or engine module, so each of them can use
it without pointing at another (the node plug-in contract is runs.nodes.base).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runs.sandbox.errors import clip

log = logging.getLogger("ballast.engine")

# Longest message of an Issue or a NodeError: an expression error's 1000 characters plus
# where it happened; they reach API responses, step errors and run events.
NODE_ERROR_CHARS = 2000


@dataclass
class Usage:
    """Token usage of one LLM call, as the provider reports it (counts of tokens).

    ``input_tokens`` includes ``cached_input_tokens`` (prompt-cache reads) and
    ``cache_write_tokens`` (prompt-cache writes, Anthropic's ``cache_creation_input_tokens``,
    of which ``cache_write_1h_tokens`` were written with the one-hour lifetime), and
    ``output_tokens`` includes ``reasoning_tokens`` (OpenAI's convention; providers
    normalise to it). Cache reads and writes have their own prices (see
    :mod:`runs.providers.pricing`), so they are kept apart from plain input.
    ``price_version`` names the price data the cost of this usage came from
    (``genai-prices 0.2.3``; "" when nothing priced it).
    """

    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    price_version: str = ""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "price_version": self.price_version,
        }


class NodeError(Exception):
    """A node failed. ``retryable`` says whether the step's retry policy may try again.

    ``code`` is a short machine name (``timeout``, ``expression``, ``http_error``,
    ``rate_limited``, ``budget_exceeded`` ...) that retry policies match on. ``usage`` and
    ``cost_usd`` carry what the attempt spent before it failed.

    ``not_sent``: the attempt certainly had no effect outside the run (the request never
    left: a refused connection; or the service refused it without acting on it, as a 429
    says). Only then is a step that is not safe to repeat retried by its policy; after any
    other retryable failure (a timeout, a dropped connection, a 5xx) its side effect may
    have happened, and the engine parks the step for a person, as after a crash.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        retryable: bool = True,
        details: Any = None,
        usage: Usage | None = None,
        cost_usd: Decimal | None = None,
        not_sent: bool = False,
    ):
        # The message lands in step errors and run events; it may quote user values
        # (an expression error, a reply body), so it is bounded like every quotation.
        message = clip(message, NODE_ERROR_CHARS, fold=False)
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.details = details
        self.not_sent = not_sent
        # What the failed attempt spent before failing (an LLM call whose reply was
        # invalid): recorded on the attempt so retries' cost is visible.
        self.usage = usage
        self.cost_usd = cost_usd

    def as_dict(self) -> dict[str, Any]:
        data = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.details is not None:
            data["details"] = self.details
        if self.not_sent:
            data["not_sent"] = True
        return data


class StepCancelled(NodeError):
    """Raised by :meth:`NodeContext.check_cancelled` when the run was cancelled or the lease lost."""

    def __init__(self, message: str = "step cancelled"):
        super().__init__(message, code="cancelled", retryable=False)


class CancelEvent(threading.Event):
    """A step's cancel signal (``NodeContext.cancel_event``, ``ToolContext.cancelled``,
    ``LLMRequest.cancel_event``): a ``threading.Event`` that also calls back whoever is
    blocked in a call the event cannot interrupt by itself.

    :meth:`on_set` registers a callback, called once, in the thread that sets the event
    (at once when it is set already): an outbound client blocked reading a socket has it
    shut down there (runs.abort), so a cancelled run's model call stops now
    rather than at its end. A callback must be quick and must not raise (one that raises
    is logged and the others still run).
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks_lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    def set(self) -> None:
        super().set()
        with self._callbacks_lock:
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one bad callback must not keep the others from the cancel
                log.exception("a cancel callback raised")

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` when the event is set (now, in this thread, if it is set
        already). Returns a function that unregisters it (a no-op once it was called)."""
        with self._callbacks_lock:
            if not self.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback

                def forget() -> None:
                    with self._callbacks_lock:
                        self._callbacks.pop(key, None)

                return forget
        callback()
        return lambda: None
