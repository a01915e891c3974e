"""Completion callbacks against a real HTTP receiver on 127.0.0.1: Standard Webhooks signatures, one committed delivery per event, retries with backoff, undeliverable ones redelivered, a run's own callback, bad input and audit."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from audit.models import AuditEntry
from runs.models import Run, Step
from tests.support import engine
from tests.support.leases import begun, dead_owner, pay_version, run_at_pay
from tests.support.specs import publish, run_local
from tests.support.world import approval_spec, failing_spec, linear_spec
from triggers import callback_sending
from triggers.callback_sending import delivery_send_next, signed_headers
from triggers.models import CallbackDelivery, CompletionCallback

pytestmark = pytest.mark.usefixtures("fast_passwords")

WORKER = "tester:1:1"


def test_signatures_match_the_standard_webhooks_example_vector() -> None:
    # The example of the Standard Webhooks specification (its reference libraries' tests).
    headers = signed_headers("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                             datetime.fromtimestamp(1614265330, UTC), b'{"test": 2432232314}')
    assert headers == {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
                       "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}


def verified(secret: str, request: dict[str, Any]) -> dict[str, Any]:
    """The body of ``request`` once its signature checks, twice: by the standardwebhooks
    package as a receiver uses it, and by hand (HMAC-SHA256 of "id.timestamp.body" keyed by
    the base64 bytes after ``whsec_``)."""
    headers, body = request["headers"], request["body"]
    payload = Webhook(secret).verify(body, headers)
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == expected
    return payload


def create(world: Any, graph_id: int, **fields: Any) -> Any:
    body = {"name": "notify", "events": ["succeeded", "failed", "waiting", "parked"], **fields}
    return world.clients["builder"].post(f"/api/v1/graphs/{graph_id}/callbacks/", body, format="json")


@pytest.fixture
def hooked(world: Any, receiver: Any) -> dict[str, Any]:
    """A published linear graph with a callback to the receiver, made through the API."""
    version = publish(linear_spec())
    response = create(world, version.graph_id, url=receiver.url)
    assert response.status_code == 201, response.content
    return {"version": version, "graph": version.graph_id, **response.json()}


def send_all(now: datetime | None = None) -> list[int]:
    """Send every delivery due at ``now`` (default the database's now), one claim each."""
    now = now or engine.db_now()
    sent = []
    while (delivered := delivery_send_next(now, WORKER)) is not None:
        sent.append(delivered)
    return sent


def test_a_succeeded_run_is_delivered_once_signed_as_standard_webhooks_do(world: Any, receiver: Any, hooked: dict[str, Any]) -> None:
    run = run_local(hooked["version"], {"x": 4})
    assert run.status == "succeeded"
    delivery = CallbackDelivery.objects.get(run=run)  # committed with the run's end
    assert (delivery.status, delivery.event, delivery.attempts) == ("pending", "succeeded", 0)
    assert send_all() == [delivery.pk]
    assert len(receiver.received) == 1
    payload = verified(hooked["secret"], receiver.received[0])
    assert payload["type"] == "run.succeeded"
    assert payload["data"]["run"] == run.pk and payload["data"]["output"] == run.output and payload["data"]["graph"] == hooked["graph"]
    assert receiver.received[0]["headers"]["webhook-id"] == delivery.message_id
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.next_due_at) == ("delivered", 1, 200, None)
    assert send_all() == [] and len(receiver.received) == 1  # never sent again
    assert AuditEntry.objects.filter(action="callback.create", object_id=str(hooked["id"])).count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():  # the unique (callback, event) guard
        CallbackDelivery.objects.create(callback_id=hooked["id"], event="succeeded", event_key=delivery.event_key, message_id="msg_x", payload={})


def test_500s_are_retried_with_backoff_under_the_same_webhook_id(world: Any, receiver: Any, hooked: dict[str, Any], settings: Any) -> None:
    settings.BALLAST_CALLBACK_BACKOFF_SECONDS = 10
    receiver.answers = [500, 503]
    run = run_local(hooked["version"], {"x": 1})
    delivery = CallbackDelivery.objects.get(run=run)
    now = engine.db_now()
    assert send_all(now) == [delivery.pk]  # the 500: due again later, not now
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
    assert "HTTP 500" in delivery.last_error and "receiver says no" in delivery.last_error
    assert delivery.next_due_at >= now + timedelta(seconds=10)
    later = delivery.next_due_at
    assert send_all(later) == [delivery.pk]  # the 503: the wait doubles
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and delivery.next_due_at >= later + timedelta(seconds=20)
    assert send_all(delivery.next_due_at) == [delivery.pk]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 3, "")
    assert receiver.ids() == [delivery.message_id] * 3
    bodies = {r["body"] for r in receiver.received}
    assert len(bodies) == 1  # the same bytes on every attempt
    for request in receiver.received:
        verified(hooked["secret"], request)


