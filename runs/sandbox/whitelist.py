"""The functions and methods expressions and templates may call, each bounded by the current guard."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from runs.sandbox.errors import Fault, type_name
from runs.sandbox.guard import current_guard
from runs.sandbox.limits import HUGE

__all__ = ["DICT_METHODS", "FUNCTIONS", "FUNCTION_NAMES", "METHODS", "METHOD_NAMES", "SEQ_METHODS", "STR_METHODS",
           "fn_range", "str_join", "str_replace"]

F = TypeVar("F", bound=Callable[..., Any])

# Each function is named like the builtin it stands for, so Python's own argument errors
# ("len() takes 1 positional argument ...") read right.


def _named(name: str) -> Callable[[F], F]:
    def deco(fn: F) -> F:
        fn.__name__ = fn.__qualname__ = name
        return fn

    return deco


_MISSING: Any = object()


@_named("len")
def _fn_len(value: Any) -> int:
    return len(value)


@_named("min")
def _fn_min(*args: Any, default: Any = _MISSING) -> Any:
    return _min_max(min, "min", args, default)


@_named("max")
def _fn_max(*args: Any, default: Any = _MISSING) -> Any:
    return _min_max(max, "max", args, default)


def _min_max(fn: Callable[..., Any], name: str, args: tuple[Any, ...], default: Any) -> Any:
    if len(args) == 1:
        current_guard().check_iterable(args[0], name)
    return fn(*args) if default is _MISSING else fn(*args, default=default)


@_named("abs")
def _fn_abs(value: Any) -> Any:
    return abs(value)


@_named("round")
def _fn_round(number: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        return round(number)
    # round(5, -10**9) computes 10**(10**9) inside one C call.
    if not isinstance(ndigits, int) or abs(ndigits) > 300:
        raise Fault("limit", f"round() ndigits {ndigits!r} is outside the limit of -300..300")
    return round(number, ndigits)


@_named("int")
def _fn_int(value: Any = 0, base: Any = _MISSING) -> int:
    g = current_guard()
    if isinstance(value, str):
        g.check_chars(len(value))
        g.spend(len(value))
        result = int(value) if base is _MISSING else int(value, base)
    elif base is not _MISSING:
        raise TypeError("int() can't convert non-string with explicit base")
    else:
        result = int(value)
    g.check_bits(result.bit_length())
    return result


@_named("float")
def _fn_float(value: Any = 0.0) -> float:
    return float(value)


@_named("str")
def _fn_str(value: Any = "") -> str:
    return current_guard().text(value)


@_named("bool")
def _fn_bool(value: Any = False) -> bool:
    return bool(value)


@_named("sum")
def _fn_sum(iterable: Any, start: Any = 0) -> Any:
    g = current_guard()
    g.check_iterable(iterable, "sum")
    values = list(iterable.values()) if type(iterable) is dict else iterable
    # Numbers only: sum(lists, []) is quadratic, and strings are refused by Python anyway.
    for v in (start, *values):
        if not isinstance(v, (int, float)):
            raise Fault("type", f"sum() adds numbers only, not a {type_name(v)}")
    result = sum(iterable, start)
    if isinstance(result, int):
        g.check_bits(result.bit_length())
    return result


@_named("any")
def _fn_any(iterable: Any) -> bool:
    current_guard().check_iterable(iterable, "any")
    return any(iterable)


@_named("all")
def _fn_all(iterable: Any) -> bool:
    current_guard().check_iterable(iterable, "all")
    return all(iterable)


@_named("sorted")
def _fn_sorted(iterable: Any, *, reverse: Any = False) -> list[Any]:
    _copying(iterable, "sorted")
    return sorted(iterable, reverse=bool(reverse))


@_named("list")
def _fn_list(iterable: Any = ()) -> list[Any]:
    _copying(iterable, "list")
    return list(iterable)


@_named("dict")
def _fn_dict(*args: Any, **kwargs: Any) -> dict[Any, Any]:
    g = current_guard()
    if args:
        g.check_iterable(args[0], "dict")
    n = len(kwargs) + (len(args[0]) if args else 0)
    g.check_items(n, "the dict")
    g.spend(n)
    return dict(*args, **kwargs)


def _copying(iterable: Any, fname: str, per_item: int = 1) -> None:
    g = current_guard()
    g.check_iterable(iterable, fname)
    g.spend(len(iterable) * per_item)


@_named("range")
def fn_range(*args: Any) -> range:
    """range(...) of integers, refused ("limit") if it would hold more than ``limits.items``."""
    for a in args:
        if not isinstance(a, int):
            raise Fault("type", f"range() needs integers, not a {type_name(a)}")
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:
        n = HUGE
    current_guard().check_items(n, "the range")
    return r


@_named("enumerate")
def _fn_enumerate(iterable: Any, start: Any = 0) -> list[tuple[int, Any]]:
    _copying(iterable, "enumerate", 3)  # a list of (index, item) pairs
    if not isinstance(start, int):
        raise Fault("type", "enumerate() start must be an integer")
    return list(enumerate(iterable, start))


@_named("zip")
def _fn_zip(*iterables: Any) -> list[tuple[Any, ...]]:
    g = current_guard()
    for it in iterables:
        g.check_iterable(it, "zip")
    if iterables:  # zip(rows, rows, ...) builds len x count items
        n = min(len(it) for it in iterables) * (len(iterables) + 1)
        g.check_items(n, "the result of zip()", True)
        g.spend(n)
    return list(zip(*iterables, strict=False))


@_named("reversed")
def _fn_reversed(sequence: Any) -> list[Any]:
    _copying(sequence, "reversed")
    return list(reversed(sequence))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (_fn_len, _fn_min, _fn_max, _fn_abs, _fn_round, _fn_int, _fn_float, _fn_str, _fn_bool, _fn_sum,
               _fn_any, _fn_all, _fn_sorted, _fn_list, _fn_dict, fn_range, _fn_enumerate, _fn_zip, _fn_reversed)
}
FUNCTION_NAMES: frozenset[str] = frozenset(FUNCTIONS)


# ---------------------------------------------------------------------------------------
# Methods, per receiver type. None mutates (list.append, dict.update, ... are absent),
# none formats (str.format reaches attributes: '{0.__class__}'.format(1)), and every one
# that can grow its result is checked first. Each takes the receiver first.

def _direct(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @_named(name)
    def method(receiver: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(receiver, *args, **kwargs)

    return method


def _building(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A str method whose result is a new string (or tuple of strings) about the receiver's size."""

    @_named(name)
    def method(receiver: str, *args: Any, **kwargs: Any) -> Any:
        current_guard().spend(len(receiver))
        return fn(receiver, *args, **kwargs)

    return method


