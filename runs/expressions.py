"""Sandboxed expressions (conditions, transforms) over run state: simpleeval with size, time and memory limits."""
from __future__ import annotations

import ast
import atexit
import contextvars
import functools
import io
import math
import operator as op
import os
import pickle
import re
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from simpleeval import FeatureNotAvailable, InvalidExpression, NameNotDefined, SimpleEval

__all__ = [
    "ExpressionError",
    "FUNCTION_NAMES",
    "METHOD_NAMES",
    "Limits",
    "LIMITS",
    "ParsedExpression",
    "evaluate",
    "parse_expression",
]

# ---------------------------------------------------------------------------------------
# Limits
#
# TRAPS.md: simpleeval stops code execution but not resource exhaustion, and a big-integer
# multiply or a padding method cannot be interrupted once it has started. So every
# operation that can produce more than its inputs is checked BEFORE it runs, against the
# values below; a cooperative deadline bounds the number of (individually bounded) steps;
# the evaluator process (BALLAST_EXPRESSION_ISOLATION="process") is the hard backstop.

MAX_SOURCE_CHARS = 2000  # longest expression accepted by parse_expression
MAX_DEPTH = 50  # deepest syntax-tree nesting accepted by parse_expression
MAX_VALUE_DEPTH = 100  # deepest nesting of a run-state value an expression may read

_CODES = frozenset({"syntax", "unknown_name", "forbidden", "limit", "timeout", "memory", "type", "error"})


@dataclass(frozen=True)
class Limits:
    """Evaluation-time limits. Sizes count what an operation would BUILD, checked before it runs.

    - ``int_bits``: largest integer an operation may produce (4096 bits, about 1233 digits).
    - ``string_chars``: longest string an operation may produce.
    - ``items``: most items in a list/tuple/dict/set an operation may produce, nested
      items counted (``[[1]*1000]*1000`` is 1_001_000 items, even though it shares rows).
      Also the most items a function such as ``sorted`` or ``range`` may walk or create.
    - ``iterations``: comprehension steps (all comprehensions of one evaluation together).
    - ``budget``: characters and items all operations of one evaluation may build in
      total, garbage included (``[s + str(i) for i in range(10000)]`` builds 10_000
      strings even though each is small enough): bounds memory and time together.
    - ``timeout``: seconds of wall time for one evaluation (cooperative inline; the
      isolated process is killed ``HARD_KILL_GRACE`` seconds later).
    """

    int_bits: int = 4096
    string_chars: int = 100_000
    items: int = 100_000
    iterations: int = 10_000
    budget: int = 2_000_000
    timeout: float = 0.5


LIMITS = Limits()
HARD_KILL_GRACE = 0.25  # process mode: kill at timeout + this, if the cooperative stop did not come
_HUGE = 1 << 62


