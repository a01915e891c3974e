"""A worker process's threads around its steps: the step threads that run claimed chains at once, the heartbeat thread, abandoned timed-step threads.

- :class:`StepThreads`: the claimed chains of one doorbell task or in-process drive, up
  to ``BALLAST_WORKER_STEP_THREADS`` at once on this process's step threads (runs.engine.loop
  claims and runs the chains; this module decides which thread and when);
- the heartbeat thread (:data:`heartbeats`) extends the leases of long steps and tells
  running steps at once that their run was cancelled (their cancel event);
- a step with ``timeout_seconds`` runs on a thread of its own (:func:`run_with_deadline`),
  abandoned when it overruns (:func:`abandoned_steps`);
- :data:`held`: the steps this process's threads hold, which a lost commit reply must not
  hand back.
"""
from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from core import metrics
from runs.engine.store import claims, connections
from runs.engine.types import ClaimedStep
from runs.engine.workers import stop_requested
from runs.nodes.base import NodeResult
from runs.vocabulary import NodeError

log = logging.getLogger("ballast.engine")


@dataclass
class _Tracked:
    """An in-flight step of this process: its claim, its cancel event, when its lease was
    last extended (monotonic seconds; its start at first)."""

    claimed: ClaimedStep
    cancel: threading.Event
    since: float