def _reverse_search(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    # CPython's reverse search has no linear-time fallback: 'a'*100000 .rfind() of a
    # 50_000-character needle takes about 0.5 s inside one call.
    @_named(name)
    def method(receiver: str, sub: Any, *args: Any) -> Any:
        if isinstance(sub, str) and len(sub) > 8 and len(receiver) * len(sub) > 10**8:
            raise Fault("limit", f"{name}() of a {len(sub)}-character string in a {len(receiver)}-character one "
                                 "exceeds the search cost limit")
        if name == "rpartition":
            current_guard().spend(len(receiver))
        return fn(receiver, sub, *args)

    return method


def _strip(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    # Each stripped character is looked up in ``chars``: cost is len(s) x len(chars).
    @_named(name)
    def method(receiver: str, chars: Any = None) -> Any:
        if isinstance(chars, str) and len(receiver) * len(chars) > 10**9:
            raise Fault("limit", f"{name}() with {len(chars)} characters to strip exceeds the search cost limit")
        current_guard().spend(len(receiver))
        return fn(receiver, chars)

    return method


def str_replace(s: str, old: Any, new: Any, count: Any = -1) -> str:
    """s.replace(old, new, count), refused ("limit") if the result would be too long; a TypeError on bad types."""
    if not (isinstance(old, str) and isinstance(new, str) and isinstance(count, int)):
        raise TypeError("replace() needs (old: str, new: str, count: int)")
    size = len(s)
    if len(new) > len(old):
        n = s.count(old) if old else len(s) + 1
        if count >= 0:
            n = min(n, count)
        size += n * (len(new) - len(old))
        current_guard().check_chars(size)
    current_guard().spend(size)
    return s.replace(old, new, count)


def str_join(sep: str, items: Any) -> str:
    """sep.join(items) of strings, refused ("limit") if the result would be too long; a TypeError on non-strings."""
    g = current_guard()
    g.check_iterable(items, "join")
    seq = list(items)
    total = len(sep) * max(len(seq) - 1, 0)
    for i, x in enumerate(seq):
        if not isinstance(x, str):
            raise TypeError(f"join() item {i} is a {type_name(x)}, not a string")
        total += len(x)
    g.check_chars(total)
    g.spend(total)
    return sep.join(seq)


def _str_pad(name: str) -> Callable[..., Any]:
    fn = getattr(str, name)

    @_named(name)
    def method(s: str, width: Any, *args: Any) -> Any:
        if not isinstance(width, int):
            raise TypeError(f"{name}() width must be an integer")
        current_guard().check_chars(width)
        current_guard().spend(max(width, len(s)))
        return fn(s, width, *args)

    return method


def _str_split(name: str) -> Callable[..., Any]:
    fn = getattr(str, name)

    @_named(name)
    def method(s: str, sep: Any = None, maxsplit: Any = -1) -> Any:
        if not isinstance(maxsplit, int):
            raise TypeError(f"{name}() maxsplit must be an integer")
        if name == "rsplit" and isinstance(sep, str) and len(sep) > 8 and len(s) * len(sep) > 10**8:
            raise Fault("limit", f"rsplit() on a {len(sep)}-character separator exceeds the search cost limit")
        g = current_guard()
        cap = g.limits.items
        g.spend(len(s))
        # Ask for at most cap+1 parts: more than cap means the full split is too big, and
        # the check never builds more than the limit.
        parts = fn(s, sep, maxsplit if 0 <= maxsplit <= cap else cap)
        g.check_items(len(parts), f"the result of {name}()")
        g.spend(len(parts))
        return parts

    return method


STR_METHODS: dict[str, Callable[..., Any]] = {
    name: _direct(name, getattr(str, name))
    for name in ("startswith", "endswith", "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace",
                 "islower", "isupper", "isnumeric", "isdecimal")
}
STR_METHODS.update({
    name: _building(name, getattr(str, name))
    for name in ("lower", "upper", "title", "capitalize", "casefold", "swapcase", "removeprefix", "removesuffix",
                 "partition")
})
STR_METHODS.update({name: _reverse_search(name, getattr(str, name)) for name in ("rfind", "rindex", "rpartition")})
STR_METHODS.update({name: _strip(name, getattr(str, name)) for name in ("strip", "lstrip", "rstrip")})
STR_METHODS.update(
    replace=_named("replace")(str_replace),
    join=_named("join")(str_join),
    split=_str_split("split"),
    rsplit=_str_split("rsplit"),
    ljust=_str_pad("ljust"),
    rjust=_str_pad("rjust"),
    center=_str_pad("center"),
    zfill=_str_pad("zfill"),
)


@_named("get")
def _dict_get(d: dict[Any, Any], key: Any, default: Any = None) -> Any:
    return d.get(key, default)


# Lists, not views: views are not JSON values and would keep the dict reachable.
@_named("keys")
def _dict_keys(d: dict[Any, Any]) -> list[Any]:
    current_guard().spend(len(d))
    return list(d.keys())


@_named("values")
def _dict_values(d: dict[Any, Any]) -> list[Any]:
    current_guard().spend(len(d))
    return list(d.values())


@_named("items")
def _dict_items(d: dict[Any, Any]) -> list[tuple[Any, Any]]:
    current_guard().spend(3 * len(d))  # the list and a pair per item
    return list(d.items())


DICT_METHODS: dict[str, Callable[..., Any]] = {
    "get": _dict_get,
    "keys": _dict_keys,
    "values": _dict_values,
    "items": _dict_items,
}
SEQ_METHODS: dict[str, Callable[..., Any]] = {
    "count": _direct("count", lambda s, *a: s.count(*a)),
    "index": _direct("index", lambda s, *a: s.index(*a)),
}
METHODS: dict[type, dict[str, Callable[..., Any]]] = {str: STR_METHODS, dict: DICT_METHODS, list: SEQ_METHODS,
                                                      tuple: SEQ_METHODS}
METHOD_NAMES: frozenset[str] = frozenset().union(*(m.keys() for m in METHODS.values()))
