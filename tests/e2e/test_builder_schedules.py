"""The builder's Triggers panel in a browser: add a schedule (a bad cron refused under its field), see its next fire times, Run now, Pause and Resume; edit one (a refused time zone at its field, a new cron's fire times); its tick log with a Run now tick and its run."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_publish
from graphs.models import Graph
from runs.models import Run
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, open_builder
from tests.support.webhooks import order_spec
from triggers import schedules
from triggers.models import Schedule, ScheduleTick, TickOutcome

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_a_schedule_see_its_fire_times_run_it_now_and_pause_it(live_server, page: Page) -> None:
    pat = make_user("pat", "builders", "operators")
    graph_id = make_graph("Orders", {**order_spec(), "name": "Orders"}, user=pat)
    graph = Graph.objects.get(pk=graph_id)
    graph.operators.add(pat)
    graph_publish(graph=graph, user=pat, message="first")
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Triggers", exact=True).click()
    panel = page.get_by_role("region", name="Schedules")
    expect(panel.get_by_text("No schedules yet.")).to_be_visible()
    panel.get_by_role("button", name="New schedule").click()
    dialog = page.get_by_role("dialog", name="New schedule")
    dialog.get_by_label("Name").fill("nightly")
    dialog.get_by_label("Cron expression").fill("61 2 * * *")
    dialog.get_by_label("Time zone").fill("Europe/Paris")
    dialog.get_by_label("Run input (JSON)").fill('{"x": 2}')
    dialog.get_by_role("button", name="Create schedule").click()
    expect(dialog.locator(".field-error", has_text="Bad minute")).to_be_visible()
    screenshot(page, "schedules-create-cron-error")
    dialog.get_by_label("Cron expression").fill("30 2 * * *")
    dialog.get_by_role("button", name="Create schedule").click()
    card = panel.get_by_role("listitem", name="Schedule nightly")
    expect(card.get_by_role("list", name="Next fire times of nightly").get_by_role("listitem")).to_have_count(5)
    card.get_by_role("button", name="Run now").click()
    expect(card.get_by_role("link", name="run #")).to_be_visible()
    run = Run.objects.get()
    assert run.source == "schedule nightly" and run.input == {"x": 2}
    screenshot(page, "schedules-panel")
    card.get_by_role("button", name="Pause").click()
    expect(card.get_by_text("Paused: no tick fires")).to_be_visible()
    assert Schedule.objects.get().next_fire_at is None
    card.get_by_role("button", name="Resume").click()
    expect(card.get_by_role("list", name="Next fire times of nightly").get_by_role("listitem")).to_have_count(5)


def _fire_times(card) -> list[str]:
    return card.get_by_role("list", name="Next fire times of nightly").locator("time").evaluate_all("els => els.map(e => e.getAttribute('datetime'))")


def _iso(schedule: Schedule) -> list[str]:
    return [t.isoformat().replace("+00:00", "Z") for t in schedules.next_fire_times(schedule)]


def test_edit_a_schedules_cron_shows_its_new_fire_times_and_the_tick_log_shows_a_run_now(live_server, page: Page) -> None:
    pat = make_user("pat", "builders", "operators")
    graph_id = make_graph("Orders", {**order_spec(), "name": "Orders"}, user=pat)
    graph = Graph.objects.get(pk=graph_id)
    graph.operators.add(pat)
    graph_publish(graph=graph, user=pat, message="first")
    graph_publish(graph=graph, user=pat, message="second")
    schedule = schedules.schedule_create(graph=graph, name="nightly", user=pat, cron_expression="30 2 * * *", timezone="UTC", run_input={"x": 2})
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Triggers", exact=True).click()
    card = page.get_by_role("region", name="Schedules").get_by_role("listitem", name="Schedule nightly")
    expect(card.get_by_role("list", name="Next fire times of nightly").get_by_role("listitem")).to_have_count(5)
    before = _fire_times(card)
    assert before == _iso(schedule)

    card.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit schedule nightly")
    expect(dialog.get_by_label("Cron expression")).to_have_value("30 2 * * *")
    dialog.get_by_label("Cron expression").fill("15 */6 * * *")
    dialog.get_by_label("Time zone").fill("Mars/Olympus")
    dialog.get_by_label("Version").select_option(label="Version 1")
    dialog.get_by_label("Ticks missed in an outage").select_option("catch_up")
    dialog.get_by_label("Catch-up window (seconds)").fill("7200")
    dialog.get_by_role("button", name="Save schedule").click()
    expect(dialog.get_by_label("Time zone")).to_have_attribute("aria-invalid", "true")
    expect(dialog.locator("#schedule-timezone-error")).to_be_visible()
    screenshot(page, "schedules-edit-form")
    assert Schedule.objects.get().cron == "30 2 * * *"
    dialog.get_by_label("Time zone").fill("Asia/Kolkata")
    dialog.get_by_role("button", name="Save schedule").click()
    expect(dialog).to_have_count(0)
    schedule = Schedule.objects.get()
    assert (schedule.cron, schedule.timezone, schedule.version.number, schedule.missed_policy, schedule.catch_up_window_seconds) == (
        "15 */6 * * *", "Asia/Kolkata", 1, "catch_up", 7200)
    # The card shows the new schedule's own fire times: every six hours at :15 in Kolkata (:45 UTC).
    expect(card).to_contain_text("15 */6 * * *")
    expect(card).to_contain_text("version 1")
    after = _iso(schedule)
    assert after != before and all(t.endswith(":45:00Z") for t in after)
    expect(card.get_by_role("list", name="Next fire times of nightly").locator("time").first).to_have_attribute("datetime", after[0])
    assert _fire_times(card) == after

    card.get_by_role("button", name="Tick log").click()
    log = card.get_by_role("region", name="Tick log of nightly")
    expect(log.get_by_text("No ticks yet", exact=False)).to_be_visible()
    card.get_by_role("button", name="Run now").click()
    expect(card.get_by_role("status")).to_contain_text("Started run #")
    tick = ScheduleTick.objects.get()
    assert tick.manual and tick.outcome == TickOutcome.STARTED and tick.run is not None
    row = log.get_by_role("table", name="Ticks of nightly").get_by_role("row").nth(1)
    expect(row).to_contain_text("Run now")
    expect(row).to_contain_text("Started a run")
    link = row.get_by_role("link", name=f"run #{tick.run_id}")
    expect(link).to_have_attribute("href", f"/runs/{tick.run_id}/")
    # The side panel scrolls on its own: bring the log into view for the screenshot.
    log.evaluate("e => e.scrollIntoView({block: 'end'})")
    screenshot(page, "schedules-tick-log")
    link.click()
    page.wait_for_url(f"{live_server.url}/runs/{tick.run_id}/")
    expect(page.get_by_role("heading", name=f"Run #{tick.run_id}", exact=False)).to_be_visible()
