"""Approvals through the API: the inbox, deciding, deciding twice (409 naming who decided),
and two concurrent decisions on PostgreSQL leaving exactly one decision and one resume."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from runs.engine import api as engine
from runs.models import RunEvent, Step
from tests.support.approvals import version_of
from tests.support.world import World, client_with_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def _current(approval_id: int) -> str:
    return version_of(approval_id) if ApprovalRequest.objects.filter(pk=approval_id).exists() else "1:none"


def decide(client, approval_id: int, decision: str = "approve", comment: str = "", version: str | None = None, **extra):
    """POST a decision as the version ``version`` (default: the current one, as just read)."""
    body = {"decision": decision, "comment": comment, "version": version or _current(approval_id), **extra}
    with engine.local_mode() as queue:
        response = client.post(f"/api/v1/approvals/{approval_id}/decide/", body, format="json")
    return response, list(queue)


def test_inbox_lists_what_the_caller_may_decide_and_admins_see_everything(world: World) -> None:
    runs = [world.waiting_run(), world.waiting_run()]
    ids = sorted(world.approval_of(r).pk for r in runs)
    mine = world.clients["approver"].get("/api/v1/approvals/").json()
    assert sorted(a["id"] for a in mine["results"]) == ids and all(a["may_decide"] for a in mine["results"])
    assert mine["results"][0]["prompt"] == "Send Hello Ada?"
    assert world.clients["operator"].get("/api/v1/approvals/").json()["count"] == 0
    assert world.clients["admin"].get("/api/v1/approvals/all/").json()["count"] == 2
    assert world.clients["approver"].get("/api/v1/approvals/all/").status_code == 403
    assert world.clients["approver"].get("/api/v1/approvals/?status=approved").json()["count"] == 0


def test_decide_resumes_the_run_and_deciding_again_is_a_conflict_naming_the_decider(world: World) -> None:
    run = world.waiting_run()
    approval = world.approval_of(run)
    response, queued = decide(world.clients["approver"], approval.pk, comment="ship it")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved" and body["decided_by"] == "approver" and body["comment"] == "ship it"
    assert queued == list(Step.objects.filter(run=run, node_id="send").values_list("id", flat=True))
    with engine.local_mode() as queue:
        queue.extend(queued)
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["sent"] is True

    again, queued_again = decide(world.clients["admin"], approval.pk, "reject")
    assert again.status_code == 409 and queued_again == []
    error = again.json()["error"]
    assert error["code"] == "already_decided" and error["decided_by"] == "approver" and error["status"] == "approved"
    assert "approver" in error["message"]
    entry = AuditEntry.objects.get(action="approval.approve")
    assert (entry.actor, entry.actor_type, entry.scope, entry.data["comment"]) == ("approver", "token", f"run:{run.pk}", "ship it")


def test_bad_decisions_are_field_errors(world: World) -> None:
    approval = world.approval_of(world.waiting_run())
    wrong, _ = decide(world.clients["approver"], approval.pk, "retry")  # a recovery decision on a gate
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "bad_decision" and "decision" in wrong.json()["error"]["fields"]
    unknown, _ = decide(world.clients["approver"], approval.pk, "maybe")
    assert unknown.status_code == 400 and "decision" in unknown.json()["error"]["fields"]
    missing, _ = decide(world.clients["approver"], 10**12)
    assert missing.status_code == 404
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent decisions need PostgreSQL row locks (SQLite serialises writers)")
def test_two_concurrent_decisions_leave_one_decision_and_one_resume(world: World) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    second = get_user_model().objects.create_user("approver2", password="pw")
    second.groups.add(Group.objects.get(name="approvers"))
    for _ in range(3):  # three independent races, each on a fresh approval
        race_once(world, second)


def race_once(world: World, second) -> None:
    """Two approvers decide one approval at the same moment, from two threads."""
    run = world.waiting_run()
    approval = world.approval_of(run)
    clients = [client_with_token(world.users["approver"]), client_with_token(second)]
    shown = version_of(approval)  # both saw the same request
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def go(i: int, decision: str) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = decide(clients[i], approval.pk, decision, version=shown)
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(0, "approve")), threading.Thread(target=go, args=(1, "reject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    statuses = sorted(r[0].status_code for r in results)
    assert statuses == [200, 409], [r[0].content for r in results]
    winner = next(i for i, r in enumerate(results) if r[0].status_code == 200)
    loser = results[1 - winner][0].json()["error"]
    winner_name = ["approver", "approver2"][winner]
    assert loser["code"] == "already_decided" and loser["decided_by"] == winner_name
    approval.refresh_from_db()
    assert approval.decided_by_name == winner_name and approval.status in ("approved", "rejected")
    # One resume: exactly one successor step, handed to the queue exactly once.
    successor = "send" if approval.status == "approved" else "discard"
    created = list(Step.objects.filter(run=run, node_id__in=("send", "discard")).values_list("id", "node_id"))
    assert [n for _, n in created] == [successor]
    assert results[winner][1] == [created[0][0]] and results[1 - winner][1] == []
    assert AuditEntry.objects.filter(scope=f"run:{run.pk}", action__startswith="approval.").count() == 1
    review = Step.objects.get(run=run, node_id="review")
    assert RunEvent.objects.filter(run=run, step=review, kind="step_succeeded").count() == 1


def test_a_run_lists_its_pending_requests_for_whoever_may_read_it(world: World) -> None:
    """The run page links a waiting step to its request: any reader of the run gets the
    request's id (may_decide says whether they may decide); a hidden run is 404."""
    run = world.waiting_run()
    approval = world.approval_of(run)
    for role, may in (("admin", True), ("approver", True), ("builder", False)):
        response = world.clients[role].get(f"/api/v1/approvals/of-run/{run.pk}/")
        assert response.status_code == 200, (role, response.content)
        body = response.json()
        assert [(a["id"], a["step"], a["node_id"], a["purpose"], a["may_decide"]) for a in body] == [
            (approval.pk, approval.step_id, approval.node_id, "gate", may)
        ], role
    assert world.clients["viewer"].get(f"/api/v1/approvals/of-run/{run.pk}/").status_code == 404
    assert world.clients["admin"].get("/api/v1/approvals/of-run/999999999/").status_code == 404
    decide(world.clients["approver"], approval.pk)
    assert world.clients["admin"].get(f"/api/v1/approvals/of-run/{run.pk}/").json() == []
