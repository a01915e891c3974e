"""The sequential fast commit: decide in Python from the worker's run snapshot, write in fixed SQL.

A step that is its run's only active step, with one successor, commits from the snapshot
its worker's previous commit left (checked by ``Run.version``), without reading the run,
and writes of the state only the keys the step changed (runs.engine.state):
one statement on PostgreSQL (fastpath_postgresql), fixed statements in one transaction
on SQLite and other databases (fastpath_sqlite). Anything else, or a failed check,
returns None and the portable commit (runs.engine.commit) takes over.
``settings.BALLAST_FAST_COMMIT = False`` turns the fast path off (the conformance suite
runs the portable path that way).
"""
from __future__ import annotations

import json
from decimal import Decimal
from types import ModuleType
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from runs.engine import events, fastpath_sqlite, graphs, limits
from runs.engine import state as state_store
from runs.engine.claims import claim_details
from runs.engine.graphs import compiled_graph
from runs.engine.types import ClaimedStep, CommitOutcome, step_idempotency_key
from runs.engine.writes import add_usage, lease_delta, price_version
from runs.models import FINISHED_EVENT_KINDS, AttemptStatus, Run, RunEvent, RunEventKind, RunStatus, Step, StepStatus
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


def enabled() -> bool:
    """Whether sequential commits try the fast path (settings.BALLAST_FAST_COMMIT, default on)."""
    return bool(getattr(settings, "BALLAST_FAST_COMMIT", True))


def _dumps(value: Any) -> str | None:
    # Values were checked as JSON before the commit (limits.checked_result): no encoder
    # hook may turn anything into something else here, and NaN would be a bug.
    return None if value is None else json.dumps(value, allow_nan=False)


def _wires(run_id: int, rows: list[tuple[int, str, str | None]], last_seq: int, ids: list[int], now: Any) -> list[dict[str, Any]]:
    """Committed events in wire form (runs.engine.events.wire), for the push: ``rows`` are
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
    transition = graphs.transition(run, node_id=claimed.node_id, iteration=claimed.iteration, depth=claimed.depth, result=result, other_active=[])
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
            graph, old_state=run.state, old_sizes=sizes, new_state=transition.state, updates=result.updates, written=written_sizes
        )
        limit = limits.max_state_bytes()
        if limit and sum(sizes.values()) > limit:
            return None  # the portable commit fails the step with state_too_large
    now = timezone.now()
    usage = result.usage
    common: dict[str, Any] = {
        **ENUM_PARAMS,
        "run": run.pk,
        "version": run.version,
        "step": claimed.step_id,
        "attempt": claimed.attempt,
        "owner": claimed.worker,
        # Only the keys the step wrote are encoded and stored (runs.engine.state); the
        # bookkeeping without the reducer contributions, which go with those keys.
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
        "done_event": _dumps({"node_id": claimed.node_id, "iteration": claimed.iteration, "route": result.route}),
    }
    backend: ModuleType = fastpath_sqlite
    if connection.vendor == "postgresql":
        # Imported on first use: psycopg costs a worker about 0.25 s of CPU at start, and
        # a worker on SQLite never needs it.
        from runs.engine import fastpath_postgresql as backend
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
