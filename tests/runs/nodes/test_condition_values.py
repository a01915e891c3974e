"""A condition routes only on values a checkpoint could carry: true/false or a JSON value by
JSON truthiness. NaN, infinities, sets and complex numbers (anywhere in the value) fail the
step with a clear, non-retried error, as a transform computing them does, instead of
routing by Python's truthiness (NaN would take the ``true`` edge)."""
from __future__ import annotations

import pytest

from runs.models import Step, StepAttempt
from tests.support.specs import chain, edge, graph, node, publish, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

NOT_JSON = [
    ("1e308 * 10 - 1e308 * 10", "value", "NaN is not a JSON number"),
    ('float("nan")', "value", "NaN is not a JSON number"),
    ("1e308 * 10", "value", "Infinity is not a JSON number"),
    ("-1e308 * 10", "value", "-Infinity is not a JSON number"),
    ("{1, 2}", "value", "a set is not JSON (use a list)"),
    ("{1, 2} & {2}", "value", "a set is not JSON (use a list)"),
    ("(-1) ** 0.5", "value", "complex is not a JSON type"),
    ("[1, 1e308 * 10]", "value[1]", "Infinity is not a JSON number"),
]


def two_way(expression: str) -> dict:
    return graph(
        [
            node("start", "start"),
            node("check", "condition", config={"expression": expression}),
            transform("yes", took="'true'"),
            transform("no", took="'false'"),
            node("end", "end"),
        ],
        chain("start", "check") + [edge("check", "yes", "true"), edge("check", "no", "false"), edge("yes", "end"), edge("no", "end")],
    )


def multi_way(expression: str) -> dict:
    cases = [{"handle": "odd", "expression": expression}, {"handle": "never", "expression": "False"}]
    return graph(
        [
            node("start", "start"),
            node("route", "condition", config={"cases": cases}),
            transform("a", took="'odd'"),
            transform("b", took="'never'"),
            transform("c", took="'default'"),
            node("end", "end"),
        ],
        chain("start", "route")
        + [edge("route", "a", "odd"), edge("route", "b", "never"), edge("route", "c", "default")]
        + [edge("a", "end"), edge("b", "end"), edge("c", "end")],
    )


def assert_failed(run, node_id: str, path: str, reason: str, where: str) -> None:
    assert run.status == "failed", (run.status, run.state.get("took"))
    step = Step.objects.get(run=run, node_id=node_id)
    assert step.status == "failed"
    error = step.error
    assert error["code"] == "expression" and error["retryable"] is False, error
    assert error["details"]["error_code"] == "invalid_value"
    assert error["details"]["path"] == path and error["details"]["reason"] == reason
    assert where in error["message"] and reason in error["message"], error["message"]
    assert StepAttempt.objects.filter(step=step).count() == 1  # not retried
    assert run.error["node_id"] == node_id
    assert "took" not in run.state  # no edge was taken


@pytest.mark.parametrize(("expression", "path", "reason"), NOT_JSON)
def test_a_two_way_condition_on_a_value_json_cannot_carry_fails_its_step(expression, path, reason):
    run = run_local(two_way(expression))
    assert_failed(run, "check", path, reason, "condition expression failed")


@pytest.mark.parametrize(("expression", "path", "reason"), NOT_JSON[:1] + NOT_JSON[4:5] + NOT_JSON[6:7])
def test_a_case_on_a_value_json_cannot_carry_fails_its_step(expression, path, reason):
    run = run_local(multi_way(expression))
    assert_failed(run, "route", path, reason, "condition cases[0] (odd) failed")


@pytest.mark.parametrize(
    ("expression", "took"),
    [
        ("True", "true"), ("False", "false"), ("None", "false"), ("0", "false"), ("0.5", "true"),
        ("''", "false"), ("'x'", "true"), ("[]", "false"), ("[0]", "true"), ("{}", "false"), ("{'a': 1}", "true"),
    ],
)
def test_json_values_route_by_json_truthiness(expression, took):
    version = publish(two_way(expression))
    run = run_local(version)
    assert run.status == "succeeded", run.error
    assert run.state["took"] == took
