"""The run state store: versioned keys, so a commit writes only what its step changed.

Design (issue 11, "state that costs only what a node changed"). A run's state is not
one JSON column rewritten by every commit: each key is kept in :class:`RunStateKey`
rows, one row per version, like LangGraph's channel blobs keyed by channel version.

- A commit inserts one row per key its step wrote, with ``seq`` = the run version the
  commit produces (``Run.version`` + 1, the value the fenced commit sets), and records
  that seq on the step (``Step.state_seq``). Keys the step did not write are not
  touched, encoded or copied: a node that bumps a counter next to a 1 MB chat history
  writes a few bytes (a jsonb ``state || updates`` merge would not do: PostgreSQL
  rewrites, re-compresses and WAL-logs the whole TOASTed value on every UPDATE, and
  SQLite's json_patch rewrites the whole text).
- The state after any commit is one query, no replay: the latest version of each key
  with ``seq <= step.state_seq`` (:func:`state_after`, what the run page, a fork or a
  resume reads); its difference from the state before is the rows with that very seq
  and the versions just below them.
- The current state is the same query without a bound (``Run.state`` reads it lazily);
  the engine itself rarely reads it: the fast path commits from the worker's snapshot.
- ``Run.state_sizes`` (key -> bytes) stays the cheap per-key size map the state limit
  is enforced from (runs.engine.limits); each row also carries its own ``size``.
- Order-sensitive reducers (append, extend, merge) keep their contributions with the
  key's row (``contrib``) instead of in ``Run.scheduler``, so the bookkeeping every
  commit writes stays small. Cost: a step that appends to a list writes that list's
  new version and its contributions, O(list), like LangGraph re-serialising a channel
  it updates; steps that do not write the list pay nothing for it.

Rows are never updated or deleted by the engine (a run's rows go with the run).
Runs committed before this store existed got their state as one version (seq = their
version at migration) and their old steps have no ``state_seq``: :func:`state_after`
replays those steps' recorded writes (``Step.updates``), as fork always did.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runs.engine import scheduler
from runs.engine.store.graphs import compiled_graph
from runs.models import Run, RunStateKey, Step, StepStatus
from runs.nodes.base import NodeResult

# Bookkeeping keys kept elsewhere: contributions live with their key's rows.
CONTRIB = "contrib"


def persisted_bookkeeping(book: Mapping[str, Any]) -> dict[str, Any]:
    """``book`` as ``Run.scheduler`` stores it: without the reducer contributions."""
    return {k: v for k, v in book.items() if k != CONTRIB}


def load_contributions(run: Run, graph: scheduler.CompiledGraph, keys: Iterable[str]) -> None:
    """Make sure ``run.scheduler`` holds the contributions of every order-sensitive key
    among ``keys`` (the keys a step is about to write), reading the missing ones from
    the keys' latest rows (one query, only when some are missing: a worker's snapshot
    keeps them from its previous commit)."""
    book = run.scheduler
    have = book.get(CONTRIB) or {}
    checked: set[str] = run.__dict__.setdefault("_contrib_checked", set())
    missing = [
        k for k in keys
        if k not in have and k not in checked and (decl := graph.reducers.get(k)) is not None and decl.reducer in scheduler.ORDERED_REDUCERS
    ]
    if not missing:
        return
    found = dict(RunStateKey.latest(run.pk).filter(key__in=missing).values_list("key", "contrib"))
    checked.update(missing)
    fresh = {k: v for k, v in found.items() if v is not None}
    if fresh:
        run.scheduler = {**book, CONTRIB: {**have, **fresh}}


def rows(run_id: int, seq: int, keys: Iterable[str], state: Mapping[str, Any], sizes: Mapping[str, int], book: Mapping[str, Any]) -> list[RunStateKey]:
    """Unsaved rows for the versions ``keys`` of ``state`` at ``seq`` (sizes from the
    size map, contributions from bookkeeping ``book``)."""
    contrib = book.get(CONTRIB) or {}
    return [RunStateKey(run_id=run_id, key=k, seq=seq, value=state.get(k), size=sizes.get(k, 0), contrib=contrib.get(k)) for k in keys]


def write(run_id: int, seq: int, keys: Iterable[str], state: Mapping[str, Any], sizes: Mapping[str, int], book: Mapping[str, Any]) -> None:
    """Insert the versions of ``keys`` at ``seq`` (inside the caller's transaction)."""
    new = rows(run_id, seq, keys, state, sizes, book)
    if new:
        RunStateKey.objects.bulk_create(new)


def written_rows(keys: Iterable[str], state: Mapping[str, Any], sizes: Mapping[str, int], book: Mapping[str, Any]) -> str:
    """The versions of ``keys`` as one JSON object for the fast path's SQL:
    ``{key: {"v": value, "s": bytes, "c": contributions or null}}``. Encodes only those
    keys' values."""
    contrib = book.get(CONTRIB) or {}
    return json.dumps({k: {"v": state.get(k), "s": sizes.get(k, 0), "c": contrib.get(k)} for k in keys}, allow_nan=False)


@dataclass(frozen=True)
class StepState:
    """The state right after a committed step and what the step changed.

    ``state``: the whole state after it. ``changed``: the keys it wrote whose value
    changed, each ``{"before": value or None, "after": value, "added": bool}`` (``added``:
    the key did not exist before). ``seq``: its ``state_seq`` (None for a step committed
    before state was kept per key: then ``state`` was replayed from recorded writes).
    """

    step_id: int
    seq: int | None
    state: dict[str, Any]
    changed: dict[str, dict[str, Any]] = field(default_factory=dict)


def state_after(step: Step) -> StepState:
    """The state of ``step``'s run right after ``step`` committed, and its difference
    from the state just before (for the run page, fork and resume).

    Two queries for a step with ``state_seq``: the latest version of every key at that
    seq, and for the keys written at that seq the version before it. A succeeded
    top-level step without one (committed before this store) is replayed from the
    run's recorded writes. Raises ValueError for a step that did not commit a state
    (a child step, or one that has not succeeded).
    """
    if step.parent_id is not None or step.status != StepStatus.SUCCEEDED:
        raise ValueError(f"step {step.pk} is not a committed top-level step")
    if step.state_seq is None:
        replayed, prior = replayed_state(step)
        wrote = step.updates or {}
        changed = {k: _change(prior, k, v) for k, v in replayed.items() if k in wrote and (k not in prior or prior[k] != v)}
        return StepState(step.pk, None, replayed, changed)
    seq = step.state_seq
    state, _ = RunStateKey.state_at(step.run_id, seq)
    written = list(RunStateKey.objects.filter(run_id=step.run_id, seq=seq).values_list("key", flat=True))
    before: dict[str, Any] = {}
    if written and seq > 0:
        earlier = RunStateKey.latest(step.run_id, seq - 1).filter(key__in=written)
        before = dict(earlier.values_list("key", "value"))
    changed = {k: _change(before, k, state.get(k)) for k in written if k not in before or before[k] != state.get(k)}
    return StepState(step.pk, seq, state, changed)


def _change(before: Mapping[str, Any], key: str, after: Any) -> dict[str, Any]:
    return {"before": before.get(key), "after": after, "added": key not in before}


def committed_steps(run: Run, anchor: Step) -> list[Step]:
    """``run``'s committed top-level steps up to and including ``anchor``, in commit
    order (``state_seq`` where recorded, else finish time): the steps a fork at
    ``anchor`` keeps."""
    committed = Step.objects.filter(run=run, parent__isnull=True, status=StepStatus.SUCCEEDED, finished_at__isnull=False)
    order = sorted(committed, key=lambda s: (s.state_seq is not None, s.state_seq or 0, s.finished_at, s.pk))
    mark = (anchor.state_seq is not None, anchor.state_seq or 0, anchor.finished_at, anchor.pk)
    return [s for s in order if (s.state_seq is not None, s.state_seq or 0, s.finished_at, s.pk) <= mark]


def committed_writes(run: Run, anchor: Step) -> list[scheduler.CommittedWrite]:
    """The recorded writes of :func:`committed_steps` (``run``'s committed top-level
    steps up to and including ``anchor``, in commit order)."""
    return [scheduler.CommittedWrite(s.node_id, s.iteration, s.depth, s.updates or {}) for s in committed_steps(run, anchor)]


def replayed_state(step: Step) -> tuple[dict[str, Any], dict[str, Any]]:
    """(state after ``step``, state before it) replayed from the run's recorded writes
    onto its initial state, with the graph's reducers (steps committed before state was
    kept per key). O(steps before it)."""
    run = Run.objects.get(pk=step.run_id)
    graph = compiled_graph(run.graph_version_id)
    state = scheduler.initial_state(graph, run.input)
    book: dict[str, Any] = {}
    before = dict(state)
    for w in committed_writes(run, step):
        before = dict(state)
        scheduler.merge_updates(graph, state, book, w.updates, node_id=w.node_id, iteration=w.iteration, depth=w.depth)
    return state, before


def transition(run: Run, *, node_id: str, iteration: int, depth: int, result: NodeResult, other_active: Iterable[str]) -> scheduler.Transition:
    """scheduler.apply_step for ``result`` of step (``node_id``, ``iteration``, ``depth``) on
    ``run`` as held in memory (state, bookkeeping, step count); ``other_active``: spec node
    ids of the run's other active steps. Pure apart from the cached graph lookup and,
    for keys with order-sensitive reducers the instance does not hold the
    contributions of yet, one read of those (:func:`load_contributions`)."""
    graph = compiled_graph(run.graph_version_id)
    if result.updates:
        load_contributions(run, graph, result.updates)
    return scheduler.apply_step(
        graph,
        state=run.state,
        bookkeeping=run.scheduler,
        node_id=node_id,
        iteration=iteration,
        depth=depth,
        updates=result.updates,
        sets=result.sets,
        route=result.route,
        other_active=other_active,
        step_count=run.step_count,
        max_steps=run.max_steps,
    )
