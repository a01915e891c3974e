"""Run state kept per key (runs.engine.store.state): a commit writes only the keys its step
changed, the state after any step is read back without replay, reducers keep their
semantics on every commit path (each test runs once per path: conftest.py), and fork
starts from the versioned state."""
from __future__ import annotations

import pytest

from runs.models import RunStateKey, Step
from runs.nodes.base import StateView
from tests.support import engine
from tests.support.specs import chain, edge, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

BLOB = [{"id": k, "text": "x" * 50} for k in range(200)]


def counter_chain(n: int, **state):
    ids = [f"t{k}" for k in range(1, n + 1)]
    return graph(
        [node("start", "start"), *[transform(i, i="i + 1") for i in ids], node("end", "end", config={"output": ["i"]})],
        chain("start", *ids, "end"),
        state={"i": {"default": 0}, "blob": {"default": BLOB}, **state},
    )


def test_a_key_no_step_writes_is_stored_once_and_each_step_records_its_version(store_path):
    run = run_local(counter_chain(5))
    assert run.status == "succeeded", run.error
    assert run.state["i"] == 5 and run.state["blob"] == BLOB
    versions = dict(RunStateKey.objects.filter(run=run, key="blob").values_list("seq", "size"))
    assert list(versions) == [0]  # written when the run was created, never again
    assert RunStateKey.objects.filter(run=run, key="i").count() == 6  # the initial 0 and five writes
    assert "contrib" not in run.scheduler
    steps = list(Step.objects.filter(run=run).order_by("id"))
    seqs = [s.state_seq for s in steps]
    assert all(seq is not None for seq in seqs) and seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert run.state_sizes["blob"] == versions[0] and run.state_sizes["i"] == 1


def test_state_after_each_step_and_its_difference(store_path):
    run = run_local(counter_chain(3))
    steps = {s.node_id: s for s in Step.objects.filter(run=run)}
    start = engine.step_state(steps["start"].pk)
    assert start.state["i"] == 0 and start.changed == {}
    for k in (1, 2, 3):
        after = engine.step_state(steps[f"t{k}"].pk)
        assert after.state == {"i": k, "blob": BLOB, "input": {}}
        assert after.changed == {"i": {"before": k - 1, "after": k, "added": False}}
    assert engine.step_state(steps["end"].pk).state["i"] == 3


def test_state_of_a_step_that_did_not_commit_is_refused(store_path):
    run = run_local(counter_chain(1))
    with pytest.raises(engine.StepStateError):
        engine.step_state(10**9)
    Step.objects.filter(run=run, node_id="t1").update(status="failed")
    with pytest.raises(engine.StepStateError):
        engine.step_state(Step.objects.get(run=run, node_id="t1").pk)


def append_loop(n: int):
    ids = [f"a{k}" for k in range(1, n + 1)]
    return graph(
        [node("start", "start"), *[transform(i, log=f"'{i}'", seen="len(log) + 1") for i in ids], node("end", "end")],
        chain("start", *ids, "end"),
        state={"log": {"reducer": "append"}, "seen": {"reducer": "max"}, "tally": {"reducer": "add", "default": 0}},
    )


def test_append_reducer_keeps_its_order_and_every_version(store_path):
    run = run_local(append_loop(4))
    assert run.status == "succeeded", run.error
    assert run.state["log"] == ["a1", "a2", "a3", "a4"] and run.state["seen"] == 4
    steps = {s.node_id: s for s in Step.objects.filter(run=run)}
    a2 = engine.step_state(steps["a2"].pk)
    assert a2.state["log"] == ["a1", "a2"]
    assert a2.changed["log"] == {"before": ["a1"], "after": ["a1", "a2"], "added": False}
    latest = RunStateKey.latest(run.pk).get(key="log")
    assert [entry[3] for entry in latest.contrib] == ["a1", "a2", "a3", "a4"]  # contributions live with the key


