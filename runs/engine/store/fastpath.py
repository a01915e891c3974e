"""The sequential fast commit: decide in Python from the worker's run snapshot, write in fixed SQL.

A step that is its run's only active step, with one successor, commits from the snapshot
its worker's previous commit left (checked by ``Run.version``), without reading the run,
and writes of the state only the keys the step changed (runs.engine.store.state):
one statement on PostgreSQL (fastpath_postgresql), fixed statements in one transaction
on SQLite and other databases (fastpath_sqlite). Anything else, or a failed check,
returns None and the portable commit (runs.engine.store.commit) takes over.
``settings.BALLAST_FAST_COMMIT = False`` turns the fast path off (the conformance suite
runs the portable path that way).
"""
from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction

from core.build import build
from runs.engine import limits, scheduler
from runs.engine.store import clock, events, paths
from runs.engine.store import state as state_store
from runs.engine.store.claims import claim_details
from runs.engine.store.clock import db_time
from runs.engine.store.graphs import compiled_graph
from runs.engine.store.writes import add_usage, lease_delta, price_version
from runs.engine.types import ActiveStep, BranchSnapshot, ClaimedStep, CommitOutcome, spec_node_id, step_idempotency_key
from runs.models import (
    ACTIVE_STEP_STATUSES,
    FINISHED_EVENT_KINDS,
    AttemptStatus,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepStatus,
)
from runs.nodes.base import NodeResult
from runs.signals import run_finished

# The enum values the fixed statements take as parameters (no literals in the SQL).
ENUM_PARAMS: dict[str, str] = {
    "st_running": StepStatus.RUNNING.value,
    "st_succeeded": StepStatus.SUCCEEDED.value,
    "run_running": RunStatus.RUNNING.value,
    "att_running": AttemptStatus.RUNNING.value,
    "att_succeeded": AttemptStatus.SUCCEEDED.value,
    "ev_succeeded": RunEventKind.STEP_SUCCEEDED.value,
    "ev_created": RunEventKind.STEP_CREATED.value,
    "ev_started": RunEventKind.STEP_STARTED.value,
}


enabled = paths.enabled


def _dumps(value: Any) -> str | None:
    # Values were checked as JSON before the commit (limits.checked_result): no encoder
    # hook may turn anything into something else here, and NaN would be a bug.
    return None if value is None else json.dumps(value, allow_nan=False)


def _wires(run_id: int, rows: list[tuple[int, str, str | None]], last_seq: int, ids: list[int], now: Any) -> list[dict[str, Any]]:
    """Committed events in wire form (runs.engine.store.events.wire), for the push: ``rows`` are
    (step id, kind, JSON data) in seq order, ``ids`` their primary keys in the same order,
    the last one numbered ``last_seq``."""
    first = last_seq - len(rows) + 1
    return [
        events.wire(RunEvent(pk=pk, run_id=run_id, seq=first + i, step_id=sid, kind=kind, data=json.loads(data or "null"), created_at=now))
        for i, ((sid, kind, data), pk) in enumerate(zip(rows, ids, strict=True))
    ]


