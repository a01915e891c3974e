"""Flow control in a browser: the builder's graph settings set a graph's concurrency (a refusal under the field), and a run held in line shows "queued, position N" and why on the run list and the run page."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from builder.services import graph_create
from graphs.models import Graph
from runs.engine import api as engine
from runs.services import run_start
from tests.support.browser import login, make_user, screenshot
from tests.support.builder_steps import SPEC
from tests.support.specs import chain, graph, node, publish, transform

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_concurrency_settings_are_saved_and_a_refusal_is_shown_under_the_field(live_server, page):
    user = make_user("pat", "builders", "operators")
    graph_row = graph_create(name=SPEC["name"], draft=SPEC, user=user)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/graphs/{graph_row.pk}/")
    panel = page.get_by_role("complementary", name="Side panel")
    section = panel.get_by_role("region", name="Concurrency")
    key = section.get_by_label("Concurrency key")
    key.scroll_into_view_if_needed()
    key.fill("customer id")
    key.press("Enter")
    expect(section.get_by_role("alert")).to_contain_text("dotted path")
    section.screenshot(path=str(screenshot(page, "builder-concurrency-refused").with_name("builder-concurrency-refused-section.png")))
    key.fill("customer_id")
    key.press("Enter")
    expect(section).to_contain_text("Saved.")
    limit = section.get_by_label("Max concurrent runs")
    expect(limit).to_have_attribute("placeholder", "unlimited")
    limit.fill("3")
    limit.press("Enter")
    expect(section.locator('[id="graph.max_concurrent_runs-help"]')).to_contain_text("Saved.")
    expect(section.get_by_role("alert")).to_have_count(0)
    row = Graph.objects.get(pk=graph_row.pk)
    assert (row.max_concurrent_runs, row.concurrency_key, row.concurrency_key_limit) == (3, "customer_id", 1)
    section.screenshot(path=str(screenshot(page, "builder-concurrency-saved").with_name("builder-concurrency-saved-section.png")))


def test_a_queued_run_shows_its_position_and_why_on_the_list_and_its_page(live_server, page):
    user = make_user("pat", "builders", "operators")
    version = publish(graph([node("start", "start"), transform("calc", y="1 + 1"), node("end", "end")], chain("start", "calc", "end"), name="one at a time"))
    Graph.objects.filter(pk=version.graph_id).update(max_concurrent_runs=1)
    version.graph.refresh_from_db()  # the graph a start judges by is the one loaded with its version
    with engine.local_mode():  # nothing executes them: the first stays active, the others wait
        runs = [run_start(version=version, run_input={}, user=user) for _ in range(3)]
    login(page, live_server, user)
    page.goto(f"{live_server.url}/runs/{runs[2].pk}/")
    alert = page.get_by_role("status", name="Queued")
    expect(alert).to_contain_text("Queued, position 2.")
    expect(alert).to_contain_text("the graph allows 1 active run at a time")
    screenshot(page, "run-page-queued")
    page.goto(f"{live_server.url}/runs/")
    expect(page.locator(f"tr[data-run='{runs[1].pk}']")).to_contain_text("queued position 1")
    expect(page.locator(f"tr[data-run='{runs[0].pk}']")).not_to_contain_text("position")
    screenshot(page, "run-list-queued")
