"""The guard: sizes are refused before an operation computes, steps and budget are counted, time is checked."""
from __future__ import annotations

import time

import pytest

from runs.sandbox.errors import Fault
from runs.sandbox.guard import Guard, current_guard, guarded
from runs.sandbox.limits import LIMITS, Limits
from tests.support.bounded import assert_fails_fast


def refused(op, *args, code: str = "limit") -> Fault:
    """``op(*args)`` raises Fault with ``code`` at once: the check ran, not the operation."""
    return assert_fails_fast(lambda _source, _state: op(*args), Fault, "", {}, None, 0.05)


def test_arithmetic_is_refused_before_it_computes():
    g = Guard(LIMITS)
    # Each of these would run for seconds or minutes, or allocate gigabytes, in one C call.
    for op, args in [(g.pow, (9, 9**9)), (g.mul, (10**4000, 10**4000)), (g.lshift, (1, 10**9)),
                     (g.mul, ("a", 10**10)), (g.mul, ([[0] * 1000], 1000)), (g.add, ("a" * 60_000, "b" * 60_000))]:
        err = refused(op, *args)
        assert err.code == "limit" and err.reason.startswith("exceeds")
    assert g.pow(2, 10) == 1024 and g.mul("ab", 3) == "ababab" and g.add([1], [2]) == [1, 2]


def test_string_formatting_with_percent_is_forbidden():
    assert refused(Guard(LIMITS).mod, "%*d", (10**9, 1)).code == "forbidden"
    assert Guard(LIMITS).mod(7, 3) == 1


def test_nested_items_count_through_shared_rows():
    g = Guard(Limits(items=1000))
    row = [1] * 100
    assert g.count_items([row] * 5) == 1 + 5 * 101
    assert g.text_size("abc") == 5 and g.text_size(list(range(10**4))) > 10**15  # past the items limit
    err = refused(g.mul, [row], 10)
    assert "nested items counted" in err.reason


def test_budget_counts_everything_built():
    g = Guard(Limits(budget=100))
    for _ in range(10):
        g.add("a" * 5, "b" * 5)  # 10 characters each: exactly the budget
    with pytest.raises(Fault) as info:
        g.add("a", "b")
    assert "characters and items built" in info.value.reason


def test_steps_and_deadline():
    g = Guard(Limits(iterations=3))
    for _ in range(3):
        g.step()
    with pytest.raises(Fault) as info:
        g.step()
    assert info.value.code == "limit"
    late = Guard(LIMITS, deadline=time.monotonic() - 1)
    with pytest.raises(Fault) as info:
        late.check_time()
    assert info.value.code == "timeout" and info.value.whole


def test_text_refuses_long_str_before_building_it():
    g = Guard(Limits(string_chars=1000))
    assert refused(g.text, list(range(10_000))).code == "limit"
    assert g.text([1, 2]) == "[1, 2]"


def test_check_iterable_accepts_known_collections_only():
    g = Guard(LIMITS)
    g.check_iterable(range(10), "sum")
    with pytest.raises(Fault) as info:
        g.check_iterable(iter([1]), "sum")
    assert info.value.code == "type"


def test_guarded_sets_and_restores_the_current_guard():
    outer = current_guard()
    assert outer.limits == LIMITS  # outside any evaluation: a fresh guard with the defaults
    small = Limits(items=5)
    with guarded(small) as g:
        assert current_guard() is g and g.limits is small
        with guarded(LIMITS) as inner:
            assert current_guard() is inner
        assert current_guard() is g
    assert current_guard() is not g


def test_compare_checks_cost_first_and_skips_what_cannot_cost():
    g = Guard(Limits(scan_steps=1000))
    assert g.compare("==", [1] * 5000, [1] * 4999) is False  # unequal lengths: differ at once
    assert g.compare("in", 3, [1] * 999 + [3]) is True
    assert refused(g.compare, "==", [1] * 5000, [1] * 5000).code == "limit"
    assert refused(g.compare, "<", (1,) * 5000, (1,) * 4999).code == "limit"  # tuples compare item by item
    assert refused(g.compare, "in", "b", "a" * 5000).code == "limit"
    assert g.compare("is", [1] * 5000, None) is False