def fast_commit(claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int] | None = None) -> CommitOutcome | None:
    """Commit ``claimed`` (its result checked as JSON; ``written_sizes``: bytes per written
    key) and lease its single successor to the same worker, trusting the run snapshot
    (``claimed.snapshot``), or return None (nothing written) and let the caller take the
    portable path: budgets, an open transaction, a run that ends, fails or fans out, a
    write that would pass the state size limit, a stale snapshot or a lost lease."""
    run = claimed.snapshot
    assert run is not None
    if not enabled() or run.budget_usd is not None or run.budget_tokens is not None or transaction.get_connection().in_atomic_block:
        return None
    graph = compiled_graph(run.graph_version_id)
    transition = state_store.transition(run, node_id=claimed.node_id, iteration=claimed.iteration, depth=claimed.depth, result=result, other_active=[])
    # The end node ending the run with nothing else active: the run succeeds (finish).
    finishing = (
        transition.ended and not transition.activations and bool(transition.bookkeeping.get("ended"))
        and graph.topology.nodes[claimed.node_id].kind == "end"
    )
    if transition.failure or (not finishing and (transition.ended or len(transition.activations) != 1)):
        return None
    sizes = run.state_sizes
    if result.updates or sizes is None:
        sizes = limits.sizes_after(
            graph, old_state=run.state, old_sizes=sizes, new_state=transition.state, updates=result.updates, written=written_sizes,
            sets=result.sets,
        )
        limit = limits.max_state_bytes()
        if limit and sum(sizes.values()) > limit:
            return None  # the portable commit fails the step with state_too_large
    now = clock.now()
    common: dict[str, Any] = {
        **ENUM_PARAMS,
        "build": build(),
        "run": run.pk,
        "version": run.version,
        "step": claimed.step_id,
        "attempt": claimed.attempt,
        "owner": claimed.worker,
        # Only the keys the step wrote are encoded and stored (runs.engine.store.state); the
        # bookkeeping without the reducer contributions, which go with those keys.
        **_result_params(result, transition, sizes, now),
        "done_event": _dumps({"node_id": claimed.node_id, "iteration": claimed.iteration, "route": result.route}),
    }
    backend = paths.fast_path()
    if finishing:
        return _finish(backend, run, result, common, sizes=sizes, transition=transition, step_id=claimed.step_id, now=now)
    act = transition.activations[0]
    node = graph.topology.nodes[act.node_id]
    key = step_idempotency_key(run.uuid, act.node_id, act.iteration)
    params: dict[str, Any] = {
        **common,
        "next_node": act.node_id,
        "next_kind": node.kind,
        "next_iteration": act.iteration,
        "next_depth": act.depth,
        "next_max_attempts": node.retry.max_attempts,
        "next_key": key,
        "lease_until": connection.ops.adapt_datetimefield_value(now + lease_delta()),
        "created_event": _dumps({"node_id": act.node_id, "iteration": act.iteration}),
        "started_event": _dumps({"node_id": act.node_id, "iteration": act.iteration, "attempt": 1}),
    }
    done = backend.commit(params)
    if done is None:
        return None
    new_id, last_seq, event_ids = done
    if events.push_enabled():
        rows = [
            (claimed.step_id, ENUM_PARAMS["ev_succeeded"], params["done_event"]),
            (new_id, ENUM_PARAMS["ev_created"], params["created_event"]),
            (new_id, ENUM_PARAMS["ev_started"], params["started_event"]),
        ]
        events.publish(_wires(run.pk, rows, last_seq, event_ids, now))
    run.state = transition.state
    run.state_sizes = sizes
    run.scheduler = transition.bookkeeping
    run.step_count += 1
    run.version += 1
    run.status = RunStatus.RUNNING
    add_usage(run, result)
    kept = Step(
        pk=new_id,
        run=run,
        node_id=act.node_id,
        kind=node.kind,
        iteration=act.iteration,
        depth=act.depth,
        attempt=1,
        max_attempts=node.retry.max_attempts,
        idempotency_key=key,
    )
    next_claim = claim_details(kept, run, claimed.worker)
    next_claim.traceparent = claimed.traceparent  # the same run's (the snapshot does not carry it)
    next_claim.snapshot = run
    return CommitOutcome(committed=True, next_step=next_claim, run_status=RunStatus.RUNNING)


