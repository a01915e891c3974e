"""The approvals inbox in a real browser: approve the refund example from the inbox; two
approvers decide one request at the same moment and exactly one decision counts (the
other is told who decided); a quorum of two distinct approvers.

Screenshots go to artifacts/ (inbox-*.png)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from runs.engine import api as engine
from runs.models import Run, Step
from tests.support.browser import approver, login, screenshot
from tests.support.specs import chain, edge, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def refund_waiting() -> Run:
    spec = json.loads((EXAMPLES / "refund_agent.json").read_text())
    run = run_local(spec, {"order_id": "A-1002", "reason": "arrived broken"})
    assert run.status == "waiting", run.error
    return run


def quorum_waiting(quorum: int) -> Run:
    spec = graph(
        [
            node("start", "start"),
            transform("draft", reply="'Hello ' + name"),
            node("review", "approval", config={"prompt": "Send “{{ reply }}” to the customer?", "quorum": quorum}),
            node("send", "tool", config={"tool": "send_email", "output_key": "email", "args": {"to": "c@example.com", "subject": "Hi", "body": "{{ reply }}"}}),
            node("end", "end"),
        ],
        chain("start", "draft", "review") + [edge("review", "send", "approved"), edge("send", "end")],
        name="Customer reply",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )
    run = run_local(spec, {"name": "Ada"})
    assert run.status == "waiting", run.error
    return run


def finish(run: Run) -> Run:
    """Drive the run's queued steps in this process (the live server has no worker)."""
    with engine.local_mode() as queue:
        queue.extend(Step.objects.filter(run=run, status="pending").values_list("id", flat=True))
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    return run


def test_approve_the_refund_from_the_inbox(live_server, page: Page) -> None:
    amal = approver("amal")
    login(page, live_server, amal)
    page.goto(f"{live_server.url}/approvals/")
    expect(page.get_by_text("Nothing waits for your groups").or_(page.get_by_text("Nothing is assigned to you"))).to_be_visible()
    screenshot(page, "inbox-empty")

    run = refund_waiting()
    approval = ApprovalRequest.objects.get(run=run)
    # New requests appear without a reload, and the top bar counts them.
    item = page.get_by_role("button", name="refund").first
    expect(page.get_by_role("tab", name="My groups")).to_contain_text("1")
    page.get_by_role("tab", name="My groups").click()
    expect(item).to_be_visible()
    detail = page.get_by_role("region", name="Request")
    expect(detail.get_by_text("If approved, the run does next")).to_be_visible()
    expect(detail.get_by_text("issue_refund")).to_be_visible()  # the next node's tool, its arguments rendered
    expect(detail.locator(".inbox-args").first).to_contain_text("A-1002")
    expect(detail.get_by_text("of $0.25 budget")).to_be_visible()  # the run's cost so far and its budget
    page.reload()
    expect(page.get_by_role("link", name="Approvals")).to_contain_text("1")
    expect(detail.get_by_text("issue_refund")).to_be_visible()
    screenshot(page, "inbox-item")

    page.get_by_role("region", name="Request").get_by_label("Comment").fill("policy ok")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("Approved. The run continues on its own.")).to_be_visible()
    expect(detail.get_by_role("status").filter(has_text="amal approved this")).to_be_visible()
    expect(page.get_by_role("link", name="Approvals")).not_to_contain_text("1")  # the top bar counted again
    screenshot(page, "inbox-approved")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name, approval.comment) == ("approved", "amal", "policy ok")
    assert AuditEntry.objects.get(action="approval.approve", scope=f"run:{run.pk}").actor == "amal"
    assert finish(run).state["outcome"] == "refunded 129.5 USD"
    page.get_by_role("tab", name="Decided by me").click()
    expect(page.get_by_role("button", name="refund").first).to_be_visible()


def test_two_approvers_decide_one_request_at_once_and_exactly_one_counts(live_server, browser) -> None:
    users = [approver("amal"), approver("bea")]
    run = refund_waiting()
    approval = ApprovalRequest.objects.get(run=run)
    pages = []
    for user in users:
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        p = ctx.new_page()
        login(p, live_server, user)
        p.goto(f"{live_server.url}/approvals/{approval.pk}/")
        expect(p.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
        pages.append(p)
    # Both click before either answer is back: the server decides which one counts.
    pages[0].get_by_role("button", name="Approve", exact=True).click(no_wait_after=True)
    pages[1].get_by_role("button", name="Reject").click(no_wait_after=True)
    approval_done = lambda: ApprovalRequest.objects.get(pk=approval.pk)  # noqa: E731
    for p in pages:
        expect(p.get_by_role("status").or_(p.get_by_role("alert")).filter(has_text="Not recorded").or_(
            p.get_by_text("The run continues on its own."))).to_be_visible()
    decided = approval_done()
    winner = decided.decided_by_name
    assert decided.status in ("approved", "rejected") and winner in ("amal", "bea")
    loser_page = pages[1] if winner == "amal" else pages[0]
    expect(loser_page.get_by_role("alert").filter(has_text="Not recorded")).to_contain_text(f"{winner} already {decided.status}")
    screenshot(loser_page, "inbox-conflict")
    assert AuditEntry.objects.filter(scope=f"run:{run.pk}", action__startswith="approval.").count() == 1
    successors = Step.objects.filter(run=run, node_id__in=("issue", "reviewer_rejected")).count()
    assert successors == 1
    for p in pages:
        p.context.close()


def test_a_quorum_of_two(live_server, browser) -> None:
    users = [approver("amal"), approver("bea")]
    run = quorum_waiting(2)
    approval = ApprovalRequest.objects.get(run=run)
    pages = []
    for user in users:
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        p = ctx.new_page()
        login(p, live_server, user)
        p.goto(f"{live_server.url}/approvals/{approval.pk}/")
        expect(p.get_by_role("button", name="Approve (1 of 2)")).to_be_visible()
        pages.append(p)
    amal, bea = pages
    amal.get_by_role("button", name="Approve (1 of 2)").click()
    expect(amal.get_by_text("Approved. The run continues on its own.")).to_be_visible()
    expect(amal.get_by_text("1 of 2 (amal)")).to_be_visible()
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    assert not Step.objects.filter(run=run, node_id="send").exists()
    # Bea's page was opened before amal's vote: it says so, and her click on the old version is refused.
    expect(bea.get_by_text("Changed since you opened it")).to_be_visible()
    screenshot(bea, "inbox-quorum-changed")
    bea.get_by_role("button", name="Show the latest").click()
    bea.get_by_role("button", name="Approve", exact=True).click()
    expect(bea.get_by_text("Approved. The run continues on its own.")).to_be_visible()
    decided = ApprovalRequest.objects.get(pk=approval.pk)
    assert (decided.status, decided.decided_by_name) == ("approved", "bea")
    run = finish(run)
    assert run.status == "succeeded" and run.state["approval"]["approvers"] == ["amal", "bea"]
    for p in pages:
        p.context.close()
