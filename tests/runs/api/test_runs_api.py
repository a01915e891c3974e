"""Runs through the API: Idempotency-Key, filters, events after a cursor, cancel/resume/retry/fork,
cost aggregates, and the error body for bad input."""
from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Sum

from runs.engine import api as engine
from runs.models import Run, RunEvent, StepAttempt
from runs.services import run_start
from tests.support.specs import chain, graph, node, publish, run_local
from tests.support.world import World, client_with_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def start(client, world: World, key: str | None = None, **body):
    body = {"graph": world.approval_version.graph_id, "input": {"name": "Ada"}, **body}
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    with engine.local_mode():
        return client.post("/api/v1/runs/", body, format="json", **headers)


# --------------------------------------------------------------------------- Idempotency-Key


def test_same_idempotency_key_returns_the_same_run(world: World) -> None:
    client = world.clients["operator"]
    first = start(client, world, key="order-42")
    again = start(client, world, key="order-42")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Run.objects.count() == 1
    other = start(client, world, key="order-43")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    no_key = [start(client, world).json()["id"] for _ in range(2)]
    assert len(set(no_key)) == 2


def test_idempotency_key_with_a_different_request_is_refused(world: World) -> None:
    client = world.clients["operator"]
    first = start(client, world, key="k-1")
    reused = start(client, world, key="k-1", input={"name": "Someone else"})
    assert reused.status_code == 422
    error = reused.json()["error"]
    assert error["code"] == "idempotency_key_reused" and error["run"] == first.json()["id"]
    assert Run.objects.count() == 1


def test_idempotency_keys_are_per_user(world: World) -> None:
    mine = start(world.clients["operator"], world, key="shared")
    theirs = start(world.clients["admin"], world, key="shared")
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]


def test_malformed_idempotency_key_is_a_field_error(world: World) -> None:
    bad = start(world.clients["operator"], world, key="x" * 129)
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["error"]["fields"]
    assert Run.objects.count() == 0


def test_concurrent_requests_with_one_key_start_one_run(world: World) -> None:
    """Two clients retrying at once (a timeout on the first try): one run, both see it."""
    user = world.users["operator"]
    clients = [client_with_token(user), client_with_token(user)]
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def go(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = start(clients[i], world, key="race")
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(r is not None and r.status_code in (200, 201) for r in results), [getattr(r, "content", r) for r in results]
    assert results[0].json()["id"] == results[1].json()["id"]
    assert Run.objects.count() == 1


# --------------------------------------------------------------------------- reading runs


def test_run_list_filters_by_status_graph_user_and_date(world: World) -> None:
    waiting = world.waiting_run()
    mine = start(world.clients["operator"], world).json()["id"]
    other_graph = world.succeeded_run()
    client = world.clients["builder"]

    def ids(query: str) -> set[int]:
        response = client.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()["results"]}

    assert ids("status=waiting") == {waiting.pk}
    assert ids(f"graph={world.approval_version.graph_id}") == {waiting.pk, mine}
    assert ids("user=operator") == {mine}
    created = Run.objects.get(pk=mine).created_at
    assert ids(f"created_after={created.isoformat().replace('+00:00', 'Z')}") >= {mine}
    assert mine not in ids(f"created_before={created.isoformat().replace('+00:00', 'Z')}")
    assert other_graph.pk in ids(f"created_after={created.date().isoformat()}")
    bad = client.get("/api/v1/runs/?status=sleeping&created_after=yesterday")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"status", "created_after"}


def test_run_detail_has_its_steps_and_steps_have_attempts(world: World) -> None:
    run = world.waiting_run()
    body = world.clients["builder"].get(f"/api/v1/runs/{run.pk}/").json()
    assert body["status"] == "waiting" and body["input"] == {"name": "Ada"}
    assert [s["node_id"] for s in body["steps"]] == ["start", "draft", "review"]
    step = world.clients["builder"].get(f"/api/v1/steps/{body['steps'][1]['id']}/").json()
    assert step["output"] is not None and [a["number"] for a in step["attempts"]] == [1]
    page = world.clients["builder"].get(f"/api/v1/runs/{run.pk}/steps/?page_size=2").json()
    assert "count" not in page and [s["node_id"] for s in page["results"]] == ["start", "draft"] and page["next"]
    rest = world.clients["builder"].get(page["next"]).json()
    assert [s["node_id"] for s in rest["results"]] == ["review"] and rest["next"] is None and rest["previous"]