def _finish(
    backend: Any, run: Run, result: NodeResult, params: dict[str, Any], *, sizes: dict[str, int], transition: Any, step_id: int, now: Any
) -> CommitOutcome | None:
    """Commit the end step of a run whose only active step it is and finish the run as
    succeeded, or return None (nothing written) when the version or lease check failed.

    What the portable path's ``advance`` + ``finish_run`` write, in fewer statements: the
    snapshot guarantees no other step is open (every step a commit creates moves the
    run's version), so there is nothing to cancel. ``run_finished`` is sent inside the same
    transaction, as finish_run sends it, so its receivers' writes commit with the run's end."""
    output = result.recorded_output()
    params = {
        **params,
        "run_finished": RunStatus.SUCCEEDED.value,
        "run_output": _dumps(output),
        "ev_finished": FINISHED_EVENT_KINDS[RunStatus.SUCCEEDED].value,
        "finished_event": _dumps({"cancelled_steps": []}),
    }
    with transaction.atomic():
        done = backend.finish(params)
        if done is None:
            return None
        last_seq, event_ids = done
        if events.push_enabled():
            rows = [(step_id, ENUM_PARAMS["ev_succeeded"], params["done_event"]), (step_id, params["ev_finished"], params["finished_event"])]
            wires = _wires(run.pk, rows, last_seq, event_ids, now)
            transaction.on_commit(lambda: events.publish(wires))
        run.state = transition.state
        run.state_sizes = sizes
        run.scheduler = transition.bookkeeping
        run.version += 1
        run.status = RunStatus.SUCCEEDED
        run.output = output
        add_usage(run, result)
        run_finished.send(sender=Run, run=run, status=RunStatus.SUCCEEDED)
    return CommitOutcome(committed=True, run_status=RunStatus.SUCCEEDED)


class _Fallback(Exception):
    """Raised inside parallel_commit's transaction: the portable path decides this commit."""


def _param_time(value: datetime | None) -> Any:
    """A timestamp as the fixed statements take it inside a JSON parameter."""
    if value is None:
        return None
    adapted = connection.ops.adapt_datetimefield_value(value)
    return adapted.isoformat() if isinstance(adapted, datetime) else adapted


def parallel_commit(claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int] | None = None) -> CommitOutcome | None:
    """Commit a top-level step whose run has other active steps (a branch of a fan-out, or
    a step that fans out), or whose snapshot is stale: the portable commit's decisions
    (runs.engine.store.commit.advance: the join rule, the parallelism bound, the run status) from
    rows read in the commit's own transaction, written in fixed statements.

    One transaction, fenced by lease owner and attempt like every commit: the run row is
    locked and read (LOCK_SQL), then, with a fresh snapshot, the step under our lease, the
    run's other active steps and the latest versions of the keys the step writes
    (READ_SQL), then everything is written in one statement on PostgreSQL (PARALLEL_SQL)
    or fixed statements on SQLite. The successors are created in that statement: the one
    the parallelism bound lets this worker keep is leased to it; when it keeps none, the
    run's oldest due sibling is claimed for it in the same statement (no claim
    transaction, no queue hop per branch); the rest are released to the queue
    (``CommitOutcome.dispatch``). The last branch to reach a join creates the join step
    and leases it here, with a fresh snapshot when it is then the run's only active step
    (so the join and what follows take the sequential path).

    Returns None (nothing written) for what only the portable path decides: a budget, a
    run that ends, fails, is not running or would start waiting, a write past the state
    size limit, a lost lease (the portable path then writes nothing either)."""
    if not enabled() or claimed.parent_id is not None or claimed.budget_remaining_usd is not None or claimed.budget_remaining_tokens is not None:
        return None
    if transaction.get_connection().in_atomic_block:
        return None
    backend = paths.fast_path()
    now = clock.now()
    base: dict[str, Any] = {
        **ENUM_PARAMS, "run": claimed.run_id, "step": claimed.step_id, "attempt": claimed.attempt, "owner": claimed.worker, "build": build(),
    }
    outcome = None
    snap = claimed.branch_snapshot
    if snap is None and claimed.snapshot is not None:
        # The run's only active step (the sequential snapshot's promise, checked by the
        # statement like any branch snapshot) fanning out: nothing else is active.
        snap = BranchSnapshot(run=claimed.snapshot, active=[])
    # A chain of branches on a run other workers commit to as well would miss every
    # time: after one miss its later commits go straight to the locked path.
    contended = snap is not None and snap.contended
    if snap is not None and not contended and backend.BRANCH_FROM_SNAPSHOT and snap.run.pk == claimed.run_id:
        # ONE statement in autocommit from what this worker's previous commit left; when
        # the run moved since (or the lease is gone) it wrote nothing: the locked path.
        try:
            outcome = _branch(backend, claimed, result, written_sizes, base, now, snap)
        except _Fallback:
            outcome = None
        contended = outcome is None
    if outcome is None:
        try:
            with transaction.atomic():
                outcome = _parallel(backend, claimed, result, written_sizes, base, now)
        except _Fallback:
            return None
        if outcome is None:
            return None
    committed, wires, run, kept_step, fresh_snapshot = outcome
    if committed.branch is not None:
        committed.branch.contended = contended
    if wires and events.push_enabled():
        events.publish(wires)
    if kept_step is not None:
        # The state the next step starts from: as committed now (one read, after the commit).
        if fresh_snapshot:
            # The whole row for the snapshot the sequential path trusts (and run_finished
            # receivers see), with the state this commit left.
            state = run.state
            run = Run.objects.get(pk=run.pk)
            run.state = state
        kept_step.run = run
        next_claim = claim_details(kept_step, run, claimed.worker)
        next_claim.traceparent = claimed.traceparent  # the same run's (a snapshot does not carry it)
        if fresh_snapshot and run.version == committed.version_after and run.status == RunStatus.RUNNING:
            next_claim.snapshot = run
        elif not fresh_snapshot:
            next_claim.branch_snapshot = committed.branch
        committed.outcome.next_step = next_claim
    return committed.outcome


