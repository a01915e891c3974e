"""Browser tests of issue 25's defects: the Publish dialog's focus, shortcuts that stay quiet while a dialog, a field or an editor has focus, the run graph's wheel."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from runs.engine import api as engine
from runs.services import run_start
from tests.support.browser import admin_page, make_user, screenshot, sign_in, wait_until_still
from tests.support.builder_steps import (
    example,
    make_graph,
    node,
    open_builder,
    sample_input,
    stored_spec,
    viewport_settled,
    wait_saved,
)
from tests.support.daphne import Daphne
from tests.support.specs import publish

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
    page.get_by_role("button", name="Publish", exact=True).click()
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
    # Typed where the click put the caret, "nf" may make the expression name an unknown
    # variable, and a draft with a problem cannot be published: take the letters out again.
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    # A button inside the Publish dialog: no letter, Delete or Backspace reaches the canvas
    # (React Flow's own Delete handling ignored only fields, and deleted the selected node).
    page.keyboard.press("Escape")
    node(page, "route").click()
    page.get_by_role("button", name="Publish", exact=True).click()
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


def test_the_wheel_over_the_run_graph_scrolls_the_page_and_ctrl_wheel_zooms(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    with engine.local_mode():
        run = run_start(version=publish(example()), run_input=sample_input(example()["input_schema"]))
    admin_page(page, daphne)
    page.set_viewport_size({"width": 1024, "height": 600})
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    graph = page.locator(".react-flow").first
    expect(page.locator(".react-flow__node").first).to_be_visible()
    wait_until_still(page, ".react-flow__viewport", measure="style")
    before = _transform(page)
    box = graph.bounding_box()
    assert box
    top = box["y"]
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 200)
    # The page moved up under the pointer; the graph's zoom did not change.
    page.wait_for_function("top => document.querySelector('.react-flow').getBoundingClientRect().y < top - 50", arg=top)
    assert _transform(page) == before
    screenshot(page, "run-page-scrolled-over-graph")
    box = graph.bounding_box()
    assert box
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_function("before => document.querySelector('.react-flow__viewport').style.transform !== before", arg=before)


def test_a_renamed_input_field_made_required_is_saved_as_shown(live_server, page: Page) -> None:
    # The rename (committed on blur as the click on Required began) was lost: the Required
    # edit was computed from the panel's deferred copy of the schema, which still had the old
    # name, so the draft kept "ticket" while the panel showed "order".
    make_user("pia", "builders")
    spec = example()
    spec["input_schema"]["required"] = []
    graph_id = make_graph("triage", spec)
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    open_builder(page, live_server.url, graph_id)
    field = page.get_by_role("listitem", name="Input field ticket")
    field.get_by_label("Field name").fill("order")  # one input event
    field.get_by_label("Required").click()
    wait_saved(page)
    shown = page.get_by_role("listitem", name="Input field order")
    expect(shown.get_by_label("Field name")).to_have_value("order")
    expect(shown.get_by_label("Required")).to_be_checked()
    schema = stored_spec(page, live_server.url, graph_id)["input_schema"]
    assert list(schema["properties"]) == ["order"], schema
    assert schema["required"] == ["order"], schema


def test_an_unknown_address_shows_the_apps_404_page_signed_in_or_not(live_server, page: Page) -> None:
    page.goto(f"{live_server.url}/no/such/page/")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    expect(page.locator("header.topbar .brand")).to_be_visible()
    screenshot(page, "not-found-anonymous")
    make_user("pia", "builders")
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    page.goto(f"{live_server.url}/no/such/page/")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.get_by_role("link", name="Go to home")).to_be_visible()
    screenshot(page, "not-found-signed-in")


def test_forgotten_password_reset_by_email_in_the_apps_pages(live_server, page: Page, mailoutbox) -> None:
    user = make_user("pia", "builders")
    user.email = "pia@example.com"
    user.save()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    expect(page.get_by_role("heading", name="Reset your password")).to_be_visible()
    assert page.locator("#site-name, #django-admin").count() == 0  # not the admin's page
    screenshot(page, "password-reset-form")
    page.get_by_label("Email").fill("pia@example.com")
    page.get_by_role("button", name="Send the reset link").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()
    screenshot(page, "password-reset-done")
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["pia@example.com"]
    link = re.search(r"https?://\S+/accounts/reset/\S+/", mailoutbox[0].body)
    assert link, mailoutbox[0].body
    page.goto(link.group(0))
    expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    screenshot(page, "password-reset-confirm")
    page.get_by_label("New password", exact=True).fill("a-new-pw-for-pia-7")
    page.get_by_label("New password confirmation").fill("a-new-pw-for-pia-7")
    page.get_by_role("button", name="Set the new password").click()
    expect(page.get_by_role("heading", name="Password reset")).to_be_visible()
    screenshot(page, "password-reset-complete")
    sign_in(page, live_server.url, "pia", "a-new-pw-for-pia-7")
    # The link worked once.
    page.goto(link.group(0))
    expect(page.get_by_role("heading", name="This link no longer works")).to_be_visible()
