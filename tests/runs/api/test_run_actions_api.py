"""Run actions for the run page: allowed actions, previews of resume/retry/fork that equal
what the action then does, field errors for bad fork steps and patches, and two runs compared."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from runs.engine import api as engine
from runs.models import Run, RunStateKey, Step
from tests.support.specs import publish, run_local
from tests.support.world import World, priced_spec

pytestmark = pytest.mark.usefixtures("fast_passwords")


def step_rows(run: Run) -> list[tuple[Any, ...]]:
    """What a retry must leave alone on committed steps."""
    return list(Step.objects.filter(run=run).order_by("id").values_list("id", "node_id", "status", "output", "finished_at", "attempt"))


def test_retry_preview_is_what_the_retry_then_does(world: World) -> None:
    run = run_local(publish(priced_spec()), {"x": 1, "zero": 0, "name": "Ada"}, user=world.users["starter"])
    assert run.status == "failed"
    client = world.clients["operator"]
    before = step_rows(run)
    events_before = run.read_event_seq()
    preview = client.post(f"/api/v1/runs/{run.pk}/retry/preview/", format="json")
    assert preview.status_code == 200, preview.content
    body = preview.json()
    # Previewing changes nothing.
    assert step_rows(run) == before and Run.objects.get(pk=run.pk).read_event_seq() == events_before
    kept_nodes = [k["node_id"] for k in body["kept"]]
    assert kept_nodes == ["start", "draft"]
    (again,) = body["run_again"]
    assert again["node_id"] == "boom" and again["status"] == "pending"
    assert [t["node_id"] for t in body["then"]] == ["ask", "end"]
    ask = next(t for t in body["then"] if t["node_id"] == "ask")
    assert Decimal(ask["estimate"]["usd"]) > 0 and ask["estimate"]["tokens"] > 50
    assert Decimal(body["estimate"]["usd"]) == Decimal(ask["estimate"]["usd"]) and body["estimate"]["unpriced"] == []

    with engine.local_mode():  # the retry commits; its steps are not executed here
        done = client.post(f"/api/v1/runs/{run.pk}/retry/", format="json")
    assert done.status_code == 200, done.content
    after = {s.pk: s for s in Step.objects.filter(run=run)}
    for k in body["kept"]:  # kept steps are untouched facts
        row = next(r for r in before if r[0] == k["step"])
        s = after[k["step"]]
        assert (s.status, s.output, s.finished_at, s.attempt) == (row[2], row[3], row[4], row[5])
    for r in body["run_again"]:
        s = after[r["step"]]
        assert (s.node_id, s.status, s.max_attempts) == (r["node_id"], r["status"], r["max_attempts"])
    # Nothing else was reopened.
    reopened = {s.pk for s in after.values() if s.status in ("pending", "suspended")}
    assert reopened == {r["step"] for r in body["run_again"]}


def test_fork_preview_is_what_the_fork_then_starts(world: World) -> None:
    source = run_local(publish(priced_spec()), {"x": 1, "zero": 2, "name": "Ada"}, user=world.users["starter"])
    assert source.status == "succeeded", source.error
    draft = Step.objects.get(run=source, node_id="draft")
    client = world.clients["operator"]
    request = {"step": draft.pk, "state_patch": {"greeting": "Hello there", "zero": 4}}
    preview = client.post(f"/api/v1/runs/{source.pk}/fork/preview/", request, format="json")
    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert Run.objects.count() == 1  # a preview starts nothing
    assert [k["node_id"] for k in body["kept"]] == ["start", "draft"]
    assert [d["node_id"] for d in body["dropped"]] == ["boom", "ask", "end"]
    assert body["patched"] == ["greeting", "zero"] and "greeting" in body["state_keys"]
    assert body["state"]["greeting"] == "Hello there" and body["state"]["zero"] == 4
    assert body["anchor"] == {"step": draft.pk, "node_id": "draft", "iteration": 0}

    with engine.local_mode():
        forked = client.post(f"/api/v1/runs/{source.pk}/fork/", request, format="json")
    assert forked.status_code == 201, forked.content
    new = Run.objects.get(pk=forked.json()["id"])
    created = list(Step.objects.filter(run=new).order_by("id").values_list("node_id", "iteration", "status", "max_attempts"))
    assert created == [(r["node_id"], r["iteration"], r["status"], r["max_attempts"]) for r in body["run_again"]]
    assert RunStateKey.state_at(new.pk)[0] == body["state"]


def test_resume_preview_of_a_failed_run_and_refusals(world: World) -> None:
    client = world.clients["operator"]
    failed = world.failed_run()
    body = client.post(f"/api/v1/runs/{failed.pk}/resume/preview/", format="json").json()
    assert body["action"] == "resume" and body["mode"] == "failed" and [r["node_id"] for r in body["run_again"]] == ["boom"]
    done = world.succeeded_run()
    for action in ("resume", "retry"):
        refused = client.post(f"/api/v1/runs/{done.pk}/{action}/preview/", format="json")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state"


def test_previews_and_actions_follow_the_same_roles(world: World) -> None:
    failed = world.failed_run()
    start = Step.objects.get(run=failed, node_id="start")
    paths = {
        "retry": (f"/api/v1/runs/{failed.pk}/retry/preview/", {}),
        "resume": (f"/api/v1/runs/{failed.pk}/resume/preview/", {}),
        "fork": (f"/api/v1/runs/{failed.pk}/fork/preview/", {"step": start.pk}),
    }
    expected = {"anonymous": 401, "viewer": 404, "approver": 404, "builder": 403, "starter": 403, "operator": 200, "admin": 200}
    for role, code in expected.items():
        for action, (path, data) in paths.items():
            answer = world.clients[role].post(path, data, format="json")
            assert answer.status_code == code if code != 401 else answer.status_code in (401, 403), (role, action, answer.content)
    allowed = world.clients["operator"].get(f"/api/v1/runs/{failed.pk}/actions/").json()
    assert allowed["may_act"] and allowed["retry"]["allowed"] and allowed["fork"]["allowed"] and not allowed["cancel"]["allowed"]
    builder = world.clients["builder"].get(f"/api/v1/runs/{failed.pk}/actions/").json()
    assert not builder["may_act"] and not any(builder[a]["allowed"] for a in ("cancel", "resume", "retry", "fork"))
    assert "operators" in builder["retry"]["reason"]
    assert world.clients["viewer"].get(f"/api/v1/runs/{failed.pk}/actions/").status_code == 404


def test_bad_fork_steps_and_patches_are_field_errors(world: World) -> None:
    source = world.succeeded_run()
    other = world.succeeded_run()
    client = world.clients["operator"]
    start = Step.objects.get(run=source, node_id="start")
    foreign = Step.objects.get(run=other, node_id="start")
    for path in (f"/api/v1/runs/{source.pk}/fork/preview/", f"/api/v1/runs/{source.pk}/fork/"):
        for step in (10**12, foreign.pk):
            answer = client.post(path, {"step": step}, format="json")
            assert answer.status_code == 400 and "step" in answer.json()["error"]["fields"], (path, step, answer.content)
        unknown = client.post(path, {"step": start.pk, "state_patch": {"nope": 1, "x": 3}}, format="json")
        assert unknown.status_code == 400, unknown.content
        assert unknown.json()["error"]["code"] == "unknown_state_key" and "state_patch.nope" in unknown.json()["error"]["fields"]
        nul = client.post(path, {"step": start.pk, "state_patch": {"x": "a\u0000b"}}, format="json")
        assert nul.status_code == 400 and "x:" in nul.json()["error"]["fields"]["state_patch"][0], nul.content
        not_object = client.post(path, {"step": start.pk, "state_patch": [1]}, format="json")
        assert not_object.status_code == 400 and "state_patch" in not_object.json()["error"]["fields"]
        no_step = client.post(path, {"state_patch": {}}, format="json")
        assert no_step.status_code == 400 and "step" in no_step.json()["error"]["fields"]
    failed = world.failed_run()
    boom = Step.objects.get(run=failed, node_id="boom")
    answer = client.post(f"/api/v1/runs/{failed.pk}/fork/preview/", {"step": boom.pk}, format="json")
    assert answer.status_code == 400 and "has not committed" in answer.json()["error"]["fields"]["step"][0]
    assert Run.objects.filter(forked_from__isnull=False).count() == 0


def test_compare_two_runs_of_a_graph(world: World) -> None:
    version = publish(priced_spec())
    a = run_local(version, {"x": 1, "zero": 1, "name": "Ada"}, user=world.users["starter"])
    b = run_local(version, {"x": 1, "zero": 2, "name": "Bob"}, user=world.users["starter"])
    client = world.clients["operator"]
    answer = client.get(f"/api/v1/runs/compare/?a={a.pk}&b={b.pk}")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [n["node_id"] for n in body["nodes"]] == ["start", "draft", "boom", "ask", "end"]
    rows = {n["node_id"]: n for n in body["nodes"]}
    assert rows["boom"]["a"]["updates"] == {"y": 1.0} and rows["boom"]["b"]["updates"] == {"y": 0.5} and not rows["boom"]["same_output"]
    assert Decimal(rows["ask"]["a"]["cost_usd"]) == Step.objects.get(run=a, node_id="ask").cost_usd
    assert rows["ask"]["a"]["seconds"] is not None
    changed = {d["key"]: d for d in body["state"] if d["change"] != "same"}
    assert {"name", "zero", "y", "greeting", "input"} <= set(changed) and changed["zero"]["a"] == 1 and changed["zero"]["b"] == 2
    assert "x" not in changed and set(body["state_differs"]) == set(changed)
    other = world.succeeded_run()
    mixed = client.get(f"/api/v1/runs/compare/?a={a.pk}&b={other.pk}")
    assert mixed.status_code == 400 and "b" in mixed.json()["error"]["fields"]
    assert client.get(f"/api/v1/runs/compare/?a={a.pk}&b={a.pk}").status_code == 400
    bad = client.get("/api/v1/runs/compare/?a=x")
    assert bad.status_code == 400 and {"a", "b"} <= set(bad.json()["error"]["fields"])
    hidden = world.clients["viewer"].get(f"/api/v1/runs/compare/?a={a.pk}&b={b.pk}")
    assert hidden.status_code == 400 and "a" in hidden.json()["error"]["fields"]


def test_resume_preview_of_a_parked_run_is_what_the_resume_requeues(world: World, effects_file) -> None:
    from tests.support.world import parked_run

    run, _request = parked_run()
    client = world.clients["operator"]
    body = client.post(f"/api/v1/runs/{run.pk}/resume/preview/", format="json").json()
    assert body["mode"] == "parked" and [r["node_id"] for r in body["run_again"]] == ["pay"]
    assert [k["node_id"] for k in body["kept"]] == ["start"] and [t["node_id"] for t in body["then"]] == ["end"]
    with engine.local_mode():
        assert client.post(f"/api/v1/runs/{run.pk}/resume/", {}, format="json").status_code == 200
    requeued = set(Step.objects.filter(run=run, status="pending").values_list("id", flat=True))
    assert requeued == {r["step"] for r in body["run_again"]}