class _Committed:
    """What parallel_commit's transaction committed: the outcome, the run version it left
    and, for a branch this worker keeps, the run as it left it (or None when unknown)."""

    def __init__(self, outcome: CommitOutcome, version_after: int, branch: BranchSnapshot | None = None):
        self.outcome = outcome
        self.version_after = version_after
        self.branch = branch


_BUSY, _HELD = "busy", "held"


def active_fingerprint(active: list[ActiveStep]) -> str:
    """What a commit's decisions read of the run's other active steps, as the JSON array
    BRANCH_SQL (fastpath_postgresql) computes server-side: per step in id order, [id, node
    id, class, no backoff, parent id], the class "busy" (running, or pending and handed to
    the queue: it counts against the parallelism bound), "held" (pending, not handed out)
    or the status (waiting, parked, suspended). The join rule reads the node ids, the
    parallelism bound the classes, the held steps' release their backoff, the run status
    the classes; a claim (pending and dispatched -> running) or a release (running ->
    pending, dispatched) changes none of them."""
    rows = []
    for a in sorted(active, key=lambda a: a.id):
        if a.status == StepStatus.RUNNING or (a.status == StepStatus.PENDING and a.dispatched_at is not None):
            cls = _BUSY
        elif a.status == StepStatus.PENDING:
            cls = _HELD
        else:
            cls = str(a.status)
        rows.append([a.id, a.node_id, cls, a.available_at is None, a.parent_id])
    return json.dumps(rows)


def _branch(
    backend: Any, claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int] | None, base: dict[str, Any], now: datetime,
    snap: BranchSnapshot,
) -> tuple[_Committed, list[dict[str, Any]], Run, Step | None, bool] | None:
    """parallel_commit from ``snap`` (the run as this worker's previous parallel commit
    left it) in ONE fenced statement in autocommit: the same decisions as the locked
    path, from the snapshot instead of rows read under the run lock. None when the
    statement wrote nothing (the run's version or active steps moved, or the lease is
    gone) or a backoff is pending (its due time is compared with now: the locked path
    reads it); raises _Fallback when the decisions need the portable path's (the caller
    then tries the locked path, which decides from fresh rows)."""
    active = [a for a in snap.active if a.id != claimed.step_id]
    held = snap.run
    if any(a.available_at is not None for a in active) or held.status != RunStatus.RUNNING or held.state_sizes is None:
        return None
    run = Run(
        pk=held.pk, uuid=held.uuid, graph_version_id=held.graph_version_id, version=held.version, status=held.status,
        step_count=held.step_count, max_steps=held.max_steps, max_parallelism=held.max_parallelism, state_sizes=held.state_sizes,
        input_tokens=held.input_tokens, output_tokens=held.output_tokens, cost_usd=held.cost_usd, input=held.input,
    )
    run.state = dict(held.state)
    run.scheduler = dict(held.scheduler)
    run.__dict__["_contrib_checked"] = set(held.__dict__.get("_contrib_checked", ()))
    return _decide(backend, claimed, result, written_sizes, base, now, run, active, expect_active=active_fingerprint(active))