class _Heartbeats:
    """Extends the leases of this process's in-flight steps every lease/3 seconds, and
    every ``BALLAST_CANCEL_POLL_SECONDS`` looks whether their runs ended (one read for
    all of them).

    Steps shorter than lease/3 never cost a heartbeat. A failed extension (lease taken by
    recovery, run ended) or an ended run sets the step's cancel event, so the node (its
    tool, its model call) stops at once instead of running and billing to its end.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[int, _Tracked] = {}
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._wake = threading.Event()

    def track(self, claimed: ClaimedStep, cancel: threading.Event) -> None:
        with self._lock:
            self._steps[claimed.step_id] = _Tracked(claimed, cancel, time.monotonic())
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="ballast-heartbeat", daemon=True)
                self._thread.start()

    def untrack(self, step_id: int) -> None:
        with self._lock:
            self._steps.pop(step_id, None)

    def in_flight(self) -> set[int]:
        """Ids of the steps whose node code runs in this process now."""
        with self._lock:
            return set(self._steps)

    def run_ended(self, run_id: int) -> None:
        """Run ``run_id`` ended in this process (a cancel): set the cancel events of its
        steps that run here now, without waiting for the next check."""
        with self._lock:
            for tracked in self._steps.values():
                if tracked.claimed.run_id == run_id:
                    tracked.cancel.set()

    def _run(self) -> None:
        interval = max(0.2, settings.BALLAST_LEASE_SECONDS / 3)
        poll = min(interval, max(0.02, settings.BALLAST_CANCEL_POLL_SECONDS))
        while True:
            time.sleep(poll)
            with self._lock:
                tracked_now = [t for t in self._steps.values() if not t.cancel.is_set()]
            if not tracked_now:
                connections.close_all()  # this thread's own, when it has nothing to watch
                continue
            try:
                ended = claims.runs_ended({t.claimed.run_id for t in tracked_now})
            except Exception:  # the check must never kill the thread: the heartbeat still tells
                log.exception("checking whether running steps' runs ended failed")
                ended = set()
                connections.drop_broken()
            for tracked in tracked_now:
                if tracked.claimed.run_id in ended:
                    tracked.cancel.set()
            now = time.monotonic()
            for tracked in tracked_now:
                if now - tracked.since < interval or tracked.cancel.is_set():
                    continue
                claimed, cancel = tracked.claimed, tracked.cancel
                try:
                    if claims.step_heartbeat(claimed.step_id, claimed.attempt, claimed.worker):
                        tracked.since = now
                    else:
                        cancel.set()
                except Exception:  # a heartbeat must never kill the thread; the lease may lapse
                    log.exception("heartbeat failed for step %s", claimed.step_id)


heartbeats = _Heartbeats()


def run_ended_here(run_id: int) -> None:
    """Run ``run_id`` ended by an action in this process (a cancel, committed): its steps
    running here see their cancel event now (other processes' steps at their next check)."""
    heartbeats.run_ended(run_id)


class _Abandoned:
    """Threads of timed steps that overran their deadline and still run in this process.

    Python cannot kill a thread: an abandoned one keeps its memory, may hold the GIL (a
    busy loop) and may still do its work late. They are counted, and past
    ``BALLAST_MAX_ABANDONED_STEPS`` a django-q2 worker process asks to be recycled after
    its current task (dispatch.worker_recycle), which ends them all.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def add(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.add(thread)

    def alive(self) -> int:
        """How many abandoned threads still run (finished ones are forgotten)."""
        with self._lock:
            self._threads = {t for t in self._threads if t.is_alive()}
            return len(self._threads)


_abandoned = _Abandoned()


def abandoned_steps() -> int:
    """How many timed-out steps' threads still run in this process."""
    return _abandoned.alive()


def run_with_deadline(target: Callable[[], NodeResult], seconds: float, claimed: ClaimedStep, cancel: threading.Event) -> NodeResult | NodeError:
    """Run ``target`` on a fresh daemon thread and wait at most ``seconds`` for it.

    A fresh thread per timed step, not a fixed pool: an overrun thread that ignores its
    cancel event occupies only itself, so a later timed step always starts at once. On
    time-out the cancel event is set, the thread is counted as abandoned and a retryable
    ``timeout`` error is returned; the fenced commit guarantees its late result is never
    stored. An exception the node raises is re-raised here.
    """
    outcome: list[tuple[bool, object]] = []
    done = threading.Event()

    def body() -> None:
        try:
            outcome.append((True, target()))
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            outcome.append((False, exc))
        finally:
            connections.close_all()  # this thread's own connections, if the node opened any
            done.set()

    # In a copy of this context: the step's log fields and span follow the node there.
    thread = threading.Thread(target=contextvars.copy_context().run, args=(body,), name=f"ballast-step-{claimed.step_id}", daemon=True)
    thread.start()
    if done.wait(seconds):
        ok, value = outcome[0]
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        assert isinstance(value, NodeResult)
        return value
    cancel.set()
    _abandoned.add(thread)
    log.warning(
        "step %s (node %s) overran its %gs timeout and was abandoned; %d abandoned step thread(s) in this process",
        claimed.step_id, claimed.node_id, seconds, _abandoned.alive(),
    )
    return NodeError(f"node '{claimed.node_id}' timed out after {seconds:g}s", code="timeout", retryable=True)


def step_threads() -> int:
    """How many claimed steps one process runs at once (settings.BALLAST_WORKER_STEP_THREADS)."""
    return max(1, int(settings.BALLAST_WORKER_STEP_THREADS))


class _Held:
    """Ids of the steps this process's step threads hold now (claimed, or kept for them by
    a commit, and not yet committed): what a commit whose reply was lost must not hand
    back (claims.steps_release_kept), since another thread of this worker runs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[int, int] = {}

    def add(self, step_id: int) -> None:
        with self._lock:
            self._ids[step_id] = self._ids.get(step_id, 0) + 1

    def discard(self, step_id: int) -> None:
        with self._lock:
            left = self._ids.get(step_id, 0) - 1
            if left > 0:
                self._ids[step_id] = left
            else:
                self._ids.pop(step_id, None)

    def ids(self) -> set[int]:
        with self._lock:
            return set(self._ids)


held = _Held()


class _Pool:
    """This process's step threads: a thread pool of ``step_threads()`` threads, made on
    first use in each process (a forked worker makes its own), whose threads keep their
    database connections between chains as the process's settings say
    (connections.close_obsolete: a qcluster worker keeps them for
    BALLAST_WORKER_CONN_MAX_AGE, any other process closes them at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pid = 0

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=step_threads(), thread_name_prefix="ballast-step")
            executor = self._executor
        executor.submit(fn)


_pool = _Pool()


# How often a claimer waiting for a commit or a chain's end looks (see StepThreads._wait).
WAIT_STEP_SECONDS = 0.01


class RunChain(Protocol):
    """runs.engine.loop._run_chain: run a claimed step and its kept successors; False when
    the task should take no more work."""

    def __call__(
        self, claimed: ClaimedStep | None, worker: str, *, task_end: float | None = None, after_commit: Callable[[int], None] | None = None
    ) -> bool: ...


class StepThreads:
    """The claimed chains of one doorbell task or one in-process drive, at most ``limit``
    at once (settings.BALLAST_WORKER_STEP_THREADS; each run's ``max_parallelism`` bounds
    its own steps further: its commits release no more of them,
    runs.engine.scheduler.plan_dispatch).

    :meth:`run` claims (``claim()``: a claimed step, or None when nothing is due) and runs
    each chain it claims itself in the calling thread, so a sequential run stays on the
    caller's thread and database connection as it always did. After every commit that
    released steps to the queue, in whichever thread committed, as many step threads of
    this process (:class:`_Pool`) as it released (within the free slots) each claim a
    due step and run its chain, in a copy of the caller's context (its log fields, the
    in-process queue of dispatch.local_mode): the branches of a fan-out are claimed and
    run side by side at once. When its own chain has ended the caller claims again, and
    otherwise waits to be woken by a commit or a chain's end, or ``poll`` seconds, until
    nothing is due and every chain has ended.

    Claiming stops for good when a chain asks to take no more work (stopping,
    recycling, past the task's budget: :func:`runs.engine.loop._run_chain`) or raises, past
    ``task_end``, when the worker is asked to stop, or when ``more(self)`` says so (the
    doorbell's drain window). An exception a chain raised is raised by :meth:`run` once
    every chain has ended. With one slot, or a caller inside a transaction (no other
    thread's connection would see its writes), every chain runs in the caller's thread,
    one after another.

    ``run_chain`` is runs.engine.loop._run_chain, passed in: this module sits below the
    loop (the engine's layers). ``poll``: seconds the caller waits between claims while
    its chains run and nothing was due.
    """

    def __init__(
        self, worker: str, *, task_end: float | None, claim: Callable[[], ClaimedStep | None],
        more: Callable[[StepThreads], bool], poll: float, run_chain: RunChain,
    ) -> None:
        self.worker = worker
        self._run_chain = run_chain
        self.task_end = task_end
        self.limit = 1 if connections.in_transaction() else step_threads()
        self.claimed = 0  # chains claimed so far (read by ``more``)
        self._claim = claim
        self._more = more
        self._poll = poll
        self._cond = threading.Condition()
        self._filling = threading.Lock()
        self._running = 0
        self._seq = 0  # bumped by every commit and chain end: what wakes the caller
        self._halted = False
        self._error: BaseException | None = None

    def running(self) -> int:
        """Chains of this task that have not ended yet."""
        with self._cond:
            return self._running

    def _may_claim(self) -> bool:
        if stop_requested() or (self.task_end is not None and time.monotonic() >= self.task_end):
            return False
        with self._cond:
            if self._halted or self._running >= self.limit:
                return False
        return self._more(self)

    def _take(self) -> ClaimedStep | None:
        claimed = self._claim()
        if claimed is not None:
            with self._cond:
                self.claimed += 1
                self._running += 1  # its slot, taken before anyone else looks
            metrics.WORKER_SLOTS_IN_USE.inc()
        return claimed

    def run(self) -> None:
        """Claim and run until nothing is due and every chain has ended (see the class)."""
        seen = 0
        try:
            while True:
                nothing_due = False
                with self._filling:  # one claimer at a time: the slot count holds
                    claimed = self._take() if self._may_claim() else None
                    nothing_due = claimed is None and self._may_claim()
                if claimed is not None:
                    self._chain(claimed, own_thread=False)  # outside the lock: its commits claim more
                    continue
                if self.running() == 0 and (nothing_due or not self._may_claim()):
                    return
                seen = self._wait(seen)
        finally:
            with self._cond:
                while self._running:
                    self._cond.wait()
                error, self._error = self._error, None
            if error is not None:
                raise error

    def _fill(self, released: int) -> None:
        """After a commit that released ``released`` steps: start that many step threads
        (at most the free slots), each of which claims a due step and runs its chain, so
        the branches of a fan-out are claimed side by side, not one after another."""
        if self.limit == 1 or released <= 0:
            return
        with self._filling:  # one reserver at a time: the slot count holds
            for _ in range(released):
                if not self._may_claim():
                    return
                with self._cond:
                    self._running += 1  # the slot, reserved before the claim
                metrics.WORKER_SLOTS_IN_USE.inc()
                try:
                    _pool.submit(functools.partial(contextvars.copy_context().run, self._claim_and_chain))
                except RuntimeError:
                    # The pool takes no more work (the interpreter is shutting down): the
                    # queue's doorbells (or the caller's next claim) take the step.
                    self._ended(go_on=False)
                    return

    def _claim_and_chain(self) -> None:
        """On a step thread: claim a due step and run its chain; nothing due (a claim
        elsewhere took it first) gives the slot back."""
        try:
            claimed = self._claim()
        except BaseException as exc:  # raised by run() once every chain has ended
            self._failed(exc, None)
            connections.close_obsolete()
            self._ended(go_on=False)
            return
        if claimed is None:
            connections.close_obsolete()
            self._ended(go_on=True)
            return
        with self._cond:
            self.claimed += 1
        self._chain(claimed)

    def _failed(self, exc: BaseException, claimed: ClaimedStep | None) -> None:
        with self._cond:
            if self._error is None:
                self._error = exc
                return
        log.error("step %s: its chain raised (another chain's error is raised)", claimed.step_id if claimed else "?", exc_info=exc)

    def _chain(self, claimed: ClaimedStep, *, own_thread: bool = True) -> None:
        go_on = False
        try:
            go_on = self._run_chain(claimed, self.worker, task_end=self.task_end, after_commit=self._committed)
        except BaseException as exc:  # raised by run() once every chain has ended
            self._failed(exc, claimed)
        finally:
            if own_thread:
                connections.close_obsolete()
            self._ended(go_on=go_on)

    def _ended(self, *, go_on: bool) -> None:
        metrics.WORKER_SLOTS_IN_USE.dec()
        with self._cond:
            self._running -= 1
            self._halted = self._halted or not go_on
            self._seq += 1
            self._cond.notify_all()

    def _committed(self, released: int) -> None:
        with self._cond:
            self._seq += 1
            self._cond.notify_all()
        self._fill(released)

    def _wait(self, seen: int) -> int:
        """Until a commit or a chain's end since ``seen``, at most ``poll`` seconds; the
        sequence number now. Short relative sleeps, not a timed ``Condition.wait``: under
        libfaketime (the chaos suite's skewed hosts) a timed wait lasts the skew longer."""
        deadline = time.monotonic() + self._poll
        while True:
            with self._cond:
                if self._seq != seen:
                    return self._seq
            if time.monotonic() >= deadline:
                return seen
            time.sleep(WAIT_STEP_SECONDS)