class ExpressionError(Exception):
    """An expression or template that cannot be parsed, is not allowed, or failed to evaluate.

    ``code`` is one of "syntax", "unknown_name", "forbidden", "limit", "timeout",
    "memory", "type", "error"; ``message`` is meant for the user who wrote the expression.
    ``source``, ``position`` ((line, column), 1-based) and ``name`` (the unknown variable)
    are filled in when known.
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
        self.code = code if code in _CODES else "error"
        self.source = source
        self.position = position
        self.name = name

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
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


class _Fault(Exception):
    """Internal: a check failed; the evaluator turns it into an ExpressionError with the location."""

    def __init__(self, code: str, reason: str, *, name: str | None = None, whole: bool = False) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.name = name
        self.whole = whole  # report the whole expression, not the sub-expression (timeouts)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    return {dict: "dict", list: "list", tuple: "tuple", str: "string", int: "integer", float: "number",
            bool: "boolean", type(None): "None", set: "set", range: "range"}.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------
# The guard: per-evaluation accounting shared by expressions and templates.

_GUARD: contextvars.ContextVar[_Guard | None] = contextvars.ContextVar("ballast_expression_guard", default=None)


class _Guard:
    """Limits, deadline and size accounting for one evaluation (or one template render)."""

    __slots__ = ("limits", "deadline", "iterations", "spent", "_memo", "_memo_cells")

    def __init__(self, limits: Limits, deadline: float | None = None) -> None:
        self.limits = limits
        self.deadline = deadline if deadline is not None else time.monotonic() + limits.timeout
        self.iterations = 0
        self.spent = 0
        self._memo: dict[int, tuple[Any, int, int]] = {}
        self._memo_cells = 0

    # -- time and steps --------------------------------------------------------------
    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Fault("timeout", f"took longer than the time limit of {self.limits.timeout:g} s and was stopped",
                         whole=True)

    def step(self, limit: int | None = None, what: str = "comprehension steps") -> None:
        self.iterations += 1
        limit = self.limits.iterations if limit is None else limit
        if self.iterations > limit:
            raise _Fault("limit", f"exceeds the limit of {limit} {what}")
        if time.monotonic() > self.deadline:
            self.check_time()

    def spend(self, n: int) -> None:
        """Account ``n`` characters or items about to be built against the evaluation's budget."""
        self.spent += n
        if self.spent > self.limits.budget:
            raise _Fault("limit", f"exceeds the limit of {self.limits.budget} characters and items built in one "
                                  "evaluation")

    # -- sizes -----------------------------------------------------------------------
    def measure(self, value: Any) -> tuple[int, int]:
        """(items, chars): items counted through nesting, and about how long str() of it is.

        Shared sub-values count once per reference, as str() and == walk them that way.
        Walks stop once past the items limit, so a check costs O(limit) at worst.
        """
        t = type(value)
        if t is str:
            return 1, len(value) + 2
        if t is int:
            return 1, (value.bit_length() * 77 >> 8) + 2  # 77/256 ~ log10(2)
        if t in _SEQUENCES or t is dict:
            memo = self._memo
            hit = memo.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1], hit[2]
            cap = self.limits.items
            cells, chars = 1, 2
            if t is dict:
                for k, v in value.items():
                    kc, kch = self.measure(k)
                    vc, vch = self.measure(v)
                    cells += kc + vc
                    chars += kch + vch + 4
                    if cells > cap:
                        chars = _HUGE
                        break
            else:
                for item in value:
                    c, ch = self.measure(item)
                    cells += c
                    chars += ch + 2
                    if cells > cap:
                        chars = _HUGE
                        break
            if len(value) >= 16:
                # The memo holds references so ids cannot be reused while it lives; it is
                # dropped when large so garbage from long comprehensions is not kept alive.
                if self._memo_cells > 8 * cap:
                    memo.clear()
                    self._memo_cells = 0
                memo[id(value)] = (value, cells, chars)
                self._memo_cells += min(cells, cap)
            return cells, chars
        if t is range:
            return len(value) + 1, 24
        return 1, 24

    def check_items(self, n: int, what: str = "a value", nested: bool = False) -> None:
        """``n`` counts the items inside a value; with ``nested``, items of inner lists too."""
        if n > self.limits.items:
            how = ", nested items counted" if nested else ""
            raise _Fault("limit", f"exceeds the size limit of {self.limits.items} items ({what} would hold {n}{how})")

    def check_chars(self, n: int) -> None:
        if n > self.limits.string_chars:
            raise _Fault("limit", f"exceeds the string size limit of {self.limits.string_chars} characters "
                                  f"(the result would be {n} characters)")

    def check_bits(self, bits: float) -> None:
        if bits > self.limits.int_bits:
            shown = f"{bits:.0f}" if bits < 1e15 else "astronomically many"
            raise _Fault("limit", f"exceeds the integer size limit of {self.limits.int_bits} bits "
                                  f"(the result would need {shown} bits)")

    def check_iterable(self, value: Any, fname: str) -> None:
        """Functions that walk an argument accept only bounded, known collections."""
        t = type(value)
        if t in _SEQUENCES or t is dict or t is range or t is str:
            self.check_items(len(value), f"the argument of {fname}()")
            return
        raise _Fault("type", f"{fname}() needs a list, tuple, dict, string or range, not a {_type_name(value)}")

    def text(self, value: Any) -> str:
        """str(value), refused before it runs if the text would be too long."""
        if type(value) is str:
            return value
        estimate = self.measure(value)[1]
        self.check_chars(estimate)
        self.spend(estimate)
        out = str(value)
        self.check_chars(len(out))  # escapes in reprs can exceed the estimate
        return out

    # -- operators (checked before they compute) --------------------------------------
    def add(self, a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is str and tb is str:
            self.check_chars(len(a) + len(b))
            self.spend(len(a) + len(b))
        elif (ta is int or ta is bool) and (tb is int or tb is bool):
            self.check_bits(max(a.bit_length(), b.bit_length()) + 1)
        elif ta in _SEQUENCES and tb is ta:
            self.check_items(self.measure(a)[0] + self.measure(b)[0] - 2, f"the joined {_type_name(a)}", True)
            self.spend(len(a) + len(b))
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            self.check_bits(max(a.bit_length(), b.bit_length()) + 1)
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        a_int, b_int = isinstance(a, int), isinstance(b, int)
        if a_int and b_int:
            self.check_bits(a.bit_length() + b.bit_length())
        elif b_int and type(a) in _REPEATABLE:
            self._check_repeat(a, b)
        elif a_int and type(b) in _REPEATABLE:
            self._check_repeat(b, a)
        return a * b

    def _check_repeat(self, seq: Any, times: int) -> None:
        if times <= 0:
            return
        if type(seq) is str:
            self.check_chars(len(seq) * times)
        else:
            self.check_items((self.measure(seq)[0] - 1) * times, f"the repeated {_type_name(seq)}", True)
        self.spend(len(seq) * times)

    def pow(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
            self.check_bits(b * math.log2(abs(a)))
        elif isinstance(b, int) and b.bit_length() > self.limits.int_bits:
            self.check_bits(b.bit_length())
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int) and a and b > 0:
            self.check_bits(a.bit_length() + b)
        return a << b

    def mod(self, a: Any, b: Any) -> Any:
        if isinstance(a, str):
            # '%*d' % (10**9, 1) pads to a gigabyte inside one C call.
            raise _Fault("forbidden", "%-formatting of strings is not allowed; use an f-string or +")
        return a % b

    def bitor(self, a: Any, b: Any) -> Any:
        if type(a) in _MERGEABLE and type(b) in _MERGEABLE:
            self.check_items(self.measure(a)[0] + self.measure(b)[0] - 2, f"the merged {_type_name(a)}", True)
            self.spend(len(a) + len(b))
        return a | b


_SEQUENCES = frozenset({list, tuple, set, frozenset})
_REPEATABLE = frozenset({str, list, tuple})
_MERGEABLE = frozenset({dict, set, frozenset})


def _guard() -> _Guard:
    g = _GUARD.get()
    if g is None:  # e.g. a template filter folded at compile time, outside any evaluation
        g = _Guard(LIMITS)
    return g


# ---------------------------------------------------------------------------------------
# Whitelisted functions. Each is named like the builtin it stands for, so Python's own
# argument errors ("len() takes 1 positional argument ...") read right.

def _named(name: str):
    def deco(fn):
        fn.__name__ = fn.__qualname__ = name
        return fn

    return deco


_MISSING = object()


@_named("len")
def _fn_len(value):
    return len(value)


@_named("min")
def _fn_min(*args, default=_MISSING):
    return _min_max(min, "min", args, default)


@_named("max")
def _fn_max(*args, default=_MISSING):
    return _min_max(max, "max", args, default)


def _min_max(fn, name, args, default):
    if len(args) == 1:
        _guard().check_iterable(args[0], name)
    return fn(*args) if default is _MISSING else fn(*args, default=default)


@_named("abs")
def _fn_abs(value):
    return abs(value)


@_named("round")
def _fn_round(number, ndigits=None):
    if ndigits is None:
        return round(number)
    # round(5, -10**9) computes 10**(10**9) inside one C call.
    if not isinstance(ndigits, int) or abs(ndigits) > 300:
        raise _Fault("limit", f"round() ndigits {ndigits!r} is outside the limit of -300..300")
    return round(number, ndigits)


@_named("int")
def _fn_int(value=0, base=_MISSING):
    g = _guard()
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
def _fn_float(value=0.0):
    return float(value)


@_named("str")
def _fn_str(value=""):
    return _guard().text(value)


@_named("bool")
def _fn_bool(value=False):
    return bool(value)


@_named("sum")
def _fn_sum(iterable, start=0):
    g = _guard()
    g.check_iterable(iterable, "sum")
    values = list(iterable.values()) if type(iterable) is dict else iterable
    # Numbers only: sum(lists, []) is quadratic, and strings are refused by Python anyway.
    for v in (start, *values):
        if not isinstance(v, (int, float)):
            raise _Fault("type", f"sum() adds numbers only, not a {_type_name(v)}")
    result = sum(iterable, start)
    if isinstance(result, int):
        g.check_bits(result.bit_length())
    return result


@_named("any")
def _fn_any(iterable):
    _guard().check_iterable(iterable, "any")
    return any(iterable)


@_named("all")
def _fn_all(iterable):
    _guard().check_iterable(iterable, "all")
    return all(iterable)


@_named("sorted")
def _fn_sorted(iterable, *, reverse=False):
    _copying(iterable, "sorted")
    return sorted(iterable, reverse=bool(reverse))


@_named("list")
def _fn_list(iterable=()):
    _copying(iterable, "list")
    return list(iterable)


@_named("dict")
def _fn_dict(*args, **kwargs):
    g = _guard()
    if args:
        g.check_iterable(args[0], "dict")
    n = len(kwargs) + (len(args[0]) if args else 0)
    g.check_items(n, "the dict")
    g.spend(n)
    return dict(*args, **kwargs)


def _copying(iterable: Any, fname: str, per_item: int = 1) -> None:
    g = _guard()
    g.check_iterable(iterable, fname)
    g.spend(len(iterable) * per_item)


@_named("range")
def _fn_range(*args):
    for a in args:
        if not isinstance(a, int):
            raise _Fault("type", f"range() needs integers, not a {_type_name(a)}")
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:
        n = _HUGE
    _guard().check_items(n, "the range")
    return r


@_named("enumerate")
def _fn_enumerate(iterable, start=0):
    _copying(iterable, "enumerate", 3)  # a list of (index, item) pairs
    if not isinstance(start, int):
        raise _Fault("type", "enumerate() start must be an integer")
    return list(enumerate(iterable, start))


@_named("zip")
def _fn_zip(*iterables):
    g = _guard()
    for it in iterables:
        g.check_iterable(it, "zip")
    if iterables:  # zip(rows, rows, ...) builds len x count items
        n = min(len(it) for it in iterables) * (len(iterables) + 1)
        g.check_items(n, "the result of zip()", True)
        g.spend(n)
    return list(zip(*iterables, strict=False))


@_named("reversed")
def _fn_reversed(sequence):
    _copying(sequence, "reversed")
    return list(reversed(sequence))


_FUNCTIONS: dict[str, Any] = {
    fn.__name__: fn
    for fn in (_fn_len, _fn_min, _fn_max, _fn_abs, _fn_round, _fn_int, _fn_float, _fn_str, _fn_bool, _fn_sum,
               _fn_any, _fn_all, _fn_sorted, _fn_list, _fn_dict, _fn_range, _fn_enumerate, _fn_zip, _fn_reversed)
}
FUNCTION_NAMES: frozenset[str] = frozenset(_FUNCTIONS)


# ---------------------------------------------------------------------------------------
# Whitelisted methods, per receiver type. None mutates (list.append, dict.update, ... are
# absent), none formats (str.format reaches attributes: '{0.__class__}'.format(1)), and
# every one that can grow its result is checked first.

def _direct(name: str, fn):
    @_named(name)
    def method(receiver, *args, **kwargs):
        return fn(receiver, *args, **kwargs)

    return method


def _building(name: str, fn):
    """A str method whose result is a new string (or tuple of strings) about the receiver's size."""

    @_named(name)
    def method(receiver, *args, **kwargs):
        _guard().spend(len(receiver))
        return fn(receiver, *args, **kwargs)

    return method


def _reverse_search(name: str, fn):
    # CPython's reverse search has no linear-time fallback: 'a'*100000 .rfind() of a
    # 50_000-character needle takes about 0.5 s inside one call.
    @_named(name)
    def method(receiver, sub, *args):
        if isinstance(sub, str) and len(sub) > 8 and len(receiver) * len(sub) > 10**8:
            raise _Fault("limit", f"{name}() of a {len(sub)}-character string in a {len(receiver)}-character one "
                                  "exceeds the search cost limit")
        if name == "rpartition":
            _guard().spend(len(receiver))
        return fn(receiver, sub, *args)

    return method


def _strip(name: str, fn):
    # Each stripped character is looked up in ``chars``: cost is len(s) x len(chars).
    @_named(name)
    def method(receiver, chars=None):
        if isinstance(chars, str) and len(receiver) * len(chars) > 10**9:
            raise _Fault("limit", f"{name}() with {len(chars)} characters to strip exceeds the search cost limit")
        _guard().spend(len(receiver))
        return fn(receiver, chars)

    return method


def _str_replace(s, old, new, count=-1):
    if not (isinstance(old, str) and isinstance(new, str) and isinstance(count, int)):
        raise TypeError("replace() needs (old: str, new: str, count: int)")
    size = len(s)
    if len(new) > len(old):
        n = s.count(old) if old else len(s) + 1
        if count >= 0:
            n = min(n, count)
        size += n * (len(new) - len(old))
        _guard().check_chars(size)
    _guard().spend(size)
    return s.replace(old, new, count)


def _str_join(sep, items):
    g = _guard()
    g.check_iterable(items, "join")
    seq = list(items)
    total = len(sep) * max(len(seq) - 1, 0)
    for i, x in enumerate(seq):
        if not isinstance(x, str):
            raise TypeError(f"join() item {i} is a {_type_name(x)}, not a string")
        total += len(x)
    g.check_chars(total)
    g.spend(total)
    return sep.join(seq)


def _str_pad(name: str):
    fn = getattr(str, name)

    def method(s, width, *args):
        if not isinstance(width, int):
            raise TypeError(f"{name}() width must be an integer")
        _guard().check_chars(width)
        _guard().spend(max(width, len(s)))
        return fn(s, width, *args)

    return _named(name)(method)


def _str_split(name: str):
    fn = getattr(str, name)

    def method(s, sep=None, maxsplit=-1):
        if not isinstance(maxsplit, int):
            raise TypeError(f"{name}() maxsplit must be an integer")
        if name == "rsplit" and isinstance(sep, str) and len(sep) > 8 and len(s) * len(sep) > 10**8:
            raise _Fault("limit", f"rsplit() on a {len(sep)}-character separator exceeds the search cost limit")
        cap = _guard().limits.items
        _guard().spend(len(s))
        # Ask for at most cap+1 parts: more than cap means the full split is too big, and
        # the check never builds more than the limit.
        parts = fn(s, sep, maxsplit if 0 <= maxsplit <= cap else cap)
        _guard().check_items(len(parts), f"the result of {name}()")
        _guard().spend(len(parts))
        return parts

    return _named(name)(method)


_STR_METHODS: dict[str, Any] = {
    name: _direct(name, getattr(str, name))
    for name in ("startswith", "endswith", "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace",
                 "islower", "isupper", "isnumeric", "isdecimal")
}
_STR_METHODS.update({
    name: _building(name, getattr(str, name))
    for name in ("lower", "upper", "title", "capitalize", "casefold", "swapcase", "removeprefix", "removesuffix",
                 "partition")
})
_STR_METHODS.update({name: _reverse_search(name, getattr(str, name)) for name in ("rfind", "rindex", "rpartition")})
_STR_METHODS.update({name: _strip(name, getattr(str, name)) for name in ("strip", "lstrip", "rstrip")})
_STR_METHODS.update(
    replace=_named("replace")(_str_replace),
    join=_named("join")(_str_join),
    split=_str_split("split"),
    rsplit=_str_split("rsplit"),
    ljust=_str_pad("ljust"),
    rjust=_str_pad("rjust"),
    center=_str_pad("center"),
    zfill=_str_pad("zfill"),
)


@_named("get")
def _dict_get(d, key, default=None):
    return d.get(key, default)


# Lists, not views: views are not JSON values and would keep the dict reachable.
@_named("keys")
def _dict_keys(d):
    _guard().spend(len(d))
    return list(d.keys())


@_named("values")
def _dict_values(d):
    _guard().spend(len(d))
    return list(d.values())


@_named("items")
def _dict_items(d):
    _guard().spend(3 * len(d))  # the list and a pair per item
    return list(d.items())


_DICT_METHODS: dict[str, Any] = {
    "get": _dict_get,
    "keys": _dict_keys,
    "values": _dict_values,
    "items": _dict_items,
}
_SEQ_METHODS: dict[str, Any] = {
    "count": _direct("count", lambda s, *a: s.count(*a)),
    "index": _direct("index", lambda s, *a: s.index(*a)),
}
_METHODS: dict[type, dict[str, Any]] = {str: _STR_METHODS, dict: _DICT_METHODS, list: _SEQ_METHODS,
                                        tuple: _SEQ_METHODS}
METHOD_NAMES: frozenset[str] = frozenset().union(*(m.keys() for m in _METHODS.values()))


# ---------------------------------------------------------------------------------------
# Parsing and static checks

@dataclass(frozen=True)
class ParsedExpression:
    """A parsed, checked expression: ``names`` are the free variables it reads from the state."""

    source: str
    names: frozenset[str]
    text: str  # the source as parsed (stripped); node positions refer to it
    tree: ast.expr
    # True when every node is one whose cost is at most linear in the expression and the
    # data it reads (see _LINEAR_NODES): such expressions skip the evaluator process.
    linear: bool = False

    def __repr__(self) -> str:
        return f"ParsedExpression({self.source!r}, names={sorted(self.names)!r})"


_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift", ast.RShift: "rshift", ast.BitOr: "bitor",
    ast.BitXor: "xor", ast.BitAnd: "and_",
}
_FORBIDDEN_NODES = {
    ast.Lambda: "lambda functions are not allowed",
    ast.NamedExpr: "assignment expressions (:=) are not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
    ast.MatMult: "the @ operator is not allowed",
}
_ALLOWED_NODES = frozenset({
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Attribute, ast.Subscript, ast.Slice, ast.List,
    ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.comprehension,
    ast.Starred, ast.JoinedStr, ast.FormattedValue,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    *_BINOPS,
})


