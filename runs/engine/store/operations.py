"""Operator actions on runs: create, cancel, resume, fork, and decisions on waiting or parked steps.

Each is one short transaction under the run's row lock (or inside the caller's, for
decisions that commit with an approval), audited, and returns the step ids the caller
hands to the queue after commit.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from pydantic import ValidationError

from audit.chain import audit, audit_new, audit_new_rows
from audit.models import AuditChain, AuditEntry
from core import tracing
from core.fields import field_path
from graphs.bounds import run_limit_problems
from graphs.models import GraphVersion
from runs.engine import limits, scheduler
from runs.engine.store import clock, flow, paths
from runs.engine.store import state as state_store
from runs.engine.store.commit import advance, child_finished
from runs.engine.store.events import create as create_event
from runs.engine.store.events import publish, push_enabled, wire
from runs.engine.store.graphs import compiled_graph, state_keys, step_node
from runs.engine.store.writes import bump_run, event, finish_run, lock_run, save_steps
from runs.engine.types import (
    ReopenedStep,
    ResumePlan,
    RunNotFound,
    StartedRun,
    StateWriteRefused,
    StepStateError,
    VersionUnrunnable,
    step_idempotency_key,
)
from runs.models import Run, RunEvent, RunEventCounter, RunEventKind, RunStateKey, RunStatus, Step, StepStatus
from runs.nodes.base import NodeResult
from runs.sandbox.values import InvalidValue
from runs.signals import steps_requeued


def _startable(version: GraphVersion, **overrides: Any) -> tuple[scheduler.CompiledGraph, dict[str, Any]]:
    """The compiled graph of ``version`` and the limits a new run of it stores
    (``budget_usd``, ``budget_tokens``, ``max_parallelism``, ``max_steps``: an override
    that is not None wins over the spec's settings), checked to fit the run's row.

    Publishing validates a spec, but a version stored before a bound existed may hold a
    value past it (a budget of 10**13 USD): its spec no longer parses, or a limit would
    not fit its column (SQLite stores it anyway and every later read of the row fails).
    Either raises VersionUnrunnable before anything is written."""
    try:
        graph = compiled_graph(version.pk)
    except ValidationError as exc:
        fields: dict[str, list[str]] = {}
        for err in exc.errors():
            fields.setdefault(field_path(err["loc"]) or "spec", []).append(err["msg"])
        raise VersionUnrunnable(
            f"Version {version.number} of this graph no longer passes validation; publish a corrected version.", fields
        ) from None
    settings_ = graph.spec.settings
    limits_ = {
        "budget_usd": settings_.budget_usd, "budget_tokens": settings_.budget_tokens,
        "max_parallelism": settings_.max_parallelism, "max_steps": settings_.max_steps,
    }
    limits_.update({name: value for name, value in overrides.items() if value is not None})
    problems = run_limit_problems(**limits_)
    if problems:
        where = {name: name if name in overrides and overrides[name] is not None else f"settings.{name}" for name in problems}
        raise VersionUnrunnable(
            f"A run of version {version.number} of this graph would store a limit its row cannot hold.",
            {where[name]: [why] for name, why in problems.items()},
        )
    return graph, limits_


def run_create(
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
) -> StartedRun:
    """Commit a new run and its start step (pending, marked dispatched) in one transaction.

    ``parent_step_id``: the waiting ``subgraph`` step of another run this run is the child
    of (runs.subgraphs; unique: a second child of one step raises IntegrityError). Such a
    run is created inside that step's commit transaction, so it takes the portable path.

    A run of a flow-controlled graph, or on a schedule's ``flow_line``, passes its graph's
    gate in that transaction (runs.engine.store.flow.gate_enter): above a limit it is
    committed held, with no step, and admitted later; runs the gate admitted on the way
    are in the returned step ids too.

    The caller validated the graph and the input against its schema. The run exists
    before anything executes, so it cannot vanish. Raises IntegrityError when
    ``idempotency_key`` is taken; StateWriteRefused when the input holds a value JSON
    cannot carry (``invalid_output``, path ``input.…``) or the initial state would pass
    the state size limit (``state_too_large``); VersionUnrunnable when the version's
    spec no longer parses or a limit does not fit the run's row (:func:`_startable`).
    """
    graph, run_limits = _startable(version, budget_usd=budget_usd, budget_tokens=budget_tokens)
    run_input, _ = limits.checked_writes(run_input, field="input", known_keys=None)
    state = scheduler.initial_state(graph, run_input)
    sizes = limits.full_sizes(state)
    limits.enforce(sizes, field="input")
    now = clock.now()
    run = Run(
        graph_version=version,
        input=run_input,
        state_sizes=sizes,
        scheduler={"iterations": {graph.start_id(): 1}},
        **run_limits,
        step_count=1,
        created_by=created_by,
        idempotency_key=idempotency_key,
        source=source,
        traceparent=tracing.run_traceparent(),
        parent_step_id=parent_step_id,
    )
    gated = None if version.is_test else flow.graph_limits(version, flow_line)
    if gated is None and connection.vendor == "postgresql" and getattr(settings, "BALLAST_FAST_COMMIT", True) and not connection.in_atomic_block:
        return _create_postgresql(run, state, sizes, version, run_input, now, actor=actor, actor_type=actor_type)
    with transaction.atomic():
        admitted = [] if gated is None else flow.gate_enter(run, graph_id=version.graph_id, limits=gated, flow_line=flow_line, now=now)
        run.save(force_insert=True)
        run.state = state
        state_store.write(run.pk, 0, state, state, sizes, {})
        steps = [] if run.flow_held else [flow.start_step(run, now)]
        for step in steps:
            step.save(force_insert=True)
        create_event(run=run, kind=RunEventKind.RUN_CREATED, data={"graph_version": version.pk, "input": run_input})
        audit_new(actor, "run.start", run, actor_type=actor_type, graph_version=version.pk)  # the run's chain starts here
    return StartedRun(run, admitted + [step.pk for step in steps])


def _create_postgresql(
    run: Run, state: dict[str, Any], sizes: dict[str, int], version: GraphVersion, run_input: dict[str, Any], now: Any,
    *, actor: str, actor_type: str,
) -> StartedRun:
    """run_create's rows on PostgreSQL in two round trips instead of nine (BEGIN, seven
    INSERTs, COMMIT): the run's id from its sequence (the audit entry's hash covers it),
    then the run, its state keys, its start step, its event counter and first event and
    the first entry of its audit chain as ONE statement (fastpath_postgresql.insert_rows:
    each INSERT compiled by Django, so the rows are the ORM's own). The run's first event
    is seq 1: the counter row is created with it (a new run has none, and the unique run
    id makes a second one fail the statement). Only in autocommit (a caller's transaction
    takes the ORM path, whose savepoint keeps that transaction usable after an
    IntegrityError); raises IntegrityError as the ORM path does (a taken
    ``idempotency_key``), with nothing written. Like ``bulk_create`` it sends no
    pre_save/post_save signals: no receiver listens to these models (approvals listens
    to ApprovalRequest only)."""
    fastpath_postgresql = paths.postgresql()

    run.pk = fastpath_postgresql.next_id(Run)
    run.state = state
    step = flow.start_step(run, now)
    first = RunEvent(run=run, seq=1, kind=RunEventKind.RUN_CREATED, data={"graph_version": version.pk, "input": run_input})
    entry, head = audit_new_rows(actor, "run.start", run, actor_type=actor_type, graph_version=version.pk)
    keys = state_store.rows(run.pk, 0, state, state, sizes, {})
    groups: list[tuple[Any, list[Any], bool]] = [(Run, [run], False)]
    if keys:
        groups.append((RunStateKey, keys, False))
    groups += [
        (Step, [step], True),
        (RunEventCounter, [RunEventCounter(run=run, last=1)], False),
        (RunEvent, [first], True),
        (AuditEntry, [entry], False),
        (AuditChain, [head], False),
    ]
    ids = fastpath_postgresql.insert_rows(groups)
    step.pk, first.pk = ids[-5], ids[-3]
    run._state.adding = step._state.adding = first._state.adding = False
    if push_enabled():
        publish([wire(first)])  # committed: the statement ran in autocommit
    return StartedRun(run, [step.pk])


def run_create_node_test(
    *,
    version: GraphVersion,
    node_id: str,
    state: dict[str, Any],
    actor: str,
    actor_type: str,
    created_by: Any = None,
    known_keys: frozenset[str] | None = None,
) -> StartedRun:
    """Commit a test run of one node of test snapshot ``version``: the run (``is_test``) and
    its first step, ``node_id`` itself, pending, in one transaction, audited as
    ``run.test_node``.

    The committed state is the declared state defaults, then ``state``; ``state["input"]``
    (an object) is the run input. Budgets and limits come from the snapshot's settings.
    ``known_keys`` (the state keys of the graph the node comes from, which a one-node
    snapshot does not hold) refuses any other key but ``input``; None: any key.
    Raises ValueError when ``version`` is not a test snapshot, KeyError for an unknown node,
    StateWriteRefused when ``state`` holds a value JSON cannot carry (``invalid_output``),
    a key outside ``known_keys`` (``unknown_state_key``), an ``input`` that is not an
    object (``invalid``) or passes the state size limit.
    """
    if not version.is_test:
        raise ValueError("node_test_run needs a test snapshot version")
    graph, run_limits = _startable(version)
    node = graph.topology.nodes[node_id]
    given, _ = limits.checked_writes(state, field="state", known_keys=None if known_keys is None else {*known_keys, "input"})
    run_input = given.get("input", {})
    if not isinstance(run_input, dict):  # it is the run input: never silently replaced by {}
        message = "state.input must be a JSON object: it is the run input"
        raise StateWriteRefused("invalid", message, {"state.input": ["must be a JSON object (the run input)"]})
    initial = scheduler.initial_state(graph, {})
    initial.update(given)
    initial["input"] = run_input
    sizes = limits.full_sizes(initial)
    limits.enforce(sizes, field="state")
    step_due = clock.now()
    with transaction.atomic():
        run = Run.objects.create(
            graph_version=version,
            is_test=True,
            input=run_input,
            state_sizes=sizes,
            scheduler={"iterations": {node_id: 1}},
            **run_limits,
            step_count=1,
            created_by=created_by if getattr(created_by, "pk", None) is not None else None,
            traceparent=tracing.run_traceparent(),
        )
        run.state = initial
        state_store.write(run.pk, 0, initial, initial, sizes, {})
        step = Step.objects.create(
            run=run,
            node_id=node_id,
            kind=node.kind,
            max_attempts=1,
            idempotency_key=step_idempotency_key(run.uuid, node_id, 0),
            dispatched_at=step_due,
            due_at=step_due,
        )
        create_event(run=run, kind=RunEventKind.RUN_CREATED, data={"graph_version": version.pk, "test": True, "node_id": node_id})
        audit_new(actor, "run.test_node", run, actor_type=actor_type, graph=version.graph_id, graph_version=version.pk, node_id=node_id)
    return StartedRun(run, [step.pk])


def step_complete_waiting(step_id: int, result: NodeResult, *, actor: str, reason: str) -> list[int]:
    """Finish a waiting or parked step with ``result`` and schedule its successors.

    Must run inside the caller's transaction (an approval decision commits together with
    the resume). Returns step ids to dispatch after commit. Raises StepStateError if the
    step is not waiting or parked (deciding twice never resumes twice); StateWriteRefused
    when ``result`` writes a key the graph does not know (``unknown_state_key``), holds a
    value JSON cannot carry (``invalid_output``, with its path under ``output``) or would
    make the state pass the size limit (``state_too_large``): the caller's transaction
    must then roll back.
    """
    step = Step.objects.get(pk=step_id)
    run = lock_run(step.run_id)
    now = clock.now()
    # A child step's result goes to its parent, not to the state: any key may be given.
    known = set(state_keys(run.graph_version_id)) if step.parent_id is None else None
    updates, written_sizes = limits.checked_writes(result.updates, field="output", known_keys=known)
    try:
        result, _ = limits.checked_result(replace(result, updates=updates))
    except InvalidValue as exc:
        raise StateWriteRefused("invalid_output", f"{exc.path}: {exc.reason}", {exc.path: [exc.reason]}, exc.as_dict()) from None
    written = Step.objects.filter(pk=step_id, status__in=(StepStatus.WAITING, StepStatus.PARKED)).update(
        status=StepStatus.SUCCEEDED,
        output=result.recorded_output(),
        updates=result.updates or None,
        finished_at=now,
        lease_owner="",
        state_seq=None if step.parent_id is not None else run.version + 1,  # what advance commits (runs.engine.store.state)
    )
    if not written:
        raise StepStateError(f"step {step_id} is {step.status}, not waiting")
    if run.is_terminal:
        return []
    create_event(run_id=run.pk, step_id=step_id, kind=RunEventKind.RUN_RESUMED, data={"by": actor, "reason": reason})
    if step.parent_id is not None:
        done = event(run.pk, RunEventKind.STEP_SUCCEEDED, step.pk, node_id=step.node_id, parent=step.parent_id, by=actor)
        return child_finished(run, step, [done], now, worker=None).dispatch
    return advance(run, step, result, now, worker=None, written_sizes=written_sizes).dispatch


def step_skip_parked(step_id: int, *, output: dict[str, Any] | None, actor: str) -> list[int]:
    """Finish a parked step as a person's "skip" with ``output`` standing for its result.

    A child step (an agent's tool call) records ``output`` itself as its output, which its
    parent's replay sees as the child's result: the model is given it as the tool's
    result (no output: ``{"skipped_by": actor}``). A top-level step writes ``output`` as
    its state updates and records ``{"skipped_by", "updates"}``. Inside the caller's
    transaction. Returns step ids to dispatch. Raises StepStateError when it is not
    waiting or parked.
    """
    parent_id = Step.objects.filter(pk=step_id).values_list("parent_id", flat=True).first()
    if parent_id is not None:
        result = NodeResult(output=output if output is not None else {"skipped_by": actor})
    else:
        updates = output or {}
        result = NodeResult(updates=updates, output={"skipped_by": actor, "updates": updates})
    return step_complete_waiting(step_id, result, actor=actor, reason="skip")


def step_requeue_parked(step_id: int, *, actor: str) -> list[int]:
    """Send a parked step back to pending for a deliberate re-run (same idempotency key).

    Inside the caller's transaction. Returns step ids to dispatch. Raises StepStateError.
    """
    step = Step.objects.get(pk=step_id)
    run = lock_run(step.run_id)
    now = clock.now()
    if not Step.objects.filter(pk=step_id, status=StepStatus.PARKED).update(status=StepStatus.PENDING, dispatched_at=now, due_at=now, available_at=None):
        raise StepStateError(f"step {step_id} is {step.status}, not parked")
    bump_run(Run.objects.filter(pk=run.pk, status=RunStatus.WAITING), status=RunStatus.RUNNING)
    create_event(run_id=run.pk, step_id=step_id, kind=RunEventKind.STEP_REQUEUED, data={"by": actor})
    return [step_id]


def step_fail_parked(step_id: int, *, actor: str, message: str, code: str = "rejected", details: dict[str, Any] | None = None) -> None:
    """Fail a waiting or parked step and its run (a rejection with no reject edge, a
    person choosing "fail" for an interrupted step, a child run that failed: ``code``
    names which, ``details`` join the error). Inside the caller's transaction.
    Raises StepStateError if the step is not waiting or parked."""
    step = Step.objects.get(pk=step_id)
    run = lock_run(step.run_id)
    now = clock.now()
    error = {"code": code, "message": message, "node_id": step.node_id, "by": actor, **(details or {})}
    if not Step.objects.filter(pk=step_id, status__in=(StepStatus.WAITING, StepStatus.PARKED)).update(
        status=StepStatus.FAILED, error=error, finished_at=now
    ):
        raise StepStateError(f"step {step_id} is {step.status}, not waiting")
    finish_run(run, RunStatus.FAILED, error=error, step_id=step_id)


def _locked(run_id: int) -> Run:
    try:
        return lock_run(run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None


def run_cancel(run_id: int, *, actor: str, actor_type: str = "user", reason: str = "") -> bool:
    """Cancel a run: terminal status, pending/waiting steps cancelled, audited (with the
    node it was at, ``node_id``, all open top-level nodes, ``node_ids``, and the run's
    ``status_before``/``status_after``), in one transaction. Running steps notice within
    BALLAST_CANCEL_POLL_SECONDS (runs.engine.loop) and their commits end them cancelled,
    storing what they spent but not their result (commit.commit_cancelled). Returns False
    if the run had already ended. Raises RunNotFound."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.is_terminal:
            return False
        before = run.status
        # The node(s) the run was at: its open steps, oldest first (parallel branches can be several).
        at = list(
            Step.objects.filter(run=run, parent__isnull=True)
            .exclude(status__in=(StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED))
            .order_by("id")
            .values_list("node_id", flat=True)
        )
        finish_run(run, RunStatus.CANCELLED, error={"code": "cancelled", "message": reason or f"cancelled by {actor}"})
        audit(
            actor, "run.cancel", run, actor_type=actor_type, reason=reason,
            node_id=at[0] if at else None, node_ids=at, status_before=before, status_after=RunStatus.CANCELLED,
        )  # fmt: skip
    return True


def _resume_plan(run: Run) -> ResumePlan:
    """The plan of a resume of ``run`` (read, not changed: the caller holds its row lock,
    or only previews). Raises StepStateError when the run is neither failed nor parked."""
    kept = list(Step.objects.filter(run=run, status=StepStatus.SUCCEEDED).order_by("id").values_list("id", flat=True))
    if run.status == RunStatus.WAITING:
        parked = list(Step.objects.filter(run=run, status=StepStatus.PARKED).order_by("id"))
        if parked:
            reopen = [ReopenedStep(s.pk, s.node_id, s.iteration, s.parent_id, StepStatus.PENDING, s.max_attempts) for s in parked]
            return ResumePlan(run.pk, "parked", reopen, kept)
    if run.status != RunStatus.FAILED:
        raise StepStateError(f"run {run.pk} is {run.status}; only a failed or parked run can be resumed")
    last = RunEvent.objects.filter(run=run, kind=RunEventKind.RUN_FAILED).order_by("-id").first()
    ids = set(last.data.get("cancelled_steps", [])) if last else set()
    if last and last.step_id:
        ids.add(last.step_id)
    ids |= set(Step.objects.filter(run=run, status=StepStatus.FAILED).values_list("id", flat=True))
    rows = list(Step.objects.filter(pk__in=ids).order_by("id"))
    parents_with_reopened_children = {r.parent_id for r in rows if r.parent_id}
    reopen = []
    for step in rows:
        node = step_node(run.graph_version_id, step.node_id)
        status = StepStatus.SUSPENDED if step.pk in parents_with_reopened_children else StepStatus.PENDING
        reopen.append(ReopenedStep(step.pk, step.node_id, step.iteration, step.parent_id, status, step.attempt + node.retry.max_attempts))
    return ResumePlan(run.pk, "failed", reopen, kept)


def run_resume_preview(run_id: int) -> ResumePlan:
    """What :func:`run_resume` would do to run ``run_id`` now, computed by the same plan it
    applies; changes nothing. Raises RunNotFound, StepStateError (as run_resume)."""
    try:
        run = Run.objects.get(pk=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None
    return _resume_plan(run)


def run_resume(
    run_id: int, *, actor: str, actor_type: str = "user", budget_usd: Decimal | None = None, budget_tokens: int | None = None
) -> list[int]:
    """Continue a failed run from where it stopped, or a parked run, in one transaction.

    Failed run: the step whose failure ended the run gets a fresh attempt budget (its
    policy's ``max_attempts`` more) and goes back to pending, with the failed children
    of an agent-like parent; the steps the failure cancelled are pending again; the run
    is running again. Committed steps stay facts and never run again. A new budget may
    be given (a run stopped for its budget). Parked run: each parked step is re-queued
    (a deliberate re-run with the same idempotency key). Audited. Returns step ids to
    dispatch after commit. Raises RunNotFound, StepStateError (any other status).
    The changes are :func:`_resume_plan`'s, which :func:`run_resume_preview` shows.
    """
    now = clock.now()
    with transaction.atomic():
        run = _locked(run_id)
        plan = _resume_plan(run)
        if plan.mode == "parked":
            parked = [r.step_id for r in plan.reopen]
            Step.objects.filter(pk__in=parked).update(status=StepStatus.PENDING, dispatched_at=now, due_at=now, available_at=None)
            bump_run(Run.objects.filter(pk=run.pk), status=RunStatus.RUNNING, updated_at=now)
            create_event(run=run, kind=RunEventKind.RUN_RESUMED, data={"by": actor, "requeued": parked})
            steps_requeued.send(sender=Run, run=run, step_ids=parked, actor=actor)
            audit(actor, "run.resume", run, actor_type=actor_type, requeued=parked)
            return parked
        ids: list[int] = []
        for r in plan.reopen:
            pending = r.status == StepStatus.PENDING
            Step.objects.filter(pk=r.step_id).update(
                status=r.status,
                max_attempts=r.max_attempts,
                finished_at=None,
                available_at=None,
                dispatched_at=now if pending else None,
                due_at=now if pending else None,
                lease_owner="",
            )
            if pending:
                ids.append(r.step_id)
        fields: dict[str, Any] = {"status": RunStatus.RUNNING, "error": None, "finished_at": None, "updated_at": now}
        if budget_usd is not None:
            fields["budget_usd"] = budget_usd
        if budget_tokens is not None:
            fields["budget_tokens"] = budget_tokens
        bump_run(Run.objects.filter(pk=run.pk), **fields)
        create_event(run=run, kind=RunEventKind.RUN_RESUMED, data={"by": actor, "reopened": sorted(ids)})
        audit(actor, "run.resume", run, actor_type=actor_type, reopened=sorted(ids), previous_error=run.error)
        return ids


@dataclass(frozen=True)
class ForkPlan:
    """What :func:`run_fork` starts: the new run's ``state`` and bookkeeping
    (``transition``: its activations are the steps it creates, in order), the
    canonical ``state_patch`` and the state's size map; ``kept`` the source's committed
    top-level steps up to and including the anchor (their writes make the state)."""

    source: Run
    anchor: Step
    state_patch: dict[str, Any]
    transition: scheduler.Transition
    sizes: dict[str, int]
    kept: list[int]


def _fork_plan(run_id: int, *, step_id: int, state_patch: dict[str, Any]) -> ForkPlan:
    """The plan of a fork of run ``run_id`` at ``step_id`` with ``state_patch`` (reads
    only). Raises as :func:`run_fork`."""
    try:
        source = Run.objects.get(pk=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None
    state_patch, patch_sizes = limits.checked_writes(state_patch, field="state_patch", known_keys=set(state_keys(source.graph_version_id)))
    anchor = Step.objects.filter(pk=step_id, run=source, parent__isnull=True, status=StepStatus.SUCCEEDED).first()
    if anchor is None or anchor.finished_at is None:
        raise StepStateError(f"step {step_id} is not a committed step of run {run_id}")
    graph = compiled_graph(source.graph_version_id)
    refused = {}
    for key, value in state_patch.items():  # the value a reducer key's later writes reduce onto
        try:
            scheduler.patch_state(graph, {}, {}, {key: value})
        except scheduler.ReducerError as exc:
            refused[f"state_patch.{key}"] = [str(exc)]
    if refused:
        raise StateWriteRefused("reducer_mismatch", "; ".join(m for ms in refused.values() for m in ms), refused)
    writes = state_store.committed_writes(source, anchor)
    done = RunEvent.objects.filter(run=source, step=anchor, kind=RunEventKind.STEP_SUCCEEDED).order_by("-id").first()
    point = scheduler.CommittedWrite(anchor.node_id, anchor.iteration, anchor.depth, {})
    route = done.data.get("route") if done else None
    if anchor.state_seq is not None:
        # The committed state at the anchor, read from its versioned keys (no replay).
        state, contrib = RunStateKey.state_at(source.pk, anchor.state_seq)
        iterations: dict[str, int] = {}
        for w in writes:
            iterations[w.node_id] = max(iterations.get(w.node_id, 0), w.iteration + 1)
        book: dict[str, Any] = {"iterations": iterations, "contrib": contrib}
        transition = scheduler.fork_from(graph, state=state, bookkeeping=book, anchor=point, route=route, state_patch=state_patch, max_steps=source.max_steps)
    else:  # committed before state was kept per key: replay the recorded writes
        transition = scheduler.fork_transition(
            graph, run_input=source.input, writes=writes, anchor=point, route=route, state_patch=state_patch, max_steps=source.max_steps
        )
    if transition.failure or not transition.activations:
        reason = transition.failure.message if transition.failure else "no step follows it"
        raise StepStateError(f"cannot fork run {run_id} at step {step_id}: {reason}")
    # A new run: its size map is computed once from the whole replayed state.
    sizes = limits.full_sizes(transition.state)
    limits.enforce(sizes, field="state_patch")
    kept = [s.pk for s in state_store.committed_steps(source, anchor)]
    return ForkPlan(source, anchor, state_patch, transition, sizes, kept)


def run_fork_preview(run_id: int, *, step_id: int, state_patch: dict[str, Any]) -> ForkPlan:
    """What :func:`run_fork` would start, computed by the same plan it commits; changes
    nothing. Raises RunNotFound, StepStateError, StateWriteRefused (as run_fork)."""
    return _fork_plan(run_id, step_id=step_id, state_patch=state_patch)


def run_fork(
    run_id: int, *, step_id: int, state_patch: dict[str, Any], actor: str, actor_type: str = "user", created_by: Any = None
) -> StartedRun:
    """Start a new run from a committed step of another run, with edited state.

    The new run is pinned to the same graph version. Its state is the source run's
    state right after ``step_id`` committed (scheduler.fork_transition replays every
    committed step's writes in commit order), then ``state_patch`` on top; it starts
    with that step's successors as if the step had just committed (branches of the
    source that had not finished by then do not exist in the fork). A patched key with an
    order-sensitive reducer takes the patched value as the one its later writes reduce
    onto (scheduler.patch_state). Audited. Raises
    RunNotFound, StepStateError (step not committed, not top-level, or nothing follows it),
    StateWriteRefused (the patch writes a key the graph does not know, holds a value JSON
    cannot carry, gives a reducer key a value its reducer cannot take, ``reducer_mismatch``,
    or makes the state pass the size limit). The new run is
    :func:`_fork_plan`'s, which :func:`run_fork_preview` shows.
    """
    plan = _fork_plan(run_id, step_id=step_id, state_patch=state_patch)
    source, anchor, transition, sizes, state_patch = plan.source, plan.anchor, plan.transition, plan.sizes, plan.state_patch
    graph = compiled_graph(source.graph_version_id)
    now = clock.now()
    with transaction.atomic():
        run = Run.objects.create(
            graph_version_id=source.graph_version_id,
            input=source.input,
            state_sizes=sizes,
            scheduler=state_store.persisted_bookkeeping(transition.bookkeeping),
            max_parallelism=source.max_parallelism,
            max_steps=source.max_steps,
            budget_usd=source.budget_usd,
            budget_tokens=source.budget_tokens,
            step_count=len(transition.activations),
            created_by=created_by,
            forked_from=source,
            forked_from_step=anchor,
            traceparent=tracing.run_traceparent(),
        )
        run.state = transition.state
        state_store.write(run.pk, 0, transition.state, transition.state, sizes, transition.bookkeeping)
        new_steps = [
            Step(
                run=run,
                node_id=act.node_id,
                kind=graph.topology.nodes[act.node_id].kind,
                iteration=act.iteration,
                depth=act.depth,
                max_attempts=graph.topology.nodes[act.node_id].retry.max_attempts,
                idempotency_key=step_idempotency_key(run.uuid, act.node_id, act.iteration),
                dispatched_at=now,
                due_at=now,
            )
            for act in transition.activations
        ]
        save_steps(run, new_steps)
        create_event(
            run=run,
            kind=RunEventKind.RUN_CREATED,
            data={"forked_from": source.pk, "forked_from_step": anchor.pk, "state_patch": state_patch},
        )
        audit(actor, "run.fork", run, actor_type=actor_type, source_run=source.pk, source_step=anchor.pk, patched=sorted(state_patch))
    return StartedRun(run, [s.pk for s in new_steps])
