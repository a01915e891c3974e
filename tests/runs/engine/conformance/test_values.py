"""Values that are not JSON never break a commit, and the run's state stays within its size limit.

On every commit path (portable and the database's fast path, see conftest.py): a step
whose result holds a value JSON cannot carry faithfully fails at once, before the
commit, with ``invalid_output`` naming the key path; a step whose writes would pass
BALLAST_MAX_STATE_BYTES fails with ``state_too_large``. Neither is retried, neither
leaves the run running nor is counted as a lost worker, and nothing of the result is
stored. The per-key size map kept with the run always equals the sizes of the state.
"""
from __future__ import annotations

import pytest

from runs.engine import api as engine
from runs.engine.limits import full_sizes
from runs.models import AttemptStatus, Run, RunStatus, Step, StepAttempt, StepStatus
from tests.support.kinds import NOT_JSON
from tests.support.specs import chain, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)


def emit(node_id: str, value: str, **config):
    return node(node_id, "emit", config={"value": value, **config})


def one_step(step_node: dict, **extra):
    return graph([node("start", "start"), step_node, node("end", "end")], chain("start", step_node["id"], "end"), **extra)


def assert_failed_at(run: Run, node_id: str, code: str, path: str | None = None, reason: str | None = None) -> Step:
    """The run failed at ``node_id`` with ``code`` after ONE attempt, failed, never lost."""
    assert run.status == RunStatus.FAILED, run.error
    step = Step.objects.get(run=run, node_id=node_id)
    assert step.status == StepStatus.FAILED
    assert step.error["code"] == code and step.error["retryable"] is False, step.error
    if path is not None:
        assert step.error["details"]["path"] == path, step.error
        assert path in step.error["message"]
    if reason is not None:
        assert step.error["details"]["reason"] == reason
    attempts = list(StepAttempt.objects.filter(step=step).values_list("status", flat=True))
    assert attempts == [AttemptStatus.FAILED], attempts  # not retried, not "worker lost"
    assert run.error["code"] == code and run.error["node_id"] == node_id
    assert step.output is None and step.updates is None  # nothing of the result was stored
    return step


@pytest.mark.parametrize("kind", sorted(NOT_JSON))
def test_a_value_json_cannot_carry_fails_its_step_with_the_key_path(store_path, kind):
    value, subpath, reason = NOT_JSON[kind]
    run = run_local(one_step(emit("a", kind)), {"keep": "me"})
    assert_failed_at(run, "a", "invalid_output", f"output.result.{subpath}", reason)
    assert run.state == {"keep": "me", "input": {"keep": "me"}}  # the state is as before the step
    assert run.state_sizes == full_sizes(run.state)


def test_the_path_starts_at_the_recorded_output(store_path):
    run = run_local(one_step(emit("a", "nan", where="output")))
    assert_failed_at(run, "a", "invalid_output", "output.items[1].price", "NaN is not a JSON number")


@pytest.mark.parametrize(
    ("expression", "path", "reason"),
    [
        ("1e308 * 10", "output.total", "Infinity is not a JSON number"),
        ("1e308 * 10 - 1e308 * 10", "output.total", "NaN is not a JSON number"),
        ('{"a": [1, {2: "two"}]}', "output.total.a[1][2]", "an object key must be a string, not int (2)"),
        (
            '{1: "int", "1": "str"}',
            "output.total[1]",
            'an object key must be a string, not int (1); as JSON it would become the key "1", which this object already has',
        ),
    ],
)
def test_a_transform_that_computes_a_value_json_cannot_carry_fails(store_path, expression, path, reason):
    run = run_local(one_step(transform("a", total=expression)))
    assert_failed_at(run, "a", "invalid_output", path, reason)


def test_tuples_become_lists_and_the_run_goes_on(store_path):
    run = run_local(one_step(emit("a", "tuple")))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.state["result"] == {"pair": [1, [2, 3]]}
    assert Step.objects.get(run=run, node_id="a").output == {"result": {"pair": [1, [2, 3]]}}


