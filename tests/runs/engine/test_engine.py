"""The node-commit loop end to end on the real database: linear, branching, fan-out/join,
loops, retries, timeouts, cancellation, budgets, approvals, fencing and parking."""
from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.services import AlreadyDecided, approval_decide
from runs.models import RunEvent, Step, StepAttempt
from runs.nodes.base import NodeResult
from runs.services import run_cancel, run_start
from tests.support import engine
from tests.support.bounded import bounded_work
from tests.support.leases import begun
from tests.support.specs import chain, edge, effect, graph, node, publish, run_local, transform
from tests.support.tools import read_effects

pytestmark = pytest.mark.django_db(transaction=True)

X_INPUT = {"type": "object", "properties": {"x": {"type": "integer"}}}


def steps_of(run):
    return list(Step.objects.filter(run=run).order_by("id").values_list("node_id", "status", "attempt"))


def decide(run, decision, **kwargs):
    request = ApprovalRequest.objects.get(run=run, status="pending")
    with engine.local_mode() as queue:
        approval_decide(approval_id=request.pk, decision=decision, actor="tester", **kwargs)
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    return run


def test_linear_graph_commits_every_step_once_and_merges_state():
    spec = graph(
        [node("start", "start"), transform("double", y="x * 2"), transform("inc", z="y + 1"), node("end", "end")],
        chain("start", "double", "inc", "end"),
        input_schema=X_INPUT,
    )
    run = run_local(spec, {"x": 5})
    assert run.status == "succeeded", run.error
    assert run.state["y"] == 10 and run.state["z"] == 11 and run.state["x"] == 5
    assert steps_of(run) == [(n, "succeeded", 1) for n in ("start", "double", "inc", "end")]
    kinds = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds[0] == "run_created" and kinds[-1] == "run_succeeded"
    assert kinds.count("step_succeeded") == 4
    ids = list(RunEvent.objects.filter(run=run).values_list("id", flat=True))
    assert ids == sorted(ids)
    assert StepAttempt.objects.filter(step__run=run).count() == 4


def test_condition_takes_one_branch_only():
    spec = graph(
        [
            node("start", "start"),
            node("check", "condition", config={"expression": "x > 5"}),
            transform("big", size="'big'"),
            transform("small", size="'small'"),
            node("end", "end"),
        ],
        chain("start", "check") + [edge("check", "big", "true"), edge("check", "small", "false"), edge("big", "end"), edge("small", "end")],
        input_schema=X_INPUT,
    )
    version = publish(spec)
    assert run_local(version, {"x": 9}).state["size"] == "big"
    run = run_local(version, {"x": 1})
    assert run.state["size"] == "small"
    assert "big" not in [s[0] for s in steps_of(run)]


def test_switch_picks_first_matching_case_or_default():
    spec = graph(
        [
            node("start", "start"),
            node("route", "condition", config={"cases": [{"handle": "low", "expression": "x < 3"}, {"handle": "mid", "expression": "x < 7"}]}),
            transform("a", out="'low'"),
            transform("b", out="'mid'"),
            transform("c", out="'high'"),
            node("end", "end"),
        ],
        chain("start", "route")
        + [edge("route", "a", "low"), edge("route", "b", "mid"), edge("route", "c", "default")]
        + [edge("a", "end"), edge("b", "end"), edge("c", "end")],
        input_schema=X_INPUT,
    )
    version = publish(spec)
    assert [run_local(version, {"x": x}).state["out"] for x in (1, 5, 9)] == ["low", "mid", "high"]


