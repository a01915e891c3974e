"""The JSON value check every value passes before it is stored: what a checkpoint can carry faithfully.

One walk over a value returns its canonical JSON form (tuples become lists; ``str``,
``int`` and ``float`` subclasses become the plain type) and its encoded size, or raises
:class:`InvalidValue` naming the first offending key path (``output.items[2].price``)
and why. Only JSON types pass: ``None``, booleans, integers, finite floats, strings
without NUL (PostgreSQL's jsonb refuses ``\\u0000``), lists and tuples, and objects whose
keys are strings. Everything else fails, Decimal and datetime included: a checkpoint
never turns a value into something else (a Decimal into a string, ``{1: ...}`` into
``{"1": ...}``) or drops one (two keys that collide once turned into strings).

No Django, no engine: the engine's commit, the tool registry and the services that take
operator input (skip outputs, fork patches, run input) all call it.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

# Python's json decoder (what Django's JSONField reads with) recurses per level and
# gives up near 1,000; a value nested deeper could be written but never read back.
MAX_DEPTH = 256

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class InvalidValue(ValueError):
    """A value JSON cannot carry faithfully.

    ``path`` is where (``output.items[2].price``: keys after dots, list positions in
    brackets, keys that are not plain names as ``["a b"]``); ``reason`` is why
    (``NaN is not a JSON number``).
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path or '(value)'}: {reason}")
        self.path = path
        self.reason = reason

    def as_dict(self) -> dict[str, str]:
        """``{"path", "reason"}`` for an error's ``details``."""
        return {"path": self.path, "reason": self.reason}


class Checked(NamedTuple):
    """A value that passed: its canonical JSON form and the UTF-8 bytes of its compact
    JSON encoding (``separators=(",", ":")``, non-ASCII kept), as the state-size limit
    counts them."""

    value: Any
    size: int


def key_path(path: str, key: str) -> str:
    """``path`` extended by object key ``key``: ``output.price``, or ``output["a b"]``
    when the key is not a plain name."""
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _type_name(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _walk(value: Any, path: str, depth: int, convert: Callable[[Any], Any] | None) -> Any:
    if convert is not None:
        value = convert(value)
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidValue(path, "a string with a NUL character (\\u0000), which PostgreSQL cannot store")
        return value if type(value) is str else str.__str__(value)
    if isinstance(value, bool):  # a bool subclass that is neither True nor False cannot exist
        return bool(value)
    if isinstance(value, int):
        return value if type(value) is int else int(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise InvalidValue(path, "NaN is not a JSON number")
        if math.isinf(value):
            raise InvalidValue(path, f"{'-' if value < 0 else ''}Infinity is not a JSON number")
        return value if type(value) is float else float(value)
    if depth >= MAX_DEPTH:
        raise InvalidValue(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        return [_walk(item, f"{path}[{i}]", depth + 1, convert) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                text = json.dumps(key) if isinstance(key, (int, float, bool)) or key is None else None
                clash = f'; as JSON it would become the key "{text}", which this object already has' if text is not None and text in value else ""
                raise InvalidValue(
                    f"{path}[{key!r}]" if path else f"[{key!r}]", f"an object key must be a string, not {_type_name(key)} ({key!r}){clash}"
                )
            name = key if type(key) is str else str.__str__(key)
            if name in out:
                raise InvalidValue(key_path(path, name), "two keys of this object are the same string")
            if "\x00" in name:
                raise InvalidValue(key_path(path, name.replace("\x00", "\\u0000")), "an object key with a NUL character (\\u0000)")
            out[name] = _walk(item, key_path(path, name), depth + 1, convert)
        return out
    if isinstance(value, (set, frozenset)):
        raise InvalidValue(path, f"a {_type_name(value)} is not JSON (use a list)")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidValue(path, f"{_type_name(value)} are not JSON (decode them to a string first)")
    raise InvalidValue(path, f"{_type_name(value)} is not a JSON type")


def check(value: Any, path: str = "", *, convert: Callable[[Any], Any] | None = None) -> Checked:
    """Walk ``value`` once and return its canonical JSON form and encoded size.

    ``path`` names the value in errors (``output``, ``updates.total``, ``input``).
    ``convert`` (optional) is applied to every node first, e.g. to dump pydantic models
    in JSON mode at the tool boundary. Raises :class:`InvalidValue` at the first value
    that is not JSON (see the module docstring), or one nested deeper than MAX_DEPTH.
    """
    canonical = _walk(value, path, 0, convert)
    try:
        size = len(json.dumps(canonical, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8"))
    except ValueError as exc:  # an integer past Python's int-to-text digit limit
        raise InvalidValue(path, str(exc)) from None
    return Checked(canonical, size)


def canonical(value: Any, path: str = "") -> Any:
    """:func:`check` without the size: the canonical JSON form. Raises InvalidValue."""
    return check(value, path).value


def encoded_size(value: Any) -> int:
    """UTF-8 bytes of the compact JSON encoding of a value already known to be JSON
    (read from the database): what :class:`Checked.size` counts."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def safe_text(text: str) -> str:
    """``text`` with NUL characters shown as ``\\u0000`` (for error messages, which must
    be storable even when they quote a bad value)."""
    return text.replace("\x00", "\\u0000")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str | bytes) -> Any:
    """Parse JSON strictly: ``json.loads`` except that ``NaN``, ``Infinity`` and
    ``-Infinity`` (which Python's parser accepts and no JSON column stores) raise
    ValueError, like any other text that is not JSON."""
    return json.loads(text, parse_constant=_refuse_constant)