class _Checker:
    """Walks a parsed tree once: refuses what is not allowed and collects the free names."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: set[str] = set()

    def fail(self, node: ast.AST, code: str, reason: str) -> ExpressionError:
        seg = ast.get_source_segment(self.text, node) if hasattr(node, "lineno") else None
        pos = (node.lineno, node.col_offset + 1) if hasattr(node, "lineno") else None
        return ExpressionError(f"{reason} in `{_clip(seg or self.text)}`", code, source=self.text, position=pos)

    def check(self, node: ast.AST, bound: frozenset[str]) -> None:
        t = type(node)
        if t not in _ALLOWED_NODES:
            reason = _FORBIDDEN_NODES.get(t) or f"{t.__name__} is not allowed in expressions"
            raise self.fail(node, "forbidden", reason)
        if t is ast.Constant:
            self._constant(node)
        elif t is ast.Name:
            if not isinstance(node.ctx, ast.Load):
                raise self.fail(node, "forbidden", "assignment is not allowed")
            if node.id not in bound:
                self.names.add(node.id)
        elif t is ast.Call:
            self._call(node, bound)
        elif t is ast.Attribute:
            self._attr_name(node, node.attr)
            self.check(node.value, bound)
        elif t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            self._comprehension(node, bound)
        elif t is ast.FormattedValue:
            self.check(node.value, bound)
            if node.format_spec is not None:
                self.check(node.format_spec, bound)
        elif t is ast.Starred and not isinstance(node.ctx, ast.Load):
            raise self.fail(node, "forbidden", "starred assignment is not allowed")
        else:
            for child in ast.iter_child_nodes(node):
                self.check(child, bound)

    def _constant(self, node: ast.Constant) -> None:
        v = node.value
        if type(v) is int and v.bit_length() > LIMITS.int_bits:
            raise self.fail(node, "limit", f"integer literal exceeds the integer size limit of {LIMITS.int_bits} bits")
        if not (v is None or type(v) in (str, int, float, bool)):
            raise self.fail(node, "forbidden", f"{type(v).__name__} literals are not allowed")

    def _attr_name(self, node: ast.AST, attr: str) -> None:
        if attr.startswith("_"):
            raise self.fail(node, "forbidden",
                            f"access to `{attr}` is not allowed (names starting with '_' are private)")

    def _call(self, node: ast.Call, bound: frozenset[str]) -> None:
        func = node.func
        if type(func) is ast.Name:
            if func.id not in _FUNCTIONS or func.id in bound:
                raise self.fail(node, "forbidden",
                                f"unknown function `{func.id}()`; available functions: {', '.join(sorted(_FUNCTIONS))}")
        elif type(func) is ast.Attribute:
            self._attr_name(func, func.attr)
            if func.attr not in METHOD_NAMES:
                raise self.fail(node, "forbidden",
                                f"method `.{func.attr}()` is not allowed; available methods: "
                                f"{', '.join(sorted(METHOD_NAMES))}")
            self.check(func.value, bound)
        else:
            raise self.fail(node, "forbidden", "only named functions and methods can be called")
        for arg in node.args:
            if type(arg) is ast.Starred:
                raise self.fail(arg, "forbidden", "*arguments are not allowed in calls")
            self.check(arg, bound)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail(kw.value, "forbidden", "**arguments are not allowed in calls")
            self.check(kw.value, bound)

    def _comprehension(self, node: ast.AST, bound: frozenset[str]) -> None:
        inner = bound
        for i, gen in enumerate(node.generators):
            if gen.is_async:
                raise self.fail(node, "forbidden", "async comprehensions are not allowed")
            # The first iterable is evaluated outside the comprehension's scope.
            self.check(gen.iter, bound if i == 0 else inner)
            inner = inner | self._targets(gen.target)
            for cond in gen.ifs:
                self.check(cond, inner)
        if type(node) is ast.DictComp:
            self.check(node.key, inner)
            self.check(node.value, inner)
        else:
            self.check(node.elt, inner)

    def _targets(self, target: ast.AST) -> frozenset[str]:
        if type(target) is ast.Name:
            return frozenset({target.id})
        if type(target) in (ast.Tuple, ast.List):
            out: frozenset[str] = frozenset()
            for elt in target.elts:
                out |= self._targets(elt)
            return out
        raise self.fail(target, "forbidden", "a comprehension can only bind plain names")


@functools.lru_cache(maxsize=4096)
def _parse_cached(source: str) -> ParsedExpression:
    text = source.strip()
    if not text:
        raise ExpressionError("expression is empty", "syntax", source=source)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        line, col, msg = exc.lineno or 1, exc.offset or 0, exc.msg
        if col <= 0:  # Python points nowhere when the input just stops
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
            msg = "unexpected end of expression"
        raise ExpressionError(
            f"syntax error at line {line}, column {col}: {msg} in `{_clip(text)}`",
            "syntax", source=source, position=(line, col),
        ) from None
    except (ValueError, TypeError) as exc:  # e.g. null bytes
        raise ExpressionError(f"syntax error: {exc}", "syntax", source=source) from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"expression nests too deeply (the limit is {MAX_DEPTH} levels)", "limit",
                              source=source) from None
    # Depth first and without recursion: the checker and evaluator below recurse.
    stack = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression nests deeper than the limit of {MAX_DEPTH} levels", "limit",
                                  source=source)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    checker = _Checker(text)
    checker.check(tree.body, frozenset())
    return ParsedExpression(source=source, names=frozenset(checker.names), text=text, tree=tree.body,
                            linear=_is_linear(tree.body))


# Reads, comparisons, boolean logic, plain arithmetic (each bounded by a one-line check on
# its operands) and calls that cannot allocate more than their input. An expression made
# only of these costs O(len(expression) x size of what it reads) in time and memory, so it
# cannot exhaust anything even if a check were wrong. Everything else (**, <<,
# comprehensions, f-strings, growing methods, functions that build collections) goes to
# the evaluator process when isolation is on.
_LINEAR_NODES = frozenset({
    ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Slice, ast.Compare, ast.BoolOp,
    ast.UnaryOp, ast.IfExp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.BinOp, ast.Call, ast.keyword,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
})
_LINEAR_FUNCTIONS = frozenset({"len", "bool", "abs", "float"})
_LINEAR_METHODS = frozenset({
    "get", "keys", "values", "items", "lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith",
    "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace", "removeprefix", "removesuffix",
})


def _is_linear(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if type(node) not in _LINEAR_NODES:
            return False
        if type(node) is ast.Call:
            func = node.func
            name = func.id if type(func) is ast.Name else func.attr
            if name not in (_LINEAR_FUNCTIONS if type(func) is ast.Name else _LINEAR_METHODS):
                return False
        elif type(node) is ast.Dict and None in node.keys:
            return False
    return True


def parse_expression(source: str) -> ParsedExpression:
    """Parse ``source`` and check that it is allowed, without evaluating it (cached).

    Returns a :class:`ParsedExpression` whose ``names`` are the variables it reads
    (calls of whitelisted functions and comprehension variables excluded).
    Raises :class:`ExpressionError`: "syntax" (with the position), "limit" (longer than
    ``MAX_SOURCE_CHARS``, nested deeper than ``MAX_DEPTH``, an integer literal over the
    bit limit) or "forbidden" (private ``_`` attributes, lambda, ``:=``, calls of anything
    but ``FUNCTION_NAMES`` and ``METHOD_NAMES``, ``*``/``**`` arguments).
    Grammar: a Python expression (``ast.parse(mode="eval")``) as simpleeval evaluates it,
    narrowed to a whitelist of node types.
    """
    if not isinstance(source, str):
        raise ExpressionError(f"an expression must be a string, not {type(source).__name__}", "type")
    if len(source) > MAX_SOURCE_CHARS:
        raise ExpressionError(
            f"expression is {len(source)} characters long; the limit is {MAX_SOURCE_CHARS}", "limit",
            source=source[:200],
        )
    return _parse_cached(source)


# ---------------------------------------------------------------------------------------
# Run-state snapshot: a deep copy of what the expression reads, JSON values only.

class _BadValue(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason, self.path = code, reason, ""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy_value(value: Any, depth: int = 0) -> Any:
    t = type(value)
    if t in _SCALARS:
        return value
    if depth >= MAX_VALUE_DEPTH:
        raise _BadValue("limit", f"nests deeper than {MAX_VALUE_DEPTH} levels")
    key = None
    try:
        if t is dict:
            out = {}
            for key, v in value.items():
                out[_copy_key(key)] = _copy_value(v, depth + 1)
            return out
        if t is list or t is tuple:
            out_list = []
            for key in range(len(value)):  # the index names the path if a value is refused
                out_list.append(_copy_value(value[key], depth + 1))
            return out_list if t is list else tuple(out_list)
    except _BadValue as exc:
        exc.path = f"[{key!r}]{exc.path}"
        raise
    # Subclasses become the plain type: a defaultdict would grow on a missing key, a str
    # subclass could carry methods of its own.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return _copy_value(dict(value.items()), depth)
    if isinstance(value, (list, tuple)):
        return _copy_value(list(value) if isinstance(value, list) else tuple(value), depth)
    raise _BadValue("type", f"is a {type(value).__name__}; expressions read only JSON values "
                            "(dict, list, string, number, boolean, None)")


def _copy_key(key: Any) -> Any:
    if type(key) in _SCALARS:
        return key
    if isinstance(key, (str, int, float)):
        return _copy_value(key)
    raise _BadValue("type", f"has a key of type {type(key).__name__}; only strings and numbers can be keys")


def _snapshot(wanted: frozenset[str], names: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Copy the variables an expression reads; missing ones are left for the evaluator to report."""
    state: dict[str, Any] = {}
    for name in wanted:
        if name in names:
            try:
                state[name] = _copy_value(names[name])
            except _BadValue as exc:
                raise ExpressionError(f"variable `{name}{exc.path}` {exc.reason}", exc.code, source=source,
                                      name=name) from None
            except RecursionError:
                raise ExpressionError(f"variable `{name}` nests too deeply", "limit", source=source) from None
    return state


