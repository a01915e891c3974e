"""The engine's public functions: the only engine module services, commands, tasks, consumers and apps call.

Every write here commits in one short transaction (or inside the caller's, where said)
and hands the steps it made runnable to the queue only after that commit
(``transaction.on_commit``): a crash between the two loses nothing, since recovery
dispatches pending steps no queue entry holds. Step ids returned are informational; the
caller never dispatches them itself. Value types and errors live in runs.engine.types
(import them from there; the two the product's callers catch are re-exported here).

These are the operations code outside the engine calls, and nothing else: the
step-level entry points (claim, commit, fail, recover one step) and the worker plumbing
tests drive directly are where they live (runs.engine.loop, runs.engine.store), gathered
for tests in tests/support/engine.py.

Invariants every function keeps: a committed step's output is a fact and never computed
again; a commit lands only under the lease it was claimed with (owner + attempt); every
change to a run row bumps ``Run.version``; audit rows commit with the change they record.
"""
from __future__ import annotations

from collections import deque
from decimal import Decimal
from typing import Any

from django.conf import settings

from graphs.models import GraphVersion
from runs.engine import cluster, dispatch, faults, loop, recovery, sources, threads, workers
from runs.engine.store import (
    clock,
    commit,
    connections,
    events,
    flow,
    liveness,
    operations,
    recovery_queries,
    selectors,
)
from runs.engine.store import state as state_store
from runs.engine.store.graphs import compiled_graph, state_keys
from runs.engine.store.operations import ForkPlan
from runs.engine.store.state import StepState
from runs.engine.store.writes import lock_run, lock_run_for_audit, run_cost_adjust
from runs.engine.types import (
    ResumePlan,
    RunNotFound,
    StartedRun,
    StateWriteRefused,
    StepStateError,
    TestRunRefused,
    VersionUnrunnable,
)
from runs.models import Run, RunStatus, Step
from runs.nodes.base import NodeResult
from runs.signals import run_finished

__all__ = [
    "HOST",
    "DueSource",
    "StateWriteRefused",
    "VersionUnrunnable",
    "cluster_serve",
    "compiled_graph",
    "db_now",
    "drive_local",
    "due_sources_ring_on_commit",
    "fault_point",
    "flow_fire_next",
    "flow_gate_touch",
    "flow_queue_place",
    "fork_kept_steps",
    "heartbeat_window",
    "is_cluster_main_process",
    "local_mode",
    "owner_is_dead",
    "queue_depth",
    "register_due_source",
    "register_flow_gates",
    "run_cancel",
    "run_cost_adjust",
    "run_event_append",
    "run_fork",
    "run_fork_preview",
    "run_lock",
    "run_lock_for_audit",
    "run_resume",
    "run_resume_preview",
    "run_retry",
    "run_retry_preview",
    "run_start",
    "run_start_node_test",
    "start_supervisor",
    "state_keys",
    "step_complete_waiting",
    "step_execute_due",
    "step_fail_parked",
    "step_fail_waiting_child",
    "step_requeue_parked",
    "step_skip_parked",
    "step_state",
    "steps_worker_alive",
    "workers_alive",
    "workers_health",
]

# Local execution (run_graph without a worker, tests) and worker identity.
local_mode = dispatch.local_mode
# Read-side liveness of running steps' workers (API, admin): {step id: alive, or None}.
steps_worker_alive = liveness.steps_worker_alive
# Seconds after which a cluster's heartbeat row counts as silent; whether a lease owner on
# this host is certainly gone (psutil). For the workers page.
HOST = workers.HOST
heartbeat_window = liveness.heartbeat_window
# Liveness of worker hosts and their clusters (manage.py check_health, /readyz's detail).
workers_health = liveness.workers_health
owner_is_dead = workers.owner_is_dead
is_cluster_main_process = recovery.is_cluster_main_process
start_supervisor = recovery.start_supervisor
cluster_serve = cluster.serve
# Rows of apps above the engine that fall due (a schedule's tick), fired by the engine's own
# claim by due time and rung for by recovery (runs.engine.sources): registered from an
# AppConfig.ready, since the engine imports no app above runs.
DueSource = sources.DueSource
register_due_source = sources.register
# The database's clock (aware UTC): what a due row's time is written and judged with.
db_now = clock.now
# A named crash point (runs.engine.faults; a no-op unless a test arms it) for code outside
# the engine that commits on the engine's behalf (a due source's firing).
fault_point = faults.point


def due_sources_ring_on_commit() -> None:
    """Ring one doorbell after the caller's transaction commits, so a worker's claim fires
    the due source row that transaction made due (a finished child run owes its parent
    step its result: runs.subgraphs) now rather than at the next recovery pass."""
    connections.on_commit(lambda: dispatch.enqueue([sources.DOORBELL_HINT]))
