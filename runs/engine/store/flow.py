"""Flow control across runs: a graph's limit on active runs and per-key limits, enforced by one gate row per graph and admitted by the engine's claim by due time.

A graph may bound its active runs (``Graph.max_concurrent_runs``) and group them by a
concurrency key, a dotted path into the run input (``Graph.concurrency_key``, at most
``concurrency_key_limit`` active runs per value); a schedule whose overlap policy is
``queue`` puts its runs on a line of their own (``Run.flow_line`` = ``schedule:<id>``, one
active at a time). Active means queued (admitted, not yet claimed), running or waiting: a
run at an approval gate holds its place. A run above a limit is created *held*
(``Run.flow_held``, status queued, no step at all, so no claim, recovery or retention can
touch it) and waits in line: FIFO by start (run id) within its graph; a run held only by
its key or line lets later runs of other keys pass.

The mechanism, and why this one:

* **The gate row** (:class:`runs.models.FlowGate`, one per graph) is locked (``SELECT ...
  FOR UPDATE``; SQLite has one writer) by every start of a flow-controlled run, which
  counts the gate's active runs under that lock and inserts its run admitted or held in
  the same transaction. Starts of one graph are serialised by it, so however many
  processes start runs at once, the count a start judges by cannot be stale: a run that
  ends concurrently must update the same row (below) and waits for the start to commit,
  so it still counts (never above the limit, at worst a run waits one admission longer).
* **A run's end makes the gate due** in the transaction that ends it: the engine sends
  ``run_finished`` inside every terminal transaction (the portable commit, both fast
  paths, cancel, failures, recovery), and :func:`run_ended` sets ``FlowGate.due_at`` to
  the database clock there. The end and "someone must admit now" commit together or not
  at all: no admission is owed that is not written down.
* **Admission is a due source** (runs.engine.sources), fired by the claim by due time on
  any worker, as schedules' ticks and the retention job are: :func:`fire_next` locks a due
  gate (``SKIP LOCKED`` on PostgreSQL), admits the oldest held runs that now fit (each
  gets its start step, pending and due, in the same transaction), and clears ``due_at``
  (or leaves it due when a pass admitted :data:`ADMIT_BATCH` runs and more may fit).
  A worker that dies before the commit leaves the gate due: the next claim admits. The
  start steps it made are ordinary due steps: a crash after the commit leaves them to
  recovery's doorbell. The recovery pass rings a doorbell when a gate is due, so an
  idle cluster admits too.

A per-run slot row (a semaphore of N rows) was the other choice: it would need a release
in every terminal path's SQL (the fast paths are fixed statements) and a sweep for slots
whose run ended without one. Counting run rows under the gate lock cannot leak a slot:
a worker SIGKILLed while its run is active leaves the run active, recovery resumes it,
and its end makes the gate due like any other end.

Limits apply to runs started while the graph had them (a run started before keeps no
gate and does not count). A failed run resumed or retried by an operator becomes active
again without waiting in line; forks and one-node test runs do not pass the gate.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import Any

from django.db import connection, transaction
from django.db.models import Count

from graphs.models import Graph
from runs.engine.store import clock
from runs.engine.store.events import create as create_event
from runs.engine.store.graphs import compiled_graph
from runs.engine.store.writes import bump_run
from runs.engine.types import step_idempotency_key
from runs.models import FlowGate, Run, RunEventKind, RunStatus, Step

# A run that counts against its gate's limits: it has not ended and is not held.
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
# How many held runs one admission pass looks at (oldest first): a pass stays short
# however long the line; a pass that admitted this many leaves the gate due for the next.
ADMIT_BATCH = 200
# Why a held run waits (the run API's ``queue.limit``).
LIMIT_GRAPH, LIMIT_KEY, LIMIT_LINE, LIMIT_NONE = "max_concurrent_runs", "concurrency_key", "schedule_overlap", "admitting"


def key_of(run_input: dict[str, Any], path: str) -> str | None:
    """The concurrency key value of ``run_input`` at dotted ``path`` ("customer.id"), as a
    string: a string value as is, anything else as compact sorted JSON (so 1 and "1"
    differ); values longer than 200 characters as ``sha256:<hex>``. None when the path is
    empty or missing, or its value is null: such a run is held by the graph limit only."""
    if not path:
        return None
    value: Any = run_input
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= 200 else "sha256:" + sha256(text.encode()).hexdigest()


def start_step(run: Run, now: datetime) -> Step:
    """The run's start step (unsaved): due and dispatched at ``now``, its idempotency key
    from the run's uuid; every path that creates a run's first step inserts this row."""
    graph = compiled_graph(run.graph_version_id)
    start = graph.topology.nodes[graph.start_id()]
    return Step(
        run=run,
        node_id=start.id,
        kind=start.kind,
        iteration=0,
        depth=0,
        max_attempts=start.retry.max_attempts,
        idempotency_key=step_idempotency_key(run.uuid, start.id, 0),
        dispatched_at=now,
        due_at=now,
    )


@dataclass
class _Counts:
    """A gate's active runs: in all, per key and per line (only what a pass asks about)."""

    total: int
    keys: dict[str, int]
    lines: dict[str, int]

    def blocked_by(self, limits: dict[str, Any], key: str | None, line: str | None) -> str | None:
        """Which limit a run with ``key``/``line`` would pass now, or None when it fits."""
        if limits["max_concurrent_runs"] is not None and self.total >= limits["max_concurrent_runs"]:
            return LIMIT_GRAPH
        if key is not None and self.keys.get(key, 0) >= limits["concurrency_key_limit"]:
            return LIMIT_KEY
        if line is not None and self.lines.get(line, 0) >= 1:
            return LIMIT_LINE
        return None

    def add(self, key: str | None, line: str | None) -> None:
        self.total += 1
        if key is not None:
            self.keys[key] = self.keys.get(key, 0) + 1
        if line is not None:
            self.lines[line] = self.lines.get(line, 0) + 1


