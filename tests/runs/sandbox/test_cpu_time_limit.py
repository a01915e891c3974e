"""The time limit counts CPU time, not waiting for a core: a starved evaluation still
finishes, a runaway is still stopped, and one given no CPU at all ends at the wall backstop."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from runs.sandbox.errors import Fault
from runs.sandbox.guard import Guard
from runs.sandbox.limits import LIMITS, STARVED_WALL_FACTOR, Limits
from runs.sandbox.process import pool, run_isolated
from tests.support.bounded import assert_took_at_least, stopwatch

pytestmark = pytest.mark.timeout(60)


def spin_cpu(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU time."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_waiting_for_a_core_does_not_use_up_the_time_limit():
    guard = Guard(Limits(timeout=0.05))
    time.sleep(0.15)  # scenario: wall time passes with almost no CPU used (a thread waiting for a core)
    guard.check_time()
    guard.step()
    assert guard.deadline > time.monotonic()  # the next look is put off by the CPU time left


def test_cpu_time_past_the_limit_is_stopped():
    guard = Guard(Limits(timeout=0.05))
    spin_cpu(0.08)
    with pytest.raises(Fault) as caught:
        guard.check_time()
    assert caught.value.code == "timeout"


def test_an_evaluation_given_no_cpu_ends_at_the_wall_backstop():
    limits = Limits(timeout=0.01)
    guard = Guard(limits)
    time.sleep(limits.timeout * STARVED_WALL_FACTOR + 0.05)  # scenario: no CPU at all, past the wall backstop
    with pytest.raises(Fault):
        guard.check_time()


def test_a_stopped_evaluator_process_is_waited_for_while_it_uses_no_cpu():
    assert run_isolated("expr", "1 + 1", {}, LIMITS) == 2  # an idle evaluator process exists
    with pool().cond:
        child = pool().idle[-1].proc.pid
    os.kill(child, signal.SIGSTOP)  # like a machine so loaded the child gets no core for a while
    resume = threading.Timer(LIMITS.timeout * 3, os.kill, (child, signal.SIGCONT))
    resume.start()
    try:
        started = stopwatch()
        assert run_isolated("expr", "i + 1", {"i": 41}, LIMITS) == 42
        assert_took_at_least(started.elapsed, LIMITS.timeout * 2, "the stopped evaluator's answer")  # it really waited past the limit
    finally:
        resume.cancel()
        with contextlib.suppress(ProcessLookupError):  # killed as a runaway (the bug this test is for)
            os.kill(child, signal.SIGCONT)
