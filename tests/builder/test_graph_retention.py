"""A graph's retention (``retention_days``) through the API: set, cleared, audited; a bad
value refused with the field named, and at the service too."""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from audit.models import AuditEntry
from builder.services import graph_update
from graphs.models import MAX_RETENTION_DAYS, Graph
from tests.support.world import World, linear_spec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_retention_is_set_at_creation_changed_cleared_and_audited(world: World) -> None:
    client = world.clients["builder"]
    created = client.post("/api/v1/graphs/", {"name": "kept", "draft": linear_spec(), "retention_days": 30}, format="json")
    assert created.status_code == 201, created.content
    graph_id = created.json()["id"]
    assert created.json()["retention_days"] == 30
    changed = client.patch(f"/api/v1/graphs/{graph_id}/", {"retention_days": 7}, format="json")
    assert changed.status_code == 200 and changed.json()["retention_days"] == 7
    cleared = client.patch(f"/api/v1/graphs/{graph_id}/", {"retention_days": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["retention_days"] is None
    assert Graph.objects.get(pk=graph_id).retention_days is None
    entries = AuditEntry.objects.filter(scope=f"graph:{graph_id}", action="graph.retention").order_by("seq")
    assert [(e.data["previous"], e.data["retention_days"]) for e in entries] == [(30, 7), (7, None)]
    # A PATCH without the field leaves it as it is.
    client.patch(f"/api/v1/graphs/{graph_id}/", {"retention_days": 5}, format="json")
    assert client.patch(f"/api/v1/graphs/{graph_id}/", {"description": "x"}, format="json").json()["retention_days"] == 5


@pytest.mark.parametrize("value", [0, -3, "soon", 1.5, MAX_RETENTION_DAYS + 1, True])
def test_an_invalid_retention_is_refused_with_the_field_named(world: World, value: object) -> None:
    client = world.clients["builder"]
    graph_id = client.post("/api/v1/graphs/", {"name": "g", "draft": linear_spec()}, format="json").json()["id"]
    refused = client.patch(f"/api/v1/graphs/{graph_id}/", {"retention_days": value}, format="json")
    assert refused.status_code == 400, refused.content
    assert "retention_days" in refused.json()["error"]["fields"]
    created = client.post("/api/v1/graphs/", {"name": "h", "draft": linear_spec(), "retention_days": value}, format="json")
    assert created.status_code == 400 and "retention_days" in created.json()["error"]["fields"]
    assert Graph.objects.get(pk=graph_id).retention_days is None and not Graph.objects.filter(name="h").exists()


def test_the_service_refuses_a_bad_retention_too(world: World) -> None:
    graph = Graph.objects.create(name="direct", draft=linear_spec())
    with pytest.raises(ValidationError) as refused:
        graph_update(graph=graph, retention_days=0)
    assert "retention_days" in refused.value.message_dict
