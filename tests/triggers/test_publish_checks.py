"""A publish whose new input schema breaks an enabled webhook that follows the latest version warns and names it."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from graphs.models import Graph
from tests.support.specs import publish
from tests.support.webhooks import order_spec

pytestmark = pytest.mark.usefixtures("fast_passwords")


def _draft(world: Any, graph: Graph, schema: dict[str, Any]) -> None:
    graph.refresh_from_db()
    spec = copy.deepcopy(graph.draft)
    spec["input_schema"] = schema
    saved = world.clients["builder"].patch(f"/api/v1/graphs/{graph.pk}/", {"spec": spec, "base_revision": graph.draft_revision}, format="json")
    assert saved.status_code == 200, saved.content


def _publish(world: Any, graph: Graph) -> Any:
    response = world.clients["builder"].post(f"/api/v1/graphs/{graph.pk}/versions/", {"message": "m"}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


@pytest.fixture
def graph(world: Any) -> Graph:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    return version.graph


def _webhook(world: Any, graph: Graph, **fields: Any) -> int:
    response = world.clients["builder"].post(f"/api/v1/graphs/{graph.pk}/webhooks/", fields, format="json")
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def test_a_new_required_field_warns_about_body_webhooks_following_latest(world: Any, graph: Graph) -> None:
    follows = _webhook(world, graph, name="follows")
    _webhook(world, graph, name="pinned", version=1)
    _webhook(world, graph, name="off", enabled=False)
    _draft(world, graph, {"type": "object", "properties": {"x": {"type": "integer"}, "customer": {"type": "string"}}, "required": ["x", "customer"]})
    # Asked before publishing, the draft's check names the same webhook and publishes nothing.
    before = world.clients["builder"].get(f"/api/v1/graphs/{graph.pk}/publish-check/")
    assert before.status_code == 200
    assert [w["subject"]["name"] for w in before.json()["warnings"]] == ["follows"]
    assert graph.versions.filter(is_test=False).count() == 1
    answer = _publish(world, graph)
    assert answer["number"] == 2
    assert world.clients["builder"].get(f"/api/v1/graphs/{graph.pk}/publish-check/").json() == {"warnings": []}
    assert answer["warnings"] == [{
        "code": "trigger_input",
        "message": "Webhook 'follows' follows the latest version, and version 2 breaks its input: "
                   "Version 2 requires 'customer', which version 1 did not: deliveries need not carry it.",
        "subject": {"kind": "webhook", "id": follows, "name": "follows"},
        "fields": {"input.customer": ["Version 2 requires 'customer', which version 1 did not: deliveries need not carry it."]},
    }]
    # The same content again: no new version, nothing to warn about.
    assert _publish(world, graph)["warnings"] == []


def test_a_mapping_to_a_removed_field_or_missing_a_required_one_warns(world: Any, graph: Graph) -> None:
    _webhook(world, graph, name="mapped", signed=False, input_mapping={"x": "/qty", "event": "header:X-Event"})
    _draft(world, graph, {"type": "object", "properties": {"x": {"type": "integer"}, "sku": {"type": "string"}}, "required": ["x", "sku"]})
    [warning] = _publish(world, graph)["warnings"]
    assert warning["subject"]["name"] == "mapped"
    assert warning["fields"] == {
        "input_mapping.event": ["Maps to 'event', which the input schema of version 2 no longer has."],
        "input_mapping.sku": ["Version 2 requires 'sku', which the mapping does not provide."],
    }


def test_a_compatible_schema_change_publishes_without_warnings(world: Any, graph: Graph) -> None:
    _webhook(world, graph, name="follows")
    _webhook(world, graph, name="mapped", signed=False, input_mapping={"x": "/qty"})
    _draft(world, graph, {"type": "object", "properties": {"x": {"type": "integer"}, "note": {"type": "string"}}, "required": ["x"]})
    answer = _publish(world, graph)
    assert (answer["number"], answer["warnings"]) == (2, [])


def test_a_pinned_test_input_is_kept_in_the_draft_and_out_of_versions(world: Any, graph: Graph) -> None:
    graph.refresh_from_db()
    spec = {**graph.draft, "test_input": {"x": 9}}
    saved = world.clients["builder"].patch(f"/api/v1/graphs/{graph.pk}/", {"spec": spec, "base_revision": graph.draft_revision}, format="json")
    assert saved.status_code == 200
    assert world.clients["builder"].get(f"/api/v1/graphs/{graph.pk}/").json()["spec"]["test_input"] == {"x": 9}
    valid = world.clients["builder"].post("/api/v1/graphs/validate/", spec, format="json").json()
    assert valid["valid"] is True, valid
    published = _publish(world, graph)
    # Test data is no graph logic: same content as version 1, and no version holds it.
    assert published["number"] == 1 and "test_input" not in published["spec"]
