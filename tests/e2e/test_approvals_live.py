"""The approvals inbox live in Chromium, against a real daphne (WebSockets: ws/approvals/
and ws/runs/) and, where a run must go on, a real qcluster worker:

- approve from the inbox in one browser context while a second context, watching the run
  page, sees the run resume and finish without a reload (resumed exactly once);
- a deadline that follows its timeout edge: the item counts down in the inbox, the
  worker's own claim by due time fires it, the item leaves the list live, the open item
  says it timed out, and the run goes on down the timeout edge;
- a new request appears in two approvers' inboxes without a reload, and when one decides
  it the other's open item updates live and names who decided.

pytest-django's live server speaks no WebSocket (the inbox would fall back to fetching
every 3 s), so these tests run daphne on the test database (tests/e2e/test_live_run_page.py)
and check the page says "Live". Screenshots: artifacts/inbox-live-*.png.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, BrowserContext, Page, expect

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from runs.models import Run, RunEvent, Step
from runs.services import run_start
from tests.support.approvals import deadline_spec
from tests.support.browser import PATIENT_MS, approver, screenshot, sign_in
from tests.support.cluster import Cluster, wait_for_status
from tests.support.daphne import Daphne
from tests.support.specs import publish, run_local
from tests.support.world import approval_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

# Ceilings on a loaded machine: every wait below ends as soon as its condition holds.
LIVE_MS = PATIENT_MS
RUN_S = 90.0


@pytest.fixture
def contexts(browser: Browser) -> Iterator[list[BrowserContext]]:
    """Browser contexts made by ``open_as`` (one per person), closed at teardown."""
    made: list[BrowserContext] = []
    yield made
    for ctx in made:
        ctx.close()


def open_as(browser: Browser, contexts: list[BrowserContext], server: Daphne, user: User, path: str) -> Page:
    """A fresh browser context signed in as ``user`` (password ``pw-<username>-1``) at ``path``,
    marked so a reload would show (``window.__notReloaded``)."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.set_default_timeout(LIVE_MS)
    contexts.append(ctx)
    page = ctx.new_page()
    sign_in(page, server.url, user.username, f"pw-{user.username}-1")
    page.goto(f"{server.url}{path}")
    page.evaluate("window.__notReloaded = true")
    return page


def inbox_live(page: Page) -> None:
    """The inbox page's socket is open (live, not the 3 s fallback fetch)."""
    expect(page.locator(".inbox-page").get_by_role("status").filter(has_text="Live")).to_be_visible()


def not_reloaded(page: Page) -> bool:
    return page.evaluate("window.__notReloaded") is True


def started_worker(cluster_factory) -> Cluster:  # noqa: F811
    cluster = cluster_factory("a").start()
    cluster.wait_ready(timeout=RUN_S)
    return cluster


def test_approve_in_the_inbox_while_another_context_watches_the_run_resume(daphne: Daphne, browser, contexts, cluster_factory) -> None:  # noqa: F811
    worker = started_worker(cluster_factory)
    amal = approver("amal")
    User.objects.create_superuser("ada", "ada@example.com", "pw-ada-1")
    run = wait_for_status(run_start(version=publish(approval_spec()), run_input={"name": "Ada"}, actor="tester"), "waiting", timeout=RUN_S, clusters=[worker])
    approval = ApprovalRequest.objects.get(run=run)

    watcher = open_as(browser, contexts, daphne, User.objects.get(username="ada"), f"/runs/{run.pk}/")
    heading = watcher.get_by_role("heading", name=f"Run #{run.pk}")
    expect(heading).to_contain_text("waiting at approval")

    inbox = open_as(browser, contexts, daphne, amal, f"/approvals/{approval.pk}/")
    inbox_live(inbox)
    detail = inbox.get_by_role("region", name="Request")
    expect(detail.get_by_text("If approved, the run does next")).to_be_visible()
    detail.get_by_label("Comment").fill("fine by me")
    detail.get_by_role("button", name="Approve", exact=True).click()
    expect(inbox.get_by_text("Approved. The run continues on its own.")).to_be_visible()

    # The watcher's page follows the run: it resumes on the worker and finishes, no reload.
    expect(heading).to_contain_text("succeeded", timeout=int(RUN_S * 1000))
    expect(watcher.locator("table[aria-label='Run events']")).to_contain_text("run_resumed")
    expect(watcher.get_by_role("button", name="Cancel run")).to_have_count(0)  # nothing left to cancel
    assert not_reloaded(watcher) and not_reloaded(inbox)
    screenshot(watcher, "inbox-live-run-resumed")

    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["sent"] is True
    assert Step.objects.filter(run=run, node_id="send").count() == 1  # resumed exactly once
    assert RunEvent.objects.filter(run=run, kind="run_resumed").count() == 1
    assert AuditEntry.objects.get(action="approval.approve", scope=f"run:{run.pk}").actor == "amal"


