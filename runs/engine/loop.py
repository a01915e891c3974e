"""The node-commit loop: claim -> execute outside any transaction -> commit -> next.

One worker keeps going with a successor its commit leased to it (no queue hop); every
other successor goes through the queue after the commit. A process runs up to
``BALLAST_WORKER_STEP_THREADS`` claimed steps at once, each chain on a thread of its own
(runs.engine.threads.StepThreads), in a qcluster's doorbell tasks and in in-process
drives alike; one heartbeat thread per process extends the leases of long steps and
tells running steps at once when their run was cancelled (runs.engine.threads).
"""
from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings

from core import log_context, metrics, tracing
from core.build import build
from runs.engine import dispatch, faults, sources, threads
from runs.engine.store import (
    claims,
    clock,
    commit,
    connections,
    deadlines,
    flow,
    graphs,
    reconnect,
    recovery_queries,
    selectors,
)
from runs.engine.types import ClaimedStep, CommitOutcome
from runs.engine.workers import current_worker, owner_is_dead, stop_requested
from runs.models import RunStatus
from runs.nodes import get_kind
from runs.nodes.base import NodeContext, NodeResult, StateView
from runs.vocabulary import NodeError

log = logging.getLogger("ballast.engine")
_C = TypeVar("_C")  # what a claim returns
# How long a deadline that raised while firing waits before it is tried again.
DEADLINE_RETRY_SECONDS = 60


def _context(claimed: ClaimedStep) -> NodeContext:
    node = graphs.step_node(claimed.version_id, claimed.node_id)
    return NodeContext(
        run_id=claimed.run_id,
        run_uuid=claimed.run_uuid,
        step_id=claimed.step_id,
        node_id=claimed.node_id,
        iteration=claimed.iteration,
        attempt=claimed.attempt,
        idempotency_key=claimed.idempotency_key,
        state=StateView(claimed.state),
        run_input=claimed.run_input,
        deadline=time.monotonic() + node.timeout_seconds if node.timeout_seconds else None,
        budget_remaining_usd=claimed.budget_remaining_usd,
        budget_remaining_tokens=claimed.budget_remaining_tokens,
        children=claimed.children,
    )


def execute_node(claimed: ClaimedStep) -> NodeResult | NodeError:
    """Run the claimed step's node outside any transaction; never raises.

    A node with ``timeout_seconds`` runs on a fresh thread and is abandoned (its cancel
    event set) when the time is up (see runs.engine.threads.run_with_deadline): Python cannot kill
    a thread, and the fenced commit guarantees an abandoned attempt's late result is
    never stored.
    """
    node = graphs.step_node(claimed.version_id, claimed.node_id)
    kind = get_kind(node.kind)
    ctx = _context(claimed)
    threads.heartbeats.track(claimed, ctx.cancel_event)
    try:
        config = kind.config_model.model_validate(node.config)
        target: Callable[[], NodeResult]
        if claimed.parent_id is not None:
            call = claimed.child_call()
            repeat_safe = kind.is_child_repeat_safe(config, call)
            target = functools.partial(kind.execute_child, config, call, ctx)
        else:
            repeat_safe = kind.is_step_repeat_safe(config, node.repeat_safe)
            target = functools.partial(kind.execute, config, ctx)
        # The mark is a fenced write safe to repeat: a lost connection is ridden out as a
        # commit's is, else a blip before the step acted would fail it and park it.
        if not repeat_safe and not reconnect.retry_on_lost_connection(
            functools.partial(claims.mark_effect_begun, claimed), what=f"step {claimed.step_id} ({claimed.node_id}) effect mark"
        ):
            # Recovery took the step back (its lease lapsed) before it began: not run here.
            return NodeError(f"step {claimed.step_id} attempt {claimed.attempt}: lease lost before it ran", code="lease_lost", retryable=False)
        faults.point("during_execute", node_id=claimed.node_id, step_id=claimed.step_id)
        if node.timeout_seconds:
            return threads.run_with_deadline(target, node.timeout_seconds, claimed, ctx.cancel_event)
        return target()
    except NodeError as exc:
        return exc
    except Exception as exc:  # a bug or an unexpected library error fails the attempt, not the worker
        log.exception("node %s raised", claimed.node_id)
        return NodeError(f"{type(exc).__name__}: {exc}", code="exception", retryable=True)
    finally:
        threads.heartbeats.untrack(claimed.step_id)


