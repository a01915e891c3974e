"""Browser tests of issue 25's defects: the Publish dialog's focus, shortcuts that stay quiet while a dialog, a field or an editor has focus."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import example, make_graph, node, open_builder, viewport_settled

pytestmark = pytest.mark.django_db(transaction=True)


def _open_triage(page: Page, base_url: str) -> None:
    make_user("pia", "builders")
    graph_id = make_graph("triage", example())
    sign_in(page, base_url, "pia", "pw-pia-1")
    open_builder(page, base_url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(10)
    viewport_settled(page)


def _transform(page: Page) -> str:
    return page.locator(".react-flow__viewport").evaluate("e => e.style.transform")


def test_publish_dialog_opens_on_its_message_and_typing_stays_in_it(live_server, page: Page) -> None:
    # showModal() put the focus on the close button: Space closed the dialog and the next
    # letters reached the canvas (n dropped sticky notes, f fitted the view).
    _open_triage(page, live_server.url)
    page.get_by_role("button", name="Publish").click()
    dialog = page.get_by_role("dialog", name="Publish a version")
    note = dialog.locator("textarea")
    expect(note).to_be_focused()
    screenshot(page, "builder-publish-dialog")
    before = _transform(page)
    page.keyboard.type("fix the refund note")
    expect(dialog).to_be_visible()
    expect(note).to_have_value("fix the refund note")
    expect(page.locator(".bnote")).to_have_count(0)
    assert _transform(page) == before


def test_single_key_shortcuts_are_quiet_in_dialogs_fields_and_editors(live_server, page: Page) -> None:
    _open_triage(page, live_server.url)
    before = _transform(page)
    # A CodeMirror editor in the side panel.
    node(page, "discard").click()
    editor = page.locator(".side-panel .cm-content").first
    editor.click()
    page.keyboard.type("nf")
    expect(page.locator(".bnote")).to_have_count(0)
    # A button inside the Publish dialog: no letter, Delete or Backspace reaches the canvas
    # (React Flow's own Delete handling ignored only fields, and deleted the selected node).
    page.keyboard.press("Escape")
    node(page, "route").click()
    page.get_by_role("button", name="Publish").click()
    dialog = page.get_by_role("dialog", name="Publish a version")
    dialog.get_by_role("button", name="Cancel").focus()
    for key in ("n", "f", "Delete", "Backspace"):
        page.keyboard.press(key)
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(node(page, "route")).to_have_count(1)
    expect(page.locator(".bnote")).to_have_count(0)
    assert _transform(page) == before
    # With nothing focused, the same keys work.
    page.locator(".react-flow__pane").click(position={"x": 5, "y": 5})
    page.keyboard.press("n")
    expect(page.locator(".bnote")).to_have_count(1)
