"""The builder's Triggers panel in a browser: add a schedule (a bad cron refused under its field), see its next fire times, Run now, Pause and Resume."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_publish
from graphs.models import Graph
from runs.models import Run
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, open_builder
from tests.support.webhooks import order_spec
from triggers.models import Schedule

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
