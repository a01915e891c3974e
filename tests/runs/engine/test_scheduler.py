"""The pure scheduler (runs/engine/scheduler.py) without a database: successors, joins,
reducers, bounds, the dispatch plan, the run status after a commit and the fork replay."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graphs.spec import GraphSpec
from runs.engine import scheduler
from runs.engine.types import ActiveStep
from tests.support.specs import chain, edge, graph, node, transform

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def compiled(nodes, edges, **extra) -> scheduler.CompiledGraph:
    return scheduler.CompiledGraph(GraphSpec.model_validate(graph(nodes, edges, **extra)))


def apply(g, node_id, *, state=None, book=None, updates=None, route=None, active=(), iteration=0, depth=0, step_count=1, max_steps=100):
    return scheduler.apply_step(
        g,
        state=state if state is not None else {},
        bookkeeping=book if book is not None else {},
        node_id=node_id,
        iteration=iteration,
        depth=depth,
        updates=updates or {},
        route=route,
        other_active=list(active),
        step_count=step_count,
        max_steps=max_steps,
    )


def names(transition):
    return [(a.node_id, a.iteration, a.depth) for a in transition.activations]


LINEAR = ([node("start", "start"), transform("a", a="1"), node("end", "end")], chain("start", "a", "end"))
FAN = (
    [node("start", "start"), transform("a", a="1"), transform("b", b="1"), node("join", "join"), node("end", "end")],
    [edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join"), edge("join", "end")],
)


def test_a_plain_node_activates_its_successor_and_leaves_its_inputs_alone():
    g = compiled(*LINEAR)
    state, book = {"x": 1}, {"iterations": {"start": 1}}
    t = apply(g, "start", state=state, book=book, updates={"x": 2})
    assert names(t) == [("a", 0, 1)] and t.state == {"x": 2} and not t.ended and t.failure is None
    assert state == {"x": 1} and book == {"iterations": {"start": 1}}  # inputs are not modified
    assert t.bookkeeping["iterations"] == {"start": 1, "a": 1}
    end = apply(g, "end", state=t.state, book=t.bookkeeping, depth=2)
    assert end.ended and end.bookkeeping["ended"] is True and end.activations == []


def test_fan_out_then_the_join_waits_for_the_other_branch():
    g = compiled(*FAN)
    start = apply(g, "start")
    assert sorted(names(start)) == [("a", 0, 1), ("b", 0, 1)]
    first = apply(g, "a", book=start.bookkeeping, depth=1, active=["b"])
    assert first.activations == [] and first.bookkeeping["joins"]["join"]["arrived"] == ["a:"]
    second = apply(g, "b", book=first.bookkeeping, depth=1)
    assert names(second) == [("join", 0, 2)] and second.bookkeeping["joins"] == {}


def test_a_branch_closed_by_a_condition_counts_as_done():
    g = compiled(
        [node("start", "start"), node("gate", "condition", config={"expression": "x > 0"}), transform("left", l="1"),
         transform("right", r="1"), node("join", "join"), node("end", "end"), node("skip", "end")],
        [edge("start", "gate"), edge("start", "right"), edge("gate", "left", "true"), edge("gate", "skip", "false"),
         edge("left", "join"), edge("right", "join"), edge("join", "end")],
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    right = apply(g, "right", depth=1, active=["gate"])
    assert right.activations == []  # the gate may still route to "left"
    closed = apply(g, "gate", book=right.bookkeeping, depth=1, route=["false"])
    assert sorted(names(closed)) == [("join", 0, 2), ("skip", 0, 2)]


def test_ordered_reducers_do_not_depend_on_commit_order():
    g = compiled(*FAN, state={"items": {"reducer": "append"}, "total": {"reducer": "add"}})
    base = scheduler.initial_state(g, {})
    assert base["items"] == [] and base["total"] == 0
    a_then = apply(g, "a", state=base, updates={"items": "A", "total": 1}, depth=1)
    a_first = apply(g, "b", state=a_then.state, book=a_then.bookkeeping, updates={"items": "B", "total": 2}, depth=1)
    b_then = apply(g, "b", state=base, updates={"items": "B", "total": 2}, depth=1)
    b_first = apply(g, "a", state=b_then.state, book=b_then.bookkeeping, updates={"items": "A", "total": 1}, depth=1)
    assert a_first.state["items"] == b_first.state["items"] == ["A", "B"]
    assert a_first.state["total"] == b_first.state["total"] == 3


def test_a_reducer_type_error_fails_the_transition_without_changes():
    g = compiled(*LINEAR, state={"total": {"reducer": "add"}})
    t = apply(g, "start", state={"total": 1}, updates={"total": "many"})
    assert t.failure is not None and t.failure.code == "reducer" and t.activations == [] and t.state == {"total": 1}


def test_loop_and_step_bounds():
    loop = compiled(
        [node("start", "start"), node("again", "transform", config={"set": {"n": "n + 1"}}, max_iterations=2), node("end", "end")],
        [edge("start", "again"), edge("again", "again"), edge("again", "end")],
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    bound = apply(loop, "again", book={"iterations": {"again": 2}}, route=None)
    assert bound.failure is not None and bound.failure.code == "max_iterations"
    steps = apply(compiled(*LINEAR), "start", step_count=5, max_steps=5)
    assert steps.failure == ("max_steps", "run reached its max_steps limit of 5")


def _active(id_, status, dispatched=None, available=None):
    return ActiveStep(id_, f"n{id_}", status, dispatched, available, None)


def test_plan_dispatch_keeps_one_fills_free_slots_and_holds_the_rest():
    running = _active(1, "running")
    plan = scheduler.plan_dispatch(max_parallelism=3, active=[running], new_count=3, now=NOW, may_keep=lambda i: True)
    assert (plan.kept, plan.dispatch_new, plan.dispatch_old) == (0, [1], [])  # 3 slots, 1 busy: keep one, send one
    no_worker = scheduler.plan_dispatch(max_parallelism=3, active=[], new_count=2, now=NOW, may_keep=None)
    assert (no_worker.kept, no_worker.dispatch_new) == (None, [0, 1])


def test_plan_dispatch_sends_a_step_the_worker_may_not_keep_and_releases_held_ones():
    refused = scheduler.plan_dispatch(max_parallelism=2, active=[], new_count=2, now=NOW, may_keep=lambda i: i == 1)
    assert (refused.kept, refused.dispatch_new) == (1, [0])  # over budget for this worker: through the queue
    held = _active(5, "pending")
    backoff = _active(6, "pending", available=NOW + timedelta(seconds=5))
    queued = _active(7, "pending", dispatched=NOW)  # already handed off: counts as busy
    plan = scheduler.plan_dispatch(max_parallelism=3, active=[queued, backoff, held], new_count=0, now=NOW, may_keep=None)
    assert plan.dispatch_old == [5]


def test_run_status_after_a_commit():
    assert scheduler.run_status_after(["waiting", "pending"]) == "running"
    assert scheduler.run_status_after(["waiting", "parked", "suspended"]) == "waiting"
    assert scheduler.run_status_after([]) == "waiting"


def test_fork_replays_committed_writes_then_the_patch():
    g = compiled(*LINEAR, state={"log": {"reducer": "append"}})
    writes = [scheduler.CommittedWrite("start", 0, 0, {"log": "s"}), scheduler.CommittedWrite("a", 0, 1, {"log": "a", "x": 1})]
    t = scheduler.fork_transition(
        g, run_input={"q": 1}, writes=writes, anchor=writes[1], route=None, state_patch={"x": 5}, max_steps=10
    )
    assert t.state["log"] == ["s", "a"] and t.state["x"] == 5 and t.state["input"] == {"q": 1}
    assert names(t) == [("end", 0, 2)] and t.bookkeeping["iterations"] == {"start": 1, "a": 1, "end": 1}
    nothing = scheduler.fork_transition(g, run_input={}, writes=[], anchor=scheduler.CommittedWrite("end", 0, 2, {}), route=None, state_patch={}, max_steps=10)
    assert nothing.activations == []


def test_a_set_write_to_an_ordered_key_replaces_what_came_before_it_in_any_commit_order():
    g = compiled(*LINEAR, state={"log": {"reducer": "append", "default": ["seed"]}})
    writes = [("x", 1, ["early"], False), ("gate", 2, ["EDITED"], True), ("y", 3, ["late"], False), ("z", 1, ["also early"], False)]
    results = []
    for order in (writes, list(reversed(writes))):
        state, book = {"log": ["seed"]}, {}
        for node_id, depth, value, is_set in order:
            update = {"log": value if is_set else value[0]}
            scheduler.merge_updates(g, state, book, update, node_id=node_id, iteration=0, depth=depth, sets={"log"} if is_set else ())
        results.append(state["log"])
    assert results == [["EDITED", "late"], ["EDITED", "late"]]
    with_patch = {"log": ["seed", "a"]}, {"contrib": {"log": [[0, "a", 0, "a"]]}}
    scheduler.patch_state(g, *with_patch, {"log": ["P"]})
    state, book = with_patch
    scheduler.merge_updates(g, state, book, {"log": "b"}, node_id="b", iteration=0, depth=0)
    assert state["log"] == ["P", "b"]  # the patch replaced the contributions before it, whatever their depth
