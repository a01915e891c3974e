"""The approvals inbox API: its three lists, claim / hand back / bulk claim, reassignment,
decisions bound to the version they were shown (409 naming who or what changed, deciding
nothing), quorums, rejection reasons a condition routes on, edited values, parked steps
for operators, and the email link that never decides."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.db import connection
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from runs.engine import api as engine
from runs.models import Run, RunStateKey, Step
from tests.support.approvals import version_of
from tests.support.specs import chain, edge, graph, node, publish, run_local, transform
from tests.support.world import NAME_INPUT, World, client_with_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def gate_spec(**gate: Any) -> dict[str, Any]:
    """start -> draft -> review (gate, ``gate`` config) -> approved: send (an email tool whose
    body is the draft), rejected: route on the reason (tone -> redo, else drop)."""
    nodes = [
        node("start", "start"),
        transform("draft", reply="'Hello ' + name"),
        node("review", "approval", config={"prompt": "Send {{ reply }}?", **gate}),
        node("send", "tool", config={"tool": "send_email", "output_key": "email", "args": {"to": "c@example.com", "subject": "Hi", "body": "{{ reply }}"}}),
        node("route", "condition", config={"expression": "approval['reason'] == 'tone'"}),
        transform("redo", outcome="'rewrite: ' + approval['comment']"),
        transform("drop", outcome="'dropped'"),
        node("end", "end"),
    ]
    edges = chain("start", "draft", "review") + [
        edge("review", "send", "approved"),
        edge("review", "route", "rejected"),
        edge("route", "redo", "true"),
        edge("route", "drop", "false"),
        edge("send", "end"),
        edge("redo", "end"),
        edge("drop", "end"),
    ]
    return graph(nodes, edges, input_schema=NAME_INPUT)


def waiting(world: World, **gate: Any) -> tuple[Run, ApprovalRequest]:
    run = run_local(publish(gate_spec(**gate)), {"name": "Ada"}, user=world.users["starter"])
    assert run.status == "waiting", run.error
    return run, world.approval_of(run)


def second_approver(world: World, name: str = "approver2") -> Any:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(name, password="pw", email=f"{name}@example.com")
    user.groups.add(Group.objects.get(name="approvers"))
    return user


def post(client: APIClient, path: str, body: dict[str, Any] | None = None) -> Any:
    with engine.local_mode():
        return client.post(f"/api/v1/approvals/{path}", body or {}, format="json")


def decide(client: APIClient, approval: ApprovalRequest | int, decision: str = "approve", version: str | None = None, **extra: Any) -> Any:
    pk = approval if isinstance(approval, int) else approval.pk
    return post(client, f"{pk}/decide/", {"decision": decision, "version": version or version_of(pk), **extra})


def ids(client: APIClient, which: str, q: str = "") -> list[int]:
    body = client.get("/api/v1/approvals/inbox/", {"list": which, "q": q}).json()
    return [a["id"] for a in body["results"]]


def drive(run: Run) -> Run:
    with engine.local_mode() as queue:
        queue.extend(Step.objects.filter(run=run, status="pending").values_list("id", flat=True))
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    return run


def test_claim_hand_back_and_bulk_claim_move_requests_between_the_lists(world: World) -> None:
    other = client_with_token(second_approver(world))
    me = world.clients["approver"]
    (_, first), (_, second) = waiting(world), waiting(world)
    assert ids(me, "group") == [second.pk, first.pk] and ids(me, "assigned") == []

    claimed = post(me, f"{first.pk}/claim/")
    assert claimed.status_code == 200 and claimed.json()["claimed_by"] == "approver"
    assert ids(me, "assigned") == [first.pk] and ids(me, "group") == [second.pk]
    assert ids(other, "group") == [second.pk, first.pk]  # still seen, marked claimed
    counts = me.get("/api/v1/approvals/inbox/counts/").json()
    assert counts == {"assigned": 1, "group": 1, "decided": 0, "waiting": 2}
    assert other.get("/api/v1/approvals/inbox/counts/").json()["waiting"] == 1  # the claimed one is not waiting for them

    # Someone else's claim: neither a second claim nor a decision, and both say who holds it.
    refused = post(other, f"{first.pk}/claim/")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "claimed" and refused.json()["error"]["by"] == "approver"
    blocked = decide(other, first)
    assert blocked.status_code == 409 and "claimed by approver" in blocked.json()["error"]["message"]
    assert post(other, f"{first.pk}/hand-back/").status_code == 403
    assert ApprovalRequest.objects.get(pk=first.pk).status == "pending"

    assert post(me, f"{first.pk}/hand-back/").status_code == 200
    assert post(me, f"{first.pk}/hand-back/").json()["error"]["code"] == "not_claimed"
    bulk = post(other, "claim/", {"ids": [first.pk, second.pk, 10**9]})
    assert bulk.status_code == 200
    assert bulk.json()["claimed"] == [first.pk, second.pk] and [r["code"] for r in bulk.json()["refused"]] == ["not_found"]
    assert ids(other, "assigned") == [second.pk, first.pk] and ids(me, "assigned") == []
    actions = list(AuditEntry.objects.filter(action__startswith="approval.").order_by("id").values_list("actor", "action"))
    assert actions == [("approver", "approval.claim"), ("approver", "approval.hand_back"), ("approver2", "approval.claim"), ("approver2", "approval.claim")]


def test_search_matches_prompt_graph_and_run_id(world: World) -> None:
    run, approval = waiting(world)
    world.waiting_run()
    me = world.clients["approver"]
    assert ids(me, "group", run.graph_version.graph.name) == [approval.pk]
    assert approval.pk in ids(me, "group", str(run.pk)) and len(ids(me, "group", "hello ada")) == 2
    assert ids(me, "group", "nothing-like-this") == []
    assert me.get("/api/v1/approvals/inbox/", {"list": "mine"}).status_code == 400


def test_a_decision_on_a_version_that_moved_on_is_refused_and_decides_nothing(world: World) -> None:
    other = client_with_token(second_approver(world))
    run, approval = waiting(world)
    shown = version_of(approval)
    post(other, f"{approval.pk}/claim/")
    post(other, f"{approval.pk}/hand-back/")
    stale = decide(world.clients["approver"], approval, version=shown)
    error = stale.json()["error"]
    assert stale.status_code == 409 and error["code"] == "changed" and "handed back by approver2" in error["message"]
    assert error["version"] == version_of(approval)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending" and not Step.objects.filter(run=run, node_id="send").exists()
    assert decide(world.clients["approver"], approval, version=error["version"]).status_code == 200
    assert decide(other, approval, version=error["version"]).json()["error"]["code"] == "already_decided"


def test_a_changed_next_action_is_refused(world: World) -> None:
    run, approval = waiting(world)
    detail = world.clients["approver"].get(f"/api/v1/approvals/{approval.pk}/").json()
    assert detail["next_actions"] == [
        {"node_id": "send", "kind": "tool", "label": "", "arguments": {"tool": "send_email", "output_key": "email", "args": {"to": "c@example.com", "subject": "Hi", "body": "Hello Ada"}}}
    ]
    assert detail["state"]["reply"] == "Hello Ada" and detail["started_by"] == "starter" and detail["cost_usd"] is not None
    # What a parallel branch's commit does to a waiting run: the key the next node reads changes.
    # (state is per key since deltastate: a new version of the key at the run's next version)
    run.refresh_from_db()
    RunStateKey.objects.create(run_id=run.pk, key="reply", seq=run.version + 1, value="Hello Mallory", size=len('"Hello Mallory"'))
    Run.objects.filter(pk=run.pk).update(version=run.version + 1)
    stale = decide(world.clients["approver"], approval, version=detail["version"])
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "action_changed"
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    fresh = world.clients["approver"].get(f"/api/v1/approvals/{approval.pk}/").json()
    assert fresh["next_actions"][0]["arguments"]["args"]["body"] == "Hello Mallory"
    assert decide(world.clients["approver"], approval, version=fresh["version"]).status_code == 200


def test_reassign_to_a_user_or_a_group_and_who_may(world: World) -> None:
    world.users["viewer"].email = "viewer@example.com"
    world.users["viewer"].save()
    run, approval = waiting(world)
    post(world.clients["approver"], f"{approval.pk}/claim/")
    mail.outbox.clear()
    assert post(world.clients["approver"], f"{approval.pk}/reassign/", {"to_user": "viewer"}).status_code == 403
    assert post(world.clients["operator"], f"{approval.pk}/reassign/", {"to_group": "nobody"}).json()["error"]["fields"] == {"to_group": ["no group named 'nobody'"]}
    assert post(world.clients["operator"], f"{approval.pk}/reassign/", {}).status_code == 400
    moved = post(world.clients["operator"], f"{approval.pk}/reassign/", {"to_user": "viewer"})
    assert moved.status_code == 200, moved.content
    assert (moved.json()["approvers"], moved.json()["claimed_by"], moved.json()["last_change"]) == (["viewer"], "", "reassigned to user viewer by operator")
    assert [m.to for m in mail.outbox] == [["viewer@example.com"]] and f"/approvals/{approval.pk}/" in mail.outbox[0].body
    assert ids(world.clients["viewer"], "assigned") == [approval.pk]
    assert decide(world.clients["approver"], approval).status_code == 404  # no longer theirs, so neither is the run
    to_group = post(world.clients["admin"], f"{approval.pk}/reassign/", {"to_group": "approvers"})
    assert to_group.json()["approver_groups"] == ["approvers"] and to_group.json()["approvers"] == []
    assert decide(world.clients["viewer"], approval).status_code == 404
    assert decide(world.clients["approver"], approval).status_code == 200
    assert AuditEntry.objects.filter(action="approval.reassign", scope=f"run:{run.pk}").count() == 2


def test_a_quorum_of_two_distinct_approvers_and_the_starter_does_not_count(world: World) -> None:
    world.users["starter"].groups.add(Group.objects.get(name="approvers"))
    other = client_with_token(second_approver(world))
    run, approval = waiting(world, quorum=2)
    starter = client_with_token(world.users["starter"])
    refused = decide(starter, approval)
    assert refused.status_code == 403 and "starter does not count" in refused.json()["error"]["message"]
    first = decide(world.clients["approver"], approval, comment="fine by me")
    assert first.status_code == 200 and first.json()["status"] == "pending"
    assert [v["by"] for v in first.json()["votes"]] == ["approver"] and first.json()["last_change"] == "approved by approver (1 of 2)"
    assert not Step.objects.filter(run=run, node_id="send").exists()
    again = decide(world.clients["approver"], approval)
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_voted"
    assert ids(world.clients["approver"], "decided") == [approval.pk]
    done = decide(other, approval)
    assert done.status_code == 200 and done.json()["status"] == "approved"
    run = drive(run)
    assert run.status == "succeeded", run.error
    assert run.state["approval"]["approvers"] == ["approver", "approver2"] and run.state["approval"]["by"] == "approver2"
    assert list(AuditEntry.objects.filter(scope=f"run:{run.pk}", action__startswith="approval.").values_list("action", flat=True)) == ["approval.vote", "approval.approve"]


def test_one_rejection_rejects_a_quorum(world: World) -> None:
    other = client_with_token(second_approver(world))
    run, approval = waiting(world, quorum=3)
    decide(world.clients["approver"], approval)
    rejected = decide(other, approval, "reject", comment="no")
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    assert drive(run).state["outcome"] == "dropped"


def test_a_rejection_reason_is_one_the_node_declares_and_a_condition_routes_on_it(world: World) -> None:
    run, approval = waiting(world, reject_reasons=["tone", "facts"])
    assert world.clients["approver"].get(f"/api/v1/approvals/{approval.pk}/").json()["reject_reasons"] == ["tone", "facts"]
    missing = decide(world.clients["approver"], approval, "reject")
    assert missing.status_code == 400 and "reason" in missing.json()["error"]["fields"]
    assert decide(world.clients["approver"], approval, "reject", reason="mood").status_code == 400
    assert decide(world.clients["approver"], approval, "approve", reason="tone").status_code == 400
    ok = decide(world.clients["approver"], approval, "reject", reason="tone", comment="too stiff")
    assert ok.status_code == 200 and ok.json()["reason"] == "tone"
    run = drive(run)
    assert run.state["approval"]["reason"] == "tone" and run.state["outcome"] == "rewrite: too stiff"
    entry = AuditEntry.objects.get(action="approval.reject", scope=f"run:{run.pk}")
    assert entry.data["reason"] == "tone"


def test_approve_with_edited_values_through_the_node_schema(world: World) -> None:
    schema = {"type": "object", "properties": {"reply": {"type": "string", "maxLength": 20}}, "required": ["reply"]}
    run, approval = waiting(world, edit_schema=schema)
    plain = waiting(world)[1]
    assert decide(world.clients["approver"], plain, values={"reply": "x"}).json()["error"]["fields"] == {"values": ["values: this approval does not allow edited values"]}
    too_long = decide(world.clients["approver"], approval, values={"reply": "x" * 30})
    assert too_long.status_code == 400 and "values.reply" in too_long.json()["error"]["fields"]
    assert decide(world.clients["approver"], approval, values={"sent": True}).status_code == 400
    assert decide(world.clients["approver"], approval, "reject", values={"reply": "Hi"}).status_code == 400
    ok = decide(world.clients["approver"], approval, values={"reply": "Dear Ada"})
    assert ok.status_code == 200 and ok.json()["values"] == {"reply": "Dear Ada"}
    run = drive(run)
    assert run.status == "succeeded" and run.state["reply"] == "Dear Ada"
    assert any(m.body == "Dear Ada" for m in mail.outbox)  # the send_email tool sent the edited draft


def test_parked_steps_are_listed_for_operators_with_retry_skip_and_fail(world: World, effects_file) -> None:
    from tests.support.world import parked_run

    run, request = parked_run()
    operator = world.clients["operator"]
    assert ids(operator, "group") == [request.pk]
    item = operator.get(f"/api/v1/approvals/{request.pk}/").json()
    assert item["purpose"] == "recovery" and item["may_decide"] and item["next_actions"][0]["node_id"] == "pay"
    assert decide(operator, request, "approve").status_code == 400
    skipped = decide(operator, request, "skip", output={})
    assert skipped.status_code == 200 and skipped.json()["decision"] == "skip"
    assert drive(run).status == "succeeded"
    assert AuditEntry.objects.get(action="approval.skip", scope=f"run:{run.pk}").actor == "operator"


def test_the_email_link_opens_the_item_and_only_a_signed_in_csrf_post_decides(world: World) -> None:
    world.users["approver"].email = "approver@example.com"
    world.users["approver"].save()
    mail.outbox.clear()
    run, approval = waiting(world)
    assert [m.to for m in mail.outbox] == [["approver@example.com"]]
    link = next(line for line in mail.outbox[0].body.splitlines() if "/approvals/" in line).split()[-1]
    path = link.split("://", 1)[1].split("/", 1)[1]
    browser = APIClient(enforce_csrf_checks=True)
    assert browser.get(f"/{path}").status_code == 302  # signed out: the login page, nothing decided
    assert browser.login(username="approver", password="pw-approver")
    for method in (browser.get, browser.head):
        assert method(f"/{path}").status_code == 200
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    assert not AuditEntry.objects.filter(action__startswith="approval.", scope=f"run:{run.pk}").exists()
    body = {"decision": "approve", "version": version_of(approval)}
    assert browser.post(f"/api/v1/approvals/{approval.pk}/decide/", body, format="json").status_code == 403  # no CSRF token
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    token = browser.get(f"/{path}").cookies["csrftoken"].value
    with engine.local_mode():
        ok = browser.post(f"/api/v1/approvals/{approval.pk}/decide/", body, format="json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 200, ok.content
    entry = AuditEntry.objects.get(action="approval.approve", scope=f"run:{run.pk}")
    assert (entry.actor, entry.actor_type) == ("approver", "user")
    assert browser.get("/approvals/999999999/").status_code == 404


def claim_race(world: World, second: Any) -> None:
    """Two approvers claim one request at the same moment, from two threads."""
    _, approval = waiting(world)
    clients = [client_with_token(world.users["approver"]), client_with_token(second)]
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def go(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = post(clients[i], f"{approval.pk}/claim/")
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r.status_code for r in results) == [200, 409]
    winner = ["approver", "approver2"][next(i for i, r in enumerate(results) if r.status_code == 200)]
    loser = next(r for r in results if r.status_code == 409).json()["error"]
    assert loser["code"] == "claimed" and loser["by"] == winner
    assert ApprovalRequest.objects.get(pk=approval.pk).claimed_by_name == winner


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent claims need PostgreSQL row locks (SQLite serialises writers)")
def test_two_concurrent_claims_leave_one_claimer(world: World) -> None:
    second = second_approver(world)
    for _ in range(3):
        claim_race(world, second)


def test_a_malformed_version_token_is_a_400_with_the_field_not_a_409(world: World) -> None:
    _, approval = waiting(world)
    client = world.clients["approver"]
    for bad in ("garbage", "", "1:a b", "-1:x"):
        response = client.post(f"/api/v1/approvals/{approval.pk}/decide/", {"decision": "approve", "version": bad}, format="json")
        assert response.status_code == 400 and "version" in response.json()["error"]["fields"], (bad, response.content)
    approval.refresh_from_db()
    assert approval.status == "pending"