def test_fan_out_append_merges_in_the_same_order_on_both_paths(store_path):
    spec = graph(
        [
            node("start", "start"),
            transform("a", results="'a'"),
            transform("c", results="'c'"),
            transform("b", results="'b'"),
            node("join", "join"),
            transform("after", results="'z'"),
            node("end", "end"),
        ],
        [edge("start", "c"), edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join"), edge("c", "join")]
        + chain("join", "after", "end"),
        state={"results": {"reducer": "append"}},
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    assert run.state["results"] == ["a", "b", "c", "z"]
    join = Step.objects.get(run=run, node_id="join")
    assert engine.step_state(join.pk).state["results"] == ["a", "b", "c"]


def test_fork_starts_from_the_versioned_state_with_reducer_contributions(store_path):
    run = run_local(append_loop(3))
    from runs.services import run_fork

    a2 = Step.objects.get(run=run, node_id="a2")
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=a2.pk, state_patch={"seen": 10}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=20)
    fork.refresh_from_db()
    assert fork.status == "succeeded", fork.error
    assert fork.state["log"] == ["a1", "a2", "a3"]  # a3's append lands after the forked contributions
    assert fork.state["seen"] == 10  # max(10, len(log) + 1)
    assert RunStateKey.latest(fork.pk).get(key="log").contrib is not None


def test_replayed_state_for_a_step_committed_before_state_was_kept_per_key(store_path):
    run = run_local(append_loop(3))
    Step.objects.filter(run=run).update(state_seq=None)  # as the migration leaves older steps
    a2 = Step.objects.get(run=run, node_id="a2")
    replayed = engine.step_state(a2.pk)
    assert replayed.seq is None and replayed.state["log"] == ["a1", "a2"]
    assert replayed.changed["log"]["after"] == ["a1", "a2"]


def test_a_node_reads_private_copies_of_only_the_keys_it_reads(store_path):
    state = {"big": [{"n": 1}], "small": 1}
    view = StateView(state)
    got = view["big"]
    got[0]["n"] = 99
    assert state["big"] == [{"n": 1}] and view["big"] is got  # one copy per key, the state untouched
    assert set(view) == {"big", "small"} and len(view) == 2 and "small" in view
    with pytest.raises(TypeError):
        view["small"] = 2  # type: ignore[index]


def fan_out_appends():
    """Two parallel transforms append to ``f``, a join, then one appends to ``g``."""
    return graph(
        [
            node("start", "start"),
            transform("a", f="'A'"),
            transform("b", f="'B'"),
            node("join", "join"),
            transform("after", g="'G'"),
            node("end", "end"),
        ],
        [edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join")] + chain("join", "after", "end"),
        state={"f": {"reducer": "append", "default": ["seed"]}, "g": {"reducer": "append", "default": ["seed"]}},
    )


def test_a_fork_patch_on_a_reducer_key_is_the_value_later_writes_reduce_onto(store_path):
    from runs.services import run_fork

    run = run_local(fan_out_appends())
    assert run.state["f"] == ["seed", "A", "B"] and run.state["g"] == ["seed", "G"]
    start = Step.objects.get(run=run, node_id="start")
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=start.pk, state_patch={"f": ["P1"], "g": ["P2"]}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=20)
    fork.refresh_from_db()
    assert fork.status == "succeeded", fork.error
    assert fork.state["f"] == ["P1", "A", "B"] and fork.state["g"] == ["P2", "G"]
    # Forked later than the appends: the patch replaces what they had accumulated.
    join = Step.objects.get(run=run, node_id="join")
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=join.pk, state_patch={"f": ["only"]}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=20)
    fork.refresh_from_db()
    assert fork.status == "succeeded", fork.error
    assert fork.state["f"] == ["only"] and fork.state["g"] == ["seed", "G"]


def test_a_fork_patch_of_the_wrong_type_for_its_reducer_is_refused(store_path):
    from runs.services import run_fork

    run = run_local(fan_out_appends())
    start = Step.objects.get(run=run, node_id="start")
    with pytest.raises(engine.StateWriteRefused) as refused:
        run_fork(run=run, step_id=start.pk, state_patch={"f": "not a list"}, actor="tester")
    assert refused.value.code == "reducer_mismatch" and list(refused.value.fields) == ["state_patch.f"]


def test_an_approvers_edited_value_of_a_reducer_key_replaces_it_as_a_fork_patch_does(store_path):
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide
    from runs.services import run_fork
    from tests.support.specs import continue_local

    edit = {"type": "object", "properties": {"f": {"type": "array", "items": {"type": "string"}}}}
    spec = graph(
        [
            node("start", "start"),
            transform("a", f="'A'"),
            node("gate", "approval", config={"edit_schema": edit}),
            transform("after", f="'after'"),
            node("end", "end"),
        ],
        [*chain("start", "a", "gate"), edge("gate", "after", "approved"), *chain("after", "end")],
        state={"f": {"reducer": "append", "default": ["seed"]}},
    )
    run = run_local(spec)
    assert run.status == "waiting" and run.state["f"] == ["seed", "A"]
    request = ApprovalRequest.objects.get(run=run)
    approval_decide(approval_id=request.pk, decision="approve", actor="tester", values={"f": ["EDITED"]})
    run = continue_local(run)
    assert run.status == "succeeded", run.error
    assert run.state["f"] == ["EDITED", "after"]
    gate = Step.objects.get(run=run, node_id="gate")
    assert engine.step_state(gate.pk).state["f"] == ["EDITED"]
    assert run.state_sizes["f"] == len('["EDITED","after"]')
    # Forked after the gate, the edited value is still what later appends reduce onto.
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=gate.pk, state_patch={}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=20)
    fork.refresh_from_db()
    assert fork.status == "succeeded", fork.error
    assert fork.state["f"] == ["EDITED", "after"]
