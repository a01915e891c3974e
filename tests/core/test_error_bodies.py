"""The exact status and JSON bytes the API answers for each service error kind (pinned before
the errors moved onto one base class, so the move changes no response)."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer

from accounts.policy import ActionNotAllowed, RunHidden
from approvals.models import ApprovalRequest
from approvals.services import AlreadyDecided, BadDecision, Changed, NotAllowed
from builder.issues import LocatedIssue
from builder.services import GraphInvalid
from core.api import exception_handler
from runs.engine.types import StateTooLarge
from runs.services import RunInputInvalid
from tests.support.engine import RunNotFound, StateWriteRefused, StepStateError, TestRunRefused, VersionUnrunnable

pytestmark = pytest.mark.usefixtures("fast_passwords")

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _decided() -> ApprovalRequest:
    return ApprovalRequest(pk=7, status="approved", decided_by_name="ann", decided_at=AT)


CASES: list[tuple[str, Any, int, bytes]] = [
    (
        "graph_invalid",
        lambda: GraphInvalid([LocatedIssue(node_id="a", field="config.x", code="bad", message="Bad x.", path="nodes[0].config.x")]),
        400,
        b'{"error":{"code":"graph_invalid","message":"The graph spec is not valid.","fields":{"nodes[0].config.x":["Bad x."]},'
        b'"issues":[{"node_id":"a","field":"config.x","message":"Bad x.","code":"bad","node":"a","path":"nodes[0].config.x"}]}}',
    ),
    (
        "input_invalid",
        lambda: RunInputInvalid([{"field": "input.a", "message": "Required."}, {"field": "input.a", "message": "Twice."}]),
        400,
        b'{"error":{"code":"input_invalid","message":"The run input does not match the graph\'s input schema.",'
        b'"fields":{"input.a":["Required.","Twice."]}}}',
    ),
    (
        "already_decided",
        lambda: AlreadyDecided(_decided()),
        409,
        b'{"error":{"code":"already_decided","message":"approval 7 was already approved by ann at 2026-01-02 03:04:05",'
        b'"fields":{},"decided_by":"ann","decided_at":"2026-01-02T03:04:05+00:00","status":"approved"}}',
    ),
    (
        "already_decided_anonymous",
        lambda: AlreadyDecided(ApprovalRequest(pk=8, status="rejected", decided_by_name="", decided_at=AT)),
        409,
        b'{"error":{"code":"already_decided","message":"approval 8 was already rejected by someone at 2026-01-02 03:04:05",'
        b'"fields":{},"decided_by":null,"decided_at":"2026-01-02T03:04:05+00:00","status":"rejected"}}',
    ),
    (
        "changed",
        lambda: Changed("claimed", "Bob claimed it.", by="bob", at=AT, version="v2"),
        409,
        b'{"error":{"code":"claimed","message":"Bob claimed it.","fields":{},"by":"bob","at":"2026-01-02T03:04:05+00:00","version":"v2"}}',
    ),
    (
        "changed_bare",
        lambda: Changed("not_claimed", "Claim it first."),
        409,
        b'{"error":{"code":"not_claimed","message":"Claim it first.","fields":{},"by":null,"at":null,"version":null}}',
    ),
    ("run_hidden", lambda: RunHidden("run 5"), 404, b'{"error":{"code":"not_found","message":"Not found.","fields":{}}}'),
    ("run_not_found", lambda: RunNotFound("run 5"), 404, b'{"error":{"code":"not_found","message":"Not found.","fields":{}}}'),
    (
        "not_allowed",
        lambda: NotAllowed("You may not decide this."),
        403,
        b'{"error":{"code":"not_allowed","message":"You may not decide this.","fields":{}}}',
    ),
    (
        "action_not_allowed",
        lambda: ActionNotAllowed("You may not cancel this run."),
        403,
        b'{"error":{"code":"not_allowed","message":"You may not cancel this run.","fields":{}}}',
    ),
    (
        "bad_decision",
        lambda: BadDecision("Too long.", field="comment"),
        400,
        b'{"error":{"code":"bad_decision","message":"Too long.","fields":{"comment":["Too long."]}}}',
    ),
    (
        "state_write_refused",
        lambda: StateWriteRefused("unknown_state_key", "No key z.", {"state_patch.z": ["No key z."]}),
        400,
        b'{"error":{"code":"unknown_state_key","message":"No key z.","fields":{"state_patch.z":["No key z."]}}}',
    ),
    (
        "state_too_large",
        lambda: StateTooLarge("Too big.", field="output", details={"size": 9, "limit": 8, "keys": [["a", 9]]}),
        400,
        b'{"error":{"code":"state_too_large","message":"Too big.","fields":{"output":["Too big."]},'
        b'"details":{"size":9,"limit":8,"keys":[["a",9]]}}}',
    ),
    ("test_run", lambda: TestRunRefused("A test run."), 409, b'{"error":{"code":"test_run","message":"A test run.","fields":{}}}'),
    (
        "version_invalid",
        lambda: VersionUnrunnable("Budget too big.", {"settings.budget_usd": ["Too big."]}),
        400,
        b'{"error":{"code":"version_invalid","message":"Budget too big.","fields":{"settings.budget_usd":["Too big."]}}}',
    ),
    (
        "invalid_state",
        lambda: StepStateError("Step 3 is not waiting."),
        409,
        b'{"error":{"code":"invalid_state","message":"Step 3 is not waiting.","fields":{}}}',
    ),
]


@pytest.mark.parametrize(("make", "status", "body"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_service_error_body(make: Any, status: int, body: bytes) -> None:
    response = exception_handler(make(), {})
    assert response.status_code == status
    assert JSONRenderer().render(response.data) == body
    assert set(response.headers) == {"Content-Type"}  # no WWW-Authenticate, no Retry-After