def run_claimed(claimed: ClaimedStep, *, released: Callable[[int], None] | None = None) -> ClaimedStep | None:
    """Execute and commit one claimed step; return a successor leased to us, if any.
    ``released(n)`` is told, right after the commit, how many steps it handed to the
    queue (the step threads claim that many at once: :class:`runs.engine.threads.StepThreads`).

    A finished result is never thrown away by a lost database connection: the commit is
    tried again on a fresh connection, same attempt and same fence, for up to
    ``BALLAST_COMMIT_RETRY_SECONDS`` (runs.engine.store.reconnect); only a lost fence ends it.
    Any other failure of the commit hands the lease back at once (re-queued, or parked
    when not safe to repeat, as recovery does for a stopped worker) and re-raises, so no
    step is left running under a live owner.

    Every record logged meanwhile carries the step's run, step, attempt, worker and trace
    id (core.log_context); with traces on, the attempt is a span under the run's stored
    trace context, ended with the commit (core.tracing): a step that parks the run at a
    gate has committed by then, so no span stays open across the wait.
    """
    trace_id = tracing.trace_id_of(claimed.traceparent)
    with log_context.bound(run_id=claimed.run_id, step_id=claimed.step_id, attempt=claimed.attempt, worker=claimed.worker, trace_id=trace_id):
        attributes = _span_attributes(claimed) if tracing.enabled() else None
        with tracing.span(f"step {claimed.node_id}", traceparent=claimed.traceparent, attributes=attributes) as span:
            return _run_claimed(claimed, span, released)


def _span_attributes(claimed: ClaimedStep) -> dict[str, object]:
    """An attempt span's attributes (``ballast.*``): which run, step, node and attempt, and
    the worker and build that ran it."""
    return {
        "ballast.run.id": claimed.run_id,
        "ballast.step.id": claimed.step_id,
        "ballast.node.id": claimed.node_id,
        "ballast.node.kind": claimed.kind,
        "ballast.step.iteration": claimed.iteration,
        "ballast.step.attempt": claimed.attempt,
        "ballast.worker": claimed.worker,
        "ballast.build": build(),
    }


def _run_claimed(claimed: ClaimedStep, span: tracing.Span | None, released: Callable[[int], None] | None = None) -> ClaimedStep | None:
    """:func:`run_claimed`'s work inside its log fields and span (None: traces off)."""
    kind = _metric_kind(claimed)
    metrics.labelled(metrics.STEPS_STARTED, kind).inc()
    outcome_value = execute_node(claimed)
    if isinstance(outcome_value, NodeError):
        tracing.set_error(span, outcome_value.code, str(outcome_value))
    faults.point("before_commit", node_id=claimed.node_id, step_id=claimed.step_id)
    tries = 0
    commit_began = time.perf_counter()

    def commit_once() -> CommitOutcome:
        nonlocal tries
        tries += 1
        return _commit(claimed, outcome_value)

    try:
        outcome = reconnect.retry_on_lost_connection(commit_once, what=f"step {claimed.step_id} ({claimed.node_id}) commit")
        if tries > 1 and not outcome.committed and claims.attempt_settled(claimed):
            # The commit landed and only its reply was lost: the retry found its own fence
            # gone. What it kept for this worker goes back to the queue (its doorbells
            # were lost with the reply; recovery rings for what it released).
            log.warning("step %s (%s): its commit had landed before the connection was lost", claimed.step_id, claimed.node_id)
            in_hand = threads.held.ids() - {claimed.step_id}  # what this process's other step threads hold
            outcome = CommitOutcome(committed=True, dispatch=claims.steps_release_kept(claimed.run_id, claimed.worker, in_hand=in_hand))
    except Exception:
        _hand_back(claimed)
        raise
    _observe_commit(claimed, kind, outcome_value, outcome, time.perf_counter() - commit_began)
    tracing.set_attributes(span, {"ballast.committed": outcome.committed})
    faults.point("after_commit", node_id=claimed.node_id, step_id=claimed.step_id)
    dispatch.enqueue(outcome.dispatch)
    if released is not None:
        released(len(outcome.dispatch))
    if outcome.next_step is not None:
        dispatch.taken(outcome.next_step.step_id)
    return outcome.next_step


