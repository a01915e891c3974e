"""The run list and the home dashboard in Chromium, against a real daphne (ws/runs/ needs ASGI):
filters kept in the URL across a reload, search by run id, bulk cancel of two runs, a status
changing live without a reload, a parked run looking unlike one waiting at an approval gate;
the dashboard's counts, spend and latest failures equal the database's and link to their pages.

Screenshots: artifacts/home-empty.png, home.png, home-1024.png, runs-filtered.png,
runs-bulk-select.png, runs-bulk-cancelled.png.
"""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from approvals.selectors import inbox_counts
from runs import selectors
from runs.models import Run
from runs.reports import selectors as report_selectors
from tests.support.browser import approve_and_drive, format_usd, make_user, screenshot, sign_in
from tests.support.daphne import Daphne
from tests.support.specs import publish, run_local
from tests.support.world import approval_spec, priced_spec

pytestmark = pytest.mark.django_db(transaction=True)


def row(page: Page, run: Run):
    return page.locator(f"table[aria-label='Runs'] tr[data-run='{run.pk}']")


def badge(page: Page, run: Run):
    return row(page, run).locator(".badge")


def test_run_list_filters_search_bulk_cancel_live_status_and_parked(daphne: Daphne, page: Page, effects_file) -> None:  # noqa: F811
    from tests.support.world import parked_run

    admin = make_user("ada", staff=True)
    gate = publish(approval_spec())
    first, second, live = (run_local(gate, {"name": n}, user=admin) for n in ("Ada", "Grace", "Linus"))
    parked, _request = parked_run()
    parked.refresh_from_db()
    other = run_local(priced_spec(), {"x": 1, "zero": 2, "name": "Edsger"}, user=admin)
    assert {first.status, second.status, live.status, parked.status} == {"waiting"} and other.status == "succeeded"

    sign_in(page, daphne.url, "ada", "pw-ada-1")
    page.goto(f"{daphne.url}/runs/")
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()

    # A parked run (a crash interrupted a step not safe to repeat) looks unlike a run at a gate.
    expect(badge(page, parked)).to_have_text("waiting for decision")
    expect(badge(page, first)).to_have_text("waiting at approval")
    assert badge(page, parked).get_attribute("class") != badge(page, first).get_attribute("class")
    assert badge(page, parked).evaluate("e => getComputedStyle(e).backgroundColor") != badge(page, first).evaluate("e => getComputedStyle(e).backgroundColor")

    # Parked runs have a filter of their own (a parked run may still be "running").
    page.get_by_label("Status").select_option(label="Waiting for decision (parked)")
    expect(page).to_have_url(re.compile(r"/runs/\?waiting_for=decision$"))
    expect(page.locator("table[aria-label='Runs'] tbody tr")).to_have_count(1)
    expect(row(page, parked)).to_be_visible()

    # Filters go to the URL and survive a reload.
    page.get_by_label("Status").select_option("waiting")
    page.get_by_label("Graph").select_option(str(gate.graph_id))
    expect(page).to_have_url(re.compile(rf"/runs/\?status=waiting&graph={gate.graph_id}$"))
    expect(page.locator("table[aria-label='Runs'] tbody tr")).to_have_count(3)
    page.reload()
    expect(page.get_by_label("Status")).to_have_value("waiting")
    expect(page.get_by_label("Graph")).to_have_value(str(gate.graph_id))
    expect(page.locator("table[aria-label='Runs'] tbody tr")).to_have_count(3)
    expect(row(page, parked)).to_have_count(0)
    expect(row(page, other)).to_have_count(0)
    screenshot(page, "runs-filtered")

    # Search by run id.
    search = page.get_by_label("Search")
    search.fill(f"#{second.pk}")
    search.press("Enter")
    expect(page.locator("table[aria-label='Runs'] tbody tr")).to_have_count(1)
    expect(row(page, second)).to_be_visible()
    expect(page).to_have_url(re.compile(rf"search=%23{second.pk}"))
    page.get_by_role("button", name="Clear filters").first.click()
    expect(page).to_have_url(re.compile(r"/runs/$"))
    expect(page.locator("table[aria-label='Runs'] tbody tr")).to_have_count(5)

    # A status changes live, without a reload.
    page.evaluate("window.__notReloaded = true")
    approve_and_drive(live)
    expect(badge(page, live)).to_have_text("succeeded")
    assert page.evaluate("window.__notReloaded") is True

    # Bulk cancel of two runs.
    page.get_by_label(f"Select run {first.pk}").check()
    page.get_by_label(f"Select run {second.pk}").check()
    screenshot(page, "runs-bulk-select")
    page.get_by_role("button", name="Cancel selected (2)").click()
    dialog = page.get_by_role("dialog", name="Cancel 2 runs?")
    dialog.get_by_label("Reason (optional, kept in the audit log)").fill("duplicates")
    dialog.get_by_role("button", name="Cancel 2 runs").click()
    expect(page.get_by_role("status", name="Bulk cancel result")).to_contain_text("2 cancelled.")
    expect(badge(page, first)).to_have_text("cancelled")
    expect(badge(page, second)).to_have_text("cancelled")
    assert set(Run.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", flat=True)) == {"cancelled"}
    assert Run.objects.get(pk=parked.pk).status == "waiting"  # untouched
    screenshot(page, "runs-bulk-cancelled")


def test_dashboard_shows_the_databases_counts_spend_and_failures_with_links(daphne: Daphne, page: Page) -> None:  # noqa: F811
    admin = make_user("ada", staff=True)
    sign_in(page, daphne.url, "ada", "pw-ada-1")
    region = lambda name: page.get_by_role("region", name=name)  # noqa: E731
    expect(region("Runs, last 24 hours").locator(".stat-figure")).to_have_text("0")
    expect(region("Approvals waiting for you")).to_contain_text("Nothing to decide.")
    expect(region("Latest failures")).to_contain_text("No failed runs")
    expect(region("Spend today").locator(".stat-figure")).to_have_text("$0")
    screenshot(page, "home-empty")

    gate = publish(approval_spec())
    waiting = [run_local(gate, {"name": n}, user=admin) for n in ("Ada", "Grace")]
    priced = publish(priced_spec())
    ok = run_local(priced, {"x": 1, "zero": 2, "name": "Edsger"}, user=admin)
    failed = run_local(priced, {"x": 1, "zero": 0, "name": "Barbara"}, user=admin)
    old = run_local(priced, {"x": 1, "zero": 2, "name": "Old"}, user=admin)
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))  # outside the 24 hours
    assert [r.status for r in waiting] == ["waiting", "waiting"] and ok.status == "succeeded" and failed.status == "failed"

    page.reload()
    runs_24h = region("Runs, last 24 hours")
    expect(runs_24h.locator(".stat-figure")).to_have_text("4")
    expect(runs_24h.get_by_role("link", name="2 waiting")).to_have_attribute("href", re.compile(r"^/runs/\?status=waiting&from=\d{4}-\d{2}-\d{2}$"))
    expect(runs_24h.get_by_role("link", name="1 succeeded")).to_be_visible()
    expect(runs_24h.get_by_role("link", name="1 failed")).to_be_visible()

    counts = inbox_counts(user=admin)
    approvals = region("Approvals waiting for you")
    expect(approvals.locator(".stat-figure")).to_have_text(str(counts["waiting"]))
    expect(approvals.locator(".stat-figure")).to_have_attribute("href", "/approvals/")
    nav = page.get_by_role("navigation").first
    if counts["waiting"]:
        expect(nav.get_by_label(f"{counts['waiting']} waiting for you")).to_be_visible()
    expect(nav.get_by_role("link", name="Costs")).to_be_visible()
    expect(nav.get_by_role("link", name="Audit")).to_be_visible()

    start, end = selectors.day_bounds(timezone.now().date(), timezone.now().date())
    today = report_selectors.cost_totals(viewer=admin, filters=selectors.RunFilter(start=start, end=end))
    assert today["cost_usd"] > 0
    spend = region("Spend today").locator(".stat-figure")
    expect(spend).to_have_text(format_usd(today["cost_usd"]))
    expect(spend).to_have_attribute("href", re.compile(r"^/costs/\?since=\d{4}-\d{2}-\d{2}&until=\d{4}-\d{2}-\d{2}$"))

    failures = region("Latest failures")
    link = failures.get_by_role("link", name=f"#{failed.pk}")
    expect(link).to_have_attribute("href", f"/runs/{failed.pk}/")
    expect(failures).to_contain_text(failed.error["message"][:40])
    screenshot(page, "home")

    # The latest runs' cost column is not clipped: its right edge stays inside the card.
    for width in (1400, 1024):
        page.set_viewport_size({"width": width, "height": 900})
        card = page.get_by_role("region", name="Latest runs")
        cost = card.locator("table thead th").last
        expect(cost).to_have_text("Cost")
        card_box, cost_box = card.bounding_box(), cost.bounding_box()
        assert cost_box["x"] + cost_box["width"] <= card_box["x"] + card_box["width"] + 0.5, (width, cost_box, card_box)
        scroll = card.locator(".table-wrap").evaluate("e => e.scrollWidth - e.clientWidth")
        assert scroll <= 0, f"the latest runs' table scrolls by {scroll}px at {width}px"
        screenshot(page, f"home-{width}")

    link.click()
    page.wait_for_url(f"{daphne.url}/runs/{failed.pk}/")
