"""Pure scheduling: merge a step's writes into the run state and decide what runs next.

No database here. ``apply_step`` is the one function the commit calls to decide
successors: its inputs are the committed facts (state, bookkeeping, active steps) and its
output is the next state, bookkeeping and the steps to create. ``plan_dispatch`` decides
which ready steps start now, ``run_status_after`` the run's status after a commit, and
``fork_transition`` replays a run's committed writes to fork it at one step. LangGraph's ``pregel/_algo.py``
keeps the same split between "what runs next" and the loop that commits it.

Bookkeeping (``Run.scheduler``) is a JSON object:
- ``iterations``: {node_id: steps created so far} (the next step's iteration number);
- ``joins``: {join_id: {"arrived": [edge keys], "depth": int}} for armed joins;
- ``contrib``: {key: [[depth, node_id, iteration, value], ...]} writes to keys with an
  order-sensitive reducer (persisted with those keys' rows, not in ``Run.scheduler``:
  runs.engine.store.state). An entry with a fifth item ``"set"`` is a value set from outside
  the reducer (an approver's edited value, a fork's patch): it replaces what the
  entries before it accumulated, and the later ones reduce onto it (:data:`SET`);
- ``ended``: true once an end node committed.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from graphs.spec import EdgeSpec, GraphSpec, StateKeySpec
from graphs.topology import Topology
from runs.engine.types import ActiveStep
from runs.models import RunStatus, StepStatus

ORDERED_REDUCERS = {"append", "extend", "merge"}
# The mark of a contribution entry that sets the key's value instead of adding to it.
SET = "set"
# Where a fork's patch sits among a key's contributions: before every step's (depths are >= 0).
PATCH_DEPTH = -1


class ReducerError(ValueError):
    """A write cannot be combined by the key's reducer (e.g. ``add`` on a string)."""


@dataclass(frozen=True)
class Activation:
    """A step to create: ``node_id`` at ``iteration`` with causal ``depth``."""

    node_id: str
    iteration: int
    depth: int


class Failure(NamedTuple):
    """Why the graph cannot go on: ``code`` (max_iterations, max_steps, reducer) and a message."""

    code: str
    message: str


@dataclass
class Transition:
    """The result of applying one committed step.

    ``failure`` is set (code, message) when the graph cannot go on (loop bound, step
    limit, reducer error); the commit then fails the run instead of creating steps.
    """

    state: dict[str, Any]
    bookkeeping: dict[str, Any]
    activations: list[Activation] = field(default_factory=list)
    ended: bool = False
    failure: Failure | None = None


class CompiledGraph:
    """A GraphSpec with its Topology and reducers, cached per graph version (runs.engine.store.graphs)."""

    def __init__(self, spec: GraphSpec):
        self.spec = spec
        self.topology = Topology(spec)
        self.reducers: dict[str, StateKeySpec] = dict(spec.state)
        self.join_ids = {n.id for n in spec.nodes if n.kind == "join"}
        self.end_ids = {n.id for n in spec.nodes if n.kind == "end"}

    def start_id(self) -> str:
        """The id of the graph's start node."""
        return self.topology.start_ids[0]


def initial_state(graph: CompiledGraph, run_input: dict[str, Any]) -> dict[str, Any]:
    """The state a run starts with: declared defaults, then the input's keys, plus ``input``.

    Returns a new dict (JSON values).
    """
    state: dict[str, Any] = {}
    for key, decl in graph.reducers.items():
        state[key] = copy.deepcopy(decl.default) if decl.default is not None else _empty(decl.reducer)
    state.update(copy.deepcopy(run_input))
    state["input"] = copy.deepcopy(run_input)
    return state


def _empty(reducer: str) -> Any:
    return {"append": [], "extend": [], "merge": {}, "add": 0}.get(reducer)


def _edge_key(edge: EdgeSpec) -> str:
    return f"{edge.source}:{edge.source_handle or ''}"


