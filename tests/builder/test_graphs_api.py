"""Graphs through the API: drafts, publish (validation issues as field errors), versions,
diff, validate without saving, import and export."""
from __future__ import annotations

import pytest

from audit.models import AuditEntry
from graphs.models import Graph, GraphVersion
from tests.support.specs import node, transform
from tests.support.world import World, linear_spec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_draft_lifecycle_publish_versions_and_diff(world: World) -> None:
    client = world.clients["builder"]
    spec = linear_spec()
    broken = {**spec, "edges": spec["edges"][:1]}  # 'double' can no longer reach the end
    created = client.post("/api/v1/graphs/", {"name": "pipeline", "description": "d", "draft": broken, "approvers": ["approver"]}, format="json")
    assert created.status_code == 201, created.content
    graph = created.json()
    assert graph["latest_version"] is None and graph["approvers"] == ["approver"] and graph["created_by"] == "builder"

    invalid = client.post(f"/api/v1/graphs/{graph['id']}/versions/")
    assert invalid.status_code == 400
    error = invalid.json()["error"]
    assert error["code"] == "graph_invalid" and error["issues"]
    assert any(i["code"] == "dead_end" and i["node_id"] == "double" for i in error["issues"])
    double = [n["id"] for n in broken["nodes"]].index("double")
    # Keyed by the validator's path from the spec root (a pseudo-field like "outgoing" is the node's own).
    assert f"nodes[{double}]" in error["fields"] and all(i["path"] in error["fields"] for i in error["issues"])
    assert not GraphVersion.objects.filter(graph_id=graph["id"]).exists()

    assert client.patch(f"/api/v1/graphs/{graph['id']}/", {"draft": spec, "base_revision": 1}, format="json").status_code == 200
    v1 = client.post(f"/api/v1/graphs/{graph['id']}/versions/")
    assert v1.status_code == 201 and v1.json()["number"] == 1
    same = client.post(f"/api/v1/graphs/{graph['id']}/versions/")
    assert same.status_code == 200 and same.json()["number"] == 1  # same content: the existing version

    changed = {**spec, "nodes": [n if n["id"] != "double" else transform("double", y="x * 3") for n in spec["nodes"]]}
    changed["nodes"].append(node("note", "transform", config={"set": {"z": "1"}}))
    changed["edges"] = [{"source": "start", "target": "double"}, {"source": "double", "target": "note"}, {"source": "note", "target": "end"}]
    assert client.patch(f"/api/v1/graphs/{graph['id']}/", {"spec": changed, "base_revision": 2}, format="json").status_code == 200
    assert client.post(f"/api/v1/graphs/{graph['id']}/versions/").json()["number"] == 2
    listed = client.get(f"/api/v1/graphs/{graph['id']}/versions/").json()
    assert [v["number"] for v in listed["results"]] == [2, 1]
    assert client.get(f"/api/v1/graphs/{graph['id']}/versions/1/").json()["spec"]["nodes"][1]["config"]["set"]["y"] == "x * 2"

    diff = client.get(f"/api/v1/graphs/{graph['id']}/diff/?from=1&to=2").json()
    assert diff["from"] == 1 and diff["to"] == 2 and diff["identical"] is False
    assert diff["nodes"]["added"] == ["note"] and diff["nodes"]["removed"] == []
    assert [c["id"] for c in diff["nodes"]["changed"]] == ["double"]
    assert diff["nodes"]["changed"][0]["fields"]["config"]["to"]["set"]["y"] == "x * 3"
    assert {(e["source"], e["target"]) for e in diff["edges"]["added"]} == {("double", "note"), ("note", "end")}
    assert {(e["source"], e["target"]) for e in diff["edges"]["removed"]} == {("double", "end")}
    assert client.get(f"/api/v1/graphs/{graph['id']}/diff/?from=1&to=9").status_code == 404
    assert client.get(f"/api/v1/graphs/{graph['id']}/diff/?from=x").status_code == 400

    publishes = AuditEntry.objects.filter(action="graph.publish", scope=f"graph:{graph['id']}").order_by("seq")
    assert [(e.actor, e.actor_type, e.data["number"]) for e in publishes] == [("builder", "token", 1), ("builder", "token", 2)]


def test_name_conflicts_and_deleting_a_graph_that_runs_are_pinned_to(world: World) -> None:
    client = world.clients["builder"]
    taken = world.approval_version.graph.name
    conflict = client.post("/api/v1/graphs/", {"name": taken}, format="json")
    assert conflict.status_code == 409 and conflict.json()["error"]["fields"] == {"name": ["A graph with this name already exists."]}
    other = client.post("/api/v1/graphs/", {"name": "other"}, format="json").json()
    assert client.patch(f"/api/v1/graphs/{other['id']}/", {"name": taken}, format="json").status_code == 409
    unknown = client.post("/api/v1/graphs/", {"name": "x", "approvers": ["nobody"]}, format="json")
    assert unknown.status_code == 400 and "approvers" in unknown.json()["error"]["fields"]
    world.waiting_run()
    protected = client.delete(f"/api/v1/graphs/{world.approval_version.graph_id}/")
    assert protected.status_code == 409 and protected.json()["error"]["code"] == "graph_has_runs"
    assert client.delete(f"/api/v1/graphs/{other['id']}/").status_code == 204
    assert not Graph.objects.filter(pk=other["id"]).exists()


def test_validate_saves_nothing_and_reports_structured_issues(world: World) -> None:
    client = world.clients["viewer"]
    before = Graph.objects.count()
    good = client.post("/api/v1/graphs/validate/", linear_spec(), format="json").json()
    assert (good["valid"], good["errors"], good["warnings"]) == (True, [], [])
    assert set(good["handles"]) == {"start", "double", "end"} and good["estimate"]["costliest_path"]["nodes"] == ["start", "double", "end"]
    bad = client.post("/api/v1/graphs/validate/", {"name": "x", "nodes": [{"id": "a", "kind": "warp"}]}, format="json").json()
    assert bad["valid"] is False and {e["code"] for e in bad["errors"]} >= {"unknown_kind"}
    assert set(bad["errors"][0]) == {"node_id", "node", "field", "path", "message", "code"}
    assert client.post("/api/v1/graphs/validate/", [1, 2], format="json").status_code == 400
    assert Graph.objects.count() == before


def test_export_then_import_round_trips(world: World) -> None:
    builder = world.clients["builder"]
    gid = world.approval_version.graph_id
    exported = builder.get(f"/api/v1/graphs/{gid}/export/").json()
    assert exported == world.approval_version.spec
    assert builder.get(f"/api/v1/graphs/{gid}/export/?version=draft").json()["name"] == exported["name"]
    assert builder.get(f"/api/v1/graphs/{gid}/export/?version=7").status_code == 404
    assert builder.get(f"/api/v1/graphs/{gid}/export/?version=latest").status_code == 400
    copy = {**exported, "name": "imported copy"}
    imported = builder.post("/api/v1/graphs/import/", copy, format="json")
    assert imported.status_code == 201 and imported.json()["version"] == 1 and imported.json()["created"] is True
    again = builder.post("/api/v1/graphs/import/", copy, format="json")
    assert again.status_code == 200 and again.json()["created"] is False
    new = GraphVersion.objects.get(graph__name="imported copy")
    assert new.content_hash != "" and new.spec["nodes"] == exported["nodes"]
    invalid = builder.post("/api/v1/graphs/import/", {"name": "broken", "nodes": []}, format="json")
    assert invalid.status_code == 400 and invalid.json()["error"]["code"] == "graph_invalid"
    assert not Graph.objects.filter(name="broken").exists()