def test_a_claimed_delivery_is_not_sent_by_a_second_worker_while_its_lease_holds(world: Any, receiver: Any, hooked: dict[str, Any]) -> None:
    run = run_local(hooked["version"], {"x": 1})
    now = engine.db_now()
    claimed = callback_sending._claim(now, "dead:1:1")  # a worker that claims, then dies before sending
    assert claimed is not None
    assert delivery_send_next(now, WORKER) is None and receiver.received == []
    after_lease = now + timedelta(seconds=callback_sending.lease_seconds() + 1)
    assert delivery_send_next(after_lease, WORKER) == claimed.delivery_id
    delivery = CallbackDelivery.objects.get(run=run)
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    # The dead worker's late settle is fenced off: it changes nothing.
    assert not callback_sending._settle(claimed, callback_sending.Outcome(False, error="late"), after_lease)
    assert CallbackDelivery.objects.get(pk=delivery.pk).status == "delivered"


def test_undeliverable_ones_are_listed_and_redelivered_by_an_operator(world: Any, receiver: Any, hooked: dict[str, Any], settings: Any) -> None:
    settings.BALLAST_CALLBACK_MAX_ATTEMPTS = 2
    settings.BALLAST_CALLBACK_BACKOFF_SECONDS = 0
    receiver.answers = [500, 500]
    run = run_local(hooked["version"], {"x": 1})
    send_all()
    send_all(CallbackDelivery.objects.get(run=run).next_due_at)  # the retry (no backoff but the first send's own time)
    delivery = CallbackDelivery.objects.get(run=run)
    assert (delivery.status, delivery.attempts) == ("failed", 2) and delivery.last_error.startswith("HTTP 500")
    base = f"/api/v1/graphs/{hooked['graph']}/callback-deliveries/"
    listed = world.clients["builder"].get(f"{base}?status=failed").json()["results"]
    assert [(d["id"], d["status"], d["last_error"][:8]) for d in listed] == [(delivery.pk, "failed", "HTTP 500")]
    assert world.clients["viewer"].post(f"{base}{delivery.pk}/redeliver/").status_code == 403
    response = world.clients["builder"].post(f"{base}{delivery.pk}/redeliver/")
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["attempts"]) == ("pending", 0)
    again = world.clients["builder"].post(f"{base}{delivery.pk}/redeliver/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_pending"
    send_all()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 1)
    assert receiver.ids() == [delivery.message_id] * 3
    entry = AuditEntry.objects.get(action="callback.redeliver")
    assert entry.actor == "builder" and entry.data["delivery"] == delivery.pk and entry.data["previous_status"] == "failed"