# (due steps, seconds the oldest has been due or None): the web's metrics collector.
queue_depth = recovery_queries.due_summary


def _dispatch_on_commit(step_ids: list[int]) -> list[int]:
    if step_ids:
        connections.on_commit(lambda: dispatch.enqueue(step_ids))
    return step_ids


# --------------------------------------------------------------------------- start


def run_start(
    *,
    version: GraphVersion,
    run_input: dict[str, Any],
    actor: str = "system",
    actor_type: str = "system",
    created_by: Any = None,
    idempotency_key: str | None = None,
    budget_usd: Decimal | None = None,
    budget_tokens: int | None = None,
    source: str = "",
    flow_line: str | None = None,
    parent_step_id: int | None = None,
) -> Run:
    """Commit a new run of ``version`` (validated graph, validated JSON-object input) with its
    start step pending, audited as ``run.start``; the start step goes to the queue after
    commit. ``budget_usd``/``budget_tokens`` override the graph's settings; ``source``
    names what started it ("webhook <name>"; "" for a direct start). The run exists
    before anything executes. Raises IntegrityError when ``idempotency_key`` is already
    taken (the service turns that into the earlier run); StateWriteRefused when the input
    holds a value JSON cannot carry or the initial state passes BALLAST_MAX_STATE_BYTES;
    VersionUnrunnable (nothing written) when the version's stored spec no longer parses
    or a limit the run would store does not fit its row. A run of a graph with flow
    control (or on a ``flow_line``, "schedule:<id>") may be committed held, queued with
    no step, until its gate admits it (runs.engine.store.flow)."""
    started = operations.run_create(
        version=version,
        run_input=run_input,
        actor=actor,
        actor_type=actor_type,
        created_by=created_by,
        idempotency_key=idempotency_key,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        source=source,
        flow_line=flow_line,
        parent_step_id=parent_step_id,
    )
    _dispatch_on_commit(started.step_ids)
    return started.run


def flow_fire_next(now: Any, worker: str) -> bool:
    """The flow gates' due source ``fire_next`` (runs.engine.store.flow): admit at one due
    gate and ring the doorbells of the runs it admitted; True when it fired one."""
    admitted = flow.fire_next(now)
    if admitted is None:
        return False
    if admitted:
        dispatch.enqueue(admitted)
    return True


def register_flow_gates() -> None:
    """Make flow control work in this process (runs.wiring, once): admission as a due
    source and ``run_finished`` (sent inside every terminal transaction) making the gate due."""
    sources.register(sources.DueSource(name="flow", earliest_due=flow.earliest_due, fire_next=flow_fire_next))
    run_finished.connect(_run_ended, dispatch_uid="ballast_flow_run_ended")


def _run_ended(sender: Any, run: Run, **kwargs: Any) -> None:
    flow.run_ended(run)


# Where a held run waits in line, or None (the run API and page); make a graph's gate due
# after its limits changed (builder.services).
flow_queue_place = flow.queue_place
flow_gate_touch = flow.gate_touch


def run_start_node_test(
    *,
    version: GraphVersion,
    node_id: str,
    state: dict[str, Any],
    actor: str,
    actor_type: str,
    created_by: Any = None,
    known_keys: frozenset[str] | None = None,
) -> StartedRun:
    """Commit a test run (``is_test``) of node ``node_id`` of test snapshot ``version``: its
    first step is that node, with ``state`` as the committed state (``state["input"]``, an
    object, is the run input; other keys must be among ``known_keys`` when given);
    audited as ``run.test_node``; the step goes to the queue after commit. Raises
    ValueError (not a test snapshot), KeyError (no such node), StateWriteRefused (nothing
    written: see operations.run_create_node_test)."""
    started = operations.run_create_node_test(
        version=version, node_id=node_id, state=state, actor=actor, actor_type=actor_type, created_by=created_by, known_keys=known_keys
    )
    _dispatch_on_commit(started.step_ids)
    return started


# --------------------------------------------------------------------------- run


def step_execute_due(hint: int, *, worker: str | None = None) -> None:
    """Answer one queue doorbell: claim the pending step that has been due longest (not
    necessarily ``hint``, the step it was rung for), execute and commit it, and go on with
    any successor the commit leased to this worker. Nothing due: does nothing, so a
    duplicate, late or reordered delivery changes nothing."""
    loop.execute_due(hint, worker=worker)