def merge_updates(
    graph: CompiledGraph,
    state: dict[str, Any],
    bookkeeping: dict[str, Any],
    updates: dict[str, Any],
    *,
    node_id: str,
    iteration: int,
    depth: int,
    sets: Collection[str] = (),
) -> None:
    """Merge ``updates`` into ``state`` in place using each key's reducer.

    ``replace`` overwrites; ``add``/``max``/``min`` are commutative and apply directly;
    ``append``/``extend``/``merge`` keep every contribution and recompute the value in
    (depth, node id, iteration) order, so the result never depends on which parallel
    branch committed first. Keys in ``sets`` are set, not reduced: their value replaces
    the key's (for an ordered key, what the contributions before it in that order
    accumulated; later ones reduce onto it). Raises ReducerError on a type mismatch.
    """
    contrib = bookkeeping.setdefault("contrib", {})
    for key, value in updates.items():
        # Values are never changed in place: a written key gets a new value (and an
        # ordered key a new contributions list), so state and bookkeeping dicts may share
        # the values of keys nobody wrote with the ones they were copied from.
        decl = graph.reducers.get(key)
        reducer = decl.reducer if decl else "replace"
        if reducer == "replace" or (key in sets and reducer not in ORDERED_REDUCERS):
            state[key] = value
        elif reducer == "add":
            current = state.get(key) or 0
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(current, (int, float)):
                raise ReducerError(f"reducer 'add' on state key '{key}' needs numbers, got {type(value).__name__}")
            state[key] = current + value
        elif reducer in ("max", "min"):
            current = state.get(key)
            try:
                state[key] = value if current is None else (max if reducer == "max" else min)(current, value)
            except TypeError as exc:
                raise ReducerError(f"reducer '{reducer}' on state key '{key}': {exc}") from None
        else:
            entry = [depth, node_id, iteration, value, SET] if key in sets else [depth, node_id, iteration, value]
            entries = [*contrib.get(key, ()), entry]
            entries.sort(key=lambda e: (e[0], e[1], e[2]))  # [depth, node_id, iteration, value(, "set")] (JSON)
            contrib[key] = entries
            state[key] = _reduce_ordered(key, reducer, decl, entries)


def patch_state(graph: CompiledGraph, state: dict[str, Any], bookkeeping: dict[str, Any], patch: dict[str, Any]) -> None:
    """Set ``patch``'s keys in ``state`` in place, as the values the run goes on from (a
    fork's state patch): an ordered key's contributions so far are replaced by one set
    entry ahead of all others (:data:`PATCH_DEPTH`), so later writes reduce onto the
    patched value instead of recomputing it from the default. Raises ReducerError when a
    value cannot be an ordered key's value (``append``/``extend``: a list, ``merge``: an
    object)."""
    contrib = bookkeeping.setdefault("contrib", {})
    for key, value in patch.items():
        decl = graph.reducers.get(key)
        if decl is not None and decl.reducer in ORDERED_REDUCERS:
            entries = [[PATCH_DEPTH, "", 0, value, SET]]
            state[key] = _reduce_ordered(key, decl.reducer, decl, entries)
            contrib[key] = entries
        else:
            state[key] = value


def _reduce_ordered(key: str, reducer: str, decl: StateKeySpec | None, entries: list[list[Any]]) -> Any:
    base = copy.deepcopy(decl.default) if decl and decl.default is not None else _empty(reducer)
    start = 0
    for index, entry in enumerate(entries):
        if len(entry) > 4 and entry[4] == SET:  # the last set value is the base of what follows it
            base, start = entry[3], index + 1
    if start:
        wanted, noun = (dict, "an object") if reducer == "merge" else (list, "a list")
        if not isinstance(base, wanted):
            raise ReducerError(f"reducer '{reducer}' on state key '{key}' needs {noun} as its value, got {type(base).__name__}")
    values = [entry[3] for entry in entries[start:]]
    if reducer == "append":
        return list(base) + values
    wanted, noun = (list, "lists") if reducer == "extend" else (dict, "objects")
    for value in values:
        if not isinstance(value, wanted):
            raise ReducerError(f"reducer '{reducer}' on state key '{key}' needs {noun}, got {type(value).__name__}")
    if reducer == "extend":
        return list(base) + [item for value in values for item in value]
    merged = dict(base)
    for value in values:  # later contributions win on a shared key
        merged.update(value)
    return merged


def fired_edges(graph: CompiledGraph, node_id: str, route: list[str] | None) -> list[EdgeSpec]:
    """Outgoing edges that fire: all of them for a plain node (``route`` None), else those
    whose source handle is in ``route``."""
    edges = graph.topology.out_edges.get(node_id, [])
    if route is None:
        return list(edges)
    wanted = set(route)
    return [e for e in edges if (e.source_handle or "") in wanted]