def test_fan_out_join_merges_with_reducer_in_deterministic_order():
    spec = graph(
        [
            node("start", "start"),
            transform("a", results="'a'"),
            transform("c", results="'c'"),
            transform("b", results="'b'"),
            node("join", "join"),
            transform("after", n="len(results)"),
            node("end", "end"),
        ],
        [edge("start", "c"), edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join"), edge("c", "join")]
        + chain("join", "after", "end"),
        state={"results": {"reducer": "append"}},
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    assert run.state["results"] == ["a", "b", "c"]  # (depth, node id) order, not finish order
    assert run.state["n"] == 3
    assert [s[0] for s in steps_of(run)].count("join") == 1


def test_join_does_not_wait_for_a_branch_closed_by_a_condition():
    spec = graph(
        [
            node("start", "start"),
            node("gate", "condition", config={"expression": "x > 0"}),
            transform("left", l="1"),
            transform("right", r="2"),
            node("join", "join"),
            node("end", "end"),
            node("end_skip", "end"),
        ],
        [edge("start", "gate"), edge("start", "right"), edge("gate", "left", "true"), edge("gate", "end_skip", "false")]
        + [edge("left", "join"), edge("right", "join"), edge("join", "end")],
        input_schema=X_INPUT,
    )
    version = publish(spec)
    closed = run_local(version, {"x": 0})
    assert closed.status == "succeeded", closed.error
    assert "join" in [s[0] for s in steps_of(closed)] and "left" not in [s[0] for s in steps_of(closed)]
    both = run_local(version, {"x": 1})
    assert both.state["l"] == 1 and both.state["r"] == 2


def test_bounded_loop_runs_until_condition_and_bound_stops_runaway():
    nodes = [
        node("start", "start"),
        {**transform("bump", n="n + 1"), "max_iterations": 5},
        node("again", "condition", config={"expression": "n < limit"}),
        node("end", "end"),
    ]
    edges = chain("start", "bump", "again") + [edge("again", "bump", "true"), edge("again", "end", "false")]
    schema = {"type": "object", "properties": {"limit": {"type": "integer"}}}
    version = publish(graph(nodes, edges, input_schema=schema, state={"n": {"default": 0}}))
    run = run_local(version, {"limit": 3})
    assert run.status == "succeeded" and run.state["n"] == 3
    assert Step.objects.filter(run=run, node_id="bump").count() == 3
    runaway = run_local(version, {"limit": 100})
    assert runaway.status == "failed" and runaway.error["code"] == "max_iterations"
    assert Step.objects.filter(run=runaway, node_id="bump").count() == 5


def test_retry_policy_retries_with_the_same_idempotency_key(effects_file):
    spec = graph(
        [
            node("start", "start"),
            node("flaky", "tool", config={"tool": "flaky", "args": {"fail_times": 2}, "output_key": "result"}, retry={"max_attempts": 3, "backoff_seconds": 0}),
            node("end", "end"),
        ],
        chain("start", "flaky", "end"),
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    assert run.state["result"] == {"attempt": 3}
    step = Step.objects.get(run=run, node_id="flaky")
    attempts = list(step.attempts.order_by("number").values_list("number", "status"))
    assert attempts == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    assert RunEvent.objects.filter(run=run, kind="step_retrying").count() == 2


def test_backoff_delays_the_next_attempt():
    spec = graph(
        [
            node("start", "start"),
            node("flaky", "tool", config={"tool": "flaky", "args": {"fail_times": 1}}, retry={"max_attempts": 2, "backoff_seconds": 0.5}),
            node("end", "end"),
        ],
        chain("start", "flaky", "end"),
    )
    run = run_local(spec)
    assert run.status == "succeeded"
    first, second = Step.objects.get(run=run, node_id="flaky").attempts.order_by("number")
    assert (second.started_at - first.finished_at).total_seconds() >= 0.45


def test_exhausted_or_non_retryable_errors_fail_the_run():
    exhausted = run_local(graph(
        [node("start", "start"), node("f", "tool", config={"tool": "flaky", "args": {"fail_times": 5}}, retry={"max_attempts": 2, "backoff_seconds": 0}), node("end", "end")],
        chain("start", "f", "end"),
    ))
    assert exhausted.status == "failed" and exhausted.error["code"] == "flaky" and exhausted.error["node_id"] == "f"
    assert Step.objects.get(run=exhausted, node_id="f").attempt == 2
    fatal = run_local(graph(
        [node("start", "start"), node("f", "tool", config={"tool": "flaky", "args": {"fail_times": 5, "retryable": False}}, retry={"max_attempts": 5, "backoff_seconds": 0}), node("end", "end")],
        chain("start", "f", "end"),
    ))
    assert fatal.status == "failed" and Step.objects.get(run=fatal, node_id="f").attempt == 1
    only_listed = run_local(graph(
        [node("start", "start"), node("f", "tool", config={"tool": "flaky", "args": {"fail_times": 5, "code": "other"}}, retry={"max_attempts": 5, "backoff_seconds": 0, "retry_on": ["flaky"]}), node("end", "end")],
        chain("start", "f", "end"),
    ))
    assert only_listed.status == "failed" and Step.objects.get(run=only_listed, node_id="f").attempt == 1


def test_timeout_fails_the_attempt_quickly():
    spec = graph(
        [node("start", "start"), node("slow", "tool", config={"tool": "flaky", "args": {"fail_times": 0, "sleep": 5}}, timeout_seconds=0.3), node("end", "end")],
        chain("start", "slow", "end"),
    )
    run = run_local(spec, timeout=10)
    assert run.status == "failed" and run.error["code"] == "timeout"


def test_expression_error_fails_its_step_and_leaves_state_unchanged():
    spec = graph([node("start", "start"), transform("bad", y="x / 0"), node("end", "end")], chain("start", "bad", "end"), input_schema=X_INPUT)
    run = run_local(spec, {"x": 1})
    assert run.status == "failed" and run.error["code"] == "expression"
    assert "y" not in run.state and run.state["x"] == 1


def test_cancel_stops_pending_steps_and_is_audited():
    spec = graph([node("start", "start"), transform("a", y="1"), node("end", "end")], chain("start", "a", "end"))
    version = publish(spec)
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        assert run_cancel(run=run, actor="tester", reason="changed my mind")
        engine.drive_local(run.pk, queue=queue, timeout=5)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Step.objects.get(run=run, node_id="start").status == "cancelled"
    assert not run_cancel(run=run, actor="tester")
    assert run.error["code"] == "cancelled"


def test_budget_refuses_a_step_that_could_overrun():
    spec = graph(
        [node("start", "start"), node("ask", "llm", config={"prompt": "hello", "max_tokens": 1_000_000}), node("end", "end")],
        chain("start", "ask", "end"),
        settings={"budget_usd": "0.0001"},
    )
    run = run_local(spec)
    assert run.status == "failed" and run.error["code"] == "budget_exceeded"
    ask = Step.objects.get(run=run, node_id="ask")
    assert ask.attempts.count() == 0  # refused before any token was spent
    ok = run_local(graph(
        [node("start", "start"), node("ask", "llm", config={"prompt": "hello", "max_tokens": 100}), node("end", "end")],
        chain("start", "ask", "end"),
        settings={"budget_usd": "1"},
    ))
    assert ok.status == "succeeded" and ok.cost_usd > 0 and ok.input_tokens > 0


def test_duplicate_delivery_of_a_finished_step_does_nothing(effects_file):
    run = run_local(graph([node("start", "start"), effect("e"), node("end", "end")], chain("start", "e", "end")))
    step = Step.objects.get(run=run, node_id="e")
    engine.step_execute(step.pk)
    engine.step_execute(step.pk)
    assert len(read_effects()) == 1
    assert StepAttempt.objects.filter(step=step).count() == 1


def test_commit_with_a_lost_lease_writes_nothing():
    version = publish(graph([node("start", "start"), transform("a", y="1"), node("end", "end")], chain("start", "a", "end")))
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start_id = Step.objects.get(run=run, node_id="start").pk
    stale = engine.step_claim(start_id, "otherhost:1:1")
    assert stale is not None
    # The lease expires and recovery hands the step to another worker.
    Step.objects.filter(pk=start_id).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert engine.step_recover(start_id, recovered_by="tester", owner_is_dead=lambda owner: False) == [start_id]
    fresh = engine.step_claim(start_id, "thishost:2:2")
    assert fresh.attempt == 2
    outcome = engine.step_commit(stale, NodeResult(updates={"stolen": True}))
    assert not outcome.committed
    run.refresh_from_db()
    assert "stolen" not in run.state
    assert engine.step_commit(fresh, NodeResult(updates={"mine": True})).committed


def test_parallelism_bound_limits_dispatched_branches():
    branches = [transform(f"b{i}", **{f"v{i}": str(i)}) for i in range(5)]
    spec = graph(
        [node("start", "start"), *branches, node("join", "join"), node("end", "end")],
        [edge("start", f"b{i}") for i in range(5)] + [edge(f"b{i}", "join") for i in range(5)] + chain("join", "end"),
        settings={"max_parallelism": 2},
    )
    version = publish(spec)
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        engine.step_execute(queue.popleft())  # start commits, keeps one branch, dispatches one
        busy = Step.objects.filter(run=run).exclude(node_id="start").exclude(status="pending", dispatched_at__isnull=True)
        assert busy.exclude(status="succeeded").count() <= 2
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    assert run.status == "succeeded" and all(run.state[f"v{i}"] == i for i in range(5))


def approval_spec(with_reject_edge: bool):
    nodes = [
        node("start", "start"),
        transform("draft", reply="'Hello ' + name"),
        node("review", "approval", config={"prompt": "Send {{ reply }}?"}),
        transform("send", sent="True"),
        node("end", "end"),
    ]
    edges = chain("start", "draft", "review") + [edge("review", "send", "approved"), edge("send", "end")]
    if with_reject_edge:
        nodes.append(transform("discard", sent="False"))
        edges += [edge("review", "discard", "rejected"), edge("discard", "end")]
    return graph(nodes, edges, input_schema={"type": "object", "properties": {"name": {"type": "string"}}})


def test_approval_gate_waits_as_a_row_and_resumes_once(effects_file):
    version = publish(approval_spec(with_reject_edge=True))
    run = run_local(version, {"name": "Ada"})
    assert run.status == "waiting"
    request = ApprovalRequest.objects.get(run=run)
    assert request.prompt == "Send Hello Ada?"
    assert not Step.objects.filter(run=run, status="running").exists()  # no lease held while waiting
    run = decide(run, "approve", comment="ok")
    assert run.status == "succeeded" and run.state["sent"] is True
    assert run.state["approval"]["decision"] == "approved"
    with pytest.raises(AlreadyDecided):
        approval_decide(approval_id=request.pk, decision="approve", actor="someone-else")
    assert Step.objects.filter(run=run, node_id="send").count() == 1
    assert Step.objects.filter(run=run, node_id="draft").get().attempts.count() == 1


def test_rejection_follows_reject_edge_or_fails_the_run():
    rejected = decide(run_local(publish(approval_spec(with_reject_edge=True)), {"name": "Ada"}), "reject")
    assert rejected.status == "succeeded" and rejected.state["sent"] is False
    failed = decide(run_local(publish(approval_spec(with_reject_edge=False)), {"name": "Ada"}), "reject", comment="no")
    assert failed.status == "failed" and failed.error["code"] == "rejected"


def test_interrupted_unsafe_step_parks_the_run_for_a_person(effects_file):
    # A skip writes only state keys the graph knows: 'paid' is declared.
    spec = graph([node("start", "start"), effect("pay", unsafe=True), node("end", "end")], chain("start", "pay", "end"), state={"paid": {}})
    version = publish(spec)
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "livehost:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    pay = Step.objects.get(run=run, node_id="pay")
    # Simulate a worker that died while executing 'pay'.
    begun(engine.step_claim(pay.pk, "deadhost:1:1"))  # its call about to begin
    Step.objects.filter(pk=pay.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    engine.recover_once()
    pay.refresh_from_db()
    run.refresh_from_db()
    assert pay.status == "parked" and run.status == "waiting"
    request = ApprovalRequest.objects.get(run=run, purpose="recovery")
    assert "not safe to repeat" in request.prompt
    run = decide(run, "skip", output={"paid": True})
    assert run.status == "succeeded" and run.state["paid"] is True
    assert read_effects() == []  # never re-executed on its own


def test_resume_continues_a_failed_run_from_its_failed_step(effects_file):
    spec = graph(
        [node("start", "start"), effect("before"), node("f", "tool", config={"tool": "flaky", "args": {"fail_times": 1}}), effect("after"), node("end", "end")],
        chain("start", "before", "f", "after", "end"),
    )
    run = run_local(spec)
    assert run.status == "failed"
    from runs.services import run_resume

    with engine.local_mode() as queue:
        run_resume(run=run, actor="tester")
        engine.drive_local(run.pk, queue=queue, timeout=20)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert [e["label"] for e in read_effects()] == ["before", "after"]  # 'before' never re-ran
    assert Step.objects.get(run=run, node_id="f").attempts.count() == 2


def test_fork_starts_from_a_committed_step_with_edited_state():
    spec = graph(
        [node("start", "start"), transform("a", y="x * 2"), transform("b", z="y + 1"), node("end", "end")],
        chain("start", "a", "b", "end"),
        input_schema=X_INPUT,
    )
    run = run_local(spec, {"x": 5})
    assert run.state["z"] == 11
    from runs.services import run_fork

    a = Step.objects.get(run=run, node_id="a")
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=a.pk, state_patch={"y": 100}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=20)
    fork.refresh_from_db()
    assert fork.status == "succeeded" and fork.state["z"] == 101 and fork.forked_from_id == run.pk
    assert [s[0] for s in steps_of(fork)] == ["b", "end"]


# Made only of constants: refused by validation before any run (the constant parts are
# evaluated under the expression limits, builder.validation expression_limit).
HOSTILE = [
    "9**9**9",
    "10**1000 * 10**1000",
    "'a' * 10**9",
    "'a'.ljust(10**10)",
    "('a' * 1000).replace('a', 'a' * 1000)",
    "[[1] * 1000] * 1000 * 1000",
    "[x for x in range(10**9)]",
    "sum([sum(range(10**5)) for _ in range(10**5)])",
    # Within every item limit but 57 MB of integers; and a case mapping past the string limit.
    "list(range(2**4094, 2**4094 + 99999))",
    "('ß' * 60000).upper()",
]
# The same operations on a value read from the state (n is 1): only the run can stop them.
HOSTILE_AT_RUN_TIME = [
    "(9 * n)**9**9",
    "(10 * n)**1000 * (10 * n)**1000",
    "'a' * (10**9 * n)",
    "'a'.ljust(10**10 * n)",
    "('a' * 1000).replace('a', 'a' * (1000 * n))",
    "[[n] * 1000] * 1000 * 1000",
    "[x for x in range(10**9 * n)]",
    "sum([sum(range(10**5 * n)) for _ in range(10**5 * n)])",
    "list(range(2**4094 * n, 2**4094 * n + 99999))",
    "('ß' * (60000 * n)).upper()",
    "[('x' * (99999 * n))] * 100000 == [('x' * (99998 * n)) + 'x'] * 100000",
]
# Escapes and mutation are refused before the run exists: validation parses every expression.
REFUSED = ["items.append(1)", "().__class__.__bases__", "'{0.__class__}'.format(1)", "items.clear()", "__import__('os')"]


@pytest.mark.parametrize("expression", REFUSED)
def test_escaping_or_mutating_expressions_are_refused_by_validation(expression):
    from builder.services import GraphInvalid

    spec = graph([node("start", "start"), transform("evil", out=expression), node("end", "end")], chain("start", "evil", "end"),
                 input_schema={"type": "object", "properties": {"items": {"type": "array"}}})
    with pytest.raises(GraphInvalid) as info:
        publish(spec)
    assert info.value.issues[0].node_id == "evil" and info.value.issues[0].field == "config.set.out"


@pytest.mark.parametrize("expression", HOSTILE)
def test_hostile_constant_expressions_are_refused_by_validation(expression):
    from builder.services import GraphInvalid

    spec = graph([node("start", "start"), transform("evil", out=expression), node("end", "end")], chain("start", "evil", "end"))
    with pytest.raises(GraphInvalid) as info:
        publish(spec)
    issue = info.value.issues[0]
    assert (issue.node_id, issue.field, issue.code) == ("evil", "config.set.out", "expression_limit"), issue


@pytest.mark.parametrize("expression", HOSTILE_AT_RUN_TIME)
def test_hostile_expression_fails_its_step_quickly_and_leaves_state_alone(expression):

    spec = graph(
        [node("start", "start"), transform("evil", out=expression), node("end", "end")],
        chain("start", "evil", "end"),
        input_schema={"type": "object", "properties": {"items": {"type": "array"}, "n": {"type": "integer"}}},
    )
    version = publish(spec)
    # Quickly in work done: the run's CPU time (the engine's, the evaluation's, inline or in
    # an evaluator process) stays near the evaluation's CPU limit (0.5 s), where finishing
    # the expression would take minutes. Wall time waits for a core on a loaded machine.
    with bounded_work(2.0, "the run with a hostile expression"):
        run = run_local(version, {"items": [1, 2], "n": 1}, timeout=60)
    assert run.status == "failed" and run.error["code"] == "expression", run.error
    assert run.state["items"] == [1, 2] and "out" not in run.state
    # The worker (this process) lives on and runs the next run normally.
    assert run_local(graph([node("start", "start"), transform("ok", y="1 + 1"), node("end", "end")], chain("start", "ok", "end"))).state["y"] == 2


def test_expression_errors_quote_user_values_briefly_in_the_run_and_its_events():
    spec = graph(
        [node("start", "start"), transform("lookup", y="d[k]"), node("end", "end")],
        chain("start", "lookup", "end"),
        input_schema={"type": "object", "properties": {"d": {"type": "object"}, "k": {"type": "string"}}},
    )
    run = run_local(spec, {"d": {}, "k": "k" * 100_000})
    assert run.status == "failed" and run.error["code"] == "expression"
    assert len(run.error["message"]) < 500 and "(100000 characters)" in run.error["message"], run.error
    failed = RunEvent.objects.get(run=run, kind="step_failed")
    assert len(failed.data["error"]["message"]) < 500
    assert all(len(str(e.data)) < 2000 for e in RunEvent.objects.filter(run=run).exclude(kind="run_created"))
