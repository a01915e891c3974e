"""The builder's server side through the API: catalogues, validation with handles and
estimates, the expression checker, optimistic drafts, publish/restore/duplicate/delete,
sticky notes in diffs, import/export round trips, and testing one node."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from audit.models import AuditEntry
from graphs.models import Graph, GraphVersion
from graphs.spec import GraphSpec
from runs.models import Run, Step
from tests.support.specs import chain, edge, graph, node, transform
from tests.support.tools import read_effects
from tests.support.world import World, linear_spec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def routed_spec(**extra: Any) -> dict[str, Any]:
    """start -> score -> route (cases high/low + default) -> end, with an llm on 'high'."""
    nodes = [
        node("start", "start"),
        transform("score", points="x * 10"),
        node("route", "condition", config={"cases": [{"handle": "high", "expression": "points > 50"}, {"handle": "low", "expression": "points < 10"}]}),
        node("ask", "llm", config={"provider": "mock", "model": "mock-1", "prompt": "Points: {{ points }}", "max_tokens": 50}),
        node("end", "end"),
    ]
    edges = [*chain("start", "score", "route"), edge("route", "ask", "high"), edge("route", "end", "low"), edge("route", "end", "default"), edge("ask", "end")]
    return graph(nodes, edges, input_schema={"type": "object", "properties": {"x": {"type": "integer"}}}, **extra)


def create(world: World, spec: dict[str, Any], role: str = "builder") -> dict[str, Any]:
    response = world.clients[role].post("/api/v1/graphs/", {"name": spec["name"], "draft": spec}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


# --------------------------------------------------------------------------- catalogues


def test_node_kind_catalogue_comes_from_the_registry(world: World, settings: Any) -> None:
    body = world.clients["viewer"].get("/api/v1/node-kinds/").json()
    kinds = {k["kind"]: k for k in body["kinds"]}
    assert set(kinds) >= {"start", "end", "llm", "tool", "condition", "approval", "transform", "join", "agent"}
    llm = kinds["llm"]
    assert (llm["title"], llm["category"], llm["inputs"], llm["outputs"], llm["default_output"]) == ("LLM", "ai", ["in"], [], True)
    assert llm["config_schema"]["properties"]["prompt"]["type"] == "string"
    assert (kinds["condition"]["outputs"], kinds["condition"]["dynamic_outputs"]) == (["true", "false"], True)
    assert (kinds["approval"]["outputs"], kinds["approval"]["optional_outputs"], kinds["approval"]["category"]) == (["approved", "rejected"], ["rejected"], "human")
    assert kinds["start"]["inputs"] == [] and kinds["end"]["default_output"] is False
    assert {k for k, v in kinds.items() if not v["uses_repeat_safe"]} >= {"start", "end", "join", "condition", "transform", "approval", "agent"}
    assert kinds["tool"]["uses_repeat_safe"] and kinds["llm"]["uses_repeat_safe"]
    # Timeout, retry and a test run only where the step does something; max_iterations only on a possible loop.
    assert {k for k, v in kinds.items() if not v["does_work"]} == {"start", "end", "join"}
    assert {k for k, v in kinds.items() if not v["can_loop"]} == {"start", "end"}
    assert "repeat_safe_tools" in kinds["agent"]["config_schema"]["properties"]
    assert {k["category"] for k in body["kinds"]} <= {"ai", "logic", "flow", "tools", "human", "data"}
    # A kind registered by a plugin appears without any change here (the test-only kind).
    assert kinds["spawner"]["title"] and kinds["spawner"]["category"] == "logic"


def test_tool_and_model_catalogues(world: World) -> None:
    tools = {t["name"]: t for t in world.clients["viewer"].get("/api/v1/tools/").json()["tools"]}
    assert tools["send_email"]["repeat_safe"] is False and tools["record_effect"]["repeat_safe"] is True
    assert "label" in tools["record_effect"]["args_schema"]["properties"]
    providers = {p["provider"]: p for p in world.clients["viewer"].get("/api/v1/models/").json()["providers"]}
    assert [m["id"] for m in providers["mock"]["models"]] == ["mock-1", "mock-large"] and providers["mock"]["source"] == "provider"
    assert providers["openai"]["source"] == "price_library" and providers["openai"]["accepts_any_model"] is True
    assert any(m["id"].startswith("gpt-4o") for m in providers["openai"]["models"])
    assert world.clients["anonymous"].get("/api/v1/node-kinds/").status_code == 401


# --------------------------------------------------------------------------- validation


def test_validation_returns_paths_handles_and_estimate(world: World) -> None:
    spec = routed_spec()
    spec["nodes"][2]["config"]["cases"][1]["expression"] = "pionts < 10"  # a typo: unknown variable
    spec["nodes"].append(node("lost", "transform", config={"set": {"y": "1"}}))  # unreachable, dead end
    body = world.clients["viewer"].post("/api/v1/graphs/validate/", spec, format="json").json()
    assert body["valid"] is False
    typo = next(e for e in body["errors"] if e["code"] == "unknown_variable")
    assert (typo["node"], typo["field"], typo["path"]) == ("route", "config.cases[1].expression", "nodes[2].config.cases[1].expression")
    lost = next(e for e in body["errors"] if e["code"] == "unreachable")
    assert (lost["node"], lost["field"], lost["path"]) == ("lost", "incoming", "nodes[5]")
    assert body["handles"]["route"] == {"inputs": ["in"], "outputs": ["high", "low", "default"], "default_output": False, "optional": []}
    assert body["handles"]["start"]["inputs"] == [] and body["handles"]["end"]["default_output"] is False
    assert body["handles"]["score"] == {"inputs": ["in"], "outputs": [], "default_output": True, "optional": []}
    estimate = body["estimate"]
    assert estimate["nodes"]["ask"]["tokens"] > 50 and Decimal(estimate["nodes"]["ask"]["usd"]) > 0
    assert estimate["nodes"]["score"] == {"usd": "0", "tokens": 0, "kind": "transform", "model": None}
    assert estimate["costliest_path"]["nodes"] == ["start", "score", "route", "ask", "end"]
    assert Decimal(estimate["costliest_path"]["usd"]) == Decimal(estimate["nodes"]["ask"]["usd"])

    broken = {"name": "x", "nodes": [{"id": "c", "kind": "condition", "config": {"expression": "a"}}, {"id": 5}], "edges": "no"}
    unparsed = world.clients["viewer"].post("/api/v1/graphs/validate/", broken, format="json").json()
    assert unparsed["estimate"] is None and unparsed["handles"]["c"]["outputs"] == ["true", "false"]
    assert {e["path"] for e in unparsed["errors"]} >= {"edges", "nodes[1].id"}


def test_graph_detail_carries_the_drafts_validation(world: World) -> None:
    created = create(world, routed_spec())
    detail = world.clients["viewer"].get(f"/api/v1/graphs/{created['id']}/").json()
    assert detail["validation"]["valid"] is True and set(detail["validation"]["handles"]) == {"start", "score", "route", "ask", "end"}
    assert detail["revision"] == 1 and detail["spec"] == detail["draft"] and detail["draft_updated_by"] == "builder"


def test_expression_and_template_check(world: World) -> None:
    client = world.clients["viewer"]

    def check(**body: Any) -> dict[str, Any]:
        response = client.post("/api/v1/expressions/check/", body, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    assert check(kind="expression", source="x * 2 + len(items)", state_keys=["x", "items"]) == {"ok": True, "errors": [], "names": ["items", "x"]}
    syntax = check(kind="expression", source="  x +", state_keys=["x"])
    assert syntax["ok"] is False and (syntax["errors"][0]["line"], syntax["errors"][0]["column"], syntax["errors"][0]["code"]) == (1, 6, "syntax")
    unknown = check(kind="expression", source="x > limit", state_keys=["x"])
    assert unknown["errors"] == [{"message": "unknown variable 'limit': declare 'limit' in Graph settings → State keys, or use input.limit", "line": 1, "column": 5, "code": "unknown_variable"}]
    assert check(kind="expression", source="x.__class__")["errors"][0]["code"] == "forbidden"
    assert check(kind="expression", source="input['x'] + 1", state_keys=[])["ok"] is True
    template = check(kind="template", source="Hello {{ name }}\n{{ who }}", state_keys=["name"])
    assert template["errors"] == [{"message": "unknown variable 'who': declare 'who' in Graph settings → State keys, or use input.who", "line": 2, "column": 4, "code": "unknown_variable"}]
    assert check(kind="template", source="{% for %}")["errors"][0]["code"] == "syntax"
    assert check(kind="template", source="{{ anything }}")["ok"] is True  # no state_keys: names not checked
    bad = client.post("/api/v1/expressions/check/", {"kind": "python", "source": "1"}, format="json")
    assert bad.status_code == 400 and "kind" in bad.json()["error"]["fields"]


# --------------------------------------------------------------------------- drafts and versions


def test_optimistic_draft_saves_never_overwrite(world: World) -> None:
    created = create(world, linear_spec())
    gid, url = created["id"], f"/api/v1/graphs/{created['id']}/"
    alice, bob = world.clients["builder"], world.clients["admin"]
    mine = {**created["draft"], "description": "alice's edit"}
    theirs = {**created["draft"], "description": "bob's edit"}
    first = alice.patch(url, {"spec": mine, "base_revision": 1}, format="json")
    assert first.status_code == 200 and first.json()["revision"] == 2 and first.json()["draft_updated_by"] == "builder"
    stale = bob.patch(url, {"spec": theirs, "base_revision": 1}, format="json")
    assert stale.status_code == 409
    body = stale.json()
    assert body["error"]["code"] == "conflict" and body["error"]["fields"] == {}
    assert body["current"]["revision"] == 2 and body["current"]["spec"]["description"] == "alice's edit"
    assert body["current"]["updated_by"] == "builder" and body["current"]["updated_at"]
    assert Graph.objects.get(pk=gid).draft["description"] == "alice's edit"
    # A refused save changes nothing else in the same request either.
    assert bob.patch(url, {"spec": theirs, "base_revision": 1, "description": "x"}, format="json").status_code == 409
    assert Graph.objects.get(pk=gid).description == ""
    retried = bob.patch(url, {"spec": theirs, "base_revision": 2}, format="json")
    assert retried.status_code == 200 and retried.json()["revision"] == 3 and retried.json()["draft_updated_by"] == "admin"
    missing = alice.patch(url, {"spec": mine}, format="json")
    assert missing.status_code == 400 and "base_revision" in missing.json()["error"]["fields"]
    assert alice.patch(url, {"description": "no draft change"}, format="json").json()["revision"] == 3


def test_concurrent_saves_from_one_revision_let_exactly_one_win(world: World) -> None:
    """Two saves racing from the same revision (real threads, real connections): one
    is stored, the other gets 409 with the winner's draft."""
    import threading

    from django.db import connections

    created = create(world, linear_spec())
    url = f"/api/v1/graphs/{created['id']}/"
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def save(role: str) -> None:
        try:
            barrier.wait(timeout=10)
            results[role] = world.clients[role].patch(url, {"spec": {**created["draft"], "description": role}, "base_revision": 1}, format="json")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=(r,)) for r in ("builder", "admin")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    codes = sorted(r.status_code for r in results.values())
    assert codes == [200, 409]
    winner = next(role for role, r in results.items() if r.status_code == 200)
    loser = next(r for r in results.values() if r.status_code == 409)
    assert loser.json()["current"]["spec"]["description"] == winner
    assert Graph.objects.get(pk=created["id"]).draft["description"] == winner


