"""Values people give a run (its input, a fork's state patch, a skipped step's output, a
decision's comment) are checked like step results: a value JSON or the database cannot
carry, a key the graph does not know, or a state over BALLAST_MAX_STATE_BYTES is a 400
naming the field, never a database error, and nothing is recorded."""
from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.services import BadDecision, approval_decide
from runs.models import Run, Step
from runs.nodes.base import NodeResult
from runs.services import RunInputInvalid, run_start
from tests.support import engine
from tests.support.approvals import version_of
from tests.support.engine import StateWriteRefused
from tests.support.leases import begun
from tests.support.specs import chain, graph, node, publish
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

NUL = "a\u0000b"


def fork(world: World, source: Run, patch: object):
    return world.clients["operator"].post(
        f"/api/v1/runs/{source.pk}/fork/", {"step": world.step(source, "start").pk, "state_patch": patch}, format="json"
    )


def test_a_run_input_with_a_nul_character_is_a_field_error(world: World) -> None:
    before = Run.objects.count()
    body = {"graph": world.approval_version.graph_id, "input": {"name": "Ada", "notes": {"text": NUL}}}
    response = world.clients["operator"].post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["fields"] == {"input": ["notes.text: Strings may not contain NUL (\\u0000) characters."]}
    assert Run.objects.count() == before
    # The service behind it (the CLI's run_graph, code) names the path as a field.
    with pytest.raises(RunInputInvalid) as refused:
        run_start(version=world.approval_version, run_input={"name": "Ada", "notes": {"text": NUL}})
    assert refused.value.errors == [{"field": "input.notes.text", "message": "a string with a NUL character (\\u0000), which PostgreSQL cannot store"}]
    with pytest.raises(StateWriteRefused) as refused_by_engine:  # and the engine itself
        engine.run_start(version=world.approval_version, run_input={"name": "Ada", "score": float("inf")})
    assert refused_by_engine.value.fields == {"input.score": ["Infinity is not a JSON number"]}
    assert Run.objects.count() == before


def test_a_run_input_over_the_state_size_limit_is_refused(world: World, settings) -> None:
    settings.BALLAST_MAX_STATE_BYTES = 500
    body = {"graph": world.approval_version.graph_id, "input": {"name": "x" * 400}}
    response = world.clients["operator"].post("/api/v1/runs/", body, format="json")
    # The input is in the state twice (its keys, and under "input"): 800 bytes and more.
    assert response.status_code == 400 and response.json()["error"]["code"] == "state_too_large", response.content
    assert "input" in response.json()["error"]["fields"]


def test_a_fork_patch_is_checked_against_the_state_keys_values_and_size(world: World, settings) -> None:
    source = world.succeeded_run()  # linear_spec: input x, writes y
    before = Run.objects.count()
    nul = fork(world, source, {"x": {"y": NUL}})
    assert nul.status_code == 400 and nul.json()["error"]["fields"] == {"state_patch": ["x.y: Strings may not contain NUL (\\u0000) characters."]}
    unknown = fork(world, source, {"x": 1, "typo": 2, "input": {}})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_state_key", unknown.content
    assert set(unknown.json()["error"]["fields"]) == {"state_patch.typo", "state_patch.input"}
    settings.BALLAST_MAX_STATE_BYTES = 300
    big = fork(world, source, {"x": "9" * 400})
    assert big.status_code == 400 and big.json()["error"]["code"] == "state_too_large", big.content
    assert big.json()["error"]["details"]["limit"] == 300
    assert Run.objects.count() == before  # nothing was started
    settings.BALLAST_MAX_STATE_BYTES = 8 * 1024 * 1024
    with engine.local_mode():
        ok = fork(world, source, {"x": 21})
    assert ok.status_code == 201, ok.content


