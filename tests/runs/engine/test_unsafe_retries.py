"""A step not safe to repeat is never retried blind: after an error that may have let its
side effect happen (a timeout, a 5xx) it is parked for a person, as after a crash; only an
error that says nothing was sent (a refused connection, a 429) is retried by its policy,
and a node that declares itself ``repeat_safe`` keeps plain retries. Against a real local
HTTP server that counts the requests it receives."""
from __future__ import annotations

import socket

import pytest

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import RunEventKind, Step
from tests.support.bounded import wait_until
from tests.support.http_server import Handler
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)


def post_spec(url: str, args: dict | None = None, **fields) -> dict:
    fields.setdefault("retry", {"max_attempts": 3, "backoff_seconds": 0})
    call_args = {"method": "POST", "url": url, "json": {"n": 1}, **(args or {})}
    return graph(
        [
            node("start", "start"),
            node("call", "tool", config={"tool": "http_request", "args": call_args}, **fields),
            node("end", "end"),
        ],
        chain("start", "call", "end"),
    )


def posts(path: str) -> list[dict]:
    """The POST requests to ``path`` the server received, in order of arrival."""
    return [r for r in Handler.received if r["method"] == "POST" and r["path"] == path]


def answered(path: str) -> list[dict]:
    """The POST requests to ``path`` the server has answered, in order of arrival."""
    return [r for r in Handler.received if r["method"] == "POST" and r["path"] == path and any(a is r for a in Handler.answered)]


def test_a_timed_out_post_is_parked_for_a_decision_not_sent_again(server):
    # The request's read timeout, not the step's: a read times out only after the request
    # was written, however long a loaded machine keeps the step's thread from a core (a
    # 1 s step timeout could expire before the POST left, and nothing would be sent).
    spec = post_spec(f"{server}/hold", args={"timeout": 1})
    run = run_local(spec, timeout=30)
    Handler.release.set()
    wait_until(lambda: answered("/hold") == posts("/hold"), 30, "the server to finish the requests it was sent")
    assert len(posts("/hold")) == 1
    assert run.status == "waiting", run.error
    step = Step.objects.get(run=run, node_id="call")
    assert step.status == "parked" and step.attempt == 1 and step.error["code"] == "http_timeout", step.error
    request = ApprovalRequest.objects.get(run=run, purpose="recovery")
    assert "outcome unknown" in request.prompt and request.payload["idempotency_key"] == step.idempotency_key
    assert run.events.filter(kind=RunEventKind.STEP_PARKED, step=step).exists()
    assert not run.events.filter(kind=RunEventKind.STEP_RETRYING).exists()
    # A person decides to send it again: one more request, with the same key, then parked again.
    approval_decide(approval_id=request.pk, decision="retry", actor="tester")
    from tests.support.specs import continue_local

    Handler.release.clear()
    run = continue_local(run, timeout=30)
    Handler.release.set()
    wait_until(lambda: answered("/hold") == posts("/hold"), 30, "the server to finish the requests it was sent")
    assert len(posts("/hold")) == 2 and len({p["headers"]["Idempotency-Key"] for p in posts("/hold")}) == 1
    assert Step.objects.get(pk=step.pk).status == "parked"


def test_a_5xx_answer_to_a_post_is_parked_too(server):
    run = run_local(post_spec(f"{server}/status/503"), timeout=30)
    assert len(posts("/status/503")) == 1
    assert run.status == "waiting" and Step.objects.get(run=run, node_id="call").status == "parked"


def test_a_post_that_was_certainly_not_sent_is_retried_by_its_policy(server):
    limited = run_local(post_spec(f"{server}/status/429?retry_after=0"), timeout=30)
    assert limited.status == "failed" and limited.error["code"] == "rate_limited", limited.error
    assert len(posts("/status/429")) == 3
    with socket.socket() as sock:  # a port nothing listens on: the connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = run_local(post_spec(f"http://127.0.0.1:{port}/x"), timeout=30)
    assert refused.status == "failed" and refused.error["code"] == "http_connection", refused.error
    step = Step.objects.get(run=refused, node_id="call")
    assert step.attempt == 3 and step.error["not_sent"] is True


def test_a_node_that_declares_itself_repeat_safe_keeps_its_retries(server):
    run = run_local(post_spec(f"{server}/status/503", repeat_safe=True), timeout=30)
    assert run.status == "failed" and run.error["code"] == "http_5xx"
    assert len(posts("/status/503")) == 3
