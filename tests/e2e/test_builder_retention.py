"""A graph's retention in the builder's graph settings, in a browser: a refused value shows the server's message under the field; a good one is saved to the graph."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from builder.services import graph_create
from graphs.models import Graph
from tests.support.browser import login, make_user, screenshot
from tests.support.builder_steps import SPEC

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_retention_days_are_saved_to_the_graph_and_a_refusal_is_shown_under_the_field(live_server, page):
    user = make_user("pat", "builders", "operators")
    graph = graph_create(name=SPEC["name"], draft=SPEC, user=user)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/graphs/{graph.pk}/")
    panel = page.get_by_role("complementary", name="Side panel")
    field = panel.get_by_label("Keep finished runs (days)")
    expect(field).to_have_attribute("placeholder", "server default")
    field.scroll_into_view_if_needed()
    field.fill("0")
    field.press("Enter")
    section = panel.get_by_role("region", name="Retention")
    expect(section.get_by_role("alert")).to_contain_text("greater than or equal to 1")
    expect(field).to_have_attribute("aria-invalid", "true")
    section.screenshot(path=str(screenshot(page, "builder-retention-refused").with_name("builder-retention-refused-section.png")))
    field.fill("30")
    field.press("Enter")
    expect(section).to_contain_text("Saved: 30 days.")
    expect(section.get_by_role("alert")).to_have_count(0)
    assert Graph.objects.get(pk=graph.pk).retention_days == 30
    section.screenshot(path=str(screenshot(page, "builder-retention-saved").with_name("builder-retention-saved-section.png")))
    # Kept on reload, and emptied back to the server's default.
    page.reload()
    expect(field).to_have_value("30")
    field.fill("")
    field.blur()
    expect(section).to_contain_text("Saved: the server's default.")
    assert Graph.objects.get(pk=graph.pk).retention_days is None
