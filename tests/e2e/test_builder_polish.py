"""Polish checks a screenshot review found.

Text fields as tall as their rows, a state-key row on one line, the run page's facts in one
row, the graph list's buttons on their row's line.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from runs.engine import api as engine
from runs.services import run_start
from tests.support.browser import admin_page, make_user, sign_in
from tests.support.builder_steps import example, make_graph, open_builder, sample_input, select_node
from tests.support.daphne import Daphne
from tests.support.specs import publish

pytestmark = pytest.mark.django_db(transaction=True)


def test_text_areas_show_their_rows(live_server, page):
    # app.css gave every textarea a one-line control's 36 px, which cut the graph's
    # description (rows=3) and the publish note (rows=3) to a line and a half.
    make_user("pia", "builders")
    graph_id = make_graph("refund", example("refund_agent"))
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    open_builder(page, live_server.url, graph_id)
    description = page.locator("#graph\\.description")
    page.get_by_role("button", name="Publish", exact=True).click()
    note = page.get_by_role("dialog").locator("textarea")
    expect(note).to_be_visible()
    for area in (description, note):
        line = float(area.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)"))
        box = area.bounding_box()
        assert box and box["height"] >= 3 * line, (box, line)


def test_a_state_key_row_lines_up(live_server, page):
    # The key's box was 36 px beside a 28 px expression editor and remove button.
    make_user("pia", "builders")
    graph_id = make_graph("triage", example())
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    open_builder(page, live_server.url, graph_id)
    select_node(page, "discard")
    row = page.locator(".rows-grid .rows-row").first
    row.locator("input").first.wait_for()
    boxes = [row.locator(s).first.bounding_box() for s in ("input", ".cm-editor", ".rows-actions button")]
    assert all(boxes), boxes
    assert max(b["y"] for b in boxes) - min(b["y"] for b in boxes) <= 1, boxes
    assert max(b["height"] for b in boxes) - min(b["height"] for b in boxes) <= 1, boxes


def test_the_run_pages_facts_are_one_row_at_1024(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    # At 110 px columns the eighth fact (cost) wrapped alone onto a second row.
    with engine.local_mode():
        run = run_start(version=publish(example()), run_input=sample_input(example()["input_schema"]))
    admin_page(page, daphne)
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    facts = page.locator("dl.facts > div")
    expect(facts).to_have_count(8)
    tops = {round(b["y"]) for b in (facts.nth(i).bounding_box() for i in range(8)) if b}
    assert len(tops) == 1, tops


def test_the_graph_lists_buttons_sit_on_the_rows_line(live_server, page):
    # With the cells' 10 px padding the 28 px buttons' labels sat 3 px below the row's text.
    make_user("pia", "builders")
    make_graph("refund", example("refund_agent"))
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    page.goto(f"{live_server.url}/graphs/")
    row = page.locator("tr[data-graph]").first
    name, button = row.locator("td a").first.bounding_box(), row.locator(".row-actions .btn").first.bounding_box()
    assert name and button
    assert abs((name["y"] + name["height"] / 2) - (button["y"] + button["height"] / 2)) <= 1, (name, button)
