"""A decision with a field it does not take is refused with a 400 naming the field, and
decides nothing: an unknown field, or an ``output`` with a gate's approve/reject (only a
parked step's decision takes one). A client's mistake is never mistaken for a recorded
value."""
from __future__ import annotations

from typing import Any

import pytest

from approvals.models import ApprovalRequest
from runs.engine import api as engine
from tests.support.approvals import version_of
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def decide(world: World, approval: ApprovalRequest, body: dict[str, Any]) -> Any:
    with engine.local_mode():
        return world.clients["approver"].post(
            f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval), **body}, format="json"
        )


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"decision": "approve", "output": {"x": 1}}, ["output"]),
        ({"decision": "reject", "output": {"x": 1}}, ["output"]),
        ({"decision": "approve", "outptu": {"x": 1}}, ["outptu"]),
        ({"decision": "approve", "comments": "typo", "value": {"a": 1}}, ["comments", "value"]),
    ],
)
def test_a_field_the_decision_does_not_take_is_a_400_naming_it_and_decides_nothing(world: World, body: dict, fields: list[str]) -> None:
    approval = world.approval_of(world.waiting_run())
    response = decide(world, approval, body)
    assert response.status_code == 400, response.content
    assert sorted(response.json()["error"]["fields"]) == fields
    approval.refresh_from_db()
    assert approval.status == "pending" and not approval.votes.exists()


def test_the_fields_a_decision_takes_still_decide(world: World) -> None:
    approval = world.approval_of(world.waiting_run())
    response = decide(world, approval, {"decision": "approve", "comment": "fine", "output": None})
    assert response.status_code == 200, response.content
    approval.refresh_from_db()
    assert approval.status == "approved"