# ---------------------------------------------------------------------------------------
# The evaluator

# [[fill]align][sign][z][#][0][width][grouping][.precision][type], as in the format mini-language.
_FORMAT_SPEC = re.compile(r"(?:.?[<>^=])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[bcdeEfFgGnosxX%]?", re.S)


def _check_format_spec(spec: str) -> None:
    # Width and precision are what can make format() allocate: f"{1:>1000000000}".
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None:
        raise _Fault("forbidden", f"format spec {spec!r} is not allowed")
    width, precision = match.groups()
    if len(width) > 3 or len(precision or "") > 3:
        raise _Fault("limit", f"format spec {spec!r} asks for a width or precision over 999")


class _Evaluator(SimpleEval):
    """simpleeval's tree walker with our node set, names, calls, operators and checks."""

    # simpleeval's _eval_compare and _eval_unaryop look operators up here.
    operators = {
        ast.Eq: op.eq, ast.NotEq: op.ne, ast.Lt: op.lt, ast.LtE: op.le, ast.Gt: op.gt, ast.GtE: op.ge,
        ast.Is: op.is_, ast.IsNot: op.is_not, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
        ast.Not: op.not_, ast.USub: op.neg, ast.UAdd: op.pos, ast.Invert: op.invert,
    }
    functions: dict[str, Any] = {}
    allowed_attrs = None
    ATTR_INDEX_FALLBACK = False

    def __init__(self, parsed: ParsedExpression, names: dict[str, Any], guard: _Guard) -> None:
        # Deliberately not SimpleEval.__init__: it enters warnings.catch_warnings(), which
        # is not thread-safe, and builds per-instance tables on every call.
        self.expr = parsed.text
        self.names = names
        self.guard = guard
        self.scopes: list[dict[str, Any]] = []
        self.binops = {
            ast.Add: guard.add, ast.Sub: guard.sub, ast.Mult: guard.mul, ast.Div: op.truediv,
            ast.FloorDiv: op.floordiv, ast.Mod: guard.mod, ast.Pow: guard.pow, ast.LShift: guard.lshift,
            ast.RShift: op.rshift, ast.BitOr: guard.bitor, ast.BitXor: op.xor, ast.BitAnd: op.and_,
        }

    def __del__(self) -> None:  # SimpleEval.__del__ clears a table we never build
        pass

    def _eval(self, node: ast.AST) -> Any:
        try:
            if time.monotonic() > self.guard.deadline:
                self.guard.check_time()
            return _HANDLERS[type(node)](self, node)
        except ExpressionError:
            raise
        except Exception as exc:  # the innermost node reports, with its own source text
            raise self._error(exc, node) from None

    def _error(self, exc: Exception, node: ast.AST) -> ExpressionError:
        name = None
        whole = False
        if isinstance(exc, _Fault):
            code, reason, name, whole = exc.code, exc.reason, exc.name, exc.whole
        elif isinstance(exc, ZeroDivisionError):
            code, reason = "error", "division by zero"
        elif isinstance(exc, KeyError):
            code, reason = "error", f"key {exc.args[0]!r} not found" if exc.args else "key not found"
        elif isinstance(exc, IndexError):
            code, reason = "error", str(exc) or "index out of range"
        elif isinstance(exc, TypeError):
            code, reason = "type", str(exc)
        elif isinstance(exc, OverflowError):
            code, reason = "limit", f"number too large ({exc})"
        elif isinstance(exc, RecursionError):
            code, reason = "limit", "nests too deeply"
        elif isinstance(exc, MemoryError):
            code, reason = "memory", "ran out of memory"
        elif isinstance(exc, NameNotDefined):
            code, reason, name = "unknown_name", f"unknown variable `{exc.name}`", exc.name
        elif isinstance(exc, FeatureNotAvailable):
            code, reason = "forbidden", str(exc)
        elif isinstance(exc, (ValueError, InvalidExpression)):
            code, reason = "error", str(exc)
        else:
            code, reason = "error", f"{type(exc).__name__}: {exc}"
        if code == "unknown_name":
            return ExpressionError(reason, code, source=self.expr, name=name)
        seg = self.expr if whole else (ast.get_source_segment(self.expr, node) or self.expr)
        prefix = "expression " if reason.startswith(("exceeds", "took")) else ""
        return ExpressionError(f"{prefix}{reason} in `{_clip(seg)}`", code, source=self.expr, name=name)

    # -- names, attributes, subscripts, calls -------------------------------------------
    def _eval_name(self, node: ast.Name) -> Any:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        try:
            return self.names[node.id]
        except KeyError:
            raise _Fault("unknown_name", f"unknown variable `{node.id}`", name=node.id) from None

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        # Attribute syntax outside a call reads a dict key: `order.total` is order["total"].
        value = self._eval(node.value)
        if type(value) is dict:
            try:
                return value[node.attr]
            except KeyError:
                raise _Fault("error", f"`{_clip(ast.get_source_segment(self.expr, node.value) or '')}` "
                                      f"has no key {node.attr!r}") from None
        if node.attr in _METHODS.get(type(value), ()):
            raise _Fault("forbidden", f"`.{node.attr}` is a method; call it as `.{node.attr}(...)`")
        raise _Fault("type", f"a {_type_name(value)} has no readable attributes; "
                                  f"`.{node.attr}` reads dict keys only")

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self._eval(node.value)
        key = self._eval(node.slice)
        if type(container) not in (dict, list, tuple, str, range):
            raise _Fault("type", f"a {_type_name(container)} cannot be indexed")
        if type(key) is slice:  # a slice is a copy
            self.guard.spend(len(range(*key.indices(len(container)))))
        return container[key]

    def _eval_call(self, node: ast.Call) -> Any:
        func = node.func
        if type(func) is ast.Name:
            fn = _FUNCTIONS[func.id]
            args = [self._eval(a) for a in node.args]
        else:
            receiver = self._eval(func.value)
            fn = _METHODS.get(type(receiver), {}).get(func.attr)
            if fn is None:
                raise _Fault("forbidden", f"`.{func.attr}()` is not available on a {_type_name(receiver)}")
            args = [receiver, *(self._eval(a) for a in node.args)]
        kwargs = {k.arg: self._eval(k.value) for k in node.keywords}
        return fn(*args, **kwargs)

    # -- operators ---------------------------------------------------------------------
    def _eval_binop(self, node: ast.BinOp) -> Any:
        return self.binops[type(node.op)](self._eval(node.left), self._eval(node.right))

    # -- literals ----------------------------------------------------------------------
    def _build(self, elts: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        cells = 0
        for item in elts:
            if type(item) is ast.Starred:
                value = self._eval(item.value)
                self.guard.check_iterable(value, "*")
                cells += self.guard.measure(value)[0] - 1
                self.guard.check_items(cells, "the literal", True)
                out.extend(value)
            else:
                value = self._eval(item)
                cells += self.guard.measure(value)[0]
                self.guard.check_items(cells, "the literal", True)
                out.append(value)
        self.guard.spend(len(out))
        return out

    def _eval_list(self, node: ast.List) -> list:
        return self._build(node.elts)

    def _eval_tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._build(node.elts))

    def _eval_set(self, node: ast.Set) -> set:
        return set(self._build(node.elts))

    def _eval_dict(self, node: ast.Dict) -> dict:
        out: dict[Any, Any] = {}
        cells = 0
        for key, value_node in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                value = self._eval(value_node)
                if type(value) is not dict:
                    raise _Fault("type", f"** needs a dict, not a {_type_name(value)}")
                cells += self.guard.measure(value)[0] - 1
                self.guard.check_items(cells, "the dict", True)
                out.update(value)
            else:
                k = self._eval(key)
                value = self._eval(value_node)
                cells += self.guard.measure(k)[0] + self.guard.measure(value)[0]
                self.guard.check_items(cells, "the dict", True)
                out[k] = value
        self.guard.spend(len(out))
        return out

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        parts: list[str] = []
        total = 0
        for item in node.values:
            if type(item) is ast.Constant:
                text = item.value
            else:
                text = self._eval_formattedvalue(item)
            total += len(text)
            self.guard.check_chars(total)
            parts.append(text)
        self.guard.spend(total)
        return "".join(parts)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> str:
        value = self._eval(node.value)
        if node.conversion in (114, 97):  # !r, !a
            self.guard.check_chars(self.guard.measure(value)[1])
            value = repr(value) if node.conversion == 114 else ascii(value)
        elif node.conversion == 115:  # !s
            value = self.guard.text(value)
        if node.format_spec is not None:
            spec = self._eval(node.format_spec)
            _check_format_spec(spec)
            if type(value) is not str:
                self.guard.check_chars(self.guard.measure(value)[1])
            out = format(value, spec)
            self.guard.spend(len(out))
            return out
        return self.guard.text(value)

    # -- comprehensions ----------------------------------------------------------------
    def _eval_comprehension(self, node: ast.AST) -> Any:
        kind = type(node)
        out: Any = {} if kind is ast.DictComp else set() if kind is ast.SetComp else []
        guard = self.guard
        cells = [0]
        scope: dict[str, Any] = {}
        generators = node.generators

        def bind(target: ast.AST, value: Any) -> None:
            if type(target) is ast.Name:
                scope[target.id] = value
                return
            values = list(value) if type(value) in (list, tuple) else None
            if values is None or len(values) != len(target.elts):
                raise _Fault("type", f"cannot unpack a {_type_name(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, values, strict=True):
                bind(t, v)

        def run(level: int) -> None:
            gen = generators[level]
            iterable = self._eval(gen.iter)
            if type(iterable) not in (list, tuple, dict, str, range, set):
                raise _Fault("type", f"cannot iterate over a {_type_name(iterable)}")
            for item in iterable:
                guard.step()
                guard.spend(1)
                bind(gen.target, item)
                if not all(self._eval(cond) for cond in gen.ifs):
                    continue
                if level + 1 < len(generators):
                    run(level + 1)
                elif kind is ast.DictComp:
                    k, v = self._eval(node.key), self._eval(node.value)
                    cells[0] += guard.measure(k)[0] + guard.measure(v)[0]
                    guard.check_items(cells[0], "the comprehension", True)
                    out[k] = v
                else:
                    v = self._eval(node.elt)
                    cells[0] += guard.measure(v)[0]
                    guard.check_items(cells[0], "the comprehension", True)
                    if kind is ast.SetComp:
                        out.add(v)
                    else:
                        out.append(v)

        self.scopes.append(scope)
        try:
            run(0)
        finally:
            self.scopes.pop()
        return out


_HANDLERS = {
    ast.Constant: lambda self, node: SimpleEval._eval_constant(node),  # a staticmethod upstream
    ast.Name: _Evaluator._eval_name,
    ast.UnaryOp: SimpleEval._eval_unaryop,
    ast.BinOp: _Evaluator._eval_binop,
    ast.BoolOp: SimpleEval._eval_boolop,
    ast.Compare: SimpleEval._eval_compare,
    ast.IfExp: SimpleEval._eval_ifexp,
    ast.Call: _Evaluator._eval_call,
    ast.Subscript: _Evaluator._eval_subscript,
    ast.Attribute: _Evaluator._eval_attribute,
    ast.Slice: SimpleEval._eval_slice,
    ast.List: _Evaluator._eval_list,
    ast.Tuple: _Evaluator._eval_tuple,
    ast.Set: _Evaluator._eval_set,
    ast.Dict: _Evaluator._eval_dict,
    ast.JoinedStr: _Evaluator._eval_joinedstr,
    ast.FormattedValue: _Evaluator._eval_formattedvalue,
    ast.ListComp: _Evaluator._eval_comprehension,
    ast.SetComp: _Evaluator._eval_comprehension,
    ast.GeneratorExp: _Evaluator._eval_comprehension,
    ast.DictComp: _Evaluator._eval_comprehension,
}


def _evaluate_inline(source: str, state: dict[str, Any], limits: Limits) -> Any:
    """Evaluate in this thread; ``state`` must already be a private snapshot."""
    parsed = parse_expression(source)
    guard = _Guard(limits)
    token = _GUARD.set(guard)
    try:
        try:
            value = _Evaluator(parsed, state, guard)._eval(parsed.tree)
        except RecursionError:
            raise ExpressionError(f"expression nests too deeply in `{_clip(parsed.text)}`", "limit",
                                  source=parsed.text) from None
        if type(value) is range:  # a JSON-ish result; the range was bounded when built
            value = list(value)
        return value
    finally:
        _GUARD.reset(token)


# ---------------------------------------------------------------------------------------
# Settings

def _setting(name: str, default: Any) -> Any:
    try:
        from django.conf import settings

        return getattr(settings, name, default)
    except Exception:  # Django absent or not configured: module defaults
        return default


def _isolation() -> str:
    mode = _setting("BALLAST_EXPRESSION_ISOLATION", "process")
    if mode not in ("process", "inline"):
        raise ExpressionError(f"BALLAST_EXPRESSION_ISOLATION must be 'process' or 'inline', not {mode!r}")
    return mode


def _limits(base: Limits = LIMITS) -> Limits:
    timeout = float(_setting("BALLAST_EXPRESSION_TIMEOUT", base.timeout))
    if not 0 < timeout < 3600:
        raise ExpressionError(f"BALLAST_EXPRESSION_TIMEOUT must be a number of seconds above 0, not {timeout!r}")
    return base if timeout == base.timeout else Limits(**{**asdict(base), "timeout": timeout})


# ---------------------------------------------------------------------------------------
# The guarded evaluator process: the hard backstop on time and memory.
#
# A long-lived child (fresh interpreter, so no locks inherited from a threaded parent)
# evaluates one request at a time under RLIMIT_AS and a per-request RLIMIT_CPU. The
# parent waits at most timeout + HARD_KILL_GRACE, then SIGKILLs it; the next call starts
# a new one. Each process (web server, each forked django-q2 worker) starts its own pool
# lazily and drops an inherited one after fork.

_HEADER = struct.Struct("!I")
_SPIN_SECONDS = 0.0002
_EXIT_MEMORY = 3
_SAFE_GLOBALS = {("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
                 ("builtins", "range"): range}


class _ResultUnpickler(pickle.Unpickler):
    # The child ran hostile input: accept plain data only, never a reference to code.
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"result refers to {module}.{name}") from None


class _WorkerDied(Exception):
    pass


class _Worker:
    """One evaluator child process and its pipes."""

    def __init__(self, memory_mb: int) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                f"from runs.expressions import _child_main; _child_main({int(memory_mb)})")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                bufsize=0, close_fds=True,
            )
        except OSError as exc:
            raise ExpressionError(f"the isolated expression evaluator could not start: {exc}") from None
        self.rfd = self.proc.stdout.fileno()
        self.wfd = self.proc.stdin.fileno()
        try:
            ready = self._read(time.monotonic() + 30)
        except (_WorkerDied, TimeoutError, OSError, pickle.UnpicklingError, EOFError) as exc:
            self.kill()
            raise ExpressionError(f"the isolated expression evaluator could not start: {exc!r}") from None
        if ready != ("ready",):
            self.kill()
            raise ExpressionError("the isolated expression evaluator could not start")

    def request(self, payload: tuple, timeout: float) -> tuple:
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]
        return self._read(time.monotonic() + timeout)

    def _read(self, deadline: float) -> tuple:
        header = self._read_exact(_HEADER.size, deadline)
        body = self._read_exact(_HEADER.unpack(header)[0], deadline)
        return _ResultUnpickler(io.BytesIO(body)).load()

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        poller = select.poll()
        poller.register(self.rfd, select.POLLIN | select.POLLHUP | select.POLLERR)
        # Most replies come within tens of microseconds; polling without sleeping for a
        # moment saves the scheduler wake-up (~40 us measured) that a blocking wait costs.
        spin_until = time.monotonic() + _SPIN_SECONDS
        while not poller.poll(0) and time.monotonic() < spin_until:
            pass
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                raise TimeoutError
            chunk = os.read(self.rfd, min(n - got, 1 << 20))
            if not chunk:
                raise _WorkerDied("the evaluator process exited")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def kill(self) -> int | None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        return code

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


