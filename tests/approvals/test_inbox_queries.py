"""The approvals inbox costs a fixed number of queries, however many requests wait."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRequest
from approvals.services import user_may_decide

pytestmark = pytest.mark.usefixtures("fast_passwords")


def inbox_queries(world, role: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        response = world.clients[role].get("/api/v1/approvals/")
    assert response.status_code == 200
    return len(captured.captured_queries), response.json()["count"]


def test_inbox_queries_do_not_grow_with_pending_requests(world):
    world.waiting_run()
    inbox_queries(world, "approver")  # warm-up: the token's first use records itself
    few, count_few = inbox_queries(world, "approver")
    for _ in range(6):
        world.waiting_run()
    many, count_many = inbox_queries(world, "approver")
    assert (count_few, count_many) == (1, 7)
    assert many == few


def test_named_approvers_see_only_their_requests(world):
    run = world.waiting_run()
    request = ApprovalRequest.objects.get(run=run)
    request.approvers = ["operator"]
    request.save()
    assert inbox_queries(world, "operator")[1] == 1
    assert inbox_queries(world, "approver")[1] == 0  # named approvers replace the default rule
    assert user_may_decide(world.users["operator"], request) and not user_may_decide(world.users["approver"], request)
    request.approvers, request.approver_groups = [], ["approvers"]
    request.save()
    assert inbox_queries(world, "approver")[1] == 1 and inbox_queries(world, "operator")[1] == 0
