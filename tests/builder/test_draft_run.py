"""POST /graphs/<id>/draft/run/ runs the saved draft without publishing it: a test run of a
hidden snapshot (left out of lists and reports unless asked), audited and costed; a bad
input or an invalid draft is a 400 that starts nothing."""
from __future__ import annotations

from typing import Any

from audit.models import AuditEntry
from builder.services import graph_create
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.models import Run
from tests.support.specs import chain, graph, node, transform


def _draft(**extra: Any) -> Any:
    """An unpublished graph: start -> double (y = x * 2) -> ask (mock LLM) -> end (y, reply)."""
    spec = graph(
        [
            node("start", "start"),
            transform("double", y="x * 2"),
            node("ask", "llm", config={"prompt": "Double is {{ y }}", "model": "mock-1", "max_tokens": 50, "output_key": "reply"}),
            node("end", "end"),
        ],
        chain("start", "double", "ask", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        **extra,
    )
    return graph_create(name=spec["name"], draft=spec)


def _post_and_drive(client: Any, graph_id: int, body: dict[str, Any]) -> tuple[Any, Run | None]:
    """POST the draft run with this process as the queue, then drive the run to its end."""
    with engine.local_mode() as queue:
        response = client.post(f"/api/v1/graphs/{graph_id}/draft/run/", body, format="json")
        if response.status_code != 201:
            return response, None
        engine.drive_local(response.json()["id"], queue=queue, timeout=60)
    return response, Run.objects.get(pk=response.json()["id"])


def test_the_draft_runs_without_a_publish_as_a_test_run(world):
    g = _draft()
    client = world.clients["builder"]
    response, run = _post_and_drive(client, g.pk, {"input": {"x": 3}})
    assert response.status_code == 201, response.content[:400]
    body = response.json()
    assert body["graph"] == g.pk and body["is_test"] is True and body["source"] == "draft" and body["tested_node"] is None
    assert run is not None and run.status == "succeeded", run.error
    assert run.state["y"] == 6 and "Double is 6" in str(run.state["reply"])
    assert run.cost_usd > 0  # the mock model is priced: the draft run is costed like any run
    # Nothing published: the graph still has no version; the run is pinned to a hidden snapshot.
    assert g.latest_version() is None
    assert run.graph_version.is_test and run.graph_version.number == 0 and [n["id"] for n in run.graph_version.spec["nodes"]] == ["start", "double", "ask", "end"]
    # Audited as a start by the builder.
    entry = AuditEntry.objects.get(action="run.start", object_id=str(run.pk))
    assert entry.actor == world.users["builder"].username
    # Kept out of the run list unless tests are asked for; readable on its own.
    listed = [r["id"] for r in client.get(f"/api/v1/runs/?graph={g.pk}").json()["results"]]
    assert run.pk not in listed
    listed = [r["id"] for r in client.get(f"/api/v1/runs/?graph={g.pk}&include_tests=true").json()["results"]]
    assert run.pk in listed
    detail = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["status"] == "succeeded" and detail["output"] is not None


def test_running_the_same_draft_again_reuses_its_snapshot_and_an_edit_makes_a_new_one(world):
    g = _draft()
    client = world.clients["builder"]
    first = _post_and_drive(client, g.pk, {"input": {"x": 1}})[1]
    second = _post_and_drive(client, g.pk, {"input": {"x": 2}})[1]
    assert first is not None and second is not None and first.graph_version_id == second.graph_version_id
    g.refresh_from_db()
    draft = g.draft
    draft["nodes"][1]["config"]["set"]["y"] = "x * 3"
    g.draft = draft
    g.save(update_fields=["draft"])
    third = _post_and_drive(client, g.pk, {"input": {"x": 2}})[1]
    assert third is not None and third.graph_version_id != first.graph_version_id and third.state["y"] == 6
    assert GraphVersion.objects.filter(graph=g, is_test=True).count() == 2 and not GraphVersion.objects.filter(graph=g, is_test=False).exists()


def test_an_input_that_does_not_match_the_schema_is_a_400_field_error_and_starts_nothing(world):
    g = _draft()
    runs = Run.objects.count()
    response = world.clients["builder"].post(f"/api/v1/graphs/{g.pk}/draft/run/", {"input": {"x": "three"}}, format="json")
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    assert error["code"] == "input_invalid" and list(error["fields"]) == ["input.x"]
    response = world.clients["builder"].post(f"/api/v1/graphs/{g.pk}/draft/run/", {"input": {}}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "input_invalid", response.content[:400]
    response = world.clients["builder"].post(f"/api/v1/graphs/{g.pk}/draft/run/", {"input": [1]}, format="json")
    assert response.status_code == 400 and "input" in response.json()["error"]["fields"], response.content[:400]
    assert Run.objects.count() == runs


def test_an_invalid_draft_is_a_400_naming_its_problems_and_starts_nothing(world):
    spec = graph([node("start", "start"), transform("calc", total="nope +"), node("end", "end")], chain("start", "calc", "end"))
    g = graph_create(name=spec["name"], draft=spec)
    runs = Run.objects.count()
    response = world.clients["builder"].post(f"/api/v1/graphs/{g.pk}/draft/run/", {}, format="json")
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    assert error["code"] == "graph_invalid" and any(i["node_id"] == "calc" for i in error["issues"]), error
    assert Run.objects.count() == runs and not GraphVersion.objects.filter(graph=g).exists()


def test_a_draft_run_cannot_be_retried_like_a_published_run(world):
    xz = {"type": "object", "properties": {"x": {"type": "number"}, "zero": {"type": "number"}}}
    spec = graph([node("start", "start"), transform("boom", y="x / zero"), node("end", "end")], chain("start", "boom", "end"), input_schema=xz)
    g = graph_create(name=spec["name"], draft=spec)
    response, run = _post_and_drive(world.clients["builder"], g.pk, {"input": {"x": 1, "zero": 0}})
    assert run is not None and run.status == "failed"
    response = world.clients["admin"].post(f"/api/v1/runs/{run.pk}/retry/", {}, format="json")
    assert response.status_code == 409, response.content[:400]
