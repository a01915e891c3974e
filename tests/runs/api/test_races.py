"""Two operator actions on one run at the same moment, from two threads with their own
database connections (PostgreSQL row locks, SQLite's serialised writers): never a 500,
always an outcome some serial order of the two gives (one wins, the other gets 409 when
it no longer applies). Races: a decision and a cancel, a resume or retry and a cancel,
two resumes, two decisions."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from runs.engine import api as engine
from runs.models import Run, Step
from tests.support.approvals import version_of
from tests.support.world import World, client_with_token, parked_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

ROUNDS = 4  # independent races per pair, each on a fresh run


def race(*posts: tuple[Any, str, dict[str, Any]]) -> list[Any]:
    """POST every ``(client, path, body)`` at once (a barrier), each in its own thread and
    database connection; returns their responses in order."""
    barrier = threading.Barrier(len(posts))
    results: list[Any] = [None] * len(posts)
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            client, path, body = posts[i]
            with engine.local_mode():
                results[i] = client.post(path, body, format="json")
        except BaseException as exc:  # reported below: a crash in a thread must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(posts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for r in results:
        assert r is not None and r.status_code < 500, getattr(r, "content", r)
    return results


def operator(world: World):
    return client_with_token(world.users["operator"])


def test_a_decision_and_a_cancel_at_once_never_fail_and_leave_the_run_cancelled(world: World) -> None:
    for _ in range(ROUNDS):
        run = world.waiting_run()
        approval = world.approval_of(run)
        approver, canceller = client_with_token(world.users["approver"]), operator(world)
        decided, cancelled = race(
            (approver, f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}),
            (canceller, f"/api/v1/runs/{run.pk}/cancel/", {"reason": "race"}),
        )
        run.refresh_from_db()
        approval.refresh_from_db()
        # The cancel always applies (a waiting run, or the run the approval resumed).
        assert cancelled.status_code == 200, cancelled.content
        assert run.status == "cancelled"
        if decided.status_code == 200:  # the decision came first: the run resumed, then was cancelled
            assert approval.status == "approved"
        else:  # the cancel came first: nothing left to decide
            assert decided.status_code == 409 and decided.json()["error"]["code"] == "already_decided", decided.content
            assert approval.status == "cancelled"
            assert not Step.objects.filter(run=run, node_id="send").exists()
        assert not Step.objects.filter(run=run, status__in=("pending", "running", "waiting")).exists()


@pytest.mark.parametrize("action", ["resume", "retry"])
def test_a_resume_or_retry_and_a_cancel_at_once_never_fail(world: World, action: str) -> None:
    for _ in range(ROUNDS):
        run = world.failed_run()
        a, b = operator(world), operator(world)
        resumed, cancelled = race(
            (a, f"/api/v1/runs/{run.pk}/{action}/", {}),
            (b, f"/api/v1/runs/{run.pk}/cancel/", {"reason": "race"}),
        )
        run.refresh_from_db()
        assert resumed.status_code == 200, resumed.content  # a cancel of a failed run does not apply
        if cancelled.status_code == 200:  # resumed first, then cancelled
            assert run.status == "cancelled"
        else:
            assert cancelled.status_code == 409 and cancelled.json()["error"]["code"] == "invalid_state", cancelled.content
            assert run.status == "running"


def test_two_resumes_at_once_reopen_the_run_once(world: World) -> None:
    for _ in range(ROUNDS):
        run = world.failed_run()
        a, b = operator(world), operator(world)
        results = race((a, f"/api/v1/runs/{run.pk}/resume/", {}), (b, f"/api/v1/runs/{run.pk}/resume/", {}))
        assert sorted(r.status_code for r in results) == [200, 409], [r.content for r in results]
        assert Run.objects.get(pk=run.pk).status == "running"
        assert Step.objects.filter(run=run, node_id="boom", status="pending").count() == 1


def test_two_decisions_at_once_one_wins(world: World) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    second = get_user_model().objects.create_user("approver2", password="pw")
    second.groups.add(Group.objects.get(name="approvers"))
    for _ in range(ROUNDS):
        run = world.waiting_run()
        approval = world.approval_of(run)
        a, b = client_with_token(world.users["approver"]), client_with_token(second)
        results = race(
            (a, f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}),
            (b, f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "reject"}),
        )
        assert sorted(r.status_code for r in results) == [200, 409], [r.content for r in results]
        assert ApprovalRequest.objects.get(pk=approval.pk).status in ("approved", "rejected")




def test_a_recovery_decision_and_a_resume_of_the_parked_run_at_once_requeue_once(world: World, effects_file) -> None:
    for _ in range(ROUNDS):
        run, request = parked_run()
        approver, resumer = client_with_token(world.users["approver"]), operator(world)
        results = race(
            (approver, f"/api/v1/approvals/{request.pk}/decide/", {"version": version_of(request.pk), "decision": "retry"}),
            (resumer, f"/api/v1/runs/{run.pk}/resume/", {}),
        )
        assert sorted(r.status_code for r in results) == [200, 409], [r.content for r in results]
        pay = Step.objects.get(run=run, node_id="pay")
        assert pay.status == "pending" and Run.objects.get(pk=run.pk).status == "running"
        assert ApprovalRequest.objects.get(pk=request.pk).decision == "retry"


def test_a_skip_decision_and_a_cancel_at_once_never_fail(world: World, effects_file) -> None:
    for _ in range(ROUNDS):
        run, request = parked_run()
        approver, canceller = client_with_token(world.users["approver"]), operator(world)
        decided, cancelled = race(
            (approver, f"/api/v1/approvals/{request.pk}/decide/", {"version": version_of(request.pk), "decision": "skip"}),
            (canceller, f"/api/v1/runs/{run.pk}/cancel/", {"reason": "race"}),
        )
        assert cancelled.status_code == 200, cancelled.content
        assert decided.status_code in (200, 409), decided.content
        assert Run.objects.get(pk=run.pk).status == "cancelled"