def test_a_tool_result_that_is_not_json_fails_the_tool_step(store_path):
    tool = node("a", "tool", config={"tool": "not_json", "args": {"value": "decimal"}, "output_key": "price"})
    run = run_local(one_step(tool))
    step = assert_failed_at(run, "a", "invalid_output", "output.price", "decimal.Decimal is not a JSON type")
    assert "not_json" in step.error["message"]


def test_error_details_that_are_not_json_do_not_break_the_failure(store_path):
    tool = node("a", "tool", config={"tool": "fails_with_odd_details", "args": {"value": "x"}})
    run = run_local(one_step(tool))
    step = assert_failed_at(run, "a", "upstream")
    assert step.error["message"] == "upstream said \\u0000 no"
    assert step.error["details_dropped"] == "error.details.raw: bytes are not JSON (decode them to a string first)"


# --------------------------------------------------------------------------- state size


def test_a_write_that_would_pass_the_state_size_limit_fails_the_step(store_path, settings):
    settings.BALLAST_MAX_STATE_BYTES = 2000
    spec = graph(
        [node("start", "start"), emit("a", "big", size=1200, output_key="first"), emit("b", "big", size=1200, output_key="second"), node("end", "end")],
        chain("start", "a", "b", "end"),
    )
    run = run_local(spec)
    # Each key alone is under the limit; together they pass it: the total counts.
    step = assert_failed_at(run, "b", "state_too_large")
    assert step.error["details"]["limit"] == 2000 and step.error["details"]["size"] > 2000
    assert set(step.error["details"]["keys"]) >= {"first", "second"}
    assert "BALLAST_MAX_STATE_BYTES" in step.error["message"]
    assert "second" not in run.state and len(run.state["first"]) == 1200
    assert Step.objects.get(run=run, node_id="a").status == StepStatus.SUCCEEDED


def test_the_limit_can_be_turned_off(store_path, settings):
    settings.BALLAST_MAX_STATE_BYTES = 0
    run = run_local(one_step(emit("a", "big", size=5000)))
    assert run.status == RunStatus.SUCCEEDED and len(run.state["result"]) == 5000


def test_the_per_key_sizes_kept_with_the_run_match_its_state(store_path):
    """Sizes are updated from the written keys only (append/extend add the new items to
    the known size, replace takes the written size, merge/add re-encode that key), and
    always equal a full encoding of the state."""
    state = {
        "log": {"reducer": "append"},
        "items": {"reducer": "extend"},
        "bag": {"reducer": "merge"},
        "n": {"reducer": "add"},
        "best": {"reducer": "max"},
    }
    spec = graph(
        [
            node("start", "start"),
            transform("a", log='"one"', items="[1, 2]", bag='{"x": 1}', n="1", best="3", text='"é" * 3'),
            transform("b", log="[1, [2]]", items="[]", bag='{"y": "two", "x": 5}', n="2", best="1", text='"ü"'),
            transform("c", log='{"k": "ü"}', items='["é", {"z": None}]', n="0.5"),
            node("end", "end"),
        ],
        chain("start", "a", "b", "c", "end"),
        state=state,
    )
    run = run_local(spec, {"topic": "ß"})
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.state["log"] == ["one", [1, [2]], {"k": "ü"}] and run.state["items"] == [1, 2, "é", {"z": None}]
    assert run.state_sizes == full_sizes(run.state)


def test_a_run_committed_before_sizes_were_kept_gets_them_at_its_next_commit(store_path):
    spec = graph([node("start", "start"), transform("a", x='"abc"'), transform("b", y="1"), node("end", "end")], chain("start", "a", "b", "end"))
    from tests.support.specs import publish

    with engine.local_mode() as queue:
        run = engine.run_start(version=publish(spec), run_input={"q": "hello"})
        Run.objects.filter(pk=run.pk).update(state_sizes=None)
        engine.drive_local(run.pk, queue=queue)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.state_sizes == full_sizes(run.state)