def _parallel(
    backend: Any, claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int] | None, base: dict[str, Any], now: datetime
) -> tuple[_Committed, list[dict[str, Any]], Run, Step | None, bool] | None:
    """parallel_commit's transaction (see there). Raises _Fallback to roll it back."""
    row = backend.lock(base)
    if row is None:
        raise _Fallback
    run_id, version, status, book, sizes, step_count, max_steps, max_parallelism, in_tok, out_tok, cost = row
    if status != RunStatus.RUNNING:
        raise _Fallback  # queued, waiting or ended: the portable path knows what follows
    book = json.loads(book) if isinstance(book, str) else (book or {})
    sizes = json.loads(sizes) if isinstance(sizes, str) else sizes
    if sizes is None:
        raise _Fallback
    keys = sorted(result.updates)
    fence, active_rows, latest = backend.read({**base, "active_statuses": [s.value for s in ACTIVE_STEP_STATUSES], "keys": keys})
    if fence is None:
        raise _Fallback  # the lease is gone: the portable path writes nothing and says so
    run = Run(
        pk=run_id, uuid=claimed.run_uuid, graph_version_id=claimed.version_id, version=version, status=status,
        step_count=step_count, max_steps=max_steps, max_parallelism=max_parallelism, state_sizes=sizes,
        input_tokens=in_tok, output_tokens=out_tok, cost_usd=Decimal(str(cost)), input=claimed.run_input,
    )
    # The state as committed (the successor this commit leases starts from it, as its
    # claim would read it), the contributions of the keys the step writes.
    contrib = {k: v[1] for k, v in latest.items() if v[1] is not None}
    run.scheduler = {**book, state_store.CONTRIB: contrib} if contrib else book
    run.__dict__["_contrib_checked"] = set(keys)
    run.state = {k: v[0] for k, v in latest.items()}
    active = [
        ActiveStep(int(a[0]), a[1], a[2], db_time(a[3]), db_time(a[4]), None if a[5] is None else int(a[5])) for a in active_rows
    ]
    return _decide(backend, claimed, result, written_sizes, base, now, run, active)


