"""Errors of sandboxed evaluation: the user-facing ExpressionError, the internal Fault, and exception codes."""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["CODES", "Described", "ExpressionError", "Fault", "clip", "describe", "type_name"]

CODES = frozenset({"syntax", "unknown_name", "forbidden", "limit", "timeout", "memory", "type", "error"})


class ExpressionError(Exception):
    """An expression or template that cannot be parsed, is not allowed, or failed to evaluate.

    ``code`` is one of "syntax", "unknown_name", "forbidden", "limit", "timeout",
    "memory", "type", "error" (:data:`CODES`; anything else becomes "error");
    ``message`` is meant for the user who wrote the expression. ``source``,
    ``position`` ((line, column), 1-based) and ``name`` (the unknown variable) are
    filled in when known.
    """

    def __init__(
        self,
        message: str,
        code: str = "error",
        *,
        source: str | None = None,
        position: tuple[int, int] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code in CODES else "error"
        self.source = source
        self.position = position
        self.name = name

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions cross process boundaries (django-q2 pickles task results); the
        # default reduce would call __init__ with the message only and lose the code.
        return (self.__class__, (self.message, self.code), self.__dict__.copy())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"code", "message"} plus "source", "position", "name" when known."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.source is not None:
            out["source"] = self.source
        if self.position is not None:
            out["position"] = {"line": self.position[0], "column": self.position[1]}
        if self.name is not None:
            out["name"] = self.name
        return out


class Fault(Exception):
    """A check failed inside an evaluation; the caller turns it into an ExpressionError with the location.

    ``code`` is one of :data:`CODES`, ``reason`` a sentence without the location
    ("exceeds the limit of ..."), ``name`` the unknown variable if any, ``whole`` asks
    the reporter to show the whole expression rather than the sub-expression (timeouts).
    """

    def __init__(self, code: str, reason: str, *, name: str | None = None, whole: bool = False) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.name = name
        self.whole = whole


class Described(NamedTuple):
    """What went wrong inside an evaluation, before the location is added (see :class:`Fault`)."""

    code: str
    reason: str
    name: str | None = None
    whole: bool = False


def describe(exc: BaseException) -> Described:
    """What ``exc``, raised inside an evaluation, means for the user.

    A :class:`Fault` speaks for itself; Python's own errors get the code that says what
    went wrong (a TypeError is "type", an OverflowError "limit", a MemoryError
    "memory"); anything else is "error" with the exception's type and text.
    """
    if isinstance(exc, Fault):
        return Described(exc.code, exc.reason, exc.name, exc.whole)
    if isinstance(exc, ZeroDivisionError):
        return Described("error", "division by zero")
    if isinstance(exc, TypeError):
        return Described("type", str(exc))
    if isinstance(exc, OverflowError):
        return Described("limit", f"number too large ({exc})")
    if isinstance(exc, RecursionError):
        return Described("limit", "nests too deeply")
    if isinstance(exc, MemoryError):
        return Described("memory", "ran out of memory")
    return Described("error", f"{type(exc).__name__}: {exc}")


def clip(text: str, limit: int = 160) -> str:
    """``text`` with white space folded, cut to ``limit`` characters (with "...") for messages."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_TYPE_NAMES: dict[type, str] = {dict: "dict", list: "list", tuple: "tuple", str: "string", int: "integer",
                                float: "number", bool: "boolean", type(None): "None", set: "set", range: "range"}


def type_name(value: Any) -> str:
    """The user's word for the type of ``value`` ("string", "integer", "dict", ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)
