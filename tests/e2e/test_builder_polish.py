"""Builder polish checks a screenshot review found: text fields as tall as their rows, a state-key row on one line."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.builder_steps import example, make_graph, make_user, open_builder
from tests.e2e.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_text_areas_show_their_rows(live_server, page):
    # app.css gave every textarea a one-line control's 36 px, which cut the graph's
    # description (rows=3) and the publish note (rows=3) to a line and a half.
    make_user("pia", "builders")
    graph_id = make_graph("refund", example("refund_agent"))
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    open_builder(page, live_server.url, graph_id)
    description = page.locator("#graph\\.description")
    page.get_by_role("button", name="Publish").click()
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
    page.locator('.react-flow__node[data-id="discard"]').click()
    row = page.locator(".rows-grid .rows-row").first
    boxes = [row.locator(s).first.bounding_box() for s in ("input", ".cm-editor", ".rows-actions button")]
    assert all(boxes), boxes
    assert max(b["y"] for b in boxes) - min(b["y"] for b in boxes) <= 1, boxes
    assert max(b["height"] for b in boxes) - min(b["height"] for b in boxes) <= 1, boxes