def test_a_run_started_with_a_callback_url_calls_it_back_with_its_own_secret(world: Any, receiver: Any) -> None:
    version = publish(linear_spec())
    version.graph.operators.add(world.users["operator"])
    client = world.clients["operator"]
    with engine.local_mode() as queue:
        response = client.post("/api/v1/runs/", {"graph": version.graph_id, "input": {"x": 5}, "callback_url": receiver.url}, format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        engine.drive_local(body["id"], queue=queue, timeout=30)
    assert body["callback_secret"].startswith("whsec_") and body["callback"] > 0
    callback = CompletionCallback.objects.get(pk=body["callback"])
    assert (callback.run_id, callback.events) == (body["id"], ["succeeded", "failed"])
    send_all()
    payload = verified(body["callback_secret"], receiver.received[0])
    assert payload["type"] == "run.succeeded" and payload["data"]["run"] == body["id"] and payload["data"]["output"]["y"] == 10
    # A run's own callback is not the graph's: the next run of the graph calls nobody.
    run_local(version, {"x": 1})
    assert send_all() == [] and len(receiver.received) == 1


def test_a_refused_callback_url_at_start_is_a_400_that_starts_nothing(world: Any, receiver: Any, settings: Any) -> None:
    version = publish(linear_spec())
    version.graph.operators.add(world.users["operator"])
    client = world.clients["operator"]
    before = Run.objects.count()
    for url, word in (("not a url", "valid"), ("http://10.1.2.3/hook", "outbound guard")):
        response = client.post("/api/v1/runs/", {"graph": version.graph_id, "input": {"x": 5}, "callback_url": url}, format="json")
        assert response.status_code == 400, response.content
        assert word in response.json()["error"]["fields"]["callback_url"][0]
    bad_events = client.post("/api/v1/runs/", {"graph": version.graph_id, "input": {"x": 5}, "callback_url": receiver.url,
                                                "callback_events": ["exploded"]}, format="json")
    assert bad_events.status_code == 400 and "callback_events" in bad_events.json()["error"]["fields"]
    assert Run.objects.count() == before


def test_bad_callbacks_are_refused_at_save_with_the_field_named(world: Any, receiver: Any) -> None:
    graph_id = publish(linear_spec()).graph_id
    cases = [
        ({"url": "ftp://example.com/x"}, "url", "valid"),
        ({"url": "http://169.254.169.254/latest"}, "url", "outbound guard"),
        ({"url": "http://10.0.0.5/x"}, "url", "outbound guard"),
        ({"url": receiver.url, "events": []}, "events", "non-empty"),
        ({"url": receiver.url, "events": ["succeeded", "exploded"]}, "events", "non-empty"),
    ]
    for fields, field, words in cases:
        response = create(world, graph_id, **fields)
        assert response.status_code == 400, (fields, response.content)
        assert words in response.json()["error"]["fields"][field][0], response.json()
    assert create(world, graph_id, url=receiver.url).status_code == 201
    assert create(world, graph_id, url=receiver.url).json()["error"]["fields"]["name"]
    assert world.clients["operator"].post(f"/api/v1/graphs/{graph_id}/callbacks/", {"name": "x", "url": receiver.url, "events": ["failed"]},
                                          format="json").status_code == 403
    assert CompletionCallback.objects.count() == 1


def test_rotate_and_delete_are_audited_and_the_new_secret_signs(world: Any, receiver: Any, hooked: dict[str, Any]) -> None:
    base = f"/api/v1/graphs/{hooked['graph']}/callbacks/{hooked['id']}/"
    listed = world.clients["builder"].get(f"/api/v1/graphs/{hooked['graph']}/callbacks/").json()
    assert [c["id"] for c in listed] == [hooked["id"]] and "secret" not in listed[0]
    rotated = world.clients["builder"].post(f"{base}rotate-secret/").json()["secret"]
    assert rotated != hooked["secret"]
    run_local(hooked["version"], {"x": 2})
    send_all()
    verified(rotated, receiver.received[0])
    with pytest.raises(WebhookVerificationError):
        Webhook(hooked["secret"]).verify(receiver.received[0]["body"], receiver.received[0]["headers"])
    patched = world.clients["builder"].patch(base, {"events": ["failed"], "url": "http://10.9.9.9/"}, format="json")
    assert patched.status_code == 400 and "url" in patched.json()["error"]["fields"]
    assert world.clients["builder"].patch(base, {"events": ["failed"]}, format="json").json()["events"] == ["failed"]
    assert world.clients["builder"].delete(base).status_code == 204
    actions = list(AuditEntry.objects.filter(object_id=str(hooked["id"]), action__startswith="callback.").values_list("action", flat=True).order_by("id"))
    assert actions == ["callback.create", "callback.rotate_secret", "callback.update", "callback.delete"]


def test_a_gate_a_failure_and_a_park_each_make_one_delivery(world: Any, receiver: Any) -> None:
    gate_version = publish(approval_spec())
    assert create(world, gate_version.graph_id, url=receiver.url, name="gate").status_code == 201
    waiting = run_local(gate_version, {"name": "Ada"})
    assert waiting.status == "waiting"
    failing = publish(failing_spec())
    assert create(world, failing.graph_id, url=receiver.url, name="fail").status_code == 201
    failed = run_local(failing, {"x": 1, "zero": 0})
    assert failed.status == "failed"
    unsafe = pay_version(unsafe=True)
    assert create(world, unsafe.graph_id, url=receiver.url, name="park").status_code == 201
    parked_run, pay = run_at_pay(unsafe)
    begun(engine.step_claim(pay.pk, dead_owner()))
    with engine.local_mode():
        engine.recover_once()
        engine.recover_once()  # a second pass parks nothing again
    assert Step.objects.get(pk=pay.pk).status == "parked"
    kinds = {(d.run_id, d.event) for d in CallbackDelivery.objects.all()}
    assert kinds == {(waiting.pk, "waiting"), (failed.pk, "failed"), (parked_run.pk, "parked")}
    send_all()
    got = {p["type"]: p["data"] for p in (json.loads(r["body"]) for r in receiver.received)}
    assert got["run.waiting"]["node_id"] == "review" and got["run.waiting"]["approval"] == world.approval_of(waiting).pk
    assert got["run.failed"]["error"]["code"] and got["run.parked"]["node_id"] == "pay"