def drive_local(run_id: int, *, queue: deque[int], poll: float = 0.05, stop_when_waiting: bool = True, timeout: float | None = None) -> str:
    """Run one run's steps in this process (``queue`` from :func:`local_mode`) until it ends,
    waits at a gate (``stop_when_waiting``) or ``timeout`` seconds pass; returns its status."""
    return loop.drive_local(run_id, queue=queue, poll=poll, stop_when_waiting=stop_when_waiting, timeout=timeout)


# --------------------------------------------------------------------------- decide


def step_complete_waiting(step_id: int, result: NodeResult, *, actor: str, reason: str) -> list[int]:
    """Finish a waiting (gate) or parked step with ``result`` (a decision, or a skip with a
    given output) and create its successors, inside the caller's transaction (the decision
    row commits with it). Raises StepStateError when the step is not waiting or parked, so
    deciding twice never resumes twice; StateWriteRefused when the result writes a key the
    graph does not know, holds a value JSON cannot carry, or would pass the state size
    limit (the caller's transaction must roll back)."""
    return _dispatch_on_commit(operations.step_complete_waiting(step_id, result, actor=actor, reason=reason))


def step_requeue_parked(step_id: int, *, actor: str) -> list[int]:
    """Send a parked step back to pending (a person chose "retry": same idempotency key),
    inside the caller's transaction. Raises StepStateError when it is not parked."""
    return _dispatch_on_commit(operations.step_requeue_parked(step_id, actor=actor))


def step_skip_parked(step_id: int, *, output: dict[str, Any] | None, actor: str) -> list[int]:
    """Finish a parked step as "skip" with ``output`` (an agent tool call: the result the
    model is given; a top-level step: its state updates), inside the caller's transaction.
    Raises StepStateError when it is not parked."""
    return _dispatch_on_commit(operations.step_skip_parked(step_id, output=output, actor=actor))


def step_fail_parked(step_id: int, *, actor: str, message: str, code: str = "rejected", details: dict[str, Any] | None = None) -> None:
    """Fail a waiting or parked step and its run (a rejection without a reject edge,
    "fail" for an interrupted step, a child run that failed: ``code`` and ``details`` go
    into the error), inside the caller's transaction. Raises StepStateError."""
    operations.step_fail_parked(step_id, actor=actor, message=message, code=code, details=details)


def step_fail_waiting_child(step_id: int, *, actor: str, error: dict[str, Any]) -> list[int]:
    """Fail a waiting child step with ``error`` and wake its parent (an agent's graph
    tool whose child run failed: the model is told, the run goes on), inside the caller's
    transaction; its dispatch is rung after commit. Raises StepStateError."""
    return _dispatch_on_commit(commit.step_fail_waiting_child(step_id, actor=actor, error=error))


# --------------------------------------------------------------------------- cancel, resume, retry, fork


def run_cancel(run_id: int, *, actor: str, actor_type: str = "user", reason: str = "") -> bool:
    """Cancel a run (terminal status, open steps cancelled, audited). Its running steps
    see their cancel event at once (in this process now; in a worker at its next check,
    BALLAST_CANCEL_POLL_SECONDS), stop their tool or model call, and end cancelled when
    they commit: never a success after ``run_cancelled``. False when it had already
    ended. Raises RunNotFound."""
    cancelled = operations.run_cancel(run_id, actor=actor, actor_type=actor_type, reason=reason)
    if cancelled:
        threads.run_ended_here(run_id)
    return cancelled


def _not_a_test(run_id: int, action: str) -> None:
    """Raise TestRunRefused when run ``run_id`` is a node-test run (``action``: "resumed",
    "retried", "forked" for the message); RunNotFound when there is no such run.
    ``is_test`` never changes after the run is created, so no lock is needed."""
    is_test = selectors.run_is_test(run_id)
    if is_test is None:
        raise RunNotFound(run_id)
    if is_test:
        raise TestRunRefused(f"run {run_id} is a test of one node from the builder; it cannot be {action}: test the node again in the builder")


def run_resume(
    run_id: int, *, actor: str, actor_type: str = "user", budget_usd: Decimal | None = None, budget_tokens: int | None = None
) -> list[int]:
    """Continue a failed run from the step that failed (fresh attempts; optionally a new
    budget) or re-queue a parked run's interrupted steps; committed steps never run again.
    Audited. Raises RunNotFound, TestRunRefused (a node-test run), StepStateError (neither
    failed nor parked)."""
    _not_a_test(run_id, "resumed")
    ids = operations.run_resume(run_id, actor=actor, actor_type=actor_type, budget_usd=budget_usd, budget_tokens=budget_tokens)
    return _dispatch_on_commit(ids)