def _limits(graph_id: int) -> dict[str, Any]:
    return dict(Graph.objects.values("max_concurrent_runs", "concurrency_key", "concurrency_key_limit").get(pk=graph_id))


def graph_limits(version: Any, flow_line: str | None) -> dict[str, Any] | None:
    """The flow limits a new run of ``version``'s graph passes, or None when it passes no
    gate (no limit, no key, no ``flow_line``).

    Judged from the Graph the caller loaded with the version (an API request, a trigger's
    firing, a command load it fresh for each start) when it is loaded, so a start of an
    unlimited graph stays free of reads (run creation is a fixed handful of writes:
    tests/runs/engine/test_commit_queries.py); else read by primary key. The count
    itself is always read under the gate's lock."""
    graph = version._state.fields_cache.get("graph")
    if graph is not None:
        limits = {name: getattr(graph, name) for name in ("max_concurrent_runs", "concurrency_key", "concurrency_key_limit")}
    else:
        limits = _limits(version.graph_id)
    if limits["max_concurrent_runs"] is None and not limits["concurrency_key"] and flow_line is None:
        return None
    return limits


def _counts(gate_id: int, keys: set[str], lines: set[str]) -> _Counts:
    """Count the gate's active runs (three indexed reads on run_flow_gate)."""
    active = Run.objects.filter(flow_gate_id=gate_id, flow_held=False, status__in=ACTIVE_STATUSES)
    per_key = dict(active.filter(flow_key__in=keys).values_list("flow_key").annotate(n=Count("id"))) if keys else {}
    per_line = dict(active.filter(flow_line__in=lines).values_list("flow_line").annotate(n=Count("id"))) if lines else {}
    return _Counts(active.count(), per_key, per_line)


def _lock_gate(graph_id: int) -> FlowGate:
    """The graph's gate, made when missing (two concurrent starts make one) and locked."""
    FlowGate.objects.bulk_create([FlowGate(graph_id=graph_id)], ignore_conflicts=True)
    return FlowGate.objects.select_for_update().get(graph_id=graph_id)


def _admit_pass(gate: FlowGate, limits: dict[str, Any], now: datetime, extra: tuple[str | None, str | None] | None = None) -> tuple[list[int], bool, _Counts]:
    """Admit the oldest held runs of ``gate`` that fit now (under the gate's lock, inside
    the caller's transaction). Returns (their start step ids, whether the pass looked at a
    full batch, the counts after it). ``extra``: the key and line of a run about to be
    started, counted in too."""
    held = list(
        Run.objects.filter(flow_gate_id=gate.pk, flow_held=True, status=RunStatus.QUEUED)
        .order_by("id").values_list("id", "flow_key", "flow_line")[:ADMIT_BATCH]
    )
    keys = {k for _, k, _ in held if k is not None} | ({extra[0]} if extra and extra[0] is not None else set())
    lines = {ln for _, _, ln in held if ln is not None} | ({extra[1]} if extra and extra[1] is not None else set())
    counts = _counts(gate.pk, keys, lines)
    step_ids: list[int] = []
    for run_id, key, line in held:
        why = counts.blocked_by(limits, key, line)
        if why == LIMIT_GRAPH:
            break  # FIFO: nobody passes the head of the line on the graph's own limit
        if why is not None:
            continue  # its key or line is full: later runs of other keys may go
        # Compare-and-set: a cancel that got there first (it holds the run row) wins.
        if not bump_run(Run.objects.filter(pk=run_id, status=RunStatus.QUEUED, flow_held=True), flow_held=False, step_count=1):
            continue
        run = Run.objects.get(pk=run_id)
        step = start_step(run, now)
        step.save(force_insert=True)
        create_event(run_id=run_id, step_id=step.pk, kind=RunEventKind.STEP_CREATED, data={"node_id": step.node_id, "iteration": 0, "admitted": True})
        step_ids.append(step.pk)
        counts.add(key, line)
    return step_ids, len(held) >= ADMIT_BATCH, counts