def _decide(
    backend: Any, claimed: ClaimedStep, result: NodeResult, written_sizes: dict[str, int] | None, base: dict[str, Any], now: datetime,
    run: Run, active: list[ActiveStep], *, expect_active: str | None = None,
) -> tuple[_Committed, list[dict[str, Any]], Run, Step | None, bool] | None:
    """The decisions and the write of parallel_commit, from ``run`` (version, status,
    bookkeeping with the contributions of the keys the step writes, size map, counts,
    totals, state as committed) and ``active`` (the run's other active steps), read under
    the run lock (_parallel) or taken from a BranchSnapshot (_branch: ``expect_active``
    is then their fingerprint, checked in the statement, which runs in autocommit).
    Raises _Fallback for what the portable path decides, or when the locked write's fence
    failed; returns None when the branch statement's fence failed (nothing written)."""
    version, sizes, max_parallelism = run.version, run.state_sizes, run.max_parallelism
    assert sizes is not None
    graph = compiled_graph(claimed.version_id)
    transition = state_store.transition(
        run, node_id=claimed.node_id, iteration=claimed.iteration, depth=claimed.depth, result=result,
        other_active=[spec_node_id(a.node_id) for a in active],
    )
    if transition.failure or transition.ended or (not active and not transition.activations):
        raise _Fallback  # the run fails or ends: finish_run's writes
    new_sizes = sizes
    if result.updates:
        new_sizes = limits.sizes_after(
            graph, old_state=run.state, old_sizes=sizes, new_state=transition.state, updates=result.updates, written=written_sizes, sets=result.sets
        )
        limit = limits.max_state_bytes()
        if limit and sum(new_sizes.values()) > limit:
            raise _Fallback
    plan = scheduler.plan_dispatch(max_parallelism=max_parallelism, active=active, new_count=len(transition.activations), now=now, may_keep=lambda i: True)
    lease_until = now + lease_delta()
    new_steps: list[dict[str, Any]] = []
    statuses = [a.status for a in active]
    kept_step: Step | None = None
    event_rows: list[dict[str, Any]] = [
        {"ref": "", "kind": ENUM_PARAMS["ev_succeeded"], "data": {"node_id": claimed.node_id, "iteration": claimed.iteration, "route": result.route}}
    ]
    for index, act in enumerate(transition.activations):
        node = graph.topology.nodes[act.node_id]
        key = step_idempotency_key(run.uuid, act.node_id, act.iteration)
        kept = index == plan.kept
        dispatched = index in plan.dispatch_new
        new_steps.append({
            "ord": index, "node_id": act.node_id, "kind": node.kind, "iteration": act.iteration, "depth": act.depth,
            "status": StepStatus.RUNNING.value if kept else StepStatus.PENDING.value, "attempt": 1 if kept else 0,
            "max_attempts": node.retry.max_attempts, "key": key, "owner": claimed.worker if kept else "",
            "lease_until": _param_time(lease_until) if kept else None, "started_at": _param_time(now) if kept else None,
            "dispatched_at": _param_time(now) if dispatched else None,
        })
        statuses.append(StepStatus.RUNNING if kept else StepStatus.PENDING)
        event_rows.append({"ref": key, "kind": ENUM_PARAMS["ev_created"], "data": {"node_id": act.node_id, "iteration": act.iteration}})
        if kept:
            kept_step = Step(
                node_id=act.node_id, kind=node.kind, iteration=act.iteration, depth=act.depth, attempt=1,
                max_attempts=node.retry.max_attempts, idempotency_key=key, run_id=run.pk,
            )
    if kept_step is not None:
        event_rows.append({"ref": kept_step.idempotency_key, "kind": ENUM_PARAMS["ev_started"],
                           "data": {"node_id": kept_step.node_id, "iteration": kept_step.iteration, "attempt": 1}})
    if scheduler.run_status_after(statuses) != RunStatus.RUNNING:
        raise _Fallback  # the run starts waiting: RUN_WAITING and the gate's bookkeeping
    for ordinal, ev in enumerate(event_rows, start=1):
        ev["ord"] = ordinal
    params: dict[str, Any] = {
        **base,
        "version": version,
        **({"expect_active": expect_active, "active_statuses": [s.value for s in ACTIVE_STEP_STATUSES]} if expect_active is not None else {}),
        **_result_params(result, transition, new_sizes, now),
        "n_new": len(new_steps),
        "run_status": RunStatus.RUNNING.value,
        "st_pending": StepStatus.PENDING.value,
        "claim_next": kept_step is None,
        "lease_until": connection.ops.adapt_datetimefield_value(lease_until),
        "new_steps": json.dumps(new_steps),
        "kept_key": kept_step.idempotency_key if kept_step is not None else "",
        "dispatch_old": list(plan.dispatch_old),
        "n_events": len(event_rows),
        "events": json.dumps(event_rows, allow_nan=False),
    }
    done = backend.parallel(params)
    if done is None:
        if expect_active is not None:
            return None  # the run moved since the snapshot: nothing written, the locked path
        raise _Fallback
    last_seq, event_list, new_ids, picked = done
    run.state = transition.state
    run.scheduler = transition.bookkeeping
    if kept_step is not None:
        kept_step.pk = new_ids[kept_step.idempotency_key]
    elif picked is not None:
        pid, node_id, kind, iteration, depth, max_attempts, key = picked
        kept_step = Step(pk=int(pid), run_id=run.pk, node_id=node_id, kind=kind, iteration=int(iteration), depth=int(depth),
                         attempt=1, max_attempts=int(max_attempts), idempotency_key=key)
    wires: list[dict[str, Any]] = []
    if events.push_enabled():
        kinds = [(ev["kind"], ev["data"]) for ev in event_rows]
        if picked is not None:
            kinds.append((ENUM_PARAMS["ev_started"], {"node_id": picked[1], "iteration": int(picked[3]), "attempt": 1}))
        wires = [
            events.wire(RunEvent(pk=int(eid), run_id=run.pk, seq=int(seq), step_id=int(sid), kind=kind, data=data, created_at=now))
            for (eid, seq, sid), (kind, data) in zip(event_list, kinds, strict=True)
        ]
    dispatch = [new_ids[s["key"]] for s in new_steps if s["dispatched_at"] is not None] + list(plan.dispatch_old)
    fresh = kept_step is not None and not active and len(new_steps) == 1
    outcome = CommitOutcome(committed=True, dispatch=dispatch, run_status=RunStatus.RUNNING)
    branch = None
    if kept_step is not None and not fresh and backend.BRANCH_FROM_SNAPSHOT:
        branch = _snapshot_after(run, result, new_sizes, len(new_steps), active, new_steps, new_ids, picked, set(plan.dispatch_old), now)
    return _Committed(outcome, version + 1, branch), wires, run, kept_step, fresh