def test_publish_with_message_refused_when_invalid_then_restore(world: World) -> None:
    client = world.clients["builder"]
    spec = linear_spec()
    created = create(world, {**spec, "edges": spec["edges"][:1]})
    gid = created["id"]
    refused = client.post(f"/api/v1/graphs/{gid}/versions/", {"message": "first"}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "graph_invalid"
    issue = next(i for i in refused.json()["error"]["issues"] if i["code"] == "dead_end")
    assert issue["node"] == "double" and issue["path"] == "nodes[1]"
    assert not GraphVersion.objects.filter(graph_id=gid).exists()
    client.patch(f"/api/v1/graphs/{gid}/", {"spec": spec, "base_revision": 1}, format="json")
    v1 = client.post(f"/api/v1/graphs/{gid}/versions/", {"message": "first"}, format="json")
    assert v1.status_code == 201 and v1.json()["message"] == "first" and v1.json()["created_by"] == "builder"
    changed = {**spec, "description": "second"}
    client.patch(f"/api/v1/graphs/{gid}/", {"spec": changed, "base_revision": 2}, format="json")
    assert client.post(f"/api/v1/graphs/{gid}/versions/", {"message": "second"}, format="json").json()["number"] == 2
    listed = client.get(f"/api/v1/graphs/{gid}/versions/").json()["results"]
    assert [(v["number"], v["message"], v["created_by"]) for v in listed] == [(2, "second", "builder"), (1, "first", "builder")]
    assert all(v["created_at"] for v in listed)

    stale = client.post(f"/api/v1/graphs/{gid}/versions/1/restore/", {"base_revision": 2}, format="json")
    assert stale.status_code == 409 and stale.json()["current"]["revision"] == 3
    restored = client.post(f"/api/v1/graphs/{gid}/versions/1/restore/", {"base_revision": 3}, format="json")
    assert restored.status_code == 200 and restored.json()["revision"] == 4
    assert restored.json()["draft"] == GraphVersion.objects.get(graph_id=gid, number=1).spec
    assert client.post(f"/api/v1/graphs/{gid}/versions/9/restore/", {"base_revision": 4}, format="json").status_code == 404
    entry = AuditEntry.objects.get(action="graph.restore", scope=f"graph:{gid}")
    assert (entry.actor, entry.data["number"], entry.data["revision"]) == ("builder", 1, 4)


def test_duplicate_and_delete_refused_with_the_number_of_runs(world: World) -> None:
    client = world.clients["builder"]
    source = world.approval_version.graph
    copy = client.post(f"/api/v1/graphs/{source.pk}/duplicate/", {"name": "copy of approvals"}, format="json")
    assert copy.status_code == 201, copy.content
    body = copy.json()
    assert body["draft"]["name"] == "copy of approvals" and body["draft"]["nodes"] == source.draft["nodes"]
    assert body["latest_version"] is None and body["revision"] == 1 and body["approvers"] == ["graph_approver"]
    assert client.post(f"/api/v1/graphs/{source.pk}/duplicate/", {"name": "copy of approvals"}, format="json").status_code == 409
    world.waiting_run()
    world.waiting_run()
    refused = client.delete(f"/api/v1/graphs/{source.pk}/")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert (error["code"], error["runs"], error["test_runs"]) == ("graph_has_runs", 2, 0) and "2 runs" in error["message"]
    assert client.delete(f"/api/v1/graphs/{body['id']}/").status_code == 204
    assert AuditEntry.objects.filter(action="graph.delete", scope=f"graph:{body['id']}").exists()


def test_the_graph_list_says_up_front_which_graphs_cannot_be_deleted(world: World) -> None:
    client = world.clients["viewer"]
    source = world.approval_version.graph
    fresh = create(world, linear_spec())
    world.waiting_run()
    world.waiting_run()
    listed = {g["id"]: g for g in client.get("/api/v1/graphs/").json()["results"]}
    assert (listed[source.pk]["run_count"], listed[source.pk]["deletable"]) == (2, False)
    assert (listed[fresh["id"]]["run_count"], listed[fresh["id"]]["deletable"]) == (0, True)
    detail = client.get(f"/api/v1/graphs/{source.pk}/").json()
    assert (detail["run_count"], detail["deletable"]) == (2, False)


def test_sticky_notes_are_layout_only(world: World) -> None:
    client = world.clients["builder"]
    spec = linear_spec()
    spec["notes"] = [{"id": "why", "text": "doubles x", "position": {"x": 10, "y": 20}, "width": 180, "height": 90, "color": "blue"}]
    assert client.post("/api/v1/graphs/validate/", spec, format="json").json()["valid"] is True
    bad_note = {**spec, "notes": [{"id": "n", "width": -5}]}
    assert client.post("/api/v1/graphs/validate/", bad_note, format="json").json()["errors"][0]["path"] == "notes[0].width"
    created = create(world, spec)
    gid = created["id"]
    client.post(f"/api/v1/graphs/{gid}/versions/", {"message": "v1"}, format="json")
    moved = json.loads(json.dumps(spec))
    moved["notes"][0]["text"] = "doubles x, see issue 4"
    moved["notes"].append({"id": "todo", "text": "add a check"})
    moved["nodes"][1]["position"] = {"x": 300, "y": 40}
    client.patch(f"/api/v1/graphs/{gid}/", {"spec": moved, "base_revision": 1}, format="json")
    assert client.post(f"/api/v1/graphs/{gid}/versions/", {"message": "layout"}, format="json").json()["number"] == 2
    diff = client.get(f"/api/v1/graphs/{gid}/diff/?from=1&to=2").json()
    assert diff["nodes"] == {"added": [], "removed": [], "changed": []} and diff["edges"] == {"added": [], "removed": []}
    assert diff["layout"]["positions"] == ["double"]
    assert diff["layout"]["notes"]["added"] == ["todo"] and [c["id"] for c in diff["layout"]["notes"]["changed"]] == ["why"]
    assert diff["logic_identical"] is True and diff["identical"] is False
    # Runs never see notes: both versions run to the same result.
    from tests.support.specs import run_local

    results = [run_local(GraphVersion.objects.get(graph_id=gid, number=n), {"x": 4}) for n in (1, 2)]
    assert [(r.status, r.state["y"]) for r in results] == [("succeeded", 8), ("succeeded", 8)]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_import_then_export_gives_an_equal_spec(world: World, example: str) -> None:
    spec = json.loads((EXAMPLES / example).read_text())
    spec["name"] = f"round trip {example}"
    spec["notes"] = [{"id": "n1", "text": "kept", "position": {"x": 1, "y": 2}}]
    client = world.clients["builder"]
    imported = client.post("/api/v1/graphs/import/", spec, format="json")
    assert imported.status_code == 201, imported.content
    exported = client.get(f"/api/v1/graphs/{imported.json()['graph']}/export/").json()
    assert GraphSpec.model_validate(exported) == GraphSpec.model_validate(spec)
    again = client.post("/api/v1/graphs/import/", exported, format="json")
    assert again.status_code == 200 and again.json()["created"] is False


def test_import_reports_structured_errors_bumps_an_unedited_draft_and_keeps_an_edited_one(world: World) -> None:
    client = world.clients["builder"]
    spec = linear_spec()
    bad = {**spec, "nodes": spec["nodes"] + [node("orphan", "transform", config={"set": {"z": "nope +"}})]}
    refused = client.post("/api/v1/graphs/import/", bad, format="json")
    assert refused.status_code == 400
    issues = refused.json()["error"]["issues"]
    assert {(i["node"], i["code"]) for i in issues} >= {("orphan", "invalid_expression"), ("orphan", "unreachable")}
    assert next(i for i in issues if i["code"] == "invalid_expression")["path"] == "nodes[3].config.set.z"
    created = create(world, spec)
    # A never-published draft with nodes is someone's work: kept, the file published beside it.
    kept = client.post("/api/v1/graphs/import/", {**spec, "description": "imported"}, format="json")
    assert kept.status_code == 201 and kept.json()["draft_kept"] is True and kept.json()["version"] == 1
    assert client.get(f"/api/v1/graphs/{created['id']}/").json()["revision"] == 1
    # Once the draft holds nothing unpublished (here: restored from that version), the next import replaces it
    # and bumps its revision, so an editor still on the old revision gets a conflict instead of overwriting it.
    restored = client.post(f"/api/v1/graphs/{created['id']}/versions/1/restore/", {"base_revision": 1}, format="json")
    assert restored.status_code == 200, restored.content
    replaced = client.post("/api/v1/graphs/import/", {**spec, "description": "imported again"}, format="json")
    assert replaced.status_code == 201 and replaced.json()["draft_kept"] is False
    stale = client.patch(f"/api/v1/graphs/{created['id']}/", {"spec": spec, "base_revision": 2}, format="json")
    assert stale.status_code == 409 and stale.json()["current"]["spec"]["description"] == "imported again"


# --------------------------------------------------------------------------- test one node


def test_testing_a_node_records_a_test_run_with_its_cost(world: World) -> None:
    created = create(world, routed_spec())
    gid = created["id"]
    client = world.clients["builder"]
    response = client.post(f"/api/v1/graphs/{gid}/nodes/ask/test/", {"state": {"points": 70}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "succeeded" and body["error"] is None
    assert "70" in json.dumps(body["output"]) and body["usage"]["model"] == "mock-1" and body["usage"]["input_tokens"] > 0
    assert Decimal(body["cost_usd"]) > 0
    run = Run.objects.get(pk=body["run_id"])
    assert run.is_test and run.graph_version.is_test and run.graph_version.graph_id == gid and run.created_by.username == "builder"
    assert run.cost_usd == Decimal(body["cost_usd"])
    assert [s.node_id for s in Step.objects.filter(run=run).order_by("id")][0] == "ask"
    entry = AuditEntry.objects.get(action="run.test_node", scope=f"run:{run.pk}")
    assert (entry.actor, entry.data["node_id"], entry.data["graph"]) == ("builder", "ask", gid)
    # Not a version: the graph still has none, and a run cannot be started on the snapshot.
    assert client.get(f"/api/v1/graphs/{gid}/versions/").json()["count"] == 0
    assert client.get(f"/api/v1/graphs/{gid}/").json()["latest_version"] is None
    start = world.clients["operator"].post("/api/v1/runs/", {"graph": gid, "input": {}}, format="json")
    assert start.status_code == 400
    # The same node tested again reuses its snapshot.
    client.post(f"/api/v1/graphs/{gid}/nodes/ask/test/", {"state": {"points": 71}}, format="json")
    assert GraphVersion.objects.filter(graph_id=gid, is_test=True).count() == 1


def test_test_runs_are_left_out_of_lists_and_costs_unless_asked(world: World) -> None:
    created = create(world, routed_spec())
    client = world.clients["builder"]
    test_run = client.post(f"/api/v1/graphs/{created['id']}/nodes/ask/test/", {"state": {"points": 70}}, format="json").json()["run_id"]
    real = world.succeeded_run()
    viewer = world.clients["operator"]  # reads every run: no graph names its operators
    listed = [r["id"] for r in viewer.get("/api/v1/runs/").json()["results"]]
    assert real.pk in listed and test_run not in listed
    included = {r["id"]: r for r in viewer.get("/api/v1/runs/?include_tests=true").json()["results"]}
    assert included[test_run]["is_test"] is True and included[real.pk]["is_test"] is False
    assert viewer.get(f"/api/v1/runs/{test_run}/").json()["is_test"] is True
    by_run = {row["key"] for row in viewer.get("/api/v1/costs/?group_by=run").json()["results"]}
    assert str(test_run) not in by_run
    assert str(test_run) in {row["key"] for row in viewer.get("/api/v1/costs/?group_by=run&include_tests=true").json()["results"]}
    assert viewer.get(f"/api/v1/costs/?group_by=run&run={test_run}").json()["count"] == 1

    from runs.management.commands.cost_report import cost_rows

    assert test_run not in {r["run"] for r in cost_rows(by="run")}
    assert test_run in {r["run"] for r in cost_rows(by="run", include_tests=True)}


def test_testing_routes_transforms_and_failures(world: World) -> None:
    created = create(world, routed_spec())
    url = f"/api/v1/graphs/{created['id']}/nodes/%s/test/"
    client = world.clients["builder"]
    routed = client.post(url % "route", {"state": {"points": 5}}, format="json").json()
    assert (routed["status"], routed["output"]) == ("succeeded", {"handle": "low"})
    computed = client.post(url % "score", {"state": {"x": 3}}, format="json").json()
    assert computed["updates"] == {"points": 30} and computed["state"]["points"] == 30 and computed["cost_usd"] == "0.000000000000"
    failed = client.post(url % "score", {"state": {"x": None}}, format="json").json()
    assert failed["status"] == "failed" and failed["error"]["code"] == "expression" and "None" in failed["error"]["message"]
    assert Step.objects.get(run_id=failed["run_id"], node_id="score").attempts.count() == 1  # tried once, no retries
    assert client.post(url % "nope", {"state": {}}, format="json").status_code == 404
    assert client.post(url % "route", {"state": []}, format="json").status_code == 400


def test_testing_a_node_uses_the_editors_unsaved_node_when_sent(world: World) -> None:
    created = create(world, routed_spec())
    url = f"/api/v1/graphs/{created['id']}/nodes/%s/test/"
    client = world.clients["builder"]
    edited = {"id": "score", "kind": "transform", "config": {"set": {"points": "x * 100"}}}
    tested = client.post(url % "score", {"state": {"x": 3}, "node": edited}, format="json")
    assert tested.status_code == 200, tested.content
    assert tested.json()["updates"] == {"points": 300}  # the saved node computes x * 10
    assert Graph.objects.get(pk=created["id"]).draft["nodes"][1]["config"] == {"set": {"points": "x * 10"}}  # draft unchanged
    # Checked like a saved node: an invalid expression is refused at its path before running.
    broken = {**edited, "config": {"set": {"points": "x *"}}}
    refused = client.post(url % "score", {"state": {"x": 3}, "node": broken}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["issues"][0]["path"] == "nodes[1].config.set.points"
    # A node added in the editor and not saved yet can be tested too.
    new = {"id": "fresh", "kind": "transform", "config": {"set": {"y": "x + 1"}}}
    added = client.post(url % "fresh", {"state": {"x": 1}, "node": new}, format="json")
    assert added.status_code == 200 and added.json()["updates"] == {"y": 2}
    other = client.post(url % "score", {"state": {"x": 3}, "node": new}, format="json")
    assert other.status_code == 400 and other.json()["error"]["issues"][0]["path"] == "node.id"
    assert client.post(url % "score", {"state": {}, "node": [1]}, format="json").status_code == 400


def test_a_node_with_an_invalid_config_or_unknown_names_is_refused_before_running(world: World) -> None:
    spec = routed_spec()
    spec["nodes"][1]["config"] = {"set": {"points": "x *"}}
    spec["nodes"][3]["config"]["prompt"] = "Points: {{ points }}, mood: {{ mood }}"
    spec["nodes"].append(node("gate", "approval", config={"prompt": "ok?"}))
    created = create(world, spec)
    url = f"/api/v1/graphs/{created['id']}/nodes/%s/test/"
    client = world.clients["builder"]
    refused = client.post(url % "score", {"state": {"x": 1}}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["issues"][0]["path"] == "nodes[1].config.set.points"
    names = client.post(url % "ask", {"state": {}}, format="json")  # 'points' is written by score: known; 'mood' is not
    assert names.status_code == 400 and [(i["code"], i["path"]) for i in names.json()["error"]["issues"]] == [
        ("unknown_variable", "nodes[3].config.prompt")
    ]
    # A key no node writes and the draft does not declare is refused as documented (it
    # could never be in a run's state), not stored: declare it to test with it.
    unknown = client.post(url % "ask", {"state": {"mood": "fine"}}, format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["fields"] == {"state.mood": ["not a state key of this graph"]}
    gate = client.post(url % "gate", {"state": {}}, format="json")
    assert gate.status_code == 400 and gate.json()["error"]["code"] == "not_testable"
    assert Run.objects.filter(is_test=True).count() == 0


def test_a_tool_not_safe_to_repeat_asks_for_confirmation(world: World, effects_file: Any) -> None:
    spec = graph(
        [node("start", "start"), node("pay", "tool", config={"tool": "record_effect_unsafe", "args": {"label": "paid"}}), node("end", "end")],
        chain("start", "pay", "end"),
    )
    created = create(world, spec)
    url = f"/api/v1/graphs/{created['id']}/nodes/pay/test/"
    asked = world.clients["builder"].post(url, {"state": {}}, format="json")
    assert asked.status_code == 428
    error = asked.json()["error"]
    assert error["code"] == "confirmation_required" and error["effects"] == ["tool 'record_effect_unsafe'"]
    assert read_effects(str(effects_file)) == [] and not Run.objects.filter(is_test=True).exists()
    confirmed = world.clients["builder"].post(url, {"state": {}, "confirm": True}, format="json")
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "succeeded"
    assert [e["label"] for e in read_effects(str(effects_file))] == ["paid"]


def test_testing_an_agent_runs_its_turns_and_tools_as_child_steps(world: World) -> None:
    spec = json.loads((EXAMPLES / "agent_tools.json").read_text())
    spec["name"] = "agent under test"
    created = create(world, spec)
    agent = next(n for n in spec["nodes"] if n["kind"] == "agent")
    state = {k: "A-1002" for k in (spec.get("input_schema", {}).get("properties") or {})}
    response = world.clients["builder"].post(f"/api/v1/graphs/{created['id']}/nodes/{agent['id']}/test/", {"state": {**state, "input": state}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "succeeded", body["error"]
    assert body["steps"] > 2 and body["usage"]["input_tokens"] > 0 and Decimal(body["cost_usd"]) > 0


def test_an_agent_with_a_tool_not_safe_to_repeat_asks_too(world: World) -> None:
    spec = graph(
        [node("start", "start"), node("agent", "agent", config={"prompt": "go", "tools": ["record_effect", "record_effect_unsafe"]}), node("end", "end")],
        chain("start", "agent", "end"),
    )
    created = create(world, spec)
    asked = world.clients["builder"].post(f"/api/v1/graphs/{created['id']}/nodes/agent/test/", {}, format="json")
    assert asked.status_code == 428 and asked.json()["error"]["effects"] == ["tool 'record_effect_unsafe'"]


def test_nul_characters_are_refused_before_anything_is_stored(world: World) -> None:
    created = create(world, linear_spec())
    client = world.clients["builder"]
    saved = client.patch(f"/api/v1/graphs/{created['id']}/", {"spec": {**created["draft"], "description": "a\u0000b"}, "base_revision": 1}, format="json")
    assert saved.status_code == 400 and "spec" in saved.json()["error"]["fields"]
    tested = client.post(f"/api/v1/graphs/{created['id']}/nodes/double/test/", {"state": {"x": 1, "k\u0000": 1}}, format="json")
    assert tested.status_code == 400
    imported = client.post("/api/v1/graphs/import/", {**linear_spec(), "description": "\u0000"}, format="json")
    assert imported.status_code == 400 and Graph.objects.get(pk=created["id"]).draft_revision == 1


# --------------------------------------------------------------------------- names under concurrency


def test_a_name_taken_between_the_check_and_the_insert_is_a_409_not_a_500(world: World) -> None:
    from builder.apis import _name_taken_as_conflict
    from core.api import ApiError

    Graph.objects.create(name="race-name", draft={})
    # What a concurrent request does between _check_name_free and the insert: the unique
    # constraint fires, and the answer is the check's own 409.
    with pytest.raises(ApiError) as refused, _name_taken_as_conflict("race-name"):
        Graph.objects.create(name="race-name", draft={})
    assert refused.value.status_code == 409 and refused.value.code == "name_taken"
    assert Graph.objects.filter(name="race-name").count() == 1


@pytest.mark.django_db(transaction=True)  # six threads, each on its own connection, race to commit
def test_concurrent_creates_duplicates_and_imports_of_one_name_answer_201_once(world: World) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection
    from rest_framework.test import APIClient

    source = create(world, linear_spec())
    token = world.token("builder")
    calls = [
        ("/api/v1/graphs/", {"name": "race-create"}),
        (f"/api/v1/graphs/{source['id']}/duplicate/", {"name": "race-duplicate"}),
        ("/api/v1/graphs/import/", {**linear_spec(), "name": "race-import"}),
    ]
    for path, body in calls:
        barrier = threading.Barrier(6)

        def call(_: int, path: str = path, body: dict = body, barrier: threading.Barrier = barrier) -> int:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            try:
                barrier.wait(timeout=10)
                return client.post(path, body, format="json").status_code
            finally:
                connection.close()

        with ThreadPoolExecutor(6) as pool:
            codes = sorted(pool.map(call, range(6)))
        if path.endswith("import/"):
            assert codes == [200] * 5 + [201] or codes == [201] + [200] * 5, (path, codes)  # one version, created once
        else:
            assert codes.count(201) == 1 and set(codes) <= {201, 409}, (path, codes)
