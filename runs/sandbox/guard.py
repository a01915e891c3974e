"""The guard: per-evaluation size, step and time accounting, checked before an operation computes."""
from __future__ import annotations

import contextvars
import math
import operator
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from runs.sandbox.errors import Fault, type_name
from runs.sandbox.limits import HUGE, LIMITS, MIB, STARVED_WALL_FACTOR, Limits

__all__ = ["COMPARISONS", "MERGEABLE", "REPEATABLE", "SEQUENCES", "Guard", "current_guard", "guarded", "hash_bytes",
           "int_bytes", "range_item_bytes", "seq_bytes", "str_bytes", "str_width"]

SEQUENCES = frozenset({list, tuple, set, frozenset})
_NUMBERS = frozenset({int, float, bool, type(None)})
_STRINGS = frozenset({str})
REPEATABLE = frozenset({str, list, tuple})
MERGEABLE = frozenset({dict, set, frozenset})

_GUARD: contextvars.ContextVar[Guard | None] = contextvars.ContextVar("ballast_expression_guard", default=None)

# Comparison operators by their Python spelling (expressions and templates share them).
COMPARISONS: dict[str, Any] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b, "is": operator.is_, "is not": operator.is_not,
}


# -- byte sizes (CPython 3.11, 64-bit; sys.getsizeof of each kind of value, rounded up) ----
def str_width(s: str) -> int:
    """Bytes per character CPython stores ``s`` with (1, 2 or 4), found in O(1)."""
    if s.isascii():
        return 1
    # A compact non-ASCII string is a 72-byte header and (len + 1) characters of one width.
    return max(1, min(4, (sys.getsizeof(s) - 72) // (len(s) + 1)))


def str_bytes(chars: int, width: int = 1) -> int:
    """Bytes of a string of ``chars`` characters of ``width`` bytes each."""
    return (49 if width == 1 else 76) + chars * width


def int_bytes(bits: int) -> int:
    """Bytes of an integer of ``bits`` bits (30-bit digits of 4 bytes)."""
    return 28 + (bits // 30) * 4


def range_item_bytes(value: Any) -> int:
    """Bytes of each integer walking ``value`` creates: a range makes its items as it goes, so a
    list of range(2**4094, 2**4094 + 99999) is 57 MB of new integers; 0 for other values."""
    if type(value) is not range:
        return 0
    return int_bytes(max(abs(value.start), abs(value.stop)).bit_length())


def seq_bytes(n: int) -> int:
    """Bytes of a list or tuple of ``n`` slots (the items themselves not included)."""
    return 56 + 8 * n


def hash_bytes(n: int) -> int:
    """Bytes of a dict or set of ``n`` entries (about 37 measured per entry when full, more when sparse)."""
    return 64 + 64 * n


class Guard:
    """Limits, deadline and size accounting for one evaluation (or one template render).

    Every method that builds a value (``add``, ``mul``, ``text`` ...) checks the size of
    the result from the sizes of its operands first and raises :class:`Fault` ("limit",
    "forbidden", "type" or "timeout") instead of computing it: a big-integer multiply
    or a padding call cannot be interrupted once it has started.

    The time limit is CPU time of the evaluating thread (``time.thread_time``), so waiting
    for a core on a loaded machine does not count. ``deadline`` is the next moment
    (``time.monotonic()`` seconds) at which the CPU time is looked at: the hot path
    compares only the cheap monotonic clock, and a passed deadline that finds CPU time
    left moves on by what is left, up to ``STARVED_WALL_FACTOR`` times the limit in wall time.
    A ``deadline`` given by the caller is a hard end in wall time instead.
    """

    __slots__ = ("limits", "deadline", "cpu_deadline", "wall_deadline", "iterations", "spent", "allocated",
                 "_memo", "_memo_cells")

    def __init__(self, limits: Limits, deadline: float | None = None) -> None:
        self.limits = limits
        now = time.monotonic()
        self.deadline = deadline if deadline is not None else now + limits.timeout
        self.cpu_deadline = time.thread_time() + limits.timeout
        # A caller's own deadline is a hard end in wall time; else the starvation backstop is.
        self.wall_deadline = deadline if deadline is not None else now + limits.timeout * STARVED_WALL_FACTOR
        self.iterations = 0
        self.spent = 0
        self.allocated = 0  # bytes all operations of this evaluation allocated (estimated before each)
        self._memo: dict[int, tuple[Any, int, int]] = {}
        self._memo_cells = 0

    # -- time and steps --------------------------------------------------------------
    def check_time(self) -> None:
        """Raise Fault("timeout") once the evaluation has used its CPU time (or, starved of
        CPU, ``STARVED_WALL_FACTOR`` times it in wall time); else move ``deadline`` on."""
        now = time.monotonic()
        if now <= self.deadline:
            return
        cpu_left = self.cpu_deadline - time.thread_time()
        if cpu_left > 0 and now < self.wall_deadline:
            self.deadline = min(now + cpu_left, self.wall_deadline)
            return
        raise Fault("timeout", f"took longer than the time limit of {self.limits.timeout:g} s and was stopped",
                    whole=True)

    def step(self, limit: int | None = None, what: str = "comprehension steps") -> None:
        """Count one loop step against ``limit`` (default ``limits.iterations``) and check the time."""
        self.iterations += 1
        limit = self.limits.iterations if limit is None else limit
        if self.iterations > limit:
            raise Fault("limit", f"exceeds the limit of {limit} {what}")
        if time.monotonic() > self.deadline:
            self.check_time()

    def spend(self, n: int) -> None:
        """Account ``n`` characters or items about to be built against the evaluation's budget."""
        self.spent += n
        if self.spent > self.limits.budget:
            raise Fault("limit", f"exceeds the limit of {self.limits.budget} characters and items built in one "
                                 "evaluation")

    def alloc(self, n: int, what: str = "the value") -> None:
        """Account ``n`` bytes about to be allocated; Fault("limit") once past ``limits.memory_bytes``.

        Called BEFORE the allocation with an estimate from the operands' sizes (see
        :func:`str_bytes`, :func:`int_bytes`, :func:`seq_bytes`, :func:`hash_bytes`).
        Garbage counts too, as for ``budget``: the total bounds the evaluation's memory.
        """
        self.allocated += n
        if self.allocated > self.limits.memory_bytes:
            raise Fault("limit", f"exceeds the memory limit of {_mib(self.limits.memory_bytes)} allocated in one "
                                 f"evaluation ({what} would bring it to {_mib(self.allocated)})")

    def alloc_str(self, chars: int, *parts: str) -> None:
        """Account a new string of ``chars`` characters as wide as the widest of ``parts``."""
        width = max((str_width(p) for p in parts), default=1)
        self.alloc(str_bytes(chars, width), f"a string of {chars} characters")

    def bytes_of(self, value: Any) -> int:
        """Estimated bytes of ``value`` and everything it holds, each shared object counted once.

        The walk stops once past ``limits.memory_bytes`` or ``limits.items`` objects and
        returns HUGE, so it costs O(limits) at worst.
        """
        seen: set[int] = set()
        stack = [value]
        total, count, cap = 0, 0, self.limits.memory_bytes
        while stack:
            v = stack.pop()
            t = type(v)
            if id(v) in seen:
                continue
            seen.add(id(v))  # the walk holds every value, so ids are not reused while it runs
            if t is str:
                total += sys.getsizeof(v)
            elif t is int:
                total += int_bytes(v.bit_length())
            elif t is float:
                total += 24
            elif t in SEQUENCES or t is dict:
                count += len(v)
                if count > self.limits.items:
                    return HUGE
                if t is dict:
                    total += hash_bytes(len(v))
                    stack.extend(v.keys())
                    stack.extend(v.values())
                else:
                    total += seq_bytes(len(v)) if t is list or t is tuple else hash_bytes(len(v))
                    stack.extend(v)
            else:
                total += 16
            if total > cap:
                return HUGE
        return total

    # -- operations that cannot be interrupted ------------------------------------------
    def scan(self, steps: int, what: str) -> None:
        """Refuse one uninterruptible operation of about ``steps`` steps if over ``limits.scan_steps``.

        A step is a character searched or 64 compared (memcmp), or an item compared or hashed
        (about 10 ns here, 100 ns when the machine is loaded):
        once such a call is inside C, neither the deadline nor a Python timer can stop it.
        """
        if steps > self.limits.scan_steps:
            shown = f"about {steps}" if steps < HUGE else "too many"
            raise Fault("limit", f"{what} would take {shown} steps, over the limit of {self.limits.scan_steps} "
                                 "for one operation that cannot be interrupted")

    def steps_of(self, value: Any) -> int:
        """Steps a comparison or hash of ``value`` may take: items, plus characters / 64 (memcmp).

        Containers are walked once per evaluation (memoised); HUGE past ``limits.items`` items.
        """
        t = type(value)
        if t is str:
            return len(value) // 64 + 1
        if t is int:
            return value.bit_length() // 512 + 1
        if t in SEQUENCES:
            # Flat collections of numbers or of strings, the common case, without a Python
            # loop: map() and set() run in C (10 us for 1000 items against 150 us walked).
            kinds = set(map(type, value))
            if kinds <= _NUMBERS:
                return len(value) + 1
            if kinds == _STRINGS:
                return len(value) + 1 + sum(map(len, value)) // 64
        if t in SEQUENCES or t is dict:
            cells, chars = self._measure(value)
            return HUGE if chars >= HUGE else cells + chars // 64
        return 1

    def compare(self, name: str, a: Any, b: Any) -> Any:
        """``a <name> b`` for a key of :data:`COMPARISONS`, its cost checked first (:meth:`scan`).

        Equality and order stop at the shorter operand, so they cost at most the smaller
        one's steps; ``in`` over a string is a search (both lengths), over a list or tuple
        one comparison of ``a`` per item, over a dict or set one hash of ``a``.
        """
        fn = COMPARISONS[name]
        if name in ("is", "is not"):
            return fn(a, b)
        ta, tb = type(a), type(b)
        if name in ("in", "not in"):
            if tb is str:
                if ta is str and len(a) <= len(b):
                    self.scan(len(b) + len(a), f"searching a {len(b)}-character string")
            elif tb is list or tb is tuple:
                if len(b) > 1:
                    self.scan(len(b) * self.steps_of(a), f"`in` over a {type_name(b)} of {len(b)} items")
            elif tb is dict or tb in SEQUENCES:
                self.scan(self.steps_of(a), "hashing the value looked up")
            return fn(a, b)
        if ta is str and tb is str:
            if len(a) == len(b) or name not in ("==", "!="):  # strings of unequal length differ at once
                self.scan(min(len(a), len(b)) // 64 + 1, "comparing strings")
        elif (ta in SEQUENCES or ta is dict) and (tb in SEQUENCES or tb is dict):
            if name in ("==", "!=") and ta is tb and ta is not tuple and len(a) != len(b):
                return fn(a, b)  # lists, dicts and sets of unequal length differ at once (tuples do not check)
            small, large = (a, b) if len(a) <= len(b) else (b, a)
            cost = self.steps_of(small)
            if cost > self.limits.scan_steps:
                cost = min(cost, self.steps_of(large))
            self.scan(cost, f"comparing a {type_name(a)} with a {type_name(b)}")
        return fn(a, b)

    def check_sort(self, value: Any, what: str) -> None:
        """Refuse sorting ``value`` (or taking its min/max, ``what`` names it) if the comparisons could be too many.

        Each item takes part in about log2(n) comparisons of a merge sort, each costing at
        most its own steps: so about log2(n) x the container's steps.
        """
        self.check_iterable(value, what)
        n = len(value)
        if n > 1:
            factor = max(1, math.ceil(math.log2(n))) if what in ("sorted", "sort", "unique", "dictsort", "groupby") \
                else 1
            self.scan(self.steps_of(value) * factor, f"{what}() of {n} items")

    def search(self, haystack: str, needle: Any, what: str) -> None:
        """Refuse a search of ``needle`` in the string ``haystack`` past ``limits.scan_steps`` characters."""
        if isinstance(needle, str) and len(needle) <= len(haystack):
            self.scan(len(haystack) + len(needle), f"{what}() in a {len(haystack)}-character string")

    # -- sizes -----------------------------------------------------------------------
    def count_items(self, value: Any) -> int:
        """Items in ``value`` counted through nesting, itself included (``[[1, 2]]`` is 4).

        Shared sub-values count once per reference, as str() and == walk them that way.
        The walk stops once past ``limits.items``, so a check costs O(limit) at worst.
        """
        return self._measure(value)[0]

    def text_size(self, value: Any) -> int:
        """About how many characters str(value) has (HUGE once past ``limits.items`` items)."""
        return self._measure(value)[1]

    def _measure(self, value: Any) -> tuple[int, int]:
        # (items, chars) in one walk; memoised for large containers within one evaluation.
        t = type(value)
        if t is str:
            return 1, len(value) + 2
        if t is int:
            return 1, (value.bit_length() * 77 >> 8) + 2  # 77/256 ~ log10(2)
        if t in SEQUENCES or t is dict:
            memo = self._memo
            hit = memo.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1], hit[2]
            cap = self.limits.items + 1  # the container itself and up to ``items`` items
            cells, chars = 1, 2
            if t is dict:
                for k, v in value.items():
                    kc, kch = self._measure(k)
                    vc, vch = self._measure(v)
                    cells += kc + vc
                    chars += kch + vch + 4
                    if cells > cap:
                        chars = HUGE
                        break
            else:
                for item in value:
                    c, ch = self._measure(item)
                    cells += c
                    chars += ch + 2
                    if cells > cap:
                        chars = HUGE
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
            raise Fault("limit", f"exceeds the size limit of {self.limits.items} items ({what} would hold {n}{how})")

    def check_chars(self, n: int) -> None:
        """Refuse a string of ``n`` characters if it is over ``limits.string_chars``."""
        if n > self.limits.string_chars:
            raise Fault("limit", f"exceeds the string size limit of {self.limits.string_chars} characters "
                                 f"(the result would be {n} characters)")

    def check_bits(self, bits: float) -> None:
        """Refuse an integer of ``bits`` bits if it is over ``limits.int_bits``."""
        if bits > self.limits.int_bits:
            shown = f"{bits:.0f}" if bits < 1e15 else "astronomically many"
            raise Fault("limit", f"exceeds the integer size limit of {self.limits.int_bits} bits "
                                 f"(the result would need {shown} bits)")

    def check_iterable(self, value: Any, fname: str) -> None:
        """Functions that walk an argument accept only bounded, known collections."""
        t = type(value)
        if t in SEQUENCES or t is dict or t is range or t is str:
            self.check_items(len(value), f"the argument of {fname}()")
            return
        raise Fault("type", f"{fname}() needs a list, tuple, dict, string or range, not a {type_name(value)}")

    def text(self, value: Any) -> str:
        """str(value), refused before it runs if the text would be too long."""
        if type(value) is str:
            return value
        estimate = self.text_size(value)
        self.check_chars(estimate)
        self.spend(estimate)
        out = str(value)  # bounded by the estimate just checked (escapes can exceed it a little)
        self.check_chars(len(out))
        self.alloc(sys.getsizeof(out), "its text")
        return out

    # -- operators (checked before they compute) --------------------------------------
    def add(self, a: Any, b: Any) -> Any:
        """a + b for numbers, strings and same-type sequences, size checked first."""
        ta, tb = type(a), type(b)
        if ta is str and tb is str:
            self.check_chars(len(a) + len(b))
            self.spend(len(a) + len(b))
            self.alloc_str(len(a) + len(b), a, b)
        elif (ta is int or ta is bool) and (tb is int or tb is bool):
            bits = max(a.bit_length(), b.bit_length()) + 1
            self.check_bits(bits)
            self.alloc(int_bytes(bits), "the integer")
        elif ta in SEQUENCES and tb is ta:
            self.check_items(self.count_items(a) + self.count_items(b) - 2, f"the joined {type_name(a)}", True)
            self.spend(len(a) + len(b))
            self.alloc(seq_bytes(len(a) + len(b)) if ta is not set and ta is not frozenset
                       else hash_bytes(len(a) + len(b)), f"the joined {type_name(a)}")
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        """a - b, integer size checked first."""
        if isinstance(a, int) and isinstance(b, int):
            bits = max(a.bit_length(), b.bit_length()) + 1
            self.check_bits(bits)
            self.alloc(int_bytes(bits), "the integer")
        elif type(a) in MERGEABLE and type(b) in MERGEABLE:
            self.alloc(hash_bytes(len(a)), f"the {type_name(a)}")
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        """a * b: integer bits, or the repeated string/list/tuple, checked first."""
        a_int, b_int = isinstance(a, int), isinstance(b, int)
        if a_int and b_int:
            self.check_bits(a.bit_length() + b.bit_length())
            self.alloc(int_bytes(a.bit_length() + b.bit_length()), "the integer")
        elif b_int and type(a) in REPEATABLE:
            self._check_repeat(a, b)
        elif a_int and type(b) in REPEATABLE:
            self._check_repeat(b, a)
        return a * b

    def _check_repeat(self, seq: Any, times: int) -> None:
        if times <= 0:
            return
        if type(seq) is str:
            self.check_chars(len(seq) * times)
            self.spend(len(seq) * times)
            self.alloc_str(len(seq) * times, seq)
        else:
            self.check_items((self.count_items(seq) - 1) * times, f"the repeated {type_name(seq)}", True)
            self.spend(len(seq) * times)
            self.alloc(seq_bytes(len(seq) * times), f"the repeated {type_name(seq)}")

    def pow(self, a: Any, b: Any) -> Any:
        """a ** b, the result's bits (b x log2|a|) checked first."""
        if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
            bits = b * math.log2(abs(a))
            self.check_bits(bits)
            self.alloc(int_bytes(int(bits) + 1), "the integer")
        elif isinstance(b, int) and b.bit_length() > self.limits.int_bits:
            self.check_bits(b.bit_length())
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        """a << b, the result's bits checked first."""
        if isinstance(a, int) and isinstance(b, int) and a and b > 0:
            self.check_bits(a.bit_length() + b)
            self.alloc(int_bytes(a.bit_length() + b), "the integer")
        return a << b

    def number(self, fn: Any, a: Any, b: Any) -> Any:
        """``fn(a, b)`` for an operator whose result is no larger than its operands (/, //, >>, &, ^);
        the result's bytes are accounted."""
        if isinstance(a, int) and isinstance(b, int):
            self.alloc(int_bytes(max(a.bit_length(), b.bit_length())), "the integer")
        elif type(a) in MERGEABLE and type(b) in MERGEABLE:
            self.alloc(hash_bytes(len(a) + len(b)), f"the {type_name(a)}")
        else:
            self.alloc(32, "the number")
        return fn(a, b)

    def mod(self, a: Any, b: Any) -> Any:
        """a % b for numbers; %-formatting of strings is refused ("forbidden")."""
        if isinstance(a, str):
            # '%*d' % (10**9, 1) pads to a gigabyte inside one C call.
            raise Fault("forbidden", "%-formatting of strings is not allowed; use an f-string or +")
        if isinstance(a, int) and isinstance(b, int):
            self.alloc(int_bytes(b.bit_length()), "the integer")
        return a % b

    def bitor(self, a: Any, b: Any) -> Any:
        """a | b; merging dicts or sets is size checked first."""
        if type(a) in MERGEABLE and type(b) in MERGEABLE:
            self.check_items(self.count_items(a) + self.count_items(b) - 2, f"the merged {type_name(a)}", True)
            self.spend(len(a) + len(b))
            self.alloc(hash_bytes(len(a) + len(b)), f"the merged {type_name(a)}")
        elif isinstance(a, int) and isinstance(b, int):
            self.alloc(int_bytes(max(a.bit_length(), b.bit_length())), "the integer")
        return a | b


def _mib(n: int) -> str:
    return f"{n / MIB:.3g} MiB" if n < HUGE else "astronomically many bytes"


def current_guard() -> Guard:
    """The guard of the evaluation running in this context, or a fresh one with the default limits.

    The fresh one serves calls outside any evaluation, such as a template filter that
    Jinja folds at compile time.
    """
    g = _GUARD.get()
    if g is None:
        g = Guard(LIMITS)
    return g


@contextmanager
def guarded(limits: Limits) -> Iterator[Guard]:
    """Run the body as one evaluation: a new Guard with ``limits`` (deadline from now) is current inside."""
    guard = Guard(limits)
    token = _GUARD.set(guard)
    try:
        yield guard
    finally:
        _GUARD.reset(token)