def _snapshot_after(
    run: Run, result: NodeResult, sizes: dict[str, int], n_new: int, active: list[ActiveStep], new_steps: list[dict[str, Any]],
    new_ids: dict[str, int], picked: list[Any] | None, released: set[int], now: datetime,
) -> BranchSnapshot | None:
    """The run as the commit just written left it (``run`` holds its state and
    bookkeeping already; the rest is what the statement changed): the BranchSnapshot of
    the step it leased to this worker. None when the picked sibling is not among
    ``active`` (it cannot be: the pick reads the statement's snapshot, fenced like the
    rest; then the next commit simply takes the locked path)."""
    picked_id = int(picked[0]) if picked is not None else None
    after: list[ActiveStep] = []
    for a in active:
        if a.id == picked_id:
            a = a._replace(status=StepStatus.RUNNING)
            picked_id = None
        if a.id in released:
            a = a._replace(dispatched_at=now)
        after.append(a)
    if picked_id is not None:
        return None
    for s in new_steps:
        after.append(ActiveStep(new_ids[s["key"]], s["node_id"], s["status"], now if s["dispatched_at"] is not None else None, None, None))
    snap = Run(
        pk=run.pk, uuid=run.uuid, graph_version_id=run.graph_version_id, version=run.version + 1, status=RunStatus.RUNNING,
        step_count=run.step_count + n_new, max_steps=run.max_steps, max_parallelism=run.max_parallelism, state_sizes=sizes,
        input_tokens=run.input_tokens, output_tokens=run.output_tokens, cost_usd=run.cost_usd, input=run.input,
    )
    add_usage(snap, result)
    snap.state = run.state
    snap.scheduler = run.scheduler
    snap.__dict__["_contrib_checked"] = set(run.__dict__.get("_contrib_checked", ()))
    return BranchSnapshot(run=snap, active=after)


def _result_params(result: NodeResult, transition: Any, sizes: dict[str, int], now: datetime) -> dict[str, Any]:
    """The parameters both fast commits (sequential and parallel) write for a step's result:
    the written state keys and their sizes, the bookkeeping, usage, cost, output and updates.
    ``result``: the NodeResult; ``transition``: state.transition's; ``sizes``: bytes per key after it."""
    usage = result.usage
    return {
        "writes": state_store.written_rows(result.updates, transition.state, sizes, transition.bookkeeping),
        "state_sizes": _dumps(sizes),
        "scheduler": _dumps(state_store.persisted_bookkeeping(transition.bookkeeping)),
        "in_tokens": usage.input_tokens if usage else 0,
        "out_tokens": usage.output_tokens if usage else 0,
        "cost": connection.ops.adapt_decimalfield_value(result.cost_usd or Decimal(0), 24, 12),
        "now": connection.ops.adapt_datetimefield_value(now),
        "output": _dumps(result.recorded_output()),
        "updates": _dumps(result.updates) if result.updates else None,
        "usage": _dumps(usage.as_dict()) if usage else None,
        "step_cost": connection.ops.adapt_decimalfield_value(result.cost_usd, 24, 12),
        "price_version": price_version(usage),
    }
