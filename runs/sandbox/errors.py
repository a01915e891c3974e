"""Errors of sandboxed evaluation: the user-facing ExpressionError, the internal Fault, and exception codes."""
from __future__ import annotations

import reprlib
from typing import Any, NamedTuple

__all__ = ["CODES", "MAX_MESSAGE_CHARS", "QUOTE_CHARS", "Described", "ExpressionError", "Fault", "clip", "describe",
           "quote", "type_name"]

QUOTE_CHARS = 200  # longest quotation of a user value or sub-expression in a message
MAX_MESSAGE_CHARS = 1000  # longest message an ExpressionError carries (and so an event payload quotes)

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
        # Every message is bounded however it was built: messages end up in step errors,
        # run events and API responses, and may quote user values.
        message = clip(message, MAX_MESSAGE_CHARS, fold=False)
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
        reason = clip(reason, MAX_MESSAGE_CHARS, fold=False)
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
        return Described("type", clip(str(exc), MAX_MESSAGE_CHARS, fold=False))
    if isinstance(exc, OverflowError):
        return Described("limit", f"number too large ({exc})")
    if isinstance(exc, RecursionError):
        return Described("limit", "nests too deeply")
    if isinstance(exc, MemoryError):
        return Described("memory", "ran out of memory")
    return Described("error", clip(f"{type(exc).__name__}: {exc}", MAX_MESSAGE_CHARS, fold=False))


def clip(text: str, limit: int = QUOTE_CHARS, *, fold: bool = True) -> str:
    """``text`` cut to at most ``limit`` characters for a message: THE truncation of quoted user text.

    With ``fold`` white space runs become one space first (a quoted expression reads on
    one line). Longer text keeps its first characters followed by "… (N characters)",
    N the original length, so a reader knows how much was cut. Costs
    O(limit), not O(len(text)): only a window of the text is folded. The result is at
    most ``limit`` characters (unless ``limit`` is shorter than the note itself), so
    clipping again changes nothing.
    """
    n = len(text)
    window = text[: 4 * limit + 1] if n > 4 * limit else text
    if fold:
        window = " ".join(window.split())
    if n <= 4 * limit and len(window) <= limit:
        return window
    note = f"… ({n} characters)"
    return window[: max(limit - len(note), 1)] + note


def _repr_within(limit: int) -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = max(limit - 4, 8)
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = r.maxfrozenset = 10
    r.maxlevel = 3
    return r


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """A bounded repr of ``value`` for a message (reprlib: long strings, lists and dicts are cut with "...").

    Never builds the full repr: a user value can be megabytes (an integer's digits are
    not even computed past 10_000 bits; Python refuses more than 4300 digits anyway).
    """
    if type(value) is int and value.bit_length() > 10_000:
        return f"<integer of {value.bit_length()} bits>"
    r = _repr_within(limit)
    try:
        text = r.repr(value)
    except Exception:  # a value whose repr fails still gets a message
        text = f"<{type_name(value)}>"
    if isinstance(value, str) and len(value) > r.maxstring:
        text += f" ({len(value)} characters)"
    elif isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > r.maxlist:
        text += f" ({len(value)} items)"
    return clip(text, 2 * limit + 40, fold=False)  # nested reprs can exceed maxstring a little


_TYPE_NAMES: dict[type, str] = {dict: "dict", list: "list", tuple: "tuple", str: "string", int: "integer",
                                float: "number", bool: "boolean", type(None): "None", set: "set", range: "range"}


def type_name(value: Any) -> str:
    """The user's word for the type of ``value`` ("string", "integer", "dict", ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)