def test_events_after_a_cursor_resume_where_the_client_stopped(world: World) -> None:
    run = world.waiting_run()
    client = world.clients["builder"]
    everything = client.get(f"/api/v1/runs/{run.pk}/events/").json()
    kinds = [e["kind"] for e in everything["results"]]
    assert kinds[0] == "run_created" and kinds[-1] == "run_waiting" and everything["run_status"] == "waiting"
    first = client.get(f"/api/v1/runs/{run.pk}/events/?after=0&limit=2").json()
    assert len(first["results"]) == 2 and first["has_more"] is True
    rest = client.get(f"/api/v1/runs/{run.pk}/events/?after={first['next_after']}").json()
    assert [e["id"] for e in first["results"] + rest["results"]] == [e["id"] for e in everything["results"]]
    world.decided(run)
    later = client.get(f"/api/v1/runs/{run.pk}/events/?after={everything['next_after']}").json()
    assert later["run_status"] == "succeeded" and later["results"][-1]["kind"] == "run_succeeded"
    assert all(e["id"] > everything["next_after"] for e in later["results"])
    idle = client.get(f"/api/v1/runs/{run.pk}/events/?after={later['next_after']}").json()
    assert idle["results"] == [] and idle["next_after"] == later["next_after"] and idle["has_more"] is False


# --------------------------------------------------------------------------- changing runs


def test_cancel_twice_is_a_conflict(world: World) -> None:
    run = world.waiting_run()
    client = world.clients["operator"]
    assert client.post(f"/api/v1/runs/{run.pk}/cancel/", {"reason": "no"}, format="json").json()["status"] == "cancelled"
    again = client.post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"


def test_resume_and_retry_continue_a_failed_run_and_refuse_others(world: World) -> None:
    client = world.clients["operator"]
    failed = world.failed_run()
    with engine.local_mode():
        resumed = client.post(f"/api/v1/runs/{failed.pk}/resume/", {}, format="json")
    assert resumed.status_code == 200 and resumed.json()["status"] == "running"
    assert RunEvent.objects.filter(run=failed, kind="run_resumed").count() == 1
    other = world.failed_run()
    with engine.local_mode():
        assert client.post(f"/api/v1/runs/{other.pk}/retry/", format="json").json()["status"] == "running"
    done = world.succeeded_run()
    for action in ("resume", "retry"):
        refused = client.post(f"/api/v1/runs/{done.pk}/{action}/", {}, format="json")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state"


def test_fork_starts_a_new_run_from_a_committed_step_with_edited_state(world: World) -> None:
    source = world.succeeded_run()
    start_step = world.step(source, "start")
    client = world.clients["operator"]
    with engine.local_mode() as queue:
        forked = client.post(f"/api/v1/runs/{source.pk}/fork/", {"step": start_step.pk, "state_patch": {"x": 21}}, format="json")
        assert forked.status_code == 201, forked.content
        body = forked.json()
        engine.drive_local(body["id"], queue=queue, timeout=30)
    assert body["forked_from"] == source.pk and body["forked_from_step"] == start_step.pk
    assert Run.objects.get(pk=body["id"]).state["y"] == 42
    missing = client.post(f"/api/v1/runs/{source.pk}/fork/", {"step": 10**12}, format="json")
    assert missing.status_code == 400 and "step" in missing.json()["error"]["fields"]
    bad = client.post(f"/api/v1/runs/{source.pk}/fork/", {"step": start_step.pk, "state_patch": [1]}, format="json")
    assert bad.status_code == 400 and "state_patch" in bad.json()["error"]["fields"]


