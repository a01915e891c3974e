"""What a first-time user met in the builder: a state key's typed name counted as saved, a
read-only canvas that still drew edges, and a publish with no confirmation."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import (
    edge_count,
    example,
    make_graph,
    node,
    open_builder,
    stored_spec,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_typed_state_key_name_is_unsaved_until_committed_and_guards_leaving(live_server, page):
    user = make_user("fay", "builders")
    spec = {"name": "keys", "nodes": [], "edges": [], "state": {"key": {"reducer": "replace"}}}
    graph_id = make_graph("keys", spec, user)
    # The page's timers run on Playwright's clock (time flows as usual until run_for jumps it),
    # so the autosave debounce can be passed without waiting for it.
    page.clock.install()
    sign_in(page, live_server.url, "fay", "pw-fay-1")
    open_builder(page, live_server.url, graph_id)
    wait_saved(page)
    name = page.get_by_role("group", name="State key key").get_by_role("textbox", name="Key", exact=True)
    name.fill("topic")
    # Still focused, not committed: the indicator must not say "All changes saved".
    expect(page.locator(".save-status")).to_have_attribute("data-status", "unsaved")
    expect(page.locator(".save-status")).to_have_text("Unsaved changes")
    page.clock.run_for(1500)  # past the autosave debounce, its timers fired: still unsaved
    expect(page.locator(".save-status")).to_have_attribute("data-status", "unsaved")
    screenshot(page, "builder-state-key-unsaved")
    dialogs: list[str] = []

    def dismiss(d):
        dialogs.append(d.type)
        d.dismiss()

    page.on("dialog", dismiss)
    with pytest.raises(PlaywrightError):
        page.reload(timeout=3000)  # the leave guard asks first; dismissed, the page stays
    assert dialogs == ["beforeunload"]
    expect(name).to_have_value("topic")
    name.press("Tab")
    wait_saved(page)
    assert list(stored_spec(page, live_server.url, graph_id)["state"]) == ["topic"]


def test_read_only_approver_cannot_draw_edges_delete_or_undo(live_server, page):
    author = make_user("ben", "builders")
    spec = example()
    spec["edges"] = [e for e in spec["edges"] if not (e["source"] == "route" and e.get("source_handle") == "default")]
    graph_id = make_graph(spec["name"], spec, author)
    make_user("otto", "approvers")
    sign_in(page, live_server.url, "otto", "pw-otto-1")
    open_builder(page, live_server.url, graph_id)
    before = edge_count(page)
    expect(page.locator(".react-flow__handle.connectable")).to_have_count(0)
    # Drag from route's free "default" handle to end's input, as a user would.
    src = page.locator('.react-flow__handle.source[data-nodeid="route"][data-handleid="default"]').bounding_box()
    dst = page.locator('.react-flow__handle.target[data-nodeid="end"]').first.bounding_box()
    assert src and dst
    page.mouse.move(src["x"] + src["width"] / 2, src["y"] + src["height"] / 2)
    page.mouse.down()
    page.mouse.move(dst["x"] + dst["width"] / 2, dst["y"] + dst["height"] / 2, steps=12)
    page.mouse.up()
    assert edge_count(page) == before
    node(page, "route").click()
    page.keyboard.press("Delete")
    page.keyboard.press("Control+z")
    expect(node(page, "route")).to_have_count(1)
    assert edge_count(page) == before
    screenshot(page, "builder-read-only-approver")


def test_publish_confirms_with_the_version_and_message(live_server, page):
    user = make_user("pia", "builders")
    spec = example()
    graph_id = make_graph(spec["name"], spec, user)
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Publish", exact=True).click()
    page.get_by_label("What changed?").fill("first cut")
    page.get_by_role("dialog").get_by_role("button", name="Publish", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Published version 1: first cut")).to_be_visible()
    expect(page.get_by_text("Latest version 1")).to_be_visible()
    screenshot(page, "builder-published")
    page.get_by_role("button", name="History").click()
    history = page.get_by_role("region", name="Version history")
    expect(history.get_by_text("first cut")).to_be_visible()
    expect(history.get_by_role("button", name=re.compile("Open version 1"))).to_be_visible()