def _metric_kind(claimed: ClaimedStep) -> str:
    """The node kind of ``claimed``'s spec node as a metric label (a child step counts
    under its parent's kind); ``unknown`` when its version cannot be read."""
    try:
        return metrics.bounded("kind", graphs.step_node(claimed.version_id, claimed.node_id).kind)
    except Exception:  # observation never fails a step: the execution reports the real error
        return "unknown"


def _observe_commit(claimed: ClaimedStep, kind: str, value: NodeResult | NodeError, outcome: CommitOutcome, seconds: float) -> None:
    """Metrics of one commit, once it returned (a lost lease wrote nothing: only its
    latency is counted): the step committed or failed (by error code), and the LLM usage
    and cost it stored, by graph, provider and model. Never raises."""
    try:
        metrics.labelled(metrics.COMMIT_SECONDS, "committed" if outcome.committed else "lease_lost").observe(seconds)
        if not outcome.committed:
            return
        if isinstance(value, NodeError):
            metrics.labelled(metrics.STEPS_FAILED, kind, metrics.bounded("code", value.code)).inc()
        else:
            metrics.labelled(metrics.STEPS_COMMITTED, kind).inc()
        usage = value.usage
        if usage is not None or value.cost_usd:
            metrics.record_llm_usage(
                graph=graphs.graph_name(claimed.version_id),
                provider=usage.provider if usage else "",
                model=usage.model if usage else "",
                input_tokens=usage.input_tokens if usage else 0,
                output_tokens=usage.output_tokens if usage else 0,
                cost_usd=value.cost_usd,
            )
    except Exception:
        log.exception("step %s: recording its commit's metrics failed", claimed.step_id)


def _claim_timed(claim: Callable[[], _C]) -> _C:
    """``claim()`` with its latency observed (ballast_step_claim_seconds)."""
    began = time.perf_counter()
    claimed = claim()
    result = "claimed" if isinstance(claimed, ClaimedStep) else "none"
    metrics.labelled(metrics.CLAIM_SECONDS, result).observe(time.perf_counter() - began)
    return claimed


def _commit(claimed: ClaimedStep, value: NodeResult | NodeError) -> CommitOutcome:
    """The fenced commit of ``claimed``'s outcome: its result, or its failure."""
    if isinstance(value, NodeError):
        return commit.step_fail(claimed, value)
    try:
        return commit.step_commit(claimed, value)
    except connections.DataError as exc:
        # The database refused a value the checks let through (they should not): the
        # same result would be refused again, so the step fails with the database's
        # reason instead of escaping as an exception that leaves it running until its
        # lease runs out and recovery counts it as a lost worker.
        log.exception("step %s (%s): the database refused its commit", claimed.step_id, claimed.node_id)
        error = NodeError(f"the database refused the step's result: {exc}", code="commit_refused", retryable=False)
        return commit.step_fail(claimed, error)


def _hand_back(claimed: ClaimedStep) -> None:
    """After a commit that failed for good: give the step's lease back now, as the
    graceful stop's recovery pass does (re-queued with the same idempotency key, or parked
    when it is not safe to repeat and its effect began), instead of leaving it running
    under this live worker until lease and live-owner grace run out. Never raises (the
    database may be what failed: then the lease runs out)."""
    try:
        connections.drop_broken()
        mine = claimed.worker
        due = recovery_queries.step_recover(claimed.step_id, recovered_by=mine, owner_is_dead=lambda owner: owner == mine)
        dispatch.enqueue(due)
        log.warning("step %s (%s): its commit failed; lease handed back (%s)", claimed.step_id, claimed.node_id, "re-queued" if due else "parked or gone")
    except Exception:
        log.exception("step %s (%s): its commit failed and its lease could not be handed back; it runs out", claimed.step_id, claimed.node_id)


def execute_step(step_id: int, *, worker: str | None = None) -> None:
    """Claim ``step_id`` and run it, then any successor leased to this worker.

    Idempotent: a step that is not pending (finished, running elsewhere) is left alone.
    A worker asked to stop (workers.stop_requested) claims nothing new and hands back a
    kept successor instead of running it. In-process mode runs its queue this way.
    """
    worker = worker or current_worker()
    if stop_requested():
        # A task pulled before the stop (django-q2 runs its prefetched tasks first): leave
        # the step unclaimed, back on the queue for another worker.
        dispatch.enqueue([step_id])
        return
    _run_chain(_claim_timed(lambda: claims.step_claim(step_id, worker)), worker, task_end=_task_end())