def test_bad_input_gets_field_errors_never_a_500(world: World) -> None:
    client = world.clients["operator"]
    wrong_type = start(client, world, input={"name": 5})
    assert wrong_type.status_code == 400
    assert wrong_type.json()["error"]["code"] == "input_invalid" and "input.name" in wrong_type.json()["error"]["fields"]
    no_graph = client.post("/api/v1/runs/", {"graph": 10**15}, format="json")
    assert no_graph.status_code == 400 and "graph" in no_graph.json()["error"]["fields"]
    not_object = client.post("/api/v1/runs/", {"graph": "x", "input": [1], "budget_usd": "-1"}, format="json")
    assert set(not_object.json()["error"]["fields"]) == {"graph", "input", "budget_usd"}
    malformed = client.post("/api/v1/runs/", "{not json", content_type="application/json")
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "parse_error"
    form = client.post("/api/v1/runs/", "a=1", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415 and form.json()["error"]["code"] == "unsupported_media_type"
    assert client.put("/api/v1/runs/", {}, format="json").status_code == 405
    for path in ("/api/v1/runs/999999999/", "/api/v1/runs/-1/", "/api/v1/runs/99999999999999999999999/", "/api/v1/nothing/"):
        missing = client.get(path)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", path


# --------------------------------------------------------------------------- costs


def llm_spec(model: str) -> dict:
    return graph(
        [node("start", "start"), node("ask", "llm", config={"prompt": "Say hi to {{ name }}", "model": model}), node("end", "end")],
        chain("start", "ask", "end"),
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )


def test_costs_are_aggregated_by_the_database_per_step_run_graph_model_and_day(world: World) -> None:
    small, large = publish(llm_spec("mock-1")), publish(llm_spec("mock-large"))
    runs = [run_local(small, {"name": "Ada"}), run_local(small, {"name": "Grace Hopper"}), run_local(large, {"name": "Alan"})]
    assert all(r.status == "succeeded" for r in runs), [r.error for r in runs]
    client = world.clients["builder"]

    def rows(query: str) -> list[dict]:
        response = client.get(f"/api/v1/costs/?{query}")
        assert response.status_code == 200, response.content
        return response.json()["results"]

    by_model = {r["key"]: r for r in rows("group_by=model")}
    assert set(by_model) == {"mock-1", "mock-large"} and by_model["mock-1"]["label"] == "mock"
    assert by_model["mock-1"]["attempts"] == 2 and by_model["mock-large"]["attempts"] == 1
    small_runs = Run.objects.filter(pk__in=[runs[0].pk, runs[1].pk])
    assert Decimal(by_model["mock-1"]["cost_usd"]) == small_runs.aggregate(s=Sum("cost_usd"))["s"] > 0
    assert by_model["mock-1"]["input_tokens"] == sum(r.input_tokens for r in small_runs)
    by_run = {int(r["key"]): Decimal(r["cost_usd"]) for r in rows("group_by=run")}
    assert by_run == {r.pk: r.cost_usd for r in Run.objects.filter(pk__in=[r.pk for r in runs])}
    by_graph = {int(r["key"]): r for r in rows("group_by=graph")}
    assert set(by_graph) == {small.graph_id, large.graph_id} and by_graph[small.graph_id]["label"] == small.graph.name
    (day,) = rows("group_by=day")
    assert day["key"] == StepAttempt.objects.first().started_at.date().isoformat() and day["attempts"] == 3
    steps = rows(f"group_by=step&run={runs[2].pk}")
    assert [s["label"] for s in steps] == ["ask"] and steps[0]["run"] == runs[2].pk
    assert rows(f"group_by=model&graph={large.graph_id}")[0]["key"] == "mock-large"
    assert [r["key"] for r in rows("group_by=model&model=mock-large")] == ["mock-large"]
    assert rows("group_by=run&since=2000-01-01&until=2000-01-02") == []
    assert client.get("/api/v1/costs/?group_by=planet").status_code == 400


def test_run_detail_says_a_run_started_from_the_command_line(world: World) -> None:
    admin = world.clients["admin"]
    with engine.local_mode():
        cli_run = run_start(version=world.approval_version, run_input={"name": "C"}, actor="cli")
        other = run_start(version=world.approval_version, run_input={"name": "S"}, actor="scheduler")
    user_run = world.queued_run()
    cli = admin.get(f"/api/v1/runs/{cli_run.pk}/").json()
    assert cli["created_by"] is None and cli["started_from"] == "command line"
    # No honest source, no claim: another system actor and a user's run say nothing.
    assert admin.get(f"/api/v1/runs/{other.pk}/").json()["started_from"] is None
    assert admin.get(f"/api/v1/runs/{user_run.pk}/").json()["started_from"] is None


def test_run_list_says_who_started_each_run_as_the_detail_does(world: World, django_assert_max_num_queries) -> None:
    admin = world.clients["admin"]
    with engine.local_mode():
        cli_run = run_start(version=world.approval_version, run_input={"name": "C"}, actor="cli")
        other = run_start(version=world.approval_version, run_input={"name": "S"}, actor="scheduler")
    user_run = world.queued_run()
    listed = {r["id"]: r for r in admin.get("/api/v1/runs/?page_size=50").json()["results"]}
    for run in (cli_run, other, user_run):
        detail = admin.get(f"/api/v1/runs/{run.pk}/").json()
        assert (listed[run.pk]["created_by"], listed[run.pk]["started_from"]) == (detail["created_by"], detail["started_from"])
    assert listed[cli_run.pk]["started_from"] == "command line" and listed[other.pk]["started_from"] is None
    assert listed[user_run.pk]["created_by"] == "starter" and listed[user_run.pk]["started_from"] is None
    # Worked out for the whole page at once: more command-line runs cost no more queries.
    with django_assert_max_num_queries(40) as few:
        admin.get("/api/v1/runs/?page_size=50")
    with engine.local_mode():
        for i in range(5):
            run_start(version=world.approval_version, run_input={"name": f"C{i}"}, actor="cli")
    with django_assert_max_num_queries(len(few.captured_queries)):
        page = admin.get("/api/v1/runs/?page_size=50").json()["results"]
    assert sum(r["started_from"] == "command line" for r in page) == 6
