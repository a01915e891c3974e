"""The functions and methods expressions and templates may call, each bounded by the current guard."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from runs.sandbox.errors import Fault, quote, type_name
from runs.sandbox.guard import current_guard, hash_bytes, int_bytes, range_item_bytes, seq_bytes
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
    g = current_guard()
    if len(args) == 1:
        g.check_sort(args[0], name)
    else:
        g.scan(sum(g.steps_of(a) for a in args), f"{name}() of {len(args)} values")
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
        raise Fault("limit", f"round() ndigits {quote(ndigits)} is outside the limit of -300..300")
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
    g.alloc(int_bytes(result.bit_length()), "the integer")
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
        g.alloc(int_bytes(result.bit_length()), "the sum")
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
    current_guard().check_sort(iterable, "sorted")
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
    if args:
        g.scan(g.steps_of(args[0]), "hashing the keys of dict()")
        g.alloc(len(args[0]) * range_item_bytes(args[0]), "the keys of dict()")
    g.alloc(hash_bytes(n), "the dict")
    return dict(*args, **kwargs)


def _copying(iterable: Any, fname: str, per_item: int = 1, item_bytes: int = 0) -> None:
    # A new list of len(iterable) slots, plus ``item_bytes`` of new objects per item.
    g = current_guard()
    g.check_iterable(iterable, fname)
    g.spend(len(iterable) * per_item)
    g.alloc(seq_bytes(len(iterable)) + len(iterable) * (item_bytes + range_item_bytes(iterable)),
            f"the result of {fname}()")


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
    _copying(iterable, "enumerate", 3, seq_bytes(2) + int_bytes(64))  # a list of (index, item) pairs
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
        rows = n // (len(iterables) + 1)
        g.alloc(seq_bytes(rows) + rows * (seq_bytes(len(iterables)) + sum(range_item_bytes(it) for it in iterables)),
                "the result of zip()")
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


def _direct_scan(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A str method that searches or inspects the receiver (count, find, index, is...): its cost checked first."""

    @_named(name)
    def method(receiver: str, *args: Any, **kwargs: Any) -> Any:
        g = current_guard()
        if args and isinstance(args[0], str):
            g.search(receiver, args[0], name)
        else:
            g.scan(len(receiver) // 8 + 1, f"{name}() of a {len(receiver)}-character string")
        return fn(receiver, *args, **kwargs)

    return method


def _building(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A str method whose result is a new string (or tuple of strings) at most the receiver's size."""

    @_named(name)
    def method(receiver: str, *args: Any, **kwargs: Any) -> Any:
        g = current_guard()
        if args and isinstance(args[0], str):
            g.search(receiver, args[0], name)
        g.spend(len(receiver))
        g.alloc_str(len(receiver), receiver)
        return fn(receiver, *args, **kwargs)

    return method


def _case_mapping(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A str case mapping (lower, upper, title, capitalize, casefold, swapcase), bounded by the string limit.

    A character maps to one to three ('ß'.upper() is 'SS', 'ΐ'.upper() three), so the
    result is never shorter than the receiver: a receiver over ``limits.string_chars`` is
    refused before it runs, and the result, at most three times that, is checked after.
    """

    @_named(name)
    def method(receiver: str, *args: Any) -> Any:
        g = current_guard()
        g.check_chars(len(receiver))
        g.spend(len(receiver))
        if len(receiver) * 3 > g.limits.string_chars and not receiver.isascii():
            g.alloc_str(len(receiver) * 3, receiver)  # the worst case must fit before it is built
        out: str = fn(receiver, *args)
        g.check_chars(len(out))
        g.alloc(sys.getsizeof(out), f"the result of {name}()")
        return out

    return method


def _reverse_search(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    # CPython's reverse search has no linear-time fallback: 'a'*100000 .rfind() of a
    # 50_000-character needle takes about 0.5 s inside one call (memcmp at ~50 characters a step).
    @_named(name)
    def method(receiver: str, sub: Any, *args: Any) -> Any:
        g = current_guard()
        if isinstance(sub, str) and len(sub) <= len(receiver):
            steps = len(receiver) + len(sub) + (len(receiver) * len(sub) // 50 if len(sub) > 8 else 0)
            g.scan(steps, f"{name}() of a {len(sub)}-character string in a {len(receiver)}-character one")
        if name == "rpartition":
            g.spend(len(receiver))
            g.alloc_str(len(receiver), receiver)
        return fn(receiver, sub, *args)

    return method


def _strip(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    # Each stripped character is looked up in ``chars``: cost is len(s) x len(chars).
    @_named(name)
    def method(receiver: str, chars: Any = None) -> Any:
        g = current_guard()
        if isinstance(chars, str):
            g.scan(len(receiver) * (len(chars) // 50 + 1), f"{name}() with {len(chars)} characters to strip")
        g.spend(len(receiver))
        g.alloc_str(len(receiver), receiver)
        return fn(receiver, chars)

    return method


def str_replace(s: str, old: Any, new: Any, count: Any = -1) -> str:
    """s.replace(old, new, count), refused ("limit") if the result would be too long; a TypeError on bad types."""
    if not (isinstance(old, str) and isinstance(new, str) and isinstance(count, int)):
        raise TypeError("replace() needs (old: str, new: str, count: int)")
    g = current_guard()
    g.search(s, old, "replace")
    size = len(s)
    if len(new) > len(old):
        n = s.count(old) if old else len(s) + 1
        if count >= 0:
            n = min(n, count)
        size += n * (len(new) - len(old))
        g.check_chars(size)
    g.spend(size)
    g.alloc_str(size, s, new)
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
    g.alloc(seq_bytes(len(seq)), "the items of join()")
    g.alloc_str(total, sep, *seq)
    return sep.join(seq)


def _str_pad(name: str) -> Callable[..., Any]:
    fn = getattr(str, name)

    @_named(name)
    def method(s: str, width: Any, *args: Any) -> Any:
        if not isinstance(width, int):
            raise TypeError(f"{name}() width must be an integer")
        g = current_guard()
        g.check_chars(width)
        g.spend(max(width, len(s)))
        g.alloc_str(max(width, len(s)), s, *(a for a in args if isinstance(a, str)))
        return fn(s, width, *args)

    return method


def _str_split(name: str) -> Callable[..., Any]:
    fn = getattr(str, name)

    @_named(name)
    def method(s: str, sep: Any = None, maxsplit: Any = -1) -> Any:
        if not isinstance(maxsplit, int):
            raise TypeError(f"{name}() maxsplit must be an integer")
        g = current_guard()
        if isinstance(sep, str) and len(sep) <= len(s):
            steps = len(s) + len(sep) + (len(s) * len(sep) // 50 if name == "rsplit" and len(sep) > 8 else 0)
            g.scan(steps, f"{name}() of a {len(s)}-character string")
        cap = g.limits.items
        g.spend(len(s))
        g.alloc_str(len(s), s)
        # Ask for at most cap+1 parts: more than cap means the full split is too big, and
        # the check never builds more than the limit.
        parts = fn(s, sep, maxsplit if 0 <= maxsplit <= cap else cap)
        g.check_items(len(parts), f"the result of {name}()")
        g.spend(len(parts))
        g.alloc(seq_bytes(len(parts)) + len(parts) * 49, f"the result of {name}()")
        return parts

    return method


STR_METHODS: dict[str, Callable[..., Any]] = {
    name: _direct(name, getattr(str, name)) for name in ("startswith", "endswith")
}
STR_METHODS.update({
    name: _direct_scan(name, getattr(str, name))
    for name in ("count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper",
                 "isnumeric", "isdecimal")
})
STR_METHODS.update({
    name: _case_mapping(name, getattr(str, name))
    for name in ("lower", "upper", "title", "capitalize", "casefold", "swapcase")
})
STR_METHODS.update({
    name: _building(name, getattr(str, name)) for name in ("removeprefix", "removesuffix", "partition")
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
    g = current_guard()
    g.spend(len(d))
    g.alloc(seq_bytes(len(d)), "the keys")
    return list(d.keys())


@_named("values")
def _dict_values(d: dict[Any, Any]) -> list[Any]:
    g = current_guard()
    g.spend(len(d))
    g.alloc(seq_bytes(len(d)), "the values")
    return list(d.values())


@_named("items")
def _dict_items(d: dict[Any, Any]) -> list[tuple[Any, Any]]:
    g = current_guard()
    g.spend(3 * len(d))  # the list and a pair per item
    g.alloc(seq_bytes(len(d)) + len(d) * seq_bytes(2), "the items")
    return list(d.items())


DICT_METHODS: dict[str, Callable[..., Any]] = {
    "get": _dict_get,
    "keys": _dict_keys,
    "values": _dict_values,
    "items": _dict_items,
}
def _seq_search(name: str) -> Callable[..., Any]:
    # list.count/index compare the value with every item inside one C call.
    @_named(name)
    def method(seq: Any, value: Any, *args: Any) -> Any:
        g = current_guard()
        if len(seq) > 1:
            g.scan(len(seq) * g.steps_of(value), f"{name}() over a {type_name(seq)} of {len(seq)} items")
        return getattr(seq, name)(value, *args)

    return method


SEQ_METHODS: dict[str, Callable[..., Any]] = {"count": _seq_search("count"), "index": _seq_search("index")}
METHODS: dict[type, dict[str, Callable[..., Any]]] = {str: STR_METHODS, dict: DICT_METHODS, list: SEQ_METHODS,
                                                      tuple: SEQ_METHODS}
METHOD_NAMES: frozenset[str] = frozenset().union(*(m.keys() for m in METHODS.values()))
