"""Test data pinned per node beside the draft (PUT/DELETE /graphs/<id>/draft/pins/<node>/) and the value
preview (POST /graphs/<id>/draft/preview/) that resolves an expression or template through the engine's sandbox."""
from __future__ import annotations

from typing import Any

from audit.models import AuditEntry
from builder.services import graph_create, graph_publish
from tests.support.bounded import finishes_within
from tests.support.specs import chain, graph, node, transform


def _draft() -> Any:
    spec = graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")],
        chain("start", "double", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    return graph_create(name=spec["name"], draft=spec)


def _pin(client: Any, graph_id: int, node_id: str, body: Any) -> Any:
    return client.put(f"/api/v1/graphs/{graph_id}/draft/pins/{node_id}/", body, format="json")


def test_a_pin_is_kept_beside_the_draft_and_survives_saves_and_publishing(world):
    g = _draft()
    client = world.clients["builder"]
    state = {"x": 4, "input": {"x": 4}, "order": {"total": 12.5, "items": ["a", "b"]}}
    response = _pin(client, g.pk, "double", {"data": state})
    assert response.status_code == 200, response.content[:400]
    assert response.json() == {"pins": {"double": state}}
    detail = client.get(f"/api/v1/graphs/{g.pk}/").json()
    assert detail["pins"] == {"double": state}
    # A draft save does not touch pins, and the pins are not part of the draft document.
    saved = client.patch(f"/api/v1/graphs/{g.pk}/", {"spec": detail["spec"], "base_revision": detail["revision"]}, format="json")
    assert saved.status_code == 200 and saved.json()["pins"] == {"double": state}
    assert "pins" not in saved.json()["spec"] and "draft_pins" not in saved.json()["spec"]
    # Publishing freezes the draft only: the version's spec knows nothing of the pins.
    g.refresh_from_db()
    version = graph_publish(graph=g)
    assert "pins" not in version.spec and state != version.spec.get("state")
    entry = AuditEntry.objects.get(action="graph.pin", object_id=str(g.pk))
    assert entry.actor == "builder" and entry.data["node"] == "double" and "order" not in str(entry.data)
    # Unpin.
    cleared = client.delete(f"/api/v1/graphs/{g.pk}/draft/pins/double/")
    assert cleared.status_code == 200 and cleared.json() == {"pins": {}}
    assert client.get(f"/api/v1/graphs/{g.pk}/").json()["pins"] == {}
    assert AuditEntry.objects.filter(action="graph.unpin", object_id=str(g.pk)).count() == 1


def test_a_bad_pin_is_a_field_error_and_changes_nothing(world):
    g = _draft()
    client = world.clients["builder"]
    for body, field in (({"data": [1, 2]}, "data"), ({}, "data"), ({"data": {"t": "a\u0000b"}}, "data"),
                        ({"data": {"big": "x" * (300 * 1024)}}, "data")):
        response = _pin(client, g.pk, "double", body)
        assert response.status_code == 400, (body.keys(), response.content[:300])
        assert field in response.json()["error"]["fields"], response.json()
    assert _pin(client, g.pk, "nope", {"data": {}}).status_code == 404
    assert _pin(world.clients["viewer"], g.pk, "double", {"data": {}}).status_code == 403
    g.refresh_from_db()
    assert g.draft_pins == {}


def _preview(client: Any, graph_id: int, body: Any) -> Any:
    return client.post(f"/api/v1/graphs/{graph_id}/draft/preview/", body, format="json")


def test_the_preview_resolves_expressions_and_templates_as_a_run_would(world):
    g = _draft()
    client = world.clients["builder"]
    state = {"x": 4, "input": {"x": 4}, "order": {"total": 12.5, "items": ["a", "b"]}}
    body = _preview(client, g.pk, {"kind": "expression", "source": "order.total * 2 > x", "state": state}).json()
    assert body == {"ok": True, "value": True, "type": "boolean", "display": "true", "truncated": False}
    body = _preview(client, g.pk, {"kind": "expression", "source": "len(order['items'])", "state": state}).json()
    assert body["ok"] and body["value"] == 2 and body["type"] == "number"
    body = _preview(client, g.pk, {"kind": "template", "source": "Total {{ order.total }} for {{ input.x }}", "state": state}).json()
    assert body["ok"] and body["value"] == "Total 12.5 for 4" and body["display"] == "Total 12.5 for 4" and body["type"] == "text"
    # Errors say what and where: an unknown name (with the name), a syntax error (with the column).
    body = _preview(client, g.pk, {"kind": "expression", "source": "x + totl", "state": state}).json()
    assert body["ok"] is False and body["error"]["code"] == "unknown_name" and body["error"]["name"] == "totl"
    assert (body["error"]["line"], body["error"]["column"]) == (1, 5)  # where: the name's place in the source
    assert "totl" in body["error"]["message"]
    body = _preview(client, g.pk, {"kind": "template", "source": "Hi {{ x + }}", "state": state}).json()
    assert body["ok"] is False and body["error"]["code"] == "syntax" and body["error"]["line"] == 1
    body = _preview(client, g.pk, {"kind": "expression", "source": "x / 0", "state": state}).json()
    assert body["ok"] is False and "zero" in body["error"]["message"]


def test_a_hostile_preview_is_refused_or_cut_off_within_the_sandbox_bound(world):
    g = _draft()
    client = world.clients["builder"]
    state = {"s": "x", "n": 10}
    for source in ("s * 10**9", "9**9**9", "[[1] * 10000 for _ in range(10000)]", "s.ljust(10**9)", "().__class__"):
        with finishes_within(30, what=f"the preview of {source}"):
            response = _preview(client, g.pk, {"kind": "expression", "source": source, "state": state})
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        assert body["ok"] is False and body["error"]["code"] in {"limit", "timeout", "memory", "forbidden", "syntax", "type"}, (source, body)
    with finishes_within(30, what="a template that loops too long"):
        response = _preview(client, g.pk, {"kind": "template", "source": "{% for i in range(100000) %}{% for j in range(100000) %}.{% endfor %}{% endfor %}", "state": state})
    assert response.status_code == 200 and response.json()["ok"] is False


def test_a_malformed_preview_request_is_a_400_with_field_errors(world):
    g = _draft()
    client = world.clients["builder"]
    for body, field in (
        ({"kind": "sql", "source": "1", "state": {}}, "kind"),
        ({"kind": "expression", "source": "", "state": {}}, "source"),
        ({"kind": "expression", "state": {}}, "source"),
        ({"kind": "expression", "source": "1", "state": [1]}, "state"),
        ({"kind": "expression", "source": "1"}, "state"),
    ):
        response = _preview(client, g.pk, body)
        assert response.status_code == 400, (body, response.content[:300])
        assert field in response.json()["error"]["fields"], response.json()
    assert _preview(client, 999999, {"kind": "expression", "source": "1", "state": {}}).status_code == 404
    assert _preview(world.clients["viewer"], g.pk, {"kind": "expression", "source": "1", "state": {}}).status_code == 403
