"""Who may read a run: lists and costs hold only readable runs, graphs that name their
operators, denials (404, 403) in the audit log, the run page and the run WebSocket, and
the node id and statuses on approve, reject and cancel audit entries."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from accounts import policy
from accounts.tokens import token_create
from audit.models import AuditEntry
from ballast.asgi import application
from runs.engine import api as engine
from runs.models import Run
from tests.support.approvals import version_of
from tests.support.specs import chain, graph, node, publish, run_local
from tests.support.world import ROLE_NAMES, World, client_with_token, linear_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]
USERS = [r for r in ROLE_NAMES if r != "anonymous"]


def llm_spec(name: str) -> dict[str, Any]:
    """start -> one mock-model call -> end: a run with a cost."""
    ask = node("ask", "llm", config={"provider": "mock", "model": "mock-1", "prompt": "Hello {{ x }}", "output_key": "reply"})
    return graph([node("start", "start"), ask, node("end", "end")], chain("start", "ask", "end"),
                 input_schema={"type": "object", "properties": {"x": {"type": "string"}}}, name=name)  # fmt: skip


def denials(user: Any) -> list[tuple[str, str, str, int]]:
    """(denied action, object type, object id, status) of the user's access.denied entries, oldest first."""
    rows = AuditEntry.objects.filter(action="access.denied", scope=f"user:{user.pk}").order_by("id")
    return [(e.data["denied"], e.object_type, e.object_id, e.data["status"]) for e in rows]


def test_run_list_holds_only_the_runs_each_role_may_read(world: World) -> None:
    waiting = world.waiting_run()  # approval graph, started by starter, approval open to approvers
    plain = run_local(linear_spec(), {"x": 1})  # nobody started it, no approvals
    mine = run_local(linear_spec(), {"x": 3}, user=world.users["viewer"])
    expected = {
        "viewer": {mine.pk},
        "builder": {waiting.pk, plain.pk, mine.pk},
        "operator": {waiting.pk, plain.pk, mine.pk},  # the operators group: no graph names its operators
        "approver": {waiting.pk},
        "graph_approver": {waiting.pk},
        "starter": {waiting.pk},
        "admin": {waiting.pk, plain.pk, mine.pk},
    }
    for role in USERS:
        body = world.clients[role].get("/api/v1/runs/?page_size=500").json()
        assert {r["id"] for r in body["results"]} == expected[role], role
        assert len(body["results"]) == len(expected[role]) and body["next"] is None, role  # keyset pages: no count
        # A filter composes with the policy: never widens it.
        waiting_only = world.clients[role].get("/api/v1/runs/?status=waiting").json()
        assert {r["id"] for r in waiting_only["results"]} == expected[role] & {waiting.pk}, role


def test_costs_count_only_readable_runs(world: World) -> None:
    theirs = run_local(llm_spec("costly-a"), {"x": "a"}, user=world.users["starter"])
    other = run_local(llm_spec("costly-b"), {"x": "b"})
    assert theirs.status == other.status == "succeeded"
    assert theirs.cost_usd > 0 and other.cost_usd > 0

    def spent(role: str, query: str = "group_by=run") -> dict[int, Decimal]:
        rows = world.clients[role].get(f"/api/v1/costs/?{query}").json()["results"]
        return {int(r["key"]): Decimal(r["cost_usd"]) for r in rows}

    assert set(spent("starter")) == {theirs.pk}
    assert set(spent("viewer")) == set()
    assert set(spent("admin")) == {theirs.pk, other.pk}
    assert set(spent("operator")) == {theirs.pk, other.pk}
    # Asking for a run one may not read by id gives nothing, not its spend.
    assert spent("viewer", f"group_by=run&run={other.pk}") == {}
    by_model = world.clients["starter"].get("/api/v1/costs/?group_by=model").json()["results"]
    assert [Decimal(r["cost_usd"]) for r in by_model] == [theirs.cost_usd]