def step_claim_due(worker: str) -> ClaimedStep | None:
    """Claim the pending step that has been due the longest, for ``worker``; None when no
    step is due. What a queue message (a doorbell) does: which message arrives, in what
    order, twice or never, cannot change which step runs next (the pick and the claim:
    runs.engine.store.claims.claim_oldest_due).

    Before each pick, a waiting step whose deadline passed (an approval's:
    runs.engine.store.deadlines) is fired, once, and the pick starts again: a deadline is
    late by definition, and firing it runs no node. It costs the claim one indexed read
    that finds nothing. So is a due row of a registered source (a schedule's tick:
    runs.engine.sources), one per pass, each in its own transaction, at the cost of one
    more such read per source; but at most ``SOURCE_ROWS_PER_PICK`` of them before a step
    is picked, so a step already due (the first step of a run a tick just started) is
    not kept waiting behind a thousand ticks due at the same second. When no step is due,
    the claim goes back to the sources until none is due either.
    """
    broken: set[str] = set()  # sources that raised in this claim: not asked again in it
    fired = 0  # source rows fired since the last pick
    while True:
        now = clock.now()
        due_waiting = deadlines.next_due_waiting(now)
        if due_waiting is not None:
            # A waiting step's deadline passed: fire it (one transaction of its own, run
            # row first, as every writer of the run) and pick again. Not under this
            # claim's step lock: the firing takes the run row, and waiting for it while
            # holding a picked step could deadlock with that run's committer.
            try:
                dispatch.enqueue(deadlines.step_fire_due(due_waiting, worker=worker))
            except Exception:
                # A deadline that cannot fire must not block every doorbell behind it
                # (it is the oldest due row): try it again in a minute.
                log.exception("deadline of step %s failed to fire; trying again in %ss", due_waiting, DEADLINE_RETRY_SECONDS)
                deadlines.deadline_postpone(due_waiting, now + timedelta(seconds=DEADLINE_RETRY_SECONDS))
            continue
        if fired < SOURCE_ROWS_PER_PICK and _fire_due_source(now, worker, broken):
            fired += 1
            continue
        claimed = _claim_timed(functools.partial(claims.claim_oldest_due, worker, now))
        if isinstance(claimed, claims.PickAgain):
            continue
        if claimed is None and fired >= SOURCE_ROWS_PER_PICK:
            fired = 0  # no step is due: the sources' rows that wait are next
            continue
        return claimed


# Due rows of registered sources fired by one claim before it picks a step. With 1,000
# schedules due at the same second, firing all of them first kept the first triggered
# run's start step waiting 44 s while the ticks themselves fired within 17 s (python -m
# bench schedules); 16 keeps a step's wait behind the ticks to about one tick's
# transactions x 16 (tens of ms) and costs the ticks one pick read per 16.
SOURCE_ROWS_PER_PICK = 16


def _fire_due_source(now: datetime, worker: str, broken: set[str]) -> bool:
    """Fire one due row of the first registered source that has one (not in ``broken``);
    True when one was fired. A source that raises is logged and added to ``broken``: its
    row stays due (its transaction rolled back) for the next claim, and this claim goes
    on to the steps rather than spin on it."""
    due_by = clock.due_by(now)  # a row due within the clock's slack is due (clock.DUE_SLACK)
    for source in sources.registered():
        if source.name in broken or source.earliest_due(due_by) is None:
            continue
        try:
            if source.fire_next(due_by, worker):
                return True
        except Exception:
            log.exception("due source %s failed to fire a due row; it stays due", source.name)
            broken.add(source.name)
            connections.drop_broken()
    return False


