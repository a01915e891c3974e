"""The bounded Jinja2 environment templates render in: immutable sandbox, whitelisted filters, guarded hooks."""
from __future__ import annotations

import functools
import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jinja2 import StrictUndefined
from jinja2.filters import do_round, do_sum
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from runs.sandbox.errors import Fault
from runs.sandbox.guard import current_guard, range_item_bytes, seq_bytes
from runs.sandbox.whitelist import DICT_METHODS, SEQ_METHODS, STR_METHODS, fn_range, str_join, str_replace

__all__ = ["COMPARE_HOOK", "CONCAT_HOOK", "ENV", "GLOBAL_NAMES", "JINJA_COMPARISONS", "LOOP_HOOK",
           "BoundedEnvironment"]

# Environment attributes a template's parsed tree is rewritten to call (runs.sandbox.templating):
# around every for-loop iterable, instead of the ~ operator, and instead of comparisons
# (the sandbox intercepts arithmetic operators only, and == or `in` over large values
# cannot be interrupted once inside C).
LOOP_HOOK = "ballast_loop"
CONCAT_HOOK = "ballast_concat"
COMPARE_HOOK = "ballast_compare"

# Jinja's comparison operator names (nodes.Operand.op) in Python's spelling (Guard.compare).
JINJA_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "lteq": "<=", "gt": ">", "gteq": ">=", "in": "in",
                     "notin": "not in"}


class _BoundMethod:
    """A whitelisted method bound to its receiver; its fields are private to the sandbox."""

    __slots__ = ("_fn", "_obj", "_name")

    def __init__(self, fn: Callable[..., Any], obj: Any, name: str) -> None:
        self._fn, self._obj, self._name = fn, obj, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(self._obj, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {self._name}>"


def _method_table(obj: Any) -> dict[str, Callable[..., Any]] | None:
    if isinstance(obj, str):
        return STR_METHODS
    if isinstance(obj, dict):
        return DICT_METHODS
    if isinstance(obj, (list, tuple)):
        return SEQ_METHODS
    if isinstance(obj, (int, float)):
        return {}
    return None


def _finalize(value: Any) -> Any:
    # Every {{ }} goes through here before str(): refuse text that would be too long
    # (['x' * 100000] * 1000 is 1001 items but 100 million characters).
    if type(value) is not str:
        g = current_guard()
        size = g.text_size(value)
        g.check_chars(size)
        g.alloc(49 + size, "its text")
    return value


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment whose operators, attributes, calls and loops are bounded by the current guard.

    Hooks used (jinja2 sandbox docs): ``intercepted_binops``/``call_binop``, ``getattr``,
    ``getitem``, ``call``; plus :data:`LOOP_HOOK` and :data:`CONCAT_HOOK`, which the
    parsed tree is rewritten to call. Checks raise :class:`~runs.sandbox.errors.Fault`.
    """

    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """``+ * ** %`` through the guard's checked operators (the time is checked first)."""
        g = current_guard()
        g.check_time()
        if operator == "+":
            return g.add(left, right)
        if operator == "*":
            return g.mul(left, right)
        if operator == "**":
            return g.pow(left, right)
        return g.mod(left, right)

    def getattr(self, obj: Any, attribute: str) -> Any | Undefined:
        """On run-state values: the dict key, else a whitelisted method, else undefined (unsafe if private)."""
        table = _method_table(obj)
        if table is None:  # Jinja's own objects (loop, cycler, namespace, Undefined ...)
            return super().getattr(obj, attribute)
        if attribute.startswith("_"):
            return self.unsafe_undefined(obj, attribute)
        # Data first: run state is JSON, and `order.items` should be the key, not dict.items.
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        fn = table.get(attribute)
        if fn is not None:
            return _BoundMethod(fn, obj, attribute)
        if hasattr(type(obj), attribute):  # str.format, list.append ...: not whitelisted
            return self.unsafe_undefined(obj, attribute)
        return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj: Any, argument: str | Any) -> Any | Undefined:
        """On run-state values: ``obj[argument]``, falling back to :meth:`getattr` for a string."""
        if _method_table(obj) is None:
            return super().getitem(obj, argument)
        try:
            return obj[argument]
        except (TypeError, LookupError):
            pass
        if isinstance(argument, str):  # Jinja falls back from item to attribute
            return self.getattr(obj, argument)
        return self.undefined(obj=obj, name=argument)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's own signature)
        """Every call in a template is one guarded step ("loop steps and calls")."""
        current_guard().step(what="loop steps and calls")
        return super().call(__context, __obj, *args, **kwargs)

    def ballast_loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """:data:`LOOP_HOOK`: yields the items of a for-loop, one guarded step each."""
        g = current_guard()
        item_bytes = range_item_bytes(iterable)  # a range makes each item as it goes
        for item in iterable:
            g.step(what="loop steps and calls")
            if item_bytes:
                g.alloc(item_bytes, "the loop variable")
            yield item

    def ballast_concat(self, *parts: Any) -> str:
        """:data:`CONCAT_HOOK`: ``a ~ b ~ ...``, each part's text and the total size checked first."""
        g = current_guard()
        total = 0
        out = []
        for part in parts:
            text = g.text(part)
            total += len(text)
            g.check_chars(total)
            out.append(text)
        g.alloc_str(total, *out)
        return "".join(out)

    def ballast_compare(self, first: Any, *rest: Any) -> Any:
        """:data:`COMPARE_HOOK`: ``first op1 second op2 third ...`` (operator names of :data:`JINJA_COMPARISONS`
        alternating with operands), chained like Python, each comparison's cost checked first (Guard.compare)."""
        g = current_guard()
        left, result = first, True
        for i in range(0, len(rest), 2):
            right = rest[i + 1]
            result = g.compare(JINJA_COMPARISONS[rest[i]], left, right)
            if not result:
                break
            left = right
        return result


