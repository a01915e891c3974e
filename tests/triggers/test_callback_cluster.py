"""Completion callbacks sent by real qclusters: a worker SIGKILLed mid-delivery leaves the delivery to another attempt after its lease, with the same webhook-id, and it is never sent a third time."""
from __future__ import annotations

from typing import Any

import pytest
from standardwebhooks import Webhook

from runs.models import Run, RunStatus
from runs.services import run_start
from tests.support.cluster import WAIT_CEILING, wait_until
from tests.support.specs import publish
from tests.support.world import linear_spec
from triggers.models import CallbackDelivery

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

# The worker's send waits this long for the held receiver: far longer than the kill takes
# (the lease, at least twice this plus a second, is what the second cluster waits out).
SEND_TIMEOUT = 6
ENV = {"BALLAST_OUTBOUND_ALLOW": "127.0.0.1", "BALLAST_CALLBACK_TIMEOUT_SECONDS": str(SEND_TIMEOUT),
       "BALLAST_CALLBACK_LEASE_SECONDS": "3", "BALLAST_CALLBACK_BACKOFF_SECONDS": "0.5"}


def test_a_worker_killed_mid_delivery_is_followed_by_one_resend_with_the_same_webhook_id(world: Any, receiver: Any, cluster_factory: Any) -> None:
    version = publish(linear_spec())
    response = world.clients["builder"].post(f"/api/v1/graphs/{version.graph_id}/callbacks/",
                                             {"name": "notify", "url": receiver.url, "events": ["succeeded"]}, format="json")
    assert response.status_code == 201, response.content
    secret = response.json()["secret"]
    receiver.hold = True  # the first request is recorded, then held: the worker is mid-delivery
    first = cluster_factory("a", workers=1, extra_env=ENV).start()
    first.wait_ready()
    run = run_start(version=version, run_input={"x": 3}, user=world.users["builder"])
    wait_until(lambda: len(receiver.received) == 1, WAIT_CEILING, "the callback's first request", clusters=[first])
    first.kill()  # SIGKILL of the whole process group while the request is in flight
    delivery = CallbackDelivery.objects.get(run=run)
    assert (delivery.status, delivery.attempts) == ("pending", 1) and delivery.leased_by
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    receiver.hold = False
    receiver.release.set()
    second = cluster_factory("b", workers=1, extra_env=ENV).start()
    second.wait_ready()
    wait_until(lambda: CallbackDelivery.objects.get(pk=delivery.pk).status == "delivered", WAIT_CEILING,
               "the delivery to be sent again after the lease", clusters=[second])
    second.wait_recovery_passes(5)  # more claims by due time: nothing is sent again
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert receiver.ids() == [delivery.message_id, delivery.message_id]  # a receiver deduplicates by it
    for request in receiver.received:
        assert Webhook(secret).verify(request["body"], request["headers"])["data"]["run"] == run.pk
    assert CallbackDelivery.objects.count() == 1