def execute_due(hint: int, *, worker: str | None = None) -> None:
    """Answer one doorbell: claim the step that has been due longest (whichever step
    ``hint``, the id the doorbell was rung for, names), run it and any successor leased
    to this worker. Nothing due (a duplicate or late doorbell): does nothing.

    Up to ``BALLAST_WORKER_STEP_THREADS`` claimed steps run at once, each chain on a
    thread of its own (:class:`runs.engine.threads.StepThreads`): while a slot is free this task goes on
    claiming the next due step the same way, so parallel branches a commit released run
    side by side in this worker without a broker round trip each (their own doorbells,
    delivered later, find nothing and do nothing). It claims for
    BALLAST_DOORBELL_DRAIN_SECONDS from the start of the task, and after that for as
    long as a step of it still runs (its slots would idle otherwise), never past the
    task's budget (dispatch.task_budget_seconds) nor once the worker is asked to stop
    or recycled; ``BALLAST_DOORBELL_DRAIN_SECONDS`` 0 claims one step per doorbell. A
    step claimed runs to its end, as any step does; the task ends when every one has.
    A worker asked to stop claims nothing and rings the doorbell again for another
    worker. An exception a step's chain raised is raised here once all have ended.
    """
    worker = worker or current_worker()
    if stop_requested():
        dispatch.enqueue([hint])
        return
    _drain(worker)


# How long a task whose steps all run, with nothing due at its last claim, waits before it
# claims again (its own commits wake it at once: what they released is claimed then). A
# claim that finds nothing is one indexed read.
CLAIM_POLL_SECONDS = 0.5


def _drain(worker: str) -> None:
    """:func:`execute_due`'s work: claim due steps and run them, up to
    ``BALLAST_WORKER_STEP_THREADS`` at once (:class:`runs.engine.threads.StepThreads`)."""
    began = time.monotonic()
    window = settings.BALLAST_DOORBELL_DRAIN_SECONDS

    def more(steps: threads.StepThreads) -> bool:
        if steps.claimed == 0:
            return True
        if window <= 0:
            return False  # one step (and its kept successors) per doorbell
        return time.monotonic() < began + window or steps.running() > 0

    threads.StepThreads(
        worker, task_end=_task_end(), claim=functools.partial(step_claim_due, worker), more=more, poll=CLAIM_POLL_SECONDS, run_chain=_run_chain
    ).run()


def _task_end() -> float | None:
    """The monotonic time after which this doorbell task takes no further kept successor
    (dispatch.task_budget_seconds from now), or None without a budget."""
    budget = dispatch.task_budget_seconds()
    return None if budget is None else time.monotonic() + budget


def _run_chain(
    claimed: ClaimedStep | None, worker: str, *, task_end: float | None = None, after_commit: Callable[[int], None] | None = None
) -> bool:
    """Run ``claimed`` and each successor its commit leases to ``worker``. False when this
    worker should take no more work in this task (stopping, recycling its process, or past
    ``task_end``: a kept successor is then handed back to the queue, to run in a new task
    with django-q2's timeout counted afresh, rather than late in this one).
    ``after_commit(n)`` is called after each commit with the number of steps it released
    to the queue (:class:`runs.engine.threads.StepThreads` claims them onto step threads)."""
    first = True
    released = [0]  # how many steps the last commit released to the queue

    def note_released(n: int) -> None:
        released[0] = n

    # A step is held (see _Held) from its claim to its commit, and a kept successor from
    # the commit that leased it, never a moment unheld in between.
    if claimed is not None:
        threads.held.add(claimed.step_id)
    while claimed is not None:
        over_budget = not first and task_end is not None and time.monotonic() >= task_end
        if stop_requested() or over_budget:
            # The cluster is stopping (or the task is old): the step in hand is done; its
            # successor goes back to the queue for another task (or this cluster's next
            # start) to run.
            try:
                if claims.step_release(claimed):
                    dispatch.enqueue([claimed.step_id])
                    why = "task budget spent" if over_budget and not stop_requested() else "stopping"
                    log.info("worker %s %s: handed step %s back to the queue", worker, why, claimed.step_id)
            finally:
                threads.held.discard(claimed.step_id)
            return False
        first = False
        released[0] = 0
        try:
            following = run_claimed(claimed, released=note_released)
            if following is not None:
                threads.held.add(following.step_id)
        finally:
            threads.held.discard(claimed.step_id)
        claimed = following
        if after_commit is not None:
            after_commit(released[0])
    # Every lease of this task is committed or failed by now: a worker full of abandoned
    # step threads can end here without handing anything back.
    abandoned = threads.abandoned_steps()
    if abandoned > settings.BALLAST_MAX_ABANDONED_STEPS and dispatch.worker_recycle():
        log.warning("%d abandoned step thread(s) in worker %s: recycling the process after this task", abandoned, worker)
        return False
    return not stop_requested()


