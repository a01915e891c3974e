"""Every wall-clock bound of the suite: stopwatches, took-under/at-least checks, waits on a condition, and the sandbox's fails-fast check.

Tests measure wall time with :func:`stopwatch` and check it with :func:`assert_took_under`
or :func:`assert_took_at_least` (or :func:`finishes_within` around a block), and wait for
a condition with :func:`wait_until` instead of sleeping and then asserting, so every
bound is in one place and a failure says what was measured against what.
"""
from __future__ import annotations

import copy
import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from runs.sandbox.limits import STARVED_WALL_FACTOR
from runs.sandbox.process import pool

# Wall-clock slack for a machine shared with other work (CPU time is checked exactly).
TIME_SLACK = float(os.environ.get("BALLAST_TEST_TIME_SLACK", "4"))


class Stopwatch:
    """Wall-clock seconds (``time.monotonic``) since it was made."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def elapsed(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.monotonic() - self.started


def stopwatch() -> Stopwatch:
    """A :class:`Stopwatch` started now."""
    return Stopwatch()


def assert_took_under(took: float, limit: float, what: str = "") -> None:
    """Fail unless ``took`` (seconds of wall time) is strictly under ``limit`` seconds."""
    assert took < limit, f"{what or 'it'} took {took:.3f} s, not under {limit:.3f} s"


def assert_took_at_least(took: float, floor: float, what: str = "") -> None:
    """Fail unless ``took`` (seconds of wall time) is at least ``floor`` seconds (it really waited)."""
    assert took >= floor, f"{what or 'it'} took {took:.3f} s, less than {floor:.3f} s"


@contextmanager
def finishes_within(limit: float, what: str = "") -> Iterator[Stopwatch]:
    """The block's wall time is under ``limit`` seconds, checked when it ends without raising."""
    watch = Stopwatch()
    yield watch
    assert_took_under(watch.elapsed, limit, what)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, *, poll: float = 0.02, describe: Callable[[], str] | None = None) -> Any:
    """Poll ``predicate`` until it returns something true and return that; fail after
    ``timeout`` seconds, saying ``what`` was awaited (and ``describe()``'s account of the
    state, if given). A ceiling, not a pause: the wait ends as soon as the condition holds."""
    deadline = time.monotonic() + timeout
    while True:
        if value := predicate():
            return value
        if time.monotonic() > deadline:
            detail = f"\n{describe()}" if describe is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(poll)


def _evaluator_cpu() -> dict[int, float]:
    """CPU seconds each live evaluator process of this process has used so far, by pid."""
    with pool().cond:
        live = list(pool().live)
    return {w.proc.pid: t for w in live if (t := w.cpu_time()) is not None}


def _reaped_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def bounded_work(within: float, what: str, *, thread_only: bool = False) -> Iterator[None]:
    """The block's work is under ``within`` seconds of CPU time, checked when it ends
    without raising: this process's (all threads; or only this thread's, ``thread_only``)
    plus what the sandbox's evaluator processes used meanwhile (a child killed as a runaway
    is counted once reaped). CPU time is the sandbox limit's own measure; wall time on a
    loaded machine includes waiting for a core, so it is held only to the starvation
    backstop, ``STARVED_WALL_FACTOR`` times ``within``.
    """
    children, reaped = _evaluator_cpu(), _reaped_children_cpu()
    clock = time.thread_time if thread_only else time.process_time
    started, cpu_started = time.monotonic(), clock()
    yield
    elapsed, cpu = time.monotonic() - started, clock() - cpu_started
    after = _evaluator_cpu()
    cpu += sum(t - children.get(pid, 0.0) for pid, t in after.items())
    gone = [pid for pid in children if pid not in after]
    cpu += max(0.0, _reaped_children_cpu() - reaped - sum(children[pid] for pid in gone))
    assert cpu < within, f"{what} took {cpu:.3f} s of CPU ({elapsed:.3f} s wall)"
    assert elapsed < within * STARVED_WALL_FACTOR, f"{what} took {elapsed:.3f} s wall"


def assert_fails_fast(
    run: Callable[[str, dict], Any], error: type[Exception], source: str, state: dict, code: str | None, within: float
) -> Any:
    """``run(source, state)`` raises ``error`` within ``within`` seconds of CPU time (this
    thread's, inline, plus the evaluator processes', where this thread only waits; see
    :func:`bounded_work`) and leaves ``state`` untouched.
    """
    before = copy.deepcopy(state)
    with bounded_work(within, repr(source), thread_only=True), pytest.raises(error) as info:
        run(source, state)
    assert state == before, f"{source!r} changed the state"
    if code is not None:
        assert info.value.code == code, (info.value.code, info.value.message)
    return info.value