def test_the_engine_refuses_a_fork_patch_value_json_cannot_carry(world: World) -> None:
    source = world.succeeded_run()
    with pytest.raises(StateWriteRefused) as refused:
        engine.run_fork(source.pk, step_id=world.step(source, "start").pk, state_patch={"x": float("nan")}, actor="t")
    assert refused.value.code == "invalid_output" and refused.value.fields == {"state_patch.x": ["NaN is not a JSON number"]}


def parked_run(effects_file) -> Run:
    """A run whose not-repeat-safe step was interrupted: parked, with a recovery request."""
    spec = graph(
        [node("start", "start"), node("pay", "tool", config={"tool": "record_effect_unsafe", "args": {"label": "pay"}}), node("end", "end")],
        chain("start", "pay", "end"),
        state={"paid": {}},
    )
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input={})
    engine.step_commit(engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "livehost:1:1"), NodeResult(), keep_next=False)
    pay = Step.objects.get(run=run, node_id="pay")
    begun(engine.step_claim(pay.pk, "deadhost:1:1"))
    Step.objects.filter(pk=pay.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    engine.recover_once()
    assert Step.objects.get(pk=pay.pk).status == "parked"
    return run


def test_a_skip_output_is_checked_against_the_state_keys_values_and_size(world: World, effects_file, settings) -> None:
    run = parked_run(effects_file)
    request = ApprovalRequest.objects.get(run=run, purpose="recovery")
    client = world.clients["admin"]

    def skip(output):
        with engine.local_mode():
            return client.post(f"/api/v1/approvals/{request.pk}/decide/", {"version": version_of(request.pk), "decision": "skip", "output": output}, format="json")

    unknown = skip({"paid": True, "nope": 1})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_state_key", unknown.content
    assert unknown.json()["error"]["fields"] == {"output.nope": ["not a state key of this graph"]}
    nul = skip({"paid": {"ref": NUL}})
    assert nul.status_code == 400 and nul.json()["error"]["fields"] == {"output": ["paid.ref: Strings may not contain NUL (\\u0000) characters."]}
    with pytest.raises(StateWriteRefused) as refused:  # the service (the approve command) names the path
        approval_decide(approval_id=request.pk, decision="skip", actor="tester", output={"paid": [float("nan")]})
    assert refused.value.code == "invalid_output" and refused.value.fields == {"output.paid[0]": ["NaN is not a JSON number"]}
    settings.BALLAST_MAX_STATE_BYTES = 200
    big = skip({"paid": "x" * 300})
    assert big.status_code == 400 and big.json()["error"]["code"] == "state_too_large", big.content
    # Nothing was recorded: the request is still pending and the step still parked.
    request.refresh_from_db()
    assert request.status == "pending" and Step.objects.get(run=run, node_id="pay").status == "parked"
    settings.BALLAST_MAX_STATE_BYTES = 8 * 1024 * 1024
    ok = skip({"paid": True})
    assert ok.status_code == 200, ok.content


def test_a_decision_comment_with_a_nul_character_is_refused(world: World) -> None:
    run = world.waiting_run()
    request = world.approval_of(run)
    with pytest.raises(BadDecision) as refused:
        approval_decide(approval_id=request.pk, decision="approve", actor="tester", comment=NUL)
    assert refused.value.field == "comment"
    request.refresh_from_db()
    assert request.status == "pending"
    # Through the API too (DRF refuses NUL in a CharField itself).
    response = world.clients["approver"].post(f"/api/v1/approvals/{request.pk}/decide/", {"version": version_of(request.pk), "decision": "approve", "comment": NUL}, format="json")
    assert response.status_code == 400 and "comment" in response.json()["error"]["fields"]


def test_a_node_test_state_with_a_value_json_cannot_carry_is_refused(world: World) -> None:
    graph_id = world.approval_version.graph_id
    before = Run.objects.count()
    response = world.clients["admin"].post(f"/api/v1/graphs/{graph_id}/nodes/draft/test/", {"state": {"name": NUL}}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"state": ["name: Strings may not contain NUL (\\u0000) characters."]}
    assert Run.objects.count() == before
