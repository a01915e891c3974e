"""Webhook triggers through HTTP: signed deliveries, refusals, mapping, idempotency, wait mode, rate limit, audit and the management API."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings

from audit.models import AuditEntry
from builder.services import graph_draft_save, graph_publish
from runs.models import Run, Step
from tests.support.bounded import wait_until
from tests.support.specs import continue_local, publish
from tests.support.throttling import rates
from tests.support.webhooks import dumps, order_spec, signed_headers
from triggers.models import WebhookDelivery, WebhookTrigger

pytestmark = pytest.mark.usefixtures("fast_passwords")


@pytest.fixture
def hook(world: Any) -> dict[str, Any]:
    """A signed webhook on a published graph, created through the API by a builder who
    operates it (its runs act as the creator)."""
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    response = world.clients["builder"].post(f"/api/v1/graphs/{version.graph_id}/webhooks/", {"name": "orders"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    path = body["url"].split("testserver", 1)[1]
    return {"id": body["id"], "graph": version.graph_id, "version": version, "path": path, "secret": body["secret"], "body": body}


def post(path: str, body: bytes, **headers: str) -> Any:
    """POST a delivery with a fresh client: no session, no CSRF token."""
    return Client(enforce_csrf_checks=True).post(path, data=body, content_type="application/json", **headers)


def test_signed_delivery_starts_a_run_with_its_source(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 3})
    response = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert response.status_code == 202, response.content
    run = Run.objects.get(pk=response.json()["run"])
    assert run.input == {"x": 3}
    assert run.source == "webhook orders"
    assert run.created_by == world.users["builder"]
    detail = world.clients["builder"].get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["source"] == "webhook orders"
    delivery = WebhookDelivery.objects.get(trigger_id=hook["id"])
    assert (delivery.status_code, delivery.run_id) == (202, run.pk)
    assert AuditEntry.objects.filter(action="webhook.delivery", object_id=str(hook["id"])).count() == 1
    assert AuditEntry.objects.filter(action="webhook.create", object_id=str(hook["id"])).count() == 1


def test_a_delivery_with_a_traceparent_starts_a_run_in_the_senders_trace(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 4})
    sender = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    response = post(hook["path"], body, HTTP_TRACEPARENT=sender, **signed_headers(hook["secret"], body))
    assert response.status_code == 202, response.content
    assert Run.objects.get(pk=response.json()["run"]).traceparent == sender  # its steps' spans join that trace (core.tracing)


@pytest.mark.parametrize(
    ("case", "code"),
    [("missing", "signature_missing"), ("stale", "timestamp_stale"), ("bad", "signature_invalid"), ("not_a_time", "timestamp_invalid")],
)
def test_refused_signatures_answer_401_and_start_nothing(world: Any, hook: dict[str, Any], case: str, code: str) -> None:
    body = dumps({"x": 3})
    headers = {
        "missing": {},
        "stale": signed_headers(hook["secret"], body, timestamp=1_000_000_000),
        "bad": signed_headers("another secret", body),
        "not_a_time": {**signed_headers(hook["secret"], body), "HTTP_X_BALLAST_TIMESTAMP": "soon"},
    }[case]
    response = post(hook["path"], body, **headers)
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == code
    assert not Run.objects.exists()
    delivery = WebhookDelivery.objects.get(trigger_id=hook["id"])
    assert (delivery.status_code, delivery.run_id, delivery.error["code"]) == (401, None, code)
    assert AuditEntry.objects.filter(action="webhook.delivery", data__status=401).count() == 1


def test_unknown_and_disabled_tokens_answer_the_same_404(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 1})
    unknown = post("/api/v1/hooks/no-such-token/", body, **signed_headers(hook["secret"], body))
    world.clients["builder"].patch(f"/api/v1/graphs/{hook['graph']}/webhooks/{hook['id']}/", {"enabled": False}, format="json")
    disabled = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert unknown.status_code == disabled.status_code == 404
    assert unknown.json() == disabled.json() == {"detail": "Not found."}
    assert not Run.objects.exists()


def test_schema_errors_answer_400_with_fields_and_no_run(world: Any, hook: dict[str, Any]) -> None:
    for body, code, field in ((dumps({"x": "three"}), "input_invalid", "input.x"), (dumps({}), "input_invalid", "input"),
                              (b"{not json", "body_invalid", "body"), (dumps([1]), "body_invalid", "body")):
        response = post(hook["path"], body, **signed_headers(hook["secret"], body))
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == code
        assert any(key.startswith(field) for key in error["fields"]), error
    assert not Run.objects.exists()
    assert WebhookDelivery.objects.filter(status_code=400).count() == 4


def test_mapping_takes_fields_from_the_body_and_headers(world: Any) -> None:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    client = world.clients["builder"]
    refused = client.post(f"/api/v1/graphs/{version.graph_id}/webhooks/", {"name": "m", "signed": False, "input_mapping": {"event": "header:X-Event"}}, format="json")
    assert refused.status_code == 400
    assert "input_mapping.x" in refused.json()["error"]["fields"]
    created = client.post(
        f"/api/v1/graphs/{version.graph_id}/webhooks/",
        {"name": "m", "signed": False, "input_mapping": {"x": "/order/lines/0/qty", "event": "header:X-Event"}}, format="json",
    ).json()
    assert created["secret"] is None
    path = created["url"].split("testserver", 1)[1]
    response = post(path, dumps({"order": {"lines": [{"qty": 7}]}, "noise": True}), HTTP_X_EVENT="order.created")
    assert response.status_code == 202, response.content
    assert Run.objects.get(pk=response.json()["run"]).input == {"x": 7, "event": "order.created"}
    missing = post(path, dumps({"order": {}}))
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "input_invalid"


def test_the_same_delivery_id_answers_the_same_run(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 2})
    first = post(hook["path"], body, **signed_headers(hook["secret"], body, **{"X-Ballast-Delivery": "evt-1"}))
    again = post(hook["path"], body, **signed_headers(hook["secret"], body, **{"X-Ballast-Delivery": "evt-1"}))
    keyed = post(hook["path"], body, **signed_headers(hook["secret"], body, **{"Idempotency-Key": "evt-1"}))
    assert first.status_code == again.status_code == keyed.status_code == 202
    assert first.json()["run"] == again.json()["run"] == keyed.json()["run"]
    assert (first.json()["replayed"], again.json()["replayed"]) == (False, True)
    assert Run.objects.count() == 1
    other = dumps({"x": 5})
    reused = post(hook["path"], other, **signed_headers(hook["secret"], other, **{"X-Ballast-Delivery": "evt-1"}))
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "delivery_id_reused"


def test_concurrent_duplicate_deliveries_start_one_run(world: Any, hook: dict[str, Any]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time: the race is PostgreSQL's")
    body = dumps({"x": 4})
    answers: list[Any] = []
    barrier = threading.Barrier(6)

    def deliver() -> None:
        try:
            barrier.wait()
            answers.append(post(hook["path"], body, **signed_headers(hook["secret"], body, **{"X-Ballast-Delivery": "same"})))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [202] * 6
    assert len({a.json()["run"] for a in answers}) == 1
    assert Run.objects.count() == 1


def test_wait_mode_answers_the_output_or_202_when_not_done(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 21})
    pending = post(hook["path"] + "?wait=0.2", body, **signed_headers(hook["secret"], body))
    assert pending.status_code == 202 and pending.json()["status"] == "queued"
    assert post(hook["path"] + "?wait=31", body, **signed_headers(hook["secret"], body)).status_code == 400
    answers: list[Any] = []

    def deliver() -> None:
        try:
            answers.append(post(hook["path"] + "?wait=30", body, **signed_headers(hook["secret"], body, **{"X-Ballast-Delivery": "w"})))
        finally:
            connection.close()

    thread = threading.Thread(target=deliver)
    thread.start()
    run = wait_until(lambda: Run.objects.filter(idempotency_key__endswith=":w").first(), 30, "the delivery's run")
    continue_local(run, list(Step.objects.filter(run=run, status="pending").values_list("pk", flat=True)))
    thread.join()
    assert answers[0].status_code == 200, answers[0].content
    assert answers[0].json()["output"]["y"] == 42
    assert WebhookDelivery.objects.filter(delivery_id="w").get().status_code == 200


def test_deliveries_past_the_rate_answer_429_with_retry_after(world: Any, hook: dict[str, Any]) -> None:
    body = dumps({"x": 1})
    with override_settings(REST_FRAMEWORK=rates(webhook="2/hour")):
        codes = [post(hook["path"], body, **signed_headers(hook["secret"], body)) for _ in range(3)]
    assert [c.status_code for c in codes] == [202, 202, 429]
    assert int(codes[2]["Retry-After"]) > 0
    assert codes[2].json()["error"]["code"] == "throttled"
    assert Run.objects.count() == 2


def test_management_api_is_for_builders(world: Any, hook: dict[str, Any]) -> None:
    base = f"/api/v1/graphs/{hook['graph']}/webhooks/"
    for role in ("viewer", "operator", "approver"):
        assert world.clients[role].get(base).status_code == 403
        assert world.clients[role].post(base, {"name": "x"}, format="json").status_code == 403
        assert world.clients[role].post(f"{base}{hook['id']}/rotate-secret/").status_code == 403
    assert world.clients["anonymous"].get(base).status_code in (401, 403)
    listed = world.clients["builder"].get(base).json()
    assert [w["name"] for w in listed] == ["orders"]
    assert "secret" not in listed[0] and "token_hash" not in listed[0]


def test_rotate_update_deliveries_and_delete(world: Any, hook: dict[str, Any]) -> None:
    client = world.clients["builder"]
    base = f"/api/v1/graphs/{hook['graph']}/webhooks/{hook['id']}/"
    new_secret = client.post(base + "rotate-secret/").json()["secret"]
    body = dumps({"x": 1})
    assert post(hook["path"], body, **signed_headers(hook["secret"], body)).status_code == 401
    assert post(hook["path"], body, **signed_headers(new_secret, body)).status_code == 202
    pinned = client.patch(base, {"version": hook["version"].number}, format="json")
    assert pinned.status_code == 200 and pinned.json()["version"] == hook["version"].number
    assert client.patch(base, {"version": 99}, format="json").json()["error"]["fields"] == {"version": ["No such published version of this graph."]}
    bad = client.patch(base, {"input_mapping": {"event": "/e"}}, format="json")
    assert bad.status_code == 400 and "input_mapping.x" in bad.json()["error"]["fields"]
    deliveries = client.get(base + "deliveries/").json()["results"]
    assert [d["status_code"] for d in deliveries] == [202, 401]
    assert client.delete(base).status_code == 204
    assert not WebhookTrigger.objects.exists()
    assert post(hook["path"], body, **signed_headers(new_secret, body)).status_code == 404
    actions = set(AuditEntry.objects.filter(object_type="webhooktrigger").values_list("action", flat=True))
    assert {"webhook.create", "webhook.rotate_secret", "webhook.update", "webhook.delete", "webhook.delivery"} <= actions


def test_runs_act_as_an_operator_of_the_graph(world: Any, hook: dict[str, Any]) -> None:
    client = world.clients["builder"]
    base = f"/api/v1/graphs/{hook['graph']}/webhooks/"
    refused = client.post(base, {"name": "as-viewer", "run_as": "viewer"}, format="json")
    assert refused.status_code == 400 and "run_as" in refused.json()["error"]["fields"]
    assert client.post(base, {"name": "as-nobody", "run_as": "nobody"}, format="json").json()["error"]["fields"] == {"run_as": ["No such active user."]}
    graph = hook["version"].graph
    graph.operators.add(world.users["operator"])  # the graph names its operators: the group alone no longer counts
    service = client.post(base, {"name": "as-operator", "run_as": "operator", "signed": False}, format="json")
    assert service.status_code == 201, service.content
    path = service.json()["url"].split("testserver", 1)[1]
    run = Run.objects.get(pk=post(path, dumps({"x": 1})).json()["run"])
    assert run.created_by == world.users["operator"]
    graph.operators.remove(world.users["operator"])  # the service user loses its role: deliveries are refused, nothing starts
    lost = post(path, dumps({"x": 1}))
    assert lost.status_code == 403 and lost.json()["error"]["code"] == "run_as_not_allowed"
    assert Run.objects.count() == 1


def test_deliveries_to_unknown_tokens_are_counted_per_address(world: Any) -> None:
    with override_settings(REST_FRAMEWORK=rates(webhook_unknown="2/hour")):
        codes = [post(f"/api/v1/hooks/guess-{n}/", dumps({}), REMOTE_ADDR="192.0.2.7") for n in range(3)]
        elsewhere = post("/api/v1/hooks/guess-x/", dumps({}), REMOTE_ADDR="192.0.2.8")
    assert [c.status_code for c in codes] == [404, 404, 429]
    assert int(codes[2]["Retry-After"]) > 0
    assert elsewhere.status_code == 404


def test_an_unpinned_webhook_runs_the_latest_published_version_and_a_pinned_one_its_own(world: Any, hook: dict[str, Any]) -> None:
    graph = hook["version"].graph
    spec = {**graph.draft, "description": "v2"}
    graph = graph_draft_save(graph=graph, spec=spec, base_revision=graph.draft_revision)
    v2 = graph_publish(graph=graph)
    assert v2.number == 2
    body = dumps({"x": 1})
    latest = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert Run.objects.get(pk=latest.json()["run"]).graph_version == v2
    world.clients["builder"].patch(f"/api/v1/graphs/{hook['graph']}/webhooks/{hook['id']}/", {"version": 1}, format="json")
    pinned = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert Run.objects.get(pk=pinned.json()["run"]).graph_version == hook["version"]


def test_deleting_a_graph_deletes_its_webhooks_even_pinned_ones(world: Any, hook: dict[str, Any]) -> None:
    client = world.clients["builder"]
    client.patch(f"/api/v1/graphs/{hook['graph']}/webhooks/{hook['id']}/", {"version": 1}, format="json")
    deleted = client.delete(f"/api/v1/graphs/{hook['graph']}/")
    assert deleted.status_code == 204, deleted.content
    assert not WebhookTrigger.objects.exists()


def test_a_secret_that_no_key_decrypts_is_refused_with_a_503_that_says_so(world: Any, hook: dict[str, Any]) -> None:
    WebhookTrigger.objects.filter(pk=hook["id"]).update(secret_encrypted="gAAAAA-not-a-fernet-token")
    body = dumps({"x": 1})
    response = post(hook["path"], body, **signed_headers(hook["secret"], body))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "secret_unreadable"
    assert not Run.objects.exists()