def gate_enter(run: Run, *, graph_id: int, limits: dict[str, Any], flow_line: str | None, now: datetime) -> list[int]:
    """Pass a run about to be inserted (``run`` unsaved; inside the caller's transaction)
    through its graph's gate (``limits`` from :func:`graph_limits`): the gate is locked, runs already held
    that fit now are admitted first (FIFO), and ``run`` gets its gate, key and line and is
    marked held when it does not fit (the caller then creates no start step). Returns the
    start step ids of the runs admitted before it, for the caller to dispatch on commit."""
    gate = _lock_gate(graph_id)
    key = key_of(run.input, limits["concurrency_key"])
    admitted, more, counts = _admit_pass(gate, limits, now, extra=(key, flow_line))
    run.flow_gate_id, run.flow_key, run.flow_line = gate.pk, key, flow_line
    # A full batch looked at: more runs may be waiting ahead of this one, so it waits too.
    run.flow_held = more or counts.blocked_by(limits, key, flow_line) is not None
    if run.flow_held:
        run.step_count = 0  # its start step is made when it is admitted
    return admitted


def run_ended(run: Run) -> None:
    """``run_finished`` receiver (inside the terminal transaction): the end of an admitted
    run of a gate makes the gate due, so the next claim admits who fits now. A held run
    (cancelled in line) frees nothing and touches no gate."""
    if run.flow_gate_id is not None and not run.flow_held:
        FlowGate.objects.filter(pk=run.flow_gate_id).update(due_at=clock.now())


def gate_touch(graph_id: int) -> None:
    """Make the graph's gate due now (its limits changed: held runs may fit), if it has one."""
    FlowGate.objects.filter(graph_id=graph_id).update(due_at=clock.now())


def earliest_due(now: datetime) -> datetime | None:
    """The due source's ``earliest_due``: the earliest gate due at ``now``, or None (one
    read of the ``due_at`` index)."""
    return FlowGate.objects.filter(due_at__lte=now).order_by("due_at").values_list("due_at", flat=True).first()


def fire_next(now: datetime) -> list[int] | None:
    """Admit at one gate due at ``now`` that no other worker holds, in one transaction:
    the start step ids of the runs it admitted (the caller dispatches them), or None when
    no gate is due or every due one is locked by another worker or a start."""
    with transaction.atomic():
        gates = FlowGate.objects.filter(due_at__lte=now).order_by("due_at")
        if connection.features.has_select_for_update_skip_locked:
            gates = gates.select_for_update(skip_locked=True)
        gate = gates.first()
        if gate is None:
            return None
        admitted, more, _ = _admit_pass(gate, _limits(gate.graph_id), now)
        FlowGate.objects.filter(pk=gate.pk).update(due_at=now if more else None)
    return admitted


@dataclass(frozen=True)
class QueuePlace:
    """Where a held run waits: ``position`` in its graph's line (1 = next), the ``limit``
    that holds it (LIMIT_*), its key value and the limit's size."""

    position: int
    limit: str
    key: str | None
    max: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "limit": self.limit, "key": self.key, "max": self.max}


def queue_place(run: Run) -> QueuePlace | None:
    """Where ``run`` waits in line, worked out when read (a few indexed counts), or None
    when it is not held (admitted, never gated, or ended)."""
    if not run.flow_held or run.status != RunStatus.QUEUED or run.flow_gate_id is None:
        return None
    gate = FlowGate.objects.only("graph_id").get(pk=run.flow_gate_id)
    limits = _limits(gate.graph_id)
    ahead = Run.objects.filter(flow_gate_id=gate.pk, flow_held=True, status=RunStatus.QUEUED, id__lt=run.pk).count()
    counts = _counts(gate.pk, {run.flow_key} if run.flow_key else set(), {run.flow_line} if run.flow_line else set())
    why = counts.blocked_by(limits, run.flow_key, run.flow_line) or LIMIT_NONE
    size = {LIMIT_GRAPH: limits["max_concurrent_runs"], LIMIT_KEY: limits["concurrency_key_limit"], LIMIT_LINE: 1}.get(why)
    return QueuePlace(ahead + 1, why, run.flow_key if why == LIMIT_KEY else run.flow_line if why == LIMIT_LINE else None, size)
