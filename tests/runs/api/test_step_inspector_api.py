"""The run page's step inspector API: GET /api/v1/steps/<id>/ (attempts, lease, idempotency
key, an agent's child steps) and GET /api/v1/steps/<id>/state/ (the state after a step and
what it changed), with their permissions, 404s and 409s, and a query count that does not
grow with the length of the run (no replay)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry
from core.build import build
from runs.models import Step
from tests.support.specs import chain, graph, node, run_local, transform
from tests.support.world import World

pytestmark = pytest.mark.usefixtures("fast_passwords")

EXAMPLE = json.loads((Path(__file__).resolve().parents[3] / "examples" / "agent_tools.json").read_text())


def counter_chain(n: int) -> dict:
    ids = [f"t{k}" for k in range(1, n + 1)]
    return graph(
        [node("start", "start"), *[transform(i, i="i + 1") for i in ids], node("end", "end", config={"output": ["i"]})],
        chain("start", *ids, "end"),
        state={"i": {"default": 0}, "note": {"default": "kept"}},
        name=f"counter-{n}",
    )


def test_step_state_is_the_state_after_the_step_and_its_difference_from_the_one_before(world: World) -> None:
    run = run_local(counter_chain(3), {}, user=world.users["starter"])
    steps = {s.node_id: s for s in Step.objects.filter(run=run)}
    body = world.clients["operator"].get(f"/api/v1/steps/{steps['t2'].pk}/state/").json()
    assert body["step"] == steps["t2"].pk
    assert body["state"]["i"] == 2 and body["state"]["note"] == "kept"
    assert body["changed"] == {"i": {"before": 1, "after": 2, "added": False}}
    assert body["previous_step"] == steps["t1"].pk and body["seq"] == steps["t2"].state_seq
    assert body["input_state"]["i"] == 1 and body["input_state"]["note"] == "kept"  # what t2 was given: the state after t1
    first = world.clients["operator"].get(f"/api/v1/steps/{steps['start'].pk}/state/").json()
    assert first["previous_step"] is None and first["changed"] == {}
    assert first["input_state"]["i"] == 0  # the initial state


def test_step_state_reads_a_fixed_number_of_queries_however_long_the_run(world: World) -> None:
    client = world.clients["admin"]
    counts = []
    for n in (2, 30):
        run = run_local(counter_chain(n), {})
        last = Step.objects.get(run=run, node_id=f"t{n}")
        client.get(f"/api/v1/steps/{last.pk}/state/")  # warm the token cache and anything per-process
        with CaptureQueriesContext(connection) as ctx:
            body = client.get(f"/api/v1/steps/{last.pk}/state/").json()
        assert body["state"]["i"] == n and body["changed"]["i"] == {"before": n - 1, "after": n, "added": False}
        # Authentication and throttling use the cache table (its culling varies): count the run's reads.
        ours = [q["sql"] for q in ctx.captured_queries if "runs_step" in q["sql"] or "runs_runstatekey" in q["sql"]]
        counts.append(len(ours))
    assert counts[0] == counts[1], counts
    assert counts[0] <= 8, counts  # the step (twice), the input state (two), the state (three), the previous commit


def test_step_state_is_permission_checked_and_answers_404_and_409(world: World) -> None:
    run = world.failed_run()
    start = Step.objects.get(run=run, node_id="start")
    boom = Step.objects.get(run=run, node_id="boom")
    hidden = world.clients["viewer"].get(f"/api/v1/steps/{start.pk}/state/")
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
    assert AuditEntry.objects.filter(action="access.denied", object_id=str(start.pk), data__denied="step.state").exists()
    assert world.clients["viewer"].get("/api/v1/steps/999999/state/").status_code == 404
    assert world.clients["anonymous"].get(f"/api/v1/steps/{start.pk}/state/").status_code in (401, 403)
    # A failed step committed no state: what it was given, and nothing after it.
    failed = world.clients["operator"].get(f"/api/v1/steps/{boom.pk}/state/").json()
    assert failed["state"] is None and failed["changed"] == {} and failed["input_state"]["zero"] == 0
    assert world.clients["operator"].get(f"/api/v1/steps/{start.pk}/state/").status_code == 200


def test_a_child_steps_state_is_a_conflict(world: World) -> None:
    run = run_local(EXAMPLE, {"question": "Refund?", "order_id": "A-1001"}, user=world.users["starter"])
    child = Step.objects.filter(run=run, parent__isnull=False).first()
    answer = world.clients["operator"].get(f"/api/v1/steps/{child.pk}/state/")
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "invalid_state"


def test_step_detail_has_the_idempotency_key_attempts_and_scheduling_times(world: World) -> None:
    run = world.failed_run()
    boom = Step.objects.get(run=run, node_id="boom")
    body = world.clients["operator"].get(f"/api/v1/steps/{boom.pk}/").json()
    assert body["idempotency_key"] == boom.idempotency_key and body["idempotency_key"]
    assert body["attempts"] and body["attempts"][0]["worker"] and body["attempts"][0]["status"] == "failed"
    # The build that ran each attempt: this process's (core.build), as the row recorded it.
    assert [a["build"] for a in body["attempts"]] == list(boom.attempts.order_by("number").values_list("build", flat=True))
    assert body["attempts"][0]["build"] == build()
    assert body["error"]["message"] and body["children"] == []
    assert {"lease_owner", "lease_expires_at", "worker_alive", "available_at", "due_at", "state_seq", "depth"} <= set(body)
    assert world.clients["viewer"].get(f"/api/v1/steps/{boom.pk}/").status_code == 404


def test_an_agent_steps_detail_is_its_transcript_of_child_steps(world: World) -> None:
    run = run_local(EXAMPLE, {"question": "Can I get a refund?", "order_id": "A-1001"}, user=world.users["starter"])
    assert run.status == "succeeded", run.error
    agent = Step.objects.get(run=run, node_id="agent")
    body = world.clients["operator"].get(f"/api/v1/steps/{agent.pk}/").json()
    keys = [c["child_key"] for c in body["children"]]
    assert keys == ["turn-0", "tool-0-call_order", "tool-0-call_policy", "turn-1"]
    turn0, tool = body["children"][0], body["children"][1]
    assert turn0["output"]["tool_calls"] and turn0["usage"] and turn0["cost_usd"] is not None
    assert "messages" not in (turn0["input"] or {}) and turn0["message_count"] >= 1
    assert tool["input"]["tool"] == "order_lookup" and tool["input"]["arguments"] == {"order_id": "A-1001"}
    assert body["children"][3]["output"]["text"].startswith("Order A-1001")
