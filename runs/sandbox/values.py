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
_NO_KEY = object()


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


class _Bad(Exception):
    """Raised by the walk; collects the path (innermost first) as it propagates, so no
    path text is built for values that pass."""

    def __init__(self, reason: str, *, key: Any = _NO_KEY) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[tuple[bool, Any]] = []  # (is an object key, key or position)
        if key is not _NO_KEY:
            self.parts.append((True, key))


_NUL = "a string with a NUL character (\\u0000), which PostgreSQL cannot store"
_INFINITIES = (math.inf, -math.inf)


def _walk(value: Any, depth: int, convert: Callable[[Any], Any] | None) -> Any:
    """The canonical form of ``value``: the same object when it already is (no copy),
    else a copy with what changed. Raises _Bad."""
    if convert is not None:
        value = convert(value)
    cls = type(value)
    if cls is str:
        if "\x00" in value:
            raise _Bad(_NUL)
        return value
    if cls is int or cls is bool or value is None:
        return value
    if cls is float:
        if value != value:
            raise _Bad("NaN is not a JSON number")
        if value in _INFINITIES:
            raise _Bad(f"{'-' if value < 0 else ''}Infinity is not a JSON number")
        return value
    if cls is dict:
        if depth >= MAX_DEPTH:
            raise _Bad(f"nested deeper than {MAX_DEPTH} levels")
        out: dict[str, Any] | None = None
        for key, item in value.items():
            name = key if type(key) is str else _key_name(key, value)
            if "\x00" in name:
                raise _Bad("an object key with a NUL character (\\u0000)", key=name.replace("\x00", "\\u0000"))
            try:
                new = _walk(item, depth + 1, convert)
            except _Bad as bad:
                bad.parts.append((True, name))
                raise
            if new is not item or name is not key:
                if out is None:
                    out = {}
                    for k, v in value.items():  # the keys before this one, unchanged
                        if k is key:
                            break
                        out[k] = v
            if out is not None:
                if name in out:
                    raise _Bad("two keys of this object are the same string", key=name)
                out[name] = new
        return value if out is None else out
    if cls is list or cls is tuple:
        if depth >= MAX_DEPTH:
            raise _Bad(f"nested deeper than {MAX_DEPTH} levels")
        items: list[Any] | None = None if cls is list else list(value)
        for index, item in enumerate(value):
            try:
                new = _walk(item, depth + 1, convert)
            except _Bad as bad:
                bad.parts.append((False, index))
                raise
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    return _other(value, depth, convert)


def _key_name(key: Any, obj: dict[Any, Any]) -> str:
    """A key that is not a plain ``str``: a str subclass becomes its text; anything else
    fails (JSON would turn it into a string, silently, and may collide)."""
    if isinstance(key, str):
        return str.__str__(key)
    text = json.dumps(key) if isinstance(key, (int, float, bool)) or key is None else None
    clash = f'; as JSON it would become the key "{text}", which this object already has' if text is not None and text in obj else ""
    bad = _Bad(f"an object key must be a string, not {_type_name(key)} ({key!r}){clash}")
    bad.parts.append((False, key))  # shown as [key]: it is not a name
    raise bad


def _other(value: Any, depth: int, convert: Callable[[Any], Any] | None) -> Any:
    """Subclasses of the JSON types (canonicalised to the plain type), and the failures."""
    if isinstance(value, str):
        return _walk(str.__str__(value), depth, None)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _walk(float(value), depth, None)
    if isinstance(value, (list, tuple)):
        return _walk(list(value), depth, convert)
    if isinstance(value, dict):
        return _walk(dict(value), depth, convert)
    if isinstance(value, (set, frozenset)):
        raise _Bad(f"a {_type_name(value)} is not JSON (use a list)")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise _Bad(f"{_type_name(value)} are not JSON (decode them to a string first)")
    raise _Bad(f"{_type_name(value)} is not a JSON type")


def _path(root: str, parts: list[tuple[bool, Any]]) -> str:
    path = root
    for is_key, part in reversed(parts):
        if is_key:
            path = key_path(path, part)
        else:
            path = f"{path}[{part!r}]" if not isinstance(part, int) or isinstance(part, bool) else f"{path}[{part}]"
    return path


def check(value: Any, path: str = "", *, convert: Callable[[Any], Any] | None = None) -> Checked:
    """Walk ``value`` once and return its canonical JSON form and encoded size.

    ``path`` names the value in errors (``output``, ``updates.total``, ``input``).
    ``convert`` (optional) is applied to every node first, e.g. to dump pydantic models
    in JSON mode at the tool boundary. Raises :class:`InvalidValue` at the first value
    that is not JSON (see the module docstring), or one nested deeper than MAX_DEPTH.
    """
    try:
        canonical = _walk(value, 0, convert)
    except _Bad as bad:
        raise InvalidValue(_path(path, bad.parts), bad.reason) from None
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


# How many non-finite numbers one check lists (a document could hold thousands).
MAX_NUMBER_ISSUES = 20


def non_finite_locations(data: Any, limit: int = MAX_NUMBER_ISSUES) -> list[tuple[tuple[Any, ...], float]]:
    """Where ``data`` holds a float that is not finite, as ``(loc, value)`` (``loc`` a
    pydantic-style location), at most ``limit`` of them in document order. A JSON body
    parser reads a number too large for a float (``1e999``) as Infinity, and Python's
    lenient one reads ``NaN``: neither is a JSON number, and a spec holding one cannot be
    stored (the JSON column refuses it). Iterative: no recursion."""
    found: list[tuple[tuple[Any, ...], float]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack and len(found) < limit:
        item, loc = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            found.append((loc, item))
        elif isinstance(item, dict):
            stack.extend(reversed([(v, (*loc, k)) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(v, (*loc, i)) for i, v in enumerate(item)]))
    return found


def non_finite_message(value: float) -> str:
    """Why a non-finite float is refused, for a person who wrote ``1e999``."""
    if value != value:
        return "NaN is not a JSON number"
    return f"{'-' if value < 0 else ''}Infinity is not a JSON number (a number too large for a float, such as 1e999, reads as Infinity)"
