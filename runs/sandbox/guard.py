"""The guard: per-evaluation size, step and time accounting, checked before an operation computes."""
from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from runs.sandbox.errors import Fault, type_name
from runs.sandbox.limits import HUGE, LIMITS, Limits

__all__ = ["MERGEABLE", "REPEATABLE", "SEQUENCES", "Guard", "current_guard", "guarded"]

SEQUENCES = frozenset({list, tuple, set, frozenset})
REPEATABLE = frozenset({str, list, tuple})
MERGEABLE = frozenset({dict, set, frozenset})

_GUARD: contextvars.ContextVar[Guard | None] = contextvars.ContextVar("ballast_expression_guard", default=None)


class Guard:
    """Limits, deadline and size accounting for one evaluation (or one template render).

    Every method that builds a value (``add``, ``mul``, ``text`` ...) checks the size of
    the result from the sizes of its operands first and raises :class:`Fault` ("limit",
    "forbidden", "type" or "timeout") instead of computing it: a big-integer multiply
    or a padding call cannot be interrupted once it has started.
    """

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
        """Raise Fault("timeout") once the deadline (time.monotonic() seconds) has passed."""
        if time.monotonic() > self.deadline:
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
            cap = self.limits.items
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
        out = str(value)
        self.check_chars(len(out))  # escapes in reprs can exceed the estimate
        return out

    # -- operators (checked before they compute) --------------------------------------
    def add(self, a: Any, b: Any) -> Any:
        """a + b for numbers, strings and same-type sequences, size checked first."""
        ta, tb = type(a), type(b)
        if ta is str and tb is str:
            self.check_chars(len(a) + len(b))
            self.spend(len(a) + len(b))
        elif (ta is int or ta is bool) and (tb is int or tb is bool):
            self.check_bits(max(a.bit_length(), b.bit_length()) + 1)
        elif ta in SEQUENCES and tb is ta:
            self.check_items(self.count_items(a) + self.count_items(b) - 2, f"the joined {type_name(a)}", True)
            self.spend(len(a) + len(b))
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        """a - b, integer size checked first."""
        if isinstance(a, int) and isinstance(b, int):
            self.check_bits(max(a.bit_length(), b.bit_length()) + 1)
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        """a * b: integer bits, or the repeated string/list/tuple, checked first."""
        a_int, b_int = isinstance(a, int), isinstance(b, int)
        if a_int and b_int:
            self.check_bits(a.bit_length() + b.bit_length())
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
        else:
            self.check_items((self.count_items(seq) - 1) * times, f"the repeated {type_name(seq)}", True)
        self.spend(len(seq) * times)

    def pow(self, a: Any, b: Any) -> Any:
        """a ** b, the result's bits (b x log2|a|) checked first."""
        if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
            self.check_bits(b * math.log2(abs(a)))
        elif isinstance(b, int) and b.bit_length() > self.limits.int_bits:
            self.check_bits(b.bit_length())
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        """a << b, the result's bits checked first."""
        if isinstance(a, int) and isinstance(b, int) and a and b > 0:
            self.check_bits(a.bit_length() + b)
        return a << b

    def mod(self, a: Any, b: Any) -> Any:
        """a % b for numbers; %-formatting of strings is refused ("forbidden")."""
        if isinstance(a, str):
            # '%*d' % (10**9, 1) pads to a gigabyte inside one C call.
            raise Fault("forbidden", "%-formatting of strings is not allowed; use an f-string or +")
        return a % b

    def bitor(self, a: Any, b: Any) -> Any:
        """a | b; merging dicts or sets is size checked first."""
        if type(a) in MERGEABLE and type(b) in MERGEABLE:
            self.check_items(self.count_items(a) + self.count_items(b) - 2, f"the merged {type_name(a)}", True)
            self.spend(len(a) + len(b))
        return a | b


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
