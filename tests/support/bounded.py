"""Shared check for sandboxed evaluation: it fails fast, with the right code, and leaves the state alone."""
from __future__ import annotations

import copy
import os
import resource
import time
from collections.abc import Callable
from typing import Any

import pytest

from runs.sandbox.limits import STARVED_WALL_FACTOR
from runs.sandbox.process import pool

# Wall-clock slack for a machine shared with other work (CPU time is checked exactly).
TIME_SLACK = float(os.environ.get("BALLAST_TEST_TIME_SLACK", "4"))


def _evaluator_cpu() -> dict[int, float]:
    """CPU seconds each live evaluator process of this process has used so far, by pid."""
    with pool().cond:
        live = list(pool().live)
    return {w.proc.pid: t for w in live if (t := w.cpu_time()) is not None}


def _reaped_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def assert_fails_fast(
    run: Callable[[str, dict], Any], error: type[Exception], source: str, state: dict, code: str | None, within: float
) -> Any:
    """``run(source, state)`` raises ``error`` within ``within`` seconds and leaves ``state`` untouched.

    The bound is on work done, in CPU time (the limit's own measure): this thread's
    (inline) plus the evaluator processes' (process mode, where this thread only waits;
    a child killed as a runaway is counted once reaped). Wall time on a loaded machine
    includes waiting for a core, so it is held only to the starvation backstop.
    """
    before = copy.deepcopy(state)
    children, reaped = _evaluator_cpu(), _reaped_children_cpu()
    started, cpu_started = time.monotonic(), time.thread_time()
    with pytest.raises(error) as info:
        run(source, state)
    elapsed, cpu = time.monotonic() - started, time.thread_time() - cpu_started
    after = _evaluator_cpu()
    cpu += sum(t - children.get(pid, 0.0) for pid, t in after.items())
    gone = [pid for pid in children if pid not in after]
    cpu += max(0.0, _reaped_children_cpu() - reaped - sum(children[pid] for pid in gone))
    assert cpu < within, f"{source!r} took {cpu:.3f} s of CPU ({elapsed:.3f} s wall)"
    assert elapsed < within * STARVED_WALL_FACTOR, f"{source!r} took {elapsed:.3f} s"
    assert state == before, f"{source!r} changed the state"
    if code is not None:
        assert info.value.code == code, (info.value.code, info.value.message)
    return info.value
