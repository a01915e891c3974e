"""The run list API: filters (status, graph, version, starter, dates, search by id and by input),
bulk cancel with per-run refusals (policy, audit, field errors), the dashboard's status
summary, one RunFilter serving run lists and cost reports, and "new runs" on ws/runs/."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from accounts.tokens import token_create
from audit.models import AuditEntry
from ballast.asgi import application
from runs import selectors
from runs.models import Run
from runs.reports import selectors as report_selectors
from tests.support.specs import publish, run_local
from tests.support.world import World, linear_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["results"]]


# --------------------------------------------------------------------------- filters


def test_filters_by_status_graph_version_starter_and_dates(world: World) -> None:
    client = world.clients["admin"]
    waiting = world.waiting_run()
    failed = world.failed_run()
    mine = run_local(linear_spec(), {"x": 3}, user=world.users["operator"])
    assert ids(client.get("/api/v1/runs/", {"status": "failed"})) == [failed.pk]
    gate_graph = world.approval_version.graph_id
    assert ids(client.get("/api/v1/runs/", {"graph": gate_graph})) == [waiting.pk]
    assert ids(client.get("/api/v1/runs/", {"graph": gate_graph, "version": world.approval_version.number})) == [waiting.pk]
    assert ids(client.get("/api/v1/runs/", {"graph": gate_graph, "version": world.approval_version.number + 1})) == []
    assert ids(client.get("/api/v1/runs/", {"user": "operator"})) == [mine.pk]
    Run.objects.filter(pk=failed.pk).update(created_at=timezone.now() - timedelta(days=3))
    day = (timezone.now() - timedelta(days=3)).date()
    in_range = {"created_after": str(day), "created_before": str(day + timedelta(days=1))}
    assert ids(client.get("/api/v1/runs/", in_range)) == [failed.pk]


def test_search_by_run_id_and_by_input_text(world: World) -> None:
    client = world.clients["admin"]
    ada = world.waiting_run()  # input {"name": "Ada"}
    other = run_local(world.approval_version, {"name": "Grace Hopper"}, user=world.users["starter"])
    assert ids(client.get("/api/v1/runs/", {"search": "grace hop"})) == [other.pk]  # case-insensitive substring
    assert ids(client.get("/api/v1/runs/", {"search": f"#{ada.pk}"})) == [ada.pk]
    assert ada.pk in ids(client.get("/api/v1/runs/", {"search": str(ada.pk)}))
    assert ids(client.get("/api/v1/runs/", {"search": "nobody-has-this"})) == []
    assert sorted(ids(client.get("/api/v1/runs/", {"search": "  "}))) == sorted([ada.pk, other.pk])  # blank: no search


def test_filters_hold_only_readable_runs(world: World) -> None:
    world.waiting_run()
    assert ids(world.clients["viewer"].get("/api/v1/runs/", {"search": "Ada"})) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"version": 1}, "version"),
        ({"graph": "x"}, "graph"),
        ({"status": "exploded"}, "status"),
        ({"created_after": "2026-12-02", "created_before": "2026-12-01"}, "created_before"),
        ({"created_after": "not a date"}, "created_after"),
        ({"search": "x" * 201}, "search"),
        ({"search": "a\x00b"}, "search"),
    ],
)
def test_bad_filters_are_400_field_errors(world: World, params: dict, field: str) -> None:
    response = world.clients["admin"].get("/api/v1/runs/", params)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_one_run_filter_serves_lists_and_cost_reports(world: World) -> None:
    """The same RunFilter narrows the run list and the spend: the runs a graph filter lists
    are the runs whose attempts its cost rows count."""
    world.waiting_run()
    run_local(linear_spec(), {"x": 1}, user=world.users["starter"])
    f = selectors.RunFilter(graph_id=world.approval_version.graph_id)
    listed = set(selectors.run_list(viewer=None, filters=f).values_list("pk", flat=True))
    costed = set(report_selectors.cost_attempts(viewer=None, filters=f).values_list("step__run_id", flat=True))
    assert listed == {r.pk for r in Run.objects.filter(graph_version__graph_id=f.graph_id)}
    assert costed <= listed


# --------------------------------------------------------------------------- bulk cancel


def test_bulk_cancel_cancels_what_it_may_and_says_why_not_per_run(world: World) -> None:
    waiting, queued, done = world.waiting_run(), world.queued_run(), world.succeeded_run()
    response = world.clients["operator"].post(
        "/api/v1/runs/cancel/", {"runs": [waiting.pk, done.pk, queued.pk, 999999], "reason": "tidy up"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    by_run = {r["run"]: r for r in body["results"]}
    assert [r["run"] for r in body["results"]] == [waiting.pk, done.pk, queued.pk, 999999]  # the order asked
    assert by_run[waiting.pk]["ok"] and by_run[waiting.pk]["status"] == "cancelled"
    assert by_run[queued.pk]["ok"]
    assert by_run[done.pk]["error"]["code"] == "invalid_state" and by_run[done.pk]["status"] == "succeeded"
    assert by_run[999999]["error"]["code"] == "not_found" and by_run[999999]["status"] is None
    assert (body["cancelled"], body["refused"]) == (2, 2)
    assert AuditEntry.objects.filter(action="run.cancel", object_id__in=[str(waiting.pk), str(queued.pk)]).count() == 2


def test_bulk_cancel_is_checked_per_run_like_a_single_cancel(world: World) -> None:
    run = world.waiting_run()  # started by "starter": they may read it, not cancel it
    starter = world.clients["starter"].post("/api/v1/runs/cancel/", {"runs": [run.pk]}, format="json").json()
    assert starter["results"][0]["error"]["code"] == "not_allowed" and starter["results"][0]["status"] == "waiting"
    viewer = world.clients["viewer"].post("/api/v1/runs/cancel/", {"runs": [run.pk]}, format="json").json()
    assert viewer["results"][0]["error"]["code"] == "not_found"  # a run they may not read is not revealed
    run.refresh_from_db()
    assert run.status == "waiting"
    denied = AuditEntry.objects.filter(action="access.denied", object_id=str(run.pk))
    assert sorted(e.data["status"] for e in denied) == [403, 404]
    assert world.clients["anonymous"].post("/api/v1/runs/cancel/", {"runs": [run.pk]}, format="json").status_code in (401, 403)


@pytest.mark.parametrize(
    "body",
    [{}, {"runs": []}, {"runs": "1"}, {"runs": [1, 1]}, {"runs": ["x"]}, {"runs": [0]}, {"runs": list(range(1, 502))}, {"runs": [1], "reason": "r" * 1001}],
)
def test_bulk_cancel_bad_bodies_are_400_field_errors(world: World, body: dict) -> None:
    response = world.clients["operator"].post("/api/v1/runs/cancel/", body, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    assert any(f.split(".")[0].split("[")[0] in ("runs", "reason") for f in fields), fields


# --------------------------------------------------------------------------- summary


def test_status_summary_of_the_last_24_hours(world: World) -> None:
    world.waiting_run()
    world.failed_run()
    old = world.succeeded_run()
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    body = world.clients["admin"].get("/api/v1/runs/summary/").json()
    assert body["by_status"]["waiting"] == 1 and body["by_status"]["failed"] == 1 and body["by_status"]["succeeded"] == 0
    assert body["total"] == 2 and set(body["by_status"]) == {"queued", "running", "waiting", "succeeded", "failed", "cancelled"}
    assert world.clients["viewer"].get("/api/v1/runs/summary/").json()["total"] == 0
    assert world.clients["admin"].get("/api/v1/runs/summary/", {"hours": 72}).json()["total"] == 3
    assert "hours" in world.clients["admin"].get("/api/v1/runs/summary/", {"hours": 0}).json()["error"]["fields"]


# --------------------------------------------------------------------------- new runs, live


def test_a_socket_watching_new_runs_hears_of_each_new_run(world: World) -> None:
    key = token_create(user=world.users["admin"], name="ws")[1]
    version = publish(linear_spec())

    async def body() -> list[dict]:
        ws = WebsocketCommunicator(application, f"/ws/runs/?token={key}")
        connected, _ = await ws.connect(timeout=10)
        assert connected
        await ws.send_json_to({"type": "watch_new"})
        assert await ws.receive_nothing(timeout=0.6)  # nothing new yet
        from channels.db import database_sync_to_async

        await database_sync_to_async(lambda: run_local(version, {"x": 1}))()
        got = [await ws.receive_json_from(timeout=10)]
        await ws.send_json_to({"type": "unwatch_new"})
        await ws.disconnect()
        return got

    # In a thread of its own: after the browser tests in one pytest process, Playwright's
    # sync API keeps an event loop in this thread and async_to_sync refuses to run there.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(async_to_sync(body)).result(timeout=60) == [{"type": "runs.created"}]