def _retry_allowed(run_id: int) -> None:
    _not_a_test(run_id, "retried")
    status = selectors.run_status_or_none(run_id)
    if status is None:
        raise RunNotFound(run_id)
    if status != RunStatus.FAILED:
        raise StepStateError(f"run {run_id} is {status}; only a failed run can be retried")


def run_retry(run_id: int, *, actor: str, actor_type: str = "user") -> list[int]:
    """Retry a failed run from the step that failed (resume, for failed runs only).
    Raises RunNotFound, TestRunRefused (a node-test run), StepStateError (the run is not failed)."""
    _retry_allowed(run_id)
    return run_resume(run_id, actor=actor, actor_type=actor_type)


def run_resume_preview(run_id: int) -> ResumePlan:
    """What :func:`run_resume` would do now (the same plan it applies; nothing changes):
    the steps it reopens or re-queues and the committed steps it keeps. Raises
    RunNotFound, TestRunRefused, StepStateError (as run_resume)."""
    _not_a_test(run_id, "resumed")
    return operations.run_resume_preview(run_id)


def run_retry_preview(run_id: int) -> ResumePlan:
    """What :func:`run_retry` would do now (nothing changes). Raises RunNotFound,
    StepStateError (the run is not failed)."""
    _retry_allowed(run_id)
    return operations.run_resume_preview(run_id)


def run_fork_preview(run_id: int, *, step_id: int, state_patch: dict[str, Any]) -> ForkPlan:
    """What :func:`run_fork` would start (the same plan it commits; nothing changes): the
    new run's state and first steps, and the source steps it keeps. Raises as run_fork."""
    _not_a_test(run_id, "forked")
    return operations.run_fork_preview(run_id, step_id=step_id, state_patch=state_patch)


def run_fork(
    run_id: int, *, step_id: int, state_patch: dict[str, Any], actor: str, actor_type: str = "user", created_by: Any = None
) -> Run:
    """Start a new run of the same graph version from committed top-level step ``step_id`` of
    run ``run_id``: the state as it was right after that step, ``state_patch`` on top, that
    step's successors pending. Audited. Raises RunNotFound, TestRunRefused (a node-test
    run: its snapshot is a harness, not the graph), StepStateError,
    StateWriteRefused (the patch writes an unknown key, holds a value JSON cannot carry,
    or passes the state size limit)."""
    _not_a_test(run_id, "forked")
    started = operations.run_fork(run_id, step_id=step_id, state_patch=state_patch, actor=actor, actor_type=actor_type, created_by=created_by)
    _dispatch_on_commit(started.step_ids)
    return started.run


def fork_kept_steps(source: Run, anchor: Step) -> list[Step]:
    """The steps of ``source`` a fork at its step ``anchor`` kept: its committed top-level
    steps up to and including the anchor, in commit order (the steps whose writes made the
    fork's first state; the same set :func:`run_fork_preview` lists as ``kept``)."""
    return state_store.committed_steps(source, anchor)


def step_state(step_id: int) -> StepState:
    """The state of a run right after its committed top-level step ``step_id``, and what
    that step changed (``StepState.changed``: key -> before/after), for the run page:
    two queries, no replay (runs.engine.store.state). Raises StepStateError when the step does
    not exist or is not a succeeded top-level step."""
    step = selectors.step_or_none(step_id)
    if step is None:
        raise StepStateError(f"step {step_id} does not exist")
    try:
        return state_store.state_after(step)
    except ValueError as exc:
        raise StepStateError(str(exc)) from None


def run_lock(run_id: int) -> Run:
    """Lock and read a run row inside the caller's transaction (the lock every engine commit
    of that run takes first). Raises Run.DoesNotExist."""
    return lock_run(run_id)


def run_lock_for_audit(key: str) -> None:
    """The lock an append to the audit chain ``run:<key>`` takes first (runs.apps registers
    it with audit.chain.register_scope_lock): the run row, as every engine commit of that
    run takes it first. Nothing when the run is gone."""
    lock_run_for_audit(key)


# --------------------------------------------------------------------------- recover


def workers_alive() -> bool:
    """Whether a qcluster sent a heartbeat recently (run_graph uses it to pick in-process)."""
    return recovery_queries.workers_alive(max(5.0, 3 * settings.BALLAST_RECOVERY_INTERVAL))



def run_event_append(run_id: int, *, kind: str, data: dict[str, Any], step_id: int | None = None) -> None:
    """Append one event (``kind``: a RunEventKind value, ``data`` its JSON payload) to run
    ``run_id`` in the caller's transaction; it is numbered with the run's other events and
    reaches live viewers after the commit, like the engine's own (runs.engine.store.events)."""
    events.create(run_id=run_id, step_id=step_id, kind=kind, data=data)