# ---------------------------------------------------------------------------------------
# Filters

def _stringifies(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Filters that str() their input: refuse input whose text would be too long."""

    value_at = 0 if getattr(fn, "jinja_pass_arg", None) is None else 1  # after env/context, if passed

    @functools.wraps(fn)  # keeps jinja_pass_arg
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _finalize(args[value_at])
        return fn(*args, **kwargs)

    return wrapper


def _case_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    """lower, upper, title, capitalize, urlencode: the output is at least the input's size and can
    be several times it ('ß'|upper is 'SS', urlencode writes %XX per UTF-8 byte), so the
    input's text is bounded by the string limit first and the output checked after."""

    @functools.wraps(fn)
    def wrapper(value: Any, *args: Any, **kwargs: Any) -> Any:
        g = current_guard()
        g.check_chars(len(value) if type(value) is str else g.text_size(value))
        out = fn(value, *args, **kwargs)
        g.check_chars(len(out))
        g.alloc(sys.getsizeof(out), "the filtered text")
        return out

    return wrapper


def _sorting(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """sort, dictsort, unique, groupby, min, max: the comparisons are one C call, so their cost is
    checked first (Guard.check_sort); case-insensitive ones lowercase every string."""
    value_at = 0 if getattr(fn, "jinja_pass_arg", None) is None else 1

    @functools.wraps(fn)  # keeps jinja_pass_arg
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        g = current_guard()
        value = args[value_at]
        if isinstance(value, (str, list, tuple, dict, range, set)):
            g.check_sort(value, name)
            g.alloc(seq_bytes(len(value)), f"the result of {name}")
            if not kwargs.get("case_sensitive", False):
                g.alloc(g.text_size(value), f"the lowercased keys of {name}")
        return fn(*args, **kwargs)

    return wrapper


def _comparing_test(name: str) -> Callable[..., Any]:
    # The tests ==, in, lt ... (also used by select/reject) compare inside one C call too.
    op = {"==": "==", "eq": "==", "equalto": "==", "!=": "!=", "ne": "!=", "<": "<", "lt": "<", "lessthan": "<",
          "<=": "<=", "le": "<=", ">": ">", "gt": ">", "greaterthan": ">", ">=": ">=", "ge": ">=", "in": "in"}[name]

    def test(value: Any, other: Any) -> bool:
        return bool(current_guard().compare(op, value, other))

    test.__name__ = f"test_{name}"
    return test


_COMPARING_TESTS = ("==", "eq", "equalto", "!=", "ne", "<", "lt", "lessthan", "<=", "le", ">", "gt", "greaterthan",
                    ">=", "ge", "in")


def _bounded_list(value: Any, what: str) -> list[Any]:
    """Materialise a filter's input; other filters' generators are cut off past the limit."""
    g = current_guard()
    if isinstance(value, (str, list, tuple, dict, range, set)):
        g.check_iterable(value, what)
        g.alloc(seq_bytes(len(value)) + len(value) * range_item_bytes(value), f"the input of {what}")
        return list(value)
    try:
        items = list(itertools.islice(iter(value), g.limits.items + 1))
    except TypeError:
        raise Fault("type", f"{what} needs a list, not a {type(value).__name__}") from None
    g.check_items(len(items), f"the input of {what}")
    # A generator (map over a range) made its items as it went: count what they hold.
    g.alloc(seq_bytes(len(items)) + g.bytes_of(items), f"the input of {what}")
    return items


def _copying_filter(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """list, reverse: a new list of the input's items (a generator's cut off past the limit)."""

    value_at = 0 if getattr(fn, "jinja_pass_arg", None) is None else 1  # after env/context, if passed

    @functools.wraps(fn)  # keeps jinja_pass_arg
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = (*args[:value_at], _bounded_list(args[value_at], name), *args[value_at + 1:])
        return fn(*args, **kwargs)

    return wrapper


def _filter_join(value: Any, d: Any = "", attribute: Any = None) -> str:
    g = current_guard()
    items = _bounded_list(value, "join")
    g.alloc(seq_bytes(len(items)), "the items of join")
    if attribute is not None:
        items = [ENV.getitem(x, attribute) for x in items]
    return str_join(str(d), [g.text(x) for x in items])


def _filter_replace(s: Any, old: Any, new: Any, count: Any = None) -> str:
    return str_replace(current_guard().text(s), str(old), str(new), -1 if count is None else count)


def _filter_tojson(value: Any, indent: Any = None) -> str:
    g = current_guard()
    g.check_chars(g.text_size(value) * (2 if indent else 1))
    if indent is not None and (not isinstance(indent, int) or not 0 <= indent <= 8):
        raise Fault("limit", "tojson indent must be between 0 and 8")
    g.alloc(49 + g.text_size(value) * (2 if indent else 1), "the JSON text")
    out = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    g.check_chars(len(out))
    return out


def _filter_round(value: Any, precision: Any = 0, method: Any = "common") -> float:
    # do_round computes 10**precision for ceil/floor: bound it first.
    if not isinstance(precision, int) or abs(precision) > 300:
        raise Fault("limit", "round precision must be between -300 and 300")
    return do_round(value, precision, method)


def _filter_sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    # Numbers only: sum(lists, start=[]) is quadratic.
    if not isinstance(start, (int, float)):
        raise Fault("type", "sum adds numbers only")
    g = current_guard()
    result = do_sum(environment, _bounded_list(iterable, "sum"), attribute=attribute, start=start)
    if isinstance(result, int):
        g.check_bits(result.bit_length())
    return result


_filter_sum.jinja_pass_arg = do_sum.jinja_pass_arg  # type: ignore[attr-defined]

# Filters that pad, wrap, format or repeat (center, indent, wordwrap, format, batch,
# slice, filesizeformat, xmlattr, urlize, pprint, random, attr, escape/safe) are absent.
_SAFE_FILTERS = ("abs", "count", "d", "default", "first", "float", "int", "items", "last", "length", "map",
                 "reject", "rejectattr", "select", "selectattr")
_COPYING_FILTERS = ("list", "reverse")
_SORTING_FILTERS = ("dictsort", "groupby", "max", "min", "sort", "unique")
_STRINGIFYING_FILTERS = ("string", "trim", "truncate", "wordcount")
_CASE_FILTERS = ("capitalize", "lower", "title", "upper", "urlencode")
# The lower/upper tests str() their argument; the rest only compare or inspect.
_UNSAFE_TESTS = ("lower", "upper")


def _make_environment() -> BoundedEnvironment:
    env = BoundedEnvironment(undefined=StrictUndefined, autoescape=False, finalize=_finalize, cache_size=0)
    defaults = env.filters
    env.filters = {name: defaults[name] for name in _SAFE_FILTERS}
    env.filters.update({name: _stringifies(defaults[name]) for name in _STRINGIFYING_FILTERS})
    env.filters.update({name: _case_filter(defaults[name]) for name in _CASE_FILTERS})
    env.filters.update({name: _copying_filter(defaults[name], name) for name in _COPYING_FILTERS})
    env.filters.update({name: _sorting(defaults[name], name) for name in _SORTING_FILTERS})
    env.filters.update(join=_filter_join, replace=_filter_replace, tojson=_filter_tojson, round=_filter_round,
                       sum=_filter_sum)
    for name in _UNSAFE_TESTS:
        env.tests.pop(name, None)
    env.tests.update({name: _comparing_test(name) for name in _COMPARING_TESTS})
    env.globals.pop("lipsum", None)  # lipsum(10**9) generates text inside one call
    env.globals["range"] = fn_range
    return env


# The one environment: StrictUndefined, autoescape off, the filters above, no lipsum,
# ``range`` bounded. GLOBAL_NAMES are its globals (not run-state variables).
ENV = _make_environment()
GLOBAL_NAMES = frozenset(ENV.globals)
