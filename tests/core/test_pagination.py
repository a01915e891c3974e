"""The API's pagination style: lists that grow without bound (runs, steps, audit entries)
page by cursor (keyset: ``next``/``previous`` URLs, no count), a run's events by the last
event id; a page size outside 1..max, or a cursor that is not one, is a 400 naming the
field, never clamped."""
from __future__ import annotations

import base64
from urllib.parse import unquote

import pytest

from tests.support.world import World

pytestmark = pytest.mark.usefixtures("fast_passwords")


def ids(page: dict) -> list[int]:
    return [item["id"] for item in page["results"]]


def test_runs_page_by_cursor_newest_first_and_new_runs_do_not_shift_pages(world: World) -> None:
    client = world.clients["builder"]
    made = [world.queued_run().pk for _ in range(5)]
    first = client.get("/api/v1/runs/?page_size=2").json()
    assert set(first) == {"next", "previous", "results"}  # no count: one range query per page
    assert ids(first) == made[::-1][:2] and first["previous"] is None
    world.queued_run()  # a run started meanwhile does not push older ones to the next page
    second = client.get(first["next"]).json()
    assert ids(second) == made[::-1][2:4]
    third = client.get(second["next"]).json()
    assert ids(third) == made[:1] and third["next"] is None
    back = client.get(third["previous"]).json()
    assert ids(back) == made[::-1][2:4]


def test_filters_and_cursor_compose(world: World) -> None:
    client = world.clients["builder"]
    waiting = [world.waiting_run().pk for _ in range(3)]
    world.succeeded_run()
    page = client.get("/api/v1/runs/?status=waiting&page_size=2").json()
    assert ids(page) == waiting[::-1][:2] and "status=waiting" in page["next"]
    assert ids(client.get(page["next"]).json()) == waiting[:1]


def test_steps_page_oldest_first_and_audit_newest_first(world: World) -> None:
    run = world.waiting_run()
    client = world.clients["builder"]
    steps = client.get(f"/api/v1/runs/{run.pk}/steps/?page_size=1").json()
    assert [s["node_id"] for s in steps["results"]] == ["start"]
    assert [s["node_id"] for s in client.get(steps["next"]).json()["results"]] == ["draft"]
    admin = world.clients["admin"]
    audit = admin.get("/api/v1/audit/?page_size=2").json()
    older = admin.get(audit["next"]).json()
    assert ids(audit)[0] > ids(audit)[1] > ids(older)[0]


def test_events_page_by_the_last_event_id_with_a_next_url(world: World) -> None:
    run = world.waiting_run()
    client = world.clients["builder"]
    everything = client.get(f"/api/v1/runs/{run.pk}/events/").json()["results"]
    page = client.get(f"/api/v1/runs/{run.pk}/events/?page_size=2").json()
    assert ids(page) == [e["id"] for e in everything[:2]] and page["has_more"]
    rest = client.get(page["next"]).json()
    assert ids(rest)[0] == everything[2]["id"]
    assert client.get(f"/api/v1/runs/{run.pk}/events/?limit=2").json()["results"] == page["results"]  # older name
    last = client.get(f"/api/v1/runs/{run.pk}/events/?after={everything[-1]['id']}").json()
    assert last["results"] == [] and last["next"] is None and not last["has_more"]


@pytest.mark.parametrize("size", ["0", "-1", "abc", "1.5", "501", "", "9" * 40])
def test_a_page_size_out_of_range_is_a_400_on_every_list(world: World, size: str) -> None:
    run = world.waiting_run()
    paths = ["/api/v1/runs/", f"/api/v1/runs/{run.pk}/steps/", "/api/v1/audit/", "/api/v1/graphs/", "/api/v1/approvals/"]
    for path in paths:
        response = world.clients["admin"].get(path, {"page_size": size})
        assert response.status_code == 400, (path, size, response.status_code)
        assert list(response.json()["error"]["fields"]) == ["page_size"], path
    events = world.clients["admin"].get(f"/api/v1/runs/{run.pk}/events/", {"page_size": size})
    if size not in ("501", ""):  # events allow up to 1000; an empty value means absent there
        assert events.status_code == 400 and "page_size" in events.json()["error"]["fields"]
    assert world.clients["admin"].get(f"/api/v1/runs/{run.pk}/events/", {"page_size": "1001"}).status_code == 400


def test_the_largest_page_size_is_allowed(world: World) -> None:
    world.queued_run()
    assert world.clients["builder"].get("/api/v1/runs/?page_size=500").status_code == 200


@pytest.mark.parametrize("cursor", ["garbage!", base64.b64encode(b"p=abc").decode(), base64.b64encode(b"p=99999999999999999999999").decode()])
def test_a_cursor_that_is_not_one_is_a_400(world: World, cursor: str) -> None:
    response = world.clients["builder"].get("/api/v1/runs/", {"cursor": cursor})
    assert response.status_code == 400 and list(response.json()["error"]["fields"]) == ["cursor"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Each decodes (DRF alone read them all as the first page, or as a page of its own making):
# AAAA is three NUL bytes (no tokens), then an offset or a direction without an id, a
# token DRF never writes, and an id followed by something else.
FORGED = ["AAAA", "AAAAAAAA", b64("o=5"), b64("r=1"), b64("o=0&p=3"), b64("p=3&x=1"), b64("p=3&p=4"), b64("p= 3"), b64("p=3") + "%20"]


@pytest.mark.parametrize("cursor", FORGED)
def test_a_forged_cursor_is_a_400_on_every_cursor_list(world: World, cursor: str) -> None:
    run = world.waiting_run()
    for path in ("/api/v1/runs/", f"/api/v1/runs/{run.pk}/steps/", "/api/v1/audit/"):
        response = world.clients["admin"].get(path, {"cursor": cursor})
        assert response.status_code == 400, (path, cursor, response.status_code)
        assert list(response.json()["error"]["fields"]) == ["cursor"], path


def test_a_truncated_cursor_is_a_400_and_the_cursors_handed_out_still_work(world: World) -> None:
    run = world.waiting_run()
    for _ in range(3):
        world.queued_run()
    admin = world.clients["admin"]
    for path in ("/api/v1/runs/", f"/api/v1/runs/{run.pk}/steps/", "/api/v1/audit/"):
        first = admin.get(path, {"page_size": 1}).json()
        cursor = unquote(first["next"].split("cursor=")[1].split("&")[0])
        assert admin.get(path, {"page_size": 1, "cursor": cursor}).status_code == 200
        second = admin.get(first["next"]).json()
        assert admin.get(second["previous"]).json()["results"] == first["results"], path  # a backward cursor too
        for cut in (cursor[:-3], cursor[:-1], cursor[:2]):
            response = admin.get(path, {"page_size": 1, "cursor": cut})
            assert response.status_code == 400, (path, cut, response.status_code)
