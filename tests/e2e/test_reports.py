"""The report pages in a real browser: the cost page's totals against sums made in SQL, the audit log's filters and chain verification, the workers page, the top bar's links.

Screenshots: artifacts/costs.png, costs-user.png, costs-empty.png, audit.png,
audit-filtered.png, audit-tampered.png, workers.png, workers-empty.png, forbidden-audit.png.
"""
from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from audit.models import AuditEntry
from runs.engine import workers as engine_workers
from runs.models import Worker
from tests.support import engine
from tests.support.audit import tamper
from tests.support.browser import format_usd, login, make_user, screenshot, wait_until_still
from tests.support.costs import make_spend, sql_by, sql_totals
from tests.support.leases import pay_version, run_at_pay
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)








def stat(page, name: str):
    return page.locator(f'[data-stat="{name}"] dd:not(.stat-note)')


def test_cost_page_shows_the_same_totals_as_the_database(live_server, page, sdk_providers):  # noqa: F811
    spend = make_spend(unpriced=sdk_providers)
    root = make_user("root", staff=True)
    expected = sql_totals()
    login(page, live_server, root)
    bar = page.get_by_role("banner")
    for link in ("Costs", "Audit", "Workers"):
        expect(bar.get_by_role("link", name=link)).to_be_visible()
    bar.get_by_role("link", name="Costs").click()
    page.wait_for_url(re.compile(r".*/costs/.*"))
    expect(page.get_by_role("heading", name="Costs", exact=True)).to_be_visible()
    expect(bar.get_by_role("link", name="Costs")).to_have_attribute("aria-current", "page")

    # Exact sums behind the figures, and the figures as shown (one attempt has no price).
    expect(stat(page, "total")).to_have_attribute("data-usd", str(expected["cost_usd"]))
    expect(stat(page, "retry")).to_have_attribute("data-usd", str(expected["retry_cost_usd"]))
    expect(stat(page, "crash")).to_have_attribute("data-usd", str(expected["crash_rerun_cost_usd"]))
    expect(stat(page, "total")).to_have_text(f"{format_usd(expected['cost_usd'])} + unknown")
    expect(stat(page, "retry")).to_have_text(format_usd(expected["retry_cost_usd"]))
    expect(stat(page, "crash")).to_have_text(format_usd(expected["crash_rerun_cost_usd"]))
    expect(stat(page, "unpriced")).to_have_text("1 attempt")

    # By graph: each row as the database sums it; the unpriced graph reads unknown, not $0.
    breakdown = page.get_by_role("table", name="Spend by graph")
    for name, usd in sql_by("graph").items():
        row = breakdown.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))
        expect(row.get_by_role("cell").nth(1)).to_have_text("unknown" if name == "local" else format_usd(usd))
    expect(page.get_by_role("table", name="Most expensive runs").get_by_role("row")).to_have_count(1 + len(spend.runs))
    page.get_by_role("group", name="Break down by").get_by_role("button", name="Model").click()
    expect(page.get_by_role("table", name="Spend by model").get_by_role("row").filter(has_text="my-finetune-7b").get_by_role("cell").nth(1)).to_have_text("unknown")
    page.get_by_role("group", name="Break down by").get_by_role("button", name="Graph").click()
    expect(page.locator(".chart canvas").first).to_be_visible()
    wait_until_still(page, ".chart canvas", measure="pixels")  # the charts' chunk has loaded and drawn
    screenshot(page, "costs")

    # The CSV link carries the page's filters and downloads the same rows.
    with page.expect_download() as download:
        page.get_by_role("region", name="Most expensive runs").get_by_role("link", name="Export CSV").click()
    text = open(download.value.path()).read()
    assert text.splitlines()[0].startswith("run,label,cost_usd") and len(text.splitlines()) == 1 + len(spend.runs)

    # A range with no spend: an empty state, not zeros dressed up as a report.
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    page.get_by_label("To", exact=True).fill(yesterday)
    page.get_by_label("From", exact=True).fill(yesterday)
    expect(page.get_by_text("No spend in this range")).to_be_visible()
    assert f"until={yesterday}" in page.url
    screenshot(page, "costs-empty")
    page.get_by_role("button", name="All time").click()
    expect(stat(page, "total")).to_have_attribute("data-usd", str(expected["cost_usd"]))