def apply_step(
    graph: CompiledGraph,
    *,
    state: dict[str, Any],
    bookkeeping: dict[str, Any],
    node_id: str,
    iteration: int,
    depth: int,
    updates: dict[str, Any],
    route: list[str] | None,
    other_active: Iterable[str],
    step_count: int,
    max_steps: int,
    sets: Collection[str] = (),
) -> Transition:
    """Apply one committed step and decide its successors.

    - ``state``/``bookkeeping``: the committed values (not modified; new dicts are
      returned, sharing the values of keys the step did not write: no deep copy, so a
      step costs what it wrote, not the size of the state).
    - ``other_active``: node ids of the run's other active steps (pending, running,
      waiting, parked) after this one finishes.
    - ``step_count``/``max_steps``: steps created so far and the run's limit.
    - ``sets``: keys of ``updates`` set rather than reduced (:func:`merge_updates`).

    Join rule (AND-join with dead-path elimination): a join fires once at least one
    incoming edge arrived and no active step can still reach a missing incoming edge's
    source without passing through the join. A branch closed by a condition never
    arrives and can no longer reach the join, so it counts as done.
    """
    new_state = dict(state)
    book = _copy_bookkeeping(bookkeeping)
    try:
        merge_updates(graph, new_state, book, updates, node_id=node_id, iteration=iteration, depth=depth, sets=sets)
    except ReducerError as exc:
        return Transition(state, bookkeeping, failure=Failure("reducer", str(exc)))

    transition = Transition(new_state, book)
    if node_id in graph.end_ids:
        book["ended"] = True
        transition.ended = True
    joins: dict[str, dict[str, Any]] = book.setdefault("joins", {})
    iterations: dict[str, int] = book.setdefault("iterations", {})
    targets: list[tuple[str, int]] = []
    for edge in fired_edges(graph, node_id, route):
        if edge.target in graph.join_ids:
            armed = joins.setdefault(edge.target, {"arrived": [], "depth": 0})
            key = _edge_key(edge)
            if key not in armed["arrived"]:
                armed["arrived"].append(key)
            armed["depth"] = max(armed["depth"], depth + 1)
        else:
            targets.append((edge.target, depth + 1))

    active = list(other_active)
    for target, target_depth in targets:
        failure = _activate(graph, transition, iterations, target, target_depth, step_count, max_steps)
        if failure:
            transition.failure = failure
            return transition
        active.append(target)

    # Fire joins until none can: firing adds an active step that may hold another join.
    fired = True
    while fired:
        fired = False
        for join_id in sorted(joins):
            if _join_ready(graph, join_id, joins[join_id], active):
                armed = joins.pop(join_id)
                failure = _activate(graph, transition, iterations, join_id, armed["depth"], step_count, max_steps)
                if failure:
                    transition.failure = failure
                    return transition
                active.append(join_id)
                fired = True
                break
    return transition