def test_a_graph_that_names_operators_excludes_the_operators_group(world: World) -> None:
    User = get_user_model()
    named = User.objects.create_user("ops-ada")
    member = User.objects.create_user("ops-bob")
    team = Group.objects.create(name="payments-ops")
    member.groups.add(team)
    version = publish(linear_spec() | {"name": "named-ops"})
    builder = world.clients["builder"]
    response = builder.patch(f"/api/v1/graphs/{version.graph_id}/", {"operators": ["ops-ada"], "operator_groups": ["payments-ops"]}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["operators"] == ["ops-ada"] and response.json()["operator_groups"] == ["payments-ops"]
    bad = builder.patch(f"/api/v1/graphs/{version.graph_id}/", {"operator_groups": ["nope"]}, format="json")
    assert bad.status_code == 400 and "operator_groups" in bad.json()["error"]["fields"]

    ada, bob = client_with_token(named), client_with_token(member)
    with engine.local_mode():
        started = ada.post("/api/v1/runs/", {"graph": version.graph_id, "input": {"x": 1}}, format="json")
        assert started.status_code == 201, started.json()
        refused = world.clients["operator"].post("/api/v1/runs/", {"graph": version.graph_id, "input": {"x": 1}}, format="json")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_allowed"
    run_id = started.json()["id"]
    # The operators group no longer reads it; the group named on the graph does.
    assert world.clients["operator"].get(f"/api/v1/runs/{run_id}/").status_code == 404
    assert bob.get(f"/api/v1/runs/{run_id}/").status_code == 200
    assert world.clients["operator"].post(f"/api/v1/runs/{run_id}/cancel/", {}, format="json").status_code == 404
    # A run of a graph that names no one: the global role applies, the named users have none.
    plain = run_local(linear_spec() | {"name": "plain-ops"}, {"x": 1})
    assert ada.get(f"/api/v1/runs/{plain.pk}/").status_code == 404
    assert world.clients["operator"].get(f"/api/v1/runs/{plain.pk}/").status_code == 200
    assert AuditEntry.objects.filter(action="graph.operators", object_id=str(version.graph_id)).exists()
    # The browser shows a named operator the start controls (the API decides per graph).
    page = Client()
    page.force_login(named)
    assert '"operate": true' in page.get("/").content.decode()
    # Duplicating the graph keeps who operates it.
    dup = builder.post(f"/api/v1/graphs/{version.graph_id}/duplicate/", {"name": "named-ops-2"}, format="json").json()
    assert dup["operators"] == ["ops-ada"] and dup["operator_groups"] == ["payments-ops"]


def test_hidden_runs_answer_404_refused_actions_403_and_both_are_audited(world: World) -> None:
    run = world.waiting_run()
    approval = world.approval_of(run)
    step = world.step(run, "draft")
    viewer, builder = world.users["viewer"], world.users["builder"]
    for path in (f"/api/v1/runs/{run.pk}/", f"/api/v1/runs/{run.pk}/steps/", f"/api/v1/runs/{run.pk}/events/",
                 f"/api/v1/steps/{step.pk}/", f"/api/v1/approvals/{approval.pk}/"):  # fmt: skip
        response = world.clients["viewer"].get(path)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", path
    # A run that does not exist looks the same as one that is hidden.
    assert world.clients["viewer"].get("/api/v1/runs/999999/").json() == world.clients["viewer"].get(f"/api/v1/runs/{run.pk}/").json()
    assert world.clients["viewer"].post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json").status_code == 404
    assert world.clients["builder"].post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json").status_code == 403
    assert world.clients["builder"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json").status_code == 403
    r, s, a = str(run.pk), str(step.pk), str(approval.pk)
    assert denials(viewer) == [
        ("run.read", "run", r, 404), ("run.steps", "run", r, 404), ("run.events", "run", r, 404),
        ("step.read", "step", s, 404), ("approval.read", "approvalrequest", a, 404),
        ("run.read", "run", r, 404), ("run.cancel", "run", r, 404),
    ]  # fmt: skip
    assert denials(builder) == [("run.cancel", "run", r, 403), ("approval.decide", "approvalrequest", a, 403)]
    entry = AuditEntry.objects.filter(action="access.denied", scope=f"user:{viewer.pk}").first()
    assert entry.actor == "viewer" and entry.actor_type == "token"  # the principal: an API token
    run.refresh_from_db()
    assert run.status == "waiting"
    # Denials never write to the run's own chain.
    assert not AuditEntry.objects.filter(scope=f"run:{run.pk}", action="access.denied").exists()
    from audit.chain import audit_verify

    assert audit_verify().ok


def test_run_page_is_hidden_from_who_may_not_read_it(world: World) -> None:
    run = world.waiting_run()
    outsider, starter = Client(), Client()
    outsider.force_login(world.users["viewer"])
    starter.force_login(world.users["starter"])
    assert outsider.get(f"/runs/{run.pk}/").status_code == 404
    assert starter.get(f"/runs/{run.pk}/").status_code == 200
    assert denials(world.users["viewer"]) == [("run.page", "run", str(run.pk), 404)]


def test_run_websocket_refuses_who_may_not_read_the_run(world: World) -> None:
    run = world.waiting_run()
    keys = {role: token_create(user=world.users[role], name="ws")[1] for role in ("viewer", "starter", "graph_approver")}

    async def body() -> dict[str, Any]:
        got: dict[str, Any] = {}
        for role, key in keys.items():
            ws = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/?token={key}")
            connected, code = await ws.connect(timeout=10)
            got[role] = (connected, None if connected else code)
            if connected:
                got[f"{role}:first"] = (await ws.receive_json_from(10))["event"]["kind"]
                await ws.disconnect()
        return got

    got = async_to_sync(body)()
    assert got["viewer"] == (False, 4404)
    assert got["starter"] == (True, None) and got["graph_approver"] == (True, None)
    assert got["starter:first"] == "run_created"
    assert denials(world.users["viewer"]) == [("run.stream", "run", str(run.pk), 404)]


def test_decision_and_cancel_audit_entries_carry_the_node_and_statuses(world: World) -> None:
    approved, rejected, cancelled = world.waiting_run(), world.waiting_run(), world.waiting_run()
    with engine.local_mode():
        ok = world.clients["approver"].post(f"/api/v1/approvals/{world.approval_of(approved).pk}/decide/", {"version": version_of(world.approval_of(approved).pk), "decision": "approve"}, format="json")
        no = world.clients["graph_approver"].post(f"/api/v1/approvals/{world.approval_of(rejected).pk}/decide/", {"version": version_of(world.approval_of(rejected).pk), "decision": "reject"}, format="json")
        gone = world.clients["operator"].post(f"/api/v1/runs/{cancelled.pk}/cancel/", {"reason": "stop"}, format="json")
    assert (ok.status_code, no.status_code, gone.status_code) == (200, 200, 200)

    def entry(action: str, run: Run) -> dict[str, Any]:
        return AuditEntry.objects.get(action=action, scope=f"run:{run.pk}").data

    assert {k: entry("approval.approve", approved)[k] for k in ("node_id", "status_before", "status_after")} == {
        "node_id": "review", "status_before": "waiting", "status_after": "running"}  # fmt: skip
    # The gate has a reject edge: the run goes on, down it.
    assert {k: entry("approval.reject", rejected)[k] for k in ("node_id", "status_before", "status_after")} == {
        "node_id": "review", "status_before": "waiting", "status_after": "running"}  # fmt: skip
    cancel = entry("run.cancel", cancelled)
    assert (cancel["node_id"], cancel["node_ids"], cancel["status_before"], cancel["status_after"]) == ("review", ["review"], "waiting", "cancelled")


def test_policy_checks_agree_with_the_filters(world: World) -> None:
    """can_read_run (one object) and readable_runs (the list filter) state one rule."""
    runs = [world.waiting_run(), world.queued_run(), world.failed_run(), run_local(linear_spec(), {"x": 1})]
    for role in USERS:
        user = world.users[role]
        listed = set(policy.readable_runs(user).values_list("pk", flat=True))
        assert {r.pk for r in runs if policy.can_read_run(user, r)} == listed & {r.pk for r in runs}, role
