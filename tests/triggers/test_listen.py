"""Listening for a test event: the next delivery's mapped input is captured once; an enabled webhook still starts its run, a disabled one starts none."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from audit.models import AuditEntry
from runs.models import Run
from tests.support.specs import publish
from tests.support.webhooks import dumps, order_spec, signed_headers
from triggers.models import WebhookDelivery, WebhookTrigger

pytestmark = pytest.mark.usefixtures("fast_passwords")


def _hook(world: Any, **fields: Any) -> dict[str, Any]:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    response = world.clients["builder"].post(f"/api/v1/graphs/{version.graph_id}/webhooks/", {"name": "orders", **fields}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    base = f"/api/v1/graphs/{version.graph_id}/webhooks/{body['id']}/"
    return {"id": body["id"], "base": base, "path": body["url"].split("testserver", 1)[1], "secret": body["secret"]}


def post(path: str, body: bytes, **headers: str) -> Any:
    return Client(enforce_csrf_checks=True).post(path, data=body, content_type="application/json", **headers)


def test_a_listen_captures_the_next_delivery_and_the_run_still_starts(world: Any) -> None:
    hook = _hook(world, input_mapping={"x": "/order/qty", "event": "header:X-Event"})
    client = world.clients["builder"]
    before = dumps({"order": {"qty": 1}})
    assert post(hook["path"], before, **signed_headers(hook["secret"], before)).status_code == 202
    opened = client.post(hook["base"] + "listen/", {"seconds": 60}, format="json")
    assert opened.status_code == 200, opened.content
    after = opened.json()["after"]
    assert opened.json()["listening"] is True and opened.json()["listening_until"]
    assert client.get(hook["base"]).json()["listening_until"] is not None
    waiting = client.get(hook["base"] + f"listen/?after={after}").json()
    assert (waiting["listening"], waiting["delivery"]) == (True, None)
    body = dumps({"order": {"qty": 5}, "noise": 1})
    answer = post(hook["path"], body, **signed_headers(hook["secret"], body, **{"X-Event": "order.created"}))
    assert answer.status_code == 202, answer.content
    assert Run.objects.get(pk=answer.json()["run"]).input == {"x": 5, "event": "order.created"}
    state = client.get(hook["base"] + f"listen/?after={after}").json()
    assert state["listening"] is False and state["listening_until"] is None
    assert state["delivery"]["payload"] == {"x": 5, "event": "order.created"}
    assert state["delivery"]["run"] == answer.json()["run"]
    # One delivery per listen: the next one is not captured, and earlier ones kept no body.
    again = dumps({"order": {"qty": 6}})
    post(hook["path"], again, **signed_headers(hook["secret"], again))
    assert WebhookDelivery.objects.filter(trigger_id=hook["id"], payload__isnull=False).count() == 1
    assert AuditEntry.objects.filter(action="webhook.listen", object_id=str(hook["id"])).count() == 1
    assert AuditEntry.objects.filter(action="webhook.delivery", data__captured=True).count() == 1


def test_a_disabled_webhook_that_listens_captures_without_a_run(world: Any) -> None:
    hook = _hook(world, enabled=False)
    client = world.clients["builder"]
    body = dumps({"x": 3})
    assert post(hook["path"], body, **signed_headers(hook["secret"], body)).status_code == 404
    after = client.post(hook["base"] + "listen/", format="json").json()["after"]
    # An unsigned delivery is refused as always and does not take the listen.
    assert post(hook["path"], body).status_code == 401
    answer = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"run": None, "status": "captured", "replayed": False}
    assert not Run.objects.exists()
    assert client.get(hook["base"] + f"listen/?after={after}").json()["delivery"]["payload"] == {"x": 3}
    # The listen is over: disabled answers 404 again.
    assert post(hook["path"], body, **signed_headers(hook["secret"], body)).status_code == 404


def test_an_input_the_schema_refuses_is_captured_and_refused(world: Any) -> None:
    hook = _hook(world)
    after = world.clients["builder"].post(hook["base"] + "listen/", format="json").json()["after"]
    body = dumps({"x": "three"})
    answer = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "input_invalid"
    captured = world.clients["builder"].get(hook["base"] + f"listen/?after={after}").json()["delivery"]
    assert (captured["status_code"], captured["payload"], captured["run"]) == (400, {"x": "three"}, None)


def test_stop_and_expiry_end_a_listen(world: Any) -> None:
    hook = _hook(world, enabled=False)
    client = world.clients["builder"]
    after = client.post(hook["base"] + "listen/", format="json").json()["after"]
    assert client.delete(hook["base"] + "listen/").status_code == 204
    assert client.get(hook["base"] + f"listen/?after={after}").json() == {"listening_until": None, "listening": False, "after": after, "delivery": None}
    body = dumps({"x": 3})
    assert post(hook["path"], body, **signed_headers(hook["secret"], body)).status_code == 404
    client.post(hook["base"] + "listen/", {"seconds": 1}, format="json")
    # A window in the past (database clock) is closed: nothing captured, 404 as disabled.
    WebhookTrigger.objects.filter(pk=hook["id"]).update(listening_until="2000-01-01T00:00:00Z")
    assert post(hook["path"], body, **signed_headers(hook["secret"], body)).status_code == 404
    # Unsigned, too: a lapsed window says nothing about the webhook (404, not 401).
    assert post(hook["path"], body).json() == {"detail": "Not found."}
    assert not WebhookDelivery.objects.filter(payload__isnull=False).exists()


def test_listen_is_for_builders_and_checks_its_window(world: Any) -> None:
    hook = _hook(world)
    for role in ("viewer", "operator", "approver"):
        assert world.clients[role].post(hook["base"] + "listen/", format="json").status_code == 403
        assert world.clients[role].get(hook["base"] + "listen/?after=0").status_code == 403
    client = world.clients["builder"]
    for seconds in (0, 601, "soon"):
        refused = client.post(hook["base"] + "listen/", {"seconds": seconds}, format="json")
        assert refused.status_code == 400 and "seconds" in refused.json()["error"]["fields"], refused.content
    missing = client.get(hook["base"] + "listen/")
    assert missing.status_code == 400 and "after" in missing.json()["error"]["fields"]
    assert client.post(f"/api/v1/graphs/{hook['id'] + 999}/webhooks/{hook['id']}/listen/", format="json").status_code == 404


def test_concurrent_deliveries_during_a_listen_capture_one(world: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time: the race is PostgreSQL's")
    hook = _hook(world, signed=False, enabled=False)
    world.clients["builder"].post(hook["base"] + "listen/", format="json")
    barrier = threading.Barrier(6)
    codes: list[int] = []

    def deliver(n: int) -> None:
        try:
            barrier.wait()
            codes.append(post(hook["path"], dumps({"x": n})).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [202] + [404] * 5
    assert WebhookDelivery.objects.filter(payload__isnull=False).count() == 1
