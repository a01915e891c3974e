"""Shared check for sandboxed evaluation: it fails fast, with the right code, and leaves the state alone."""
from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

# Wall-clock slack for a machine shared with other work (CPU time is checked exactly).
TIME_SLACK = float(os.environ.get("BALLAST_TEST_TIME_SLACK", "4"))


def assert_fails_fast(
    run: Callable[[str, dict], Any], error: type[Exception], source: str, state: dict, code: str | None, within: float
) -> Any:
    """``run(source, state)`` raises ``error`` within ``within`` seconds and leaves ``state`` untouched.

    The bound is on work done: CPU time of this thread (inline) or the wall time the
    evaluator process is allowed (process mode, where this thread only waits). Wall time
    on a loaded 2-core machine includes waiting for a core, so it gets slack.
    """
    before = copy.deepcopy(state)
    started, cpu_started = time.monotonic(), time.thread_time()
    with pytest.raises(error) as info:
        run(source, state)
    elapsed, cpu = time.monotonic() - started, time.thread_time() - cpu_started
    assert min(elapsed, cpu if cpu > 0.05 else elapsed) < within, f"{source!r} took {elapsed:.3f} s ({cpu:.3f} s CPU)"
    assert elapsed < within * TIME_SLACK, f"{source!r} took {elapsed:.3f} s"
    assert state == before, f"{source!r} changed the state"
    if code is not None:
        assert info.value.code == code, (info.value.code, info.value.message)
    return info.value
