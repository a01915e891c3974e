"""Two browser contexts edit one graph: the second save is refused (409), both versions are shown, nothing is lost."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import (
    drag_node,
    example,
    make_graph,
    node,
    open_builder,
    saved_revision,
    select_node,
    stored_spec,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_second_save_is_refused_and_kept_as_a_copy(live_server, browser):
    make_user("ann", "builders")
    make_user("bob", "builders")
    spec = example()
    graph_id = make_graph(spec["name"], spec)
    ctx_a = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx_b = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        a, b = ctx_a.new_page(), ctx_b.new_page()
        sign_in(a, live_server.url, "ann", "pw-ann-1")
        sign_in(b, live_server.url, "bob", "pw-bob-1")
        open_builder(a, live_server.url, graph_id)
        open_builder(b, live_server.url, graph_id)

        rev = saved_revision(a)
        drag_node(a, "draft", 0, 160)
        wait_saved(a, after=rev)
        ann_spec = stored_spec(a, live_server.url, graph_id)

        # Selected for sure before Delete (a click on a loaded machine can land while fit view
        # still moves the canvas and select nothing: stop 38's CI at load 13).
        select_node(b, "discard")
        b.keyboard.press("Delete")
        expect(b.locator(".save-status")).to_have_attribute("data-status", "conflict")
        dialog = b.get_by_role("dialog")
        expect(dialog).to_contain_text("ann")
        expect(dialog.get_by_label("Stored version")).to_contain_text("Only here: discard")
        expect(dialog.get_by_label("Your version")).to_contain_text("9 nodes")
        screenshot(b, "builder-conflict")
        # The refused save changed nothing on the server.
        assert stored_spec(b, live_server.url, graph_id) == ann_spec

        dialog.get_by_role("button", name="Keep mine as a copy").click()
        b.wait_for_url(lambda url: f"/graphs/{graph_id}/" not in url)
        copy_id = int(b.url.rstrip("/").split("/")[-1])
        b.get_by_test_id("canvas").wait_for()
        expect(b.locator(".react-flow__node")).to_have_count(9)
        copy = stored_spec(b, live_server.url, copy_id)
        assert "discard" not in {n["id"] for n in copy["nodes"]}
        assert stored_spec(a, live_server.url, graph_id) == ann_spec  # ann's edit is intact

        # Reloading the stored version in a third tab after another conflict drops only the local edit.
        rev = saved_revision(a)
        drag_node(a, "classify", 0, 120)
        wait_saved(a, after=rev)
        b.goto(f"{live_server.url}/graphs/{graph_id}/")
        b.get_by_test_id("canvas").wait_for()
        rev = saved_revision(a)
        drag_node(a, "route", 0, 120)
        wait_saved(a, after=rev)
        select_node(b, "start")
        b.keyboard.press("Delete")
        expect(b.locator(".save-status")).to_have_attribute("data-status", "conflict")
        b.get_by_role("button", name="Load the stored version (drop mine)").click()
        expect(node(b, "start")).to_have_count(1)
        wait_saved(b)
        assert stored_spec(b, live_server.url, graph_id) == stored_spec(a, live_server.url, graph_id)
    finally:
        ctx_a.close()
        ctx_b.close()