class _Pool:
    """Evaluator processes of this OS process: at most ``size`` at once, started on demand."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.live: set[_Worker] = set()
        self.starting = 0

    def run(self, payload: tuple, timeout: float, source: str) -> Any:
        what = "template" if payload[0] == "template" else "expression"
        stopped = f"{what} took longer than the time limit of {timeout:g} s and was stopped in `{_clip(source)}`"
        worker = self._acquire()
        healthy = False
        try:
            try:
                reply = worker.request(payload, timeout + HARD_KILL_GRACE)
            except TimeoutError:
                worker.kill()
                raise ExpressionError(stopped, "timeout", source=source) from None
            except (_WorkerDied, OSError, pickle.UnpicklingError, EOFError) as exc:
                code = worker.kill()
                if code in (_EXIT_MEMORY, -9):
                    raise ExpressionError(f"{what} ran out of memory in `{_clip(source)}`", "memory",
                                          source=source) from None
                if code == -24:  # SIGXCPU: the child's own CPU-time backstop
                    raise ExpressionError(stopped, "timeout", source=source) from None
                raise ExpressionError(f"the isolated evaluator failed ({exc!r}) on `{_clip(source)}`",
                                      source=source) from None
            if reply[0] == "ok":
                healthy = True
                return reply[1]
            _, code, message, position, name = reply
            # After a MemoryError the child exits; anything else leaves it reusable.
            healthy = code != "memory"
            if not healthy:
                worker.kill()
            raise ExpressionError(message, code, source=payload[1], position=position, name=name)
        finally:
            self._release(worker, healthy)

    def _take_idle(self) -> _Worker | None:
        # Caller holds self.cond. A worker that died while idle (killed from outside) is dropped.
        while self.idle:
            worker = self.idle.pop()
            if worker.proc.poll() is None:
                return worker
            self.live.discard(worker)
            worker.close()
        return None

    def _acquire(self) -> _Worker:
        with self.cond:
            worker = self._take_idle()
        if worker is not None:
            return worker
        size = max(1, int(_setting("BALLAST_EXPRESSION_WORKERS", 2)))
        with self.cond:
            while True:
                worker = self._take_idle()
                if worker is not None:
                    return worker
                if len(self.live) + self.starting < size:
                    break
                self.cond.wait()
            self.starting += 1
        try:
            worker = _Worker(int(_setting("BALLAST_EXPRESSION_MEMORY_MB", 512)))
        except BaseException:
            with self.cond:
                self.starting -= 1
                self.cond.notify()
            raise
        with self.cond:
            self.starting -= 1
            self.live.add(worker)
        return worker

    def _release(self, worker: _Worker, healthy: bool) -> None:
        with self.cond:
            if healthy:
                self.idle.append(worker)
            else:
                self.live.discard(worker)
                if worker.proc.returncode is None:
                    worker.kill()
            self.cond.notify()

    def shutdown(self) -> None:
        with self.cond:
            workers, self.idle, self.live = list(self.live), [], set()
        for w in workers:
            w.kill()

    def forget(self) -> None:
        """After fork: the children belong to the parent; drop our copies of their pipes."""
        for w in list(self.live):
            w.close()
            w.proc.returncode = 0  # never wait() on another process's child
        self.idle, self.live = [], set()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    pool = _POOL
    if pool is None or pool.pid != os.getpid():
        with _POOL_LOCK:
            if _POOL is None or _POOL.pid != os.getpid():
                _POOL = _Pool()
            pool = _POOL
    return pool


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    # A lock held by another thread at fork time would stay locked forever here.
    _POOL_LOCK = threading.Lock()
    if _POOL is not None:
        _POOL.forget()
    _POOL = None


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown_pool() -> None:
    if _POOL is not None and _POOL.pid == os.getpid():
        _POOL.shutdown()


def _run_isolated(kind: str, source: str, state: dict[str, Any], limits: Limits) -> Any:
    return _pool().run((kind, source, state, vars(limits)), limits.timeout, source)


def _child_main(memory_mb: int) -> None:
    """Entry point of the evaluator process: read requests on stdin, answer on stdout."""
    import resource
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent to handle
    rfd, wfd = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    sys.stdout = sys.stderr  # nothing may write into the reply pipe by accident
    try:
        from runs import templating  # noqa: F401  (import before the memory limit)
    except Exception:
        pass
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def read_exact(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = os.read(rfd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def send(reply: tuple) -> None:
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            data = pickle.dumps(("err", "type", f"the result cannot be returned: {exc}", None, None))
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(wfd, view):]

    send(("ready",))
    while True:
        header = read_exact(_HEADER.size)
        if header is None:
            os._exit(0)  # parent gone
        body = read_exact(_HEADER.unpack(header)[0])
        if body is None:
            os._exit(0)
        source = ""
        try:
            kind, source, state, limits = pickle.loads(body)
            limits = Limits(**limits)
            # If the parent is gone and cannot kill us, CPU time still ends a runaway.
            used = resource.getrusage(resource.RUSAGE_SELF)
            cpu = int(used.ru_utime + used.ru_stime + limits.timeout + HARD_KILL_GRACE) + 2
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
            if kind == "expr":
                value = _evaluate_inline(source, state, limits)
            else:
                from runs.templating import _render_inline

                value = _render_inline(source, state, limits)
            send(("ok", value))
        except MemoryError:
            try:
                send(("err", "memory", f"ran out of memory in `{_clip(source)}`", None, None))
            finally:
                os._exit(_EXIT_MEMORY)
        except ExpressionError as exc:
            send(("err", exc.code, exc.message, exc.position, exc.name))
        except BaseException as exc:  # keep serving; report what happened
            send(("err", "error", f"{type(exc).__name__}: {exc}", None, None))
        finally:
            state = value = None  # drop the request's data before waiting for the next one


# ---------------------------------------------------------------------------------------
# Public entry point

def _known_names_hint(names: Mapping[str, Any]) -> str:
    keys = sorted(k for k in names.keys() if isinstance(k, str))
    if not keys:
        return "the run state is empty"
    shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
    return f"known variables: {shown}"


def evaluate(source: str, names: Mapping[str, Any]) -> Any:
    """Evaluate the expression ``source`` against the run state ``names``; return its value.

    The expression sees a deep copy of the variables it reads (JSON values only: dict,
    list, str, int, float, bool, None; tuples allowed), never the caller's objects, and
    has no mutating method at all. ``order.total`` reads the dict key ``order["total"]``.
    Functions: ``FUNCTION_NAMES``; methods: ``METHOD_NAMES`` (str, dict, list/tuple).
    Operations that could build a large value are refused before they run (see
    :class:`Limits`); the wall time is bounded by ``BALLAST_EXPRESSION_TIMEOUT``
    (default 0.5 s). With ``BALLAST_EXPRESSION_ISOLATION = "process"`` (the default) any
    expression that is not ``parsed.linear`` (reads, comparisons, boolean logic, plain
    arithmetic: cost linear in its size and input, evaluated here) runs in a long-lived
    guarded child process (``BALLAST_EXPRESSION_MEMORY_MB``, default 512, of address
    space), killed and restarted on overrun; ``"inline"`` evaluates everything here.
    Raises :class:`ExpressionError` (codes: see the class). Rules: simpleeval 1.0.8's
    evaluator with a narrowed node set; limits per TRAPS.md "simpleeval blocks code
    execution, not resource exhaustion".
    """
    parsed = parse_expression(source)
    state = _snapshot(parsed.names, names, source)
    limits = _limits()
    try:
        if not parsed.linear and _isolation() == "process":
            return _run_isolated("expr", source, state, limits)
        return _evaluate_inline(source, state, limits)
    except ExpressionError as exc:
        if exc.code == "unknown_name" and exc.name is not None:
            raise ExpressionError(f"unknown variable `{exc.name}` in `{_clip(parsed.text)}`; "
                                  f"{_known_names_hint(names)}", "unknown_name", source=source,
                                  name=exc.name) from None
        raise