def test_a_user_sees_only_the_spend_of_runs_she_may_read(live_server, page):
    spend = make_spend()
    ana = spend.users["ana"]
    mine = sql_totals(user_id=ana.pk)
    assert mine["cost_usd"] < sql_totals()["cost_usd"]
    login(page, live_server, ana)
    bar = page.get_by_role("banner")
    expect(bar.get_by_role("link", name="Costs")).to_be_visible()
    expect(bar.get_by_role("link", name="Audit")).to_have_count(0)
    expect(bar.get_by_role("link", name="Workers")).to_have_count(0)
    page.goto(f"{live_server.url}/costs/")
    expect(stat(page, "total")).to_have_attribute("data-usd", str(mine["cost_usd"]))
    expect(stat(page, "total")).to_have_text(format_usd(mine["cost_usd"]))
    expect(page.get_by_role("table", name="Spend by graph").get_by_role("link", name="hidden")).to_have_count(0)
    # Budgets: alpha's two runs carried $1 each.
    budgets = page.get_by_role("region", name="Budgets")
    expect(budgets.get_by_role("row").filter(has_text="alpha").get_by_role("cell").nth(1)).to_have_text("$1.00")
    screenshot(page, "costs-user")
    # Keyboard: the range presets and the breakdown buttons are reachable and work with Enter.
    page.get_by_role("button", name="Last 7 days").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_label("From", exact=True)).to_have_value((timezone.now() - timedelta(days=6)).date().isoformat())
    page.get_by_role("group", name="Break down by").get_by_role("button", name="Node").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Spend by node")).to_be_visible()

    # The audit log is for admins: a 403 page that says so.
    response = page.goto(f"{live_server.url}/audit/")
    assert response.status == 403
    expect(page.get_by_text("Only administrators may see the audit log")).to_be_visible()
    expect(page.get_by_text("only staff accounts may (Admin → Users → Staff status)")).to_be_visible()
    screenshot(page, "forbidden-audit")


def test_audit_page_filters_and_shows_the_chains_verification(live_server, page):
    spec = graph([node("start", "start"), transform("t", y="1"), node("end", "end")], chain("start", "t", "end"), name="audited")
    runs = [run_local(spec, {}) for _ in range(3)]
    root = make_user("root", staff=True)
    login(page, live_server, root)
    page.get_by_role("banner").get_by_role("link", name="Audit").click()
    page.wait_for_url(re.compile(r".*/audit/.*"))
    total = AuditEntry.objects.count()
    expect(page.get_by_role("heading", name="Audit chain intact")).to_be_visible()
    expect(page.get_by_text(re.compile(f"^{total} entries in"))).to_be_visible()
    table = page.get_by_role("table", name="Audit entries")
    expect(table.get_by_role("row")).to_have_count(1 + min(total, 50))
    screenshot(page, "audit")

    # Verb: only run.start entries, as many as the database holds.
    starts = AuditEntry.objects.filter(action="run.start").count()
    assert starts == 3
    page.get_by_label("Verb").select_option("run.start")
    page.get_by_role("button", name="Apply filters").click()
    expect(table.get_by_role("row")).to_have_count(1 + starts)
    for i in range(starts):
        expect(table.get_by_role("row").nth(1 + i).get_by_role("cell").nth(2)).to_have_text("run.start")
    assert "action=run.start" in page.url
    # Object: one run's entries only (typed, then Enter submits the form).
    page.get_by_label("Verb").select_option("")
    page.get_by_label("Object type").select_option("run")
    page.get_by_label("Object id").fill(str(runs[1].pk))
    page.get_by_label("Object id").press("Enter")
    expected = AuditEntry.objects.filter(object_type="run", object_id=str(runs[1].pk)).count()
    expect(table.get_by_role("row")).to_have_count(1 + expected)
    expect(table.get_by_role("link", name=f"run {runs[1].pk}").first).to_have_attribute("href", f"/runs/{runs[1].pk}/")
    screenshot(page, "audit-filtered")
    # Actor and date: nobody called "nobody"; no entry before today.
    page.get_by_role("button", name="Clear").click()
    page.get_by_label("Actor", exact=True).fill("nobody")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.get_by_text("No entry matches these filters")).to_be_visible()
    page.get_by_role("button", name="Clear").click()
    page.get_by_label("To", exact=True).fill((timezone.now() - timedelta(days=1)).date().isoformat())
    page.get_by_role("button", name="Apply filters").click()
    expect(page.get_by_text("No entry matches these filters")).to_be_visible()
    page.get_by_role("button", name="Clear").click()
    expect(table.get_by_role("row")).to_have_count(1 + min(AuditEntry.objects.count(), 50))

    # An edited entry: the verification says the chain is broken and where.
    edited = AuditEntry.objects.filter(action="run.start").first()
    tamper(edited.pk, actor="mallory")
    page.get_by_role("button", name="Verify again").click()
    expect(page.get_by_role("heading", name="Audit chain broken: 1 problem")).to_be_visible()
    expect(page.get_by_text(f"(entry {edited.pk}): hash does not match the entry's content: entry edited")).to_be_visible()
    screenshot(page, "audit-tampered")