def _copy_bookkeeping(bookkeeping: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``bookkeeping`` apply_step may change: the small maps it edits in place
    (iterations, armed joins) are copied; the contributions map only one level (its
    lists are replaced, never extended, by merge_updates)."""
    book: dict[str, Any] = dict(bookkeeping)
    if "iterations" in book:
        book["iterations"] = dict(book["iterations"])
    if "joins" in book:
        book["joins"] = copy.deepcopy(book["joins"])
    if "contrib" in book:
        book["contrib"] = dict(book["contrib"])
    return book


def _activate(
    graph: CompiledGraph,
    transition: Transition,
    iterations: dict[str, int],
    node_id: str,
    depth: int,
    step_count: int,
    max_steps: int,
) -> Failure | None:
    iteration = iterations.get(node_id, 0)
    node = graph.topology.nodes[node_id]
    if node.max_iterations is not None and iteration >= node.max_iterations:
        return Failure("max_iterations", f"node '{node_id}' reached its max_iterations bound of {node.max_iterations}")
    if step_count + len(transition.activations) + 1 > max_steps:
        return Failure("max_steps", f"run reached its max_steps limit of {max_steps}")
    iterations[node_id] = iteration + 1
    transition.activations.append(Activation(node_id, iteration, depth))
    return None


def _join_ready(graph: CompiledGraph, join_id: str, armed: dict[str, Any], active: list[str]) -> bool:
    arrived = set(armed["arrived"])
    if not arrived:
        return False
    topo = graph.topology
    for edge in topo.in_edges.get(join_id, []):
        if _edge_key(edge) in arrived:
            continue
        for node in active:
            if node != join_id and topo.can_reach(node, edge.source, avoid=join_id):
                return False
    return True


@dataclass(frozen=True)
class DispatchPlan:
    """Which ready steps start now. ``kept``: index (into the new steps) of the one leased
    to the committing worker, or None; ``dispatch_new``: indices of new steps to hand to
    the queue; ``dispatch_old``: ids of older pending steps to hand to the queue."""

    kept: int | None
    dispatch_new: list[int]
    dispatch_old: list[int]


def plan_dispatch(
    *,
    max_parallelism: int,
    active: Sequence[ActiveStep],
    new_count: int,
    now: datetime,
    may_keep: Callable[[int], bool] | None,
) -> DispatchPlan:
    """Choose which ready steps start now, within the run's parallelism bound.

    ``active``: the run's other active steps; a step counts against the bound while it
    runs or was handed to the queue. New steps (``new_count`` of them, in creation order)
    fill free slots first: the first one ``may_keep(index)`` accepts (``None``: no worker
    keeps a step) is kept by the committing worker (no queue hop), the others are
    dispatched. Then older pending steps never dispatched (held back by the bound) and
    past their backoff (``available_at <= now``) fill what is left.
    """
    busy = sum(1 for a in active if a.status == StepStatus.RUNNING or (a.status == StepStatus.PENDING and a.dispatched_at is not None))
    slots = max(0, max_parallelism - busy)
    kept: int | None = None
    dispatch_new: list[int] = []
    for index in range(new_count):
        if slots <= 0:
            break
        slots -= 1
        if may_keep is not None and kept is None and may_keep(index):
            kept = index
            continue
        dispatch_new.append(index)
    old: list[int] = []
    for a in active:
        if slots <= 0:
            break
        if a.status == StepStatus.PENDING and a.dispatched_at is None and (a.available_at is None or a.available_at <= now):
            old.append(a.id)
            slots -= 1
    return DispatchPlan(kept, dispatch_new, old)


def run_status_after(step_statuses: Iterable[str]) -> str:
    """The status of a live run whose active steps have ``step_statuses``: running while one
    can make progress (pending or running), else waiting (only gates, parked or suspended
    steps are left)."""
    return RunStatus.RUNNING if set(step_statuses) & {StepStatus.PENDING, StepStatus.RUNNING} else RunStatus.WAITING


@dataclass(frozen=True)
class CommittedWrite:
    """A committed top-level step's identity and the state updates it wrote."""

    node_id: str
    iteration: int
    depth: int
    updates: dict[str, Any]


def fork_transition(
    graph: CompiledGraph,
    *,
    run_input: dict[str, Any],
    writes: Iterable[CommittedWrite],
    anchor: CommittedWrite,
    route: list[str] | None,
    state_patch: dict[str, Any],
    max_steps: int,
) -> Transition:
    """The start of a fork at ``anchor``: the state right after it committed, patched.

    ``writes`` are the source run's committed top-level steps up to and including the
    anchor, in commit order; they are replayed with the graph's reducers onto the initial
    state, then ``state_patch`` is applied on top, then the anchor's successors are decided
    as if it had just committed (``route`` as it recorded). The result's ``failure`` is set
    (or ``activations`` is empty) when nothing can follow the anchor.
    """
    state = initial_state(graph, run_input)
    book: dict[str, Any] = {"iterations": {}}
    for w in writes:
        merge_updates(graph, state, book, w.updates, node_id=w.node_id, iteration=w.iteration, depth=w.depth)
        book["iterations"][w.node_id] = max(book["iterations"].get(w.node_id, 0), w.iteration + 1)
    return fork_from(graph, state=state, bookkeeping=book, anchor=anchor, route=route, state_patch=state_patch, max_steps=max_steps)


def fork_from(
    graph: CompiledGraph,
    *,
    state: dict[str, Any],
    bookkeeping: dict[str, Any],
    anchor: CommittedWrite,
    route: list[str] | None,
    state_patch: dict[str, Any],
    max_steps: int,
) -> Transition:
    """The start of a fork at ``anchor`` from the state right after it committed (and its
    bookkeeping: ``iterations`` of the steps committed up to it, reducer ``contrib``):
    ``state_patch`` on top (:func:`patch_state`: the patched values are what later
    writes reduce onto), then the anchor's successors as :func:`fork_transition`
    decides them. ``state`` is not modified."""
    state, bookkeeping = dict(state), _copy_bookkeeping(bookkeeping)
    try:
        patch_state(graph, state, bookkeeping, state_patch)
    except ReducerError as exc:
        return Transition(state, bookkeeping, failure=Failure("reducer", str(exc)))
    return apply_step(
        graph,
        state=state,
        bookkeeping=bookkeeping,
        node_id=anchor.node_id,
        iteration=anchor.iteration,
        depth=anchor.depth,
        updates={},
        route=route,
        other_active=[],
        step_count=0,
        max_steps=max_steps,
    )