def _drive_queue(queue: deque[int], worker: str, *, poll: float) -> None:
    """Run the steps the in-process ``queue`` names (and what their commits add to it),
    up to ``BALLAST_WORKER_STEP_THREADS`` at once (:class:`runs.engine.threads.StepThreads`), until it is empty and
    every chain has ended."""

    def claim() -> ClaimedStep | None:
        while True:
            try:
                step_id = queue.popleft()
            except IndexError:
                return None
            claimed = _claim_timed(functools.partial(claims.step_claim, step_id, worker))
            if claimed is not None:
                return claimed

    threads.StepThreads(worker, task_end=None, claim=claim, more=lambda steps: True, poll=poll, run_chain=_run_chain).run()


def _fire_local_sources(worker: str) -> bool:
    """Fire every due row of the sources the in-process driver fires (``in_drive_local``);
    True when one fired. What they make runnable rings this process's local queue."""
    fired = False
    for source in sources.registered():
        if not source.in_drive_local:
            continue
        while (due_by := clock.due_by(clock.now())) and source.earliest_due(due_by) is not None and source.fire_next(due_by, worker):
            fired = True
    return fired


def drive_local(run_id: int, *, queue: deque[int], poll: float = 0.05, stop_when_waiting: bool = True, timeout: float | None = None) -> str:
    """Run one run's steps in this process until it ends (or waits at a gate).

    ``queue`` is the deque from ``dispatch.local_mode()``. Steps whose retry backoff is
    running are picked up when due (once the steps running then have ended). Returns
    the run's status. Parallel branches run at once, up to BALLAST_WORKER_STEP_THREADS
    (:class:`runs.engine.threads.StepThreads`): a chain this thread claims runs on it, the branches a
    commit releases on step threads, which close their connections when their chain
    ends. Called inside a transaction, every step runs on this thread, one at a time.

    The thread's database connection is kept for the whole drive, and left open when it
    returns, as the status read always left it: the caller's own lifecycle closes it (a
    request's end, the command's exit). Only a connection that had an error and fails a
    liveness check is dropped between steps (runs.engine.store.connections.drop_broken). Django's
    ``close_old_connections()``, which this loop called after every burst of steps, also
    closes a healthy connection once ``CONN_MAX_AGE`` (0 here, outside workers) has
    passed: a new connection (a server backend fork, about 6 ms) per in-process run,
    and the fast path's statements prepared and planned again on it.

    Kept connections and forks: no process that calls this forks with its connection in
    use by the child. drive_local never runs inside a qcluster (its workers run
    :func:`execute_step` and :func:`execute_due`, and keep their connections by
    ``BALLAST_WORKER_CONN_MAX_AGE``; runs.engine.cluster closes the forking thread's
    connections before django-q2 forks the sentinel and its children). Clusters,
    the expression sandbox and the benchmark's helpers are started with
    ``subprocess`` (fork and exec, descriptors closed), and the heartbeat, step and
    timed-step threads use and close connections of their own (Django's are per thread).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    worker = current_worker()
    while True:
        _drive_queue(queue, worker, poll=poll)
        connections.drop_broken()
        if _fire_local_sources(worker):
            continue  # a child run's result reached its parent step: its successors are queued
        status = selectors.run_status(run_id)
        if status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED):
            return status
        if status == RunStatus.WAITING and stop_when_waiting:
            return status
        if deadline is not None and time.monotonic() > deadline:
            return status
        # A deadline of this run that passed fires here (in a cluster, the doorbell's
        # claim by due time fires it: step_claim_due).
        while (due_waiting := deadlines.next_due_waiting(clock.now(), run_id=run_id)) is not None:
            queue.extend(deadlines.step_fire_due(due_waiting, worker=worker))
        if status == RunStatus.QUEUED:
            # A run held in its graph's line (flow control): admit at due gates here, as
            # a cluster's claim by due time would.
            queue.extend(flow.fire_next(clock.now()) or [])
        due = recovery_queries.due_pending_steps(stale_seconds=0, run_id=run_id)
        queue.extend(due)
        if not due:
            # Steps of this run left running by a dead process (a killed run_graph).
            for step_id in recovery_queries.expired_step_ids(owner_is_dead, run_id=run_id):
                queue.extend(recovery_queries.step_recover(step_id, recovered_by=worker, owner_is_dead=owner_is_dead))
            if not queue:
                time.sleep(poll)