def test_workers_page_shows_heartbeats_in_flight_steps_and_the_queue(live_server, page):
    root = make_user("root", staff=True)
    login(page, live_server, root)
    page.goto(f"{live_server.url}/workers/")
    expect(page.get_by_text("No worker is running")).to_be_visible()
    screenshot(page, "workers-empty")

    now = timezone.now()
    me = engine_workers.worker_id(os.getpid())
    Worker.objects.create(name=me, host=engine.HOST, pid=os.getpid(), started_at=now - timedelta(hours=2), heartbeat_at=now)
    Worker.objects.create(name="far-away:42:1", host="far-away", pid=42, started_at=now - timedelta(days=1), heartbeat_at=now - timedelta(minutes=7))
    run, pay = run_at_pay(pay_version())
    assert engine.step_claim(pay.pk, me) is not None
    run_at_pay(pay_version())  # its pay step pending: one step ready
    page.get_by_role("button", name="Refresh").click()
    mine = page.get_by_role("region", name=f"Worker {me}")
    expect(mine.get_by_text("alive")).to_be_visible()
    expect(mine.get_by_role("link", name=f"#{run.pk}")).to_be_visible()
    expect(mine.get_by_role("cell", name="pay")).to_be_visible()
    far = page.get_by_role("region", name="Worker far-away:42:1")
    expect(far.get_by_text("silent")).to_be_visible()
    expect(far.get_by_text("heartbeat 7 min ago")).to_be_visible()
    expect(stat(page, "ready")).to_have_text("1")
    expect(stat(page, "running")).to_have_text("1")
    screenshot(page, "workers")


def test_an_owner_asks_for_run_alerts_from_the_graphs_page(live_server, page, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    from django.core import mail

    from accounts.models import RunAlertSubscription

    version = publish(graph(
        [node("start", "start"), transform("boom", y="x / zero"), node("end", "end")], chain("start", "boom", "end"), name="fragile",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}},
    ))
    olga = make_user("olga", "builders")
    olga.email = "olga@example.com"
    olga.save()
    login(page, live_server, olga)
    page.goto(f"{live_server.url}/graphs/")
    page.get_by_role("button", name="Email alerts for fragile").click()
    dialog = page.get_by_role("dialog", name="Email alerts for fragile")
    expect(dialog.get_by_text("Emails go to olga@example.com.")).to_be_visible()
    dialog.get_by_label("Email me when one of its runs fails").check()
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_text("Saved: you will get these emails.")).to_be_visible()
    screenshot(page, "alerts-dialog")
    subscription = RunAlertSubscription.objects.get(user=olga, graph=version.graph)
    assert (subscription.on_failed, subscription.on_parked) == (True, False)
    run = run_local(version, {"x": 1, "zero": 0})
    assert run.status == "failed"
    [message] = mail.outbox
    assert message.to == ["olga@example.com"] and f"{settings.BALLAST_PUBLIC_URL}/runs/{run.pk}/" in message.body
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