def test_a_deadline_follows_its_timeout_edge_live(daphne: Daphne, browser, contexts, cluster_factory) -> None:  # noqa: F811
    worker = started_worker(cluster_factory)
    amal = approver("amal")
    inbox = open_as(browser, contexts, daphne, amal, "/approvals/")
    inbox_live(inbox)
    inbox.get_by_role("tab", name="My groups").click()
    expect(inbox.get_by_text("Nothing waits for your groups")).to_be_visible()

    # A real deadline, long enough for the page to show it counting down, short for a test.
    run = run_start(version=publish(deadline_spec("timeout", deadline="10s")), actor="tester")
    run = wait_for_status(run, "waiting", timeout=RUN_S, clusters=[worker])
    approval = ApprovalRequest.objects.get(run=run)
    assert approval.due_at is not None and approval.escalation == "timeout"

    listed = inbox.get_by_role("list", name="My groups").get_by_role("listitem")
    expect(listed).to_have_count(1)  # arrived live
    expect(listed.first.locator(".inbox-deadline")).to_contain_text("due in")
    listed.first.get_by_role("button").click()
    detail = inbox.get_by_role("region", name="Request")
    expect(detail.locator(".inbox-deadline-line")).to_contain_text("then it times out and the run takes its timeout path")
    screenshot(inbox, "inbox-live-countdown")

    # The worker's claim by due time fires it: the item leaves the list and the open item says so.
    expect(listed).to_have_count(0, timeout=int(RUN_S * 1000))
    expect(inbox.get_by_text("Nothing waits for your groups")).to_be_visible()
    expect(detail.get_by_role("status").filter(has_text="While you had it open")).to_contain_text("it timed out")
    expect(detail.get_by_text("Had it been approved, the run would have done")).to_be_visible()
    expect(detail.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(inbox.get_by_role("tab", name="My groups")).to_contain_text("0")
    assert not_reloaded(inbox)
    screenshot(inbox, "inbox-live-timed-out")

    run = wait_for_status(run, "succeeded", timeout=RUN_S, clusters=[worker])
    assert run.state["sent"] == "late" and run.state["approval"]["decision"] == "timeout"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name) == ("expired", "deadline")
    assert [e["action"] for e in RunEvent.objects.filter(run=run, kind="step_deadline").values_list("data", flat=True)] == ["timeout"]
    assert Step.objects.filter(run=run, node_id="late").count() == 1
    assert not Step.objects.filter(run=run, node_id__in=("send", "discard")).exists()

    # The run page tells the same story.
    inbox.goto(f"{daphne.url}/runs/{run.pk}/")
    expect(inbox.get_by_role("heading", name=f"Run #{run.pk}")).to_contain_text("succeeded")
    expect(inbox.locator("table[aria-label='Run events']")).to_contain_text("step_deadline")


def test_a_new_item_appears_live_and_a_decision_by_someone_else_shows_who(daphne: Daphne, browser, contexts) -> None:  # noqa: F811
    amal, bea = approver("amal"), approver("bea")
    pages = []
    for user in (amal, bea):
        page = open_as(browser, contexts, daphne, user, "/approvals/")
        inbox_live(page)
        page.get_by_role("tab", name="My groups").click()
        expect(page.get_by_text("Nothing waits for your groups")).to_be_visible()
        pages.append(page)
    amal_page, bea_page = pages

    run = run_local(approval_spec(), {"name": "Ada"})
    assert run.status == "waiting", run.error
    for page in pages:  # arrives in both inboxes, and in the tab's count, without a reload
        listed = page.get_by_role("list", name="My groups").get_by_role("listitem")
        expect(listed).to_have_count(1)
        expect(listed.first).to_contain_text("Send Hello Ada?")
        expect(page.get_by_role("tab", name="My groups")).to_contain_text("1")
        listed.first.get_by_role("button").click()
        expect(page.get_by_role("region", name="Request").get_by_role("button", name="Approve", exact=True)).to_be_enabled()
    screenshot(amal_page, "inbox-live-new-item")

    bea_detail = bea_page.get_by_role("region", name="Request")
    bea_detail.get_by_label("Comment").fill("looks right")
    bea_detail.get_by_role("button", name="Approve", exact=True).click()
    expect(bea_page.get_by_text("Approved. The run continues on its own.")).to_be_visible()

    # Amal's open item: who decided, and nothing left to click; the list lets it go.
    amal_detail = amal_page.get_by_role("region", name="Request")
    said = amal_detail.get_by_role("status").filter(has_text="While you had it open")
    expect(said).to_contain_text("bea approved this")
    expect(said).to_contain_text("looks right")
    expect(amal_detail.locator(".inbox-detail-head")).to_contain_text("approved", ignore_case=True)  # the badge moved on too
    expect(amal_detail.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(amal_page.get_by_role("list", name="My groups").get_by_role("listitem")).to_have_count(0)
    expect(amal_page.get_by_role("tab", name="My groups")).to_contain_text("0")
    screenshot(amal_page, "inbox-live-decided-by-other")
    assert not_reloaded(amal_page) and not_reloaded(bea_page)
    decided = ApprovalRequest.objects.get(run=run)
    assert (decided.status, decided.decided_by_name) == ("approved", "bea")
    assert Run.objects.get(pk=run.pk).status in ("running", "queued")  # resumed (no worker here to finish it)
