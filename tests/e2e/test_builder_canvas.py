"""Canvas ergonomics (issue 25): a new graph has Start and End, "+" and an edge dropped on the pane open a node picker that adds and connects, the palette and side panel collapse, the refund example opens readable at 1280x720, problems are a count that opens a list, and a drop never lands under an overlay."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from graphs.models import Graph
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import (
    canvas_zoom,
    example,
    make_graph,
    node,
    open_builder,
    overlaps,
    stored_spec,
    viewport_settled,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)


def edges_of(spec: dict) -> set[tuple[str, str]]:
    return {(e["source"], e["target"]) for e in spec["edges"]}


def create_from_dialog(page: Page, base_url: str, name: str, start_from: str | None = None) -> Graph:
    """Create a graph through the graph list's New graph dialog and wait for the builder."""
    page.goto(f"{base_url}/graphs/")
    page.get_by_role("button", name="New graph").click()
    dialog = page.get_by_role("dialog", name="New graph")
    if start_from:
        dialog.get_by_role("radio", name=re.compile(start_from)).check()
    dialog.get_by_label("Name").fill(name)
    dialog.get_by_role("button", name="Create and open").click()
    page.get_by_test_id("canvas").wait_for()
    page.locator(".errors-panel__toggle").filter(has_not_text="Checking").wait_for()
    return Graph.objects.get(name=name)


def test_a_new_graph_has_start_and_end_and_plus_puts_a_picked_node_between(live_server, page):
    make_user("nia", "builders", "operators")
    sign_in(page, live_server.url, "nia", "pw-nia-1")
    graph = create_from_dialog(page, live_server.url, "first-flow")
    assert page.url.endswith(f"/graphs/{graph.pk}/")
    expect(page.locator(".react-flow__node")).to_have_count(2)
    expect(node(page, "start")).to_be_visible()
    expect(node(page, "end")).to_be_visible()
    expect(page.locator(".react-flow__edge")).to_have_count(1)
    expect(page.locator(".errors-panel__toggle")).to_contain_text("No problems")
    screenshot(page, "builder-new-graph")

    # "+" on Start's output, shown on a graph just begun, says what it does; the picker opens
    # with its search focused; typing and Enter pick.
    expect(page.locator(".canvas-empty")).to_contain_text("+")
    plus = page.get_by_role("button", name="Add a node after start")
    expect(plus).to_have_css("opacity", "1")
    plus.click()
    picker = page.get_by_test_id("node-picker")
    expect(picker).to_be_visible()
    search = picker.get_by_role("combobox", name="Search node kinds")
    expect(search).to_be_focused()
    expect(picker.locator('[role="option"][data-kind="start"]')).to_have_count(0)  # nothing goes before Start
    search.fill("llm")
    expect(picker.get_by_role("option").first).to_have_attribute("data-kind", "llm")
    screenshot(page, "builder-picker")
    page.keyboard.press("Enter")
    expect(picker).to_have_count(0)
    expect(node(page, "llm")).to_be_visible()
    expect(node(page, "llm")).to_have_class(re.compile("selected"))
    wait_saved(page)
    spec = stored_spec(page, live_server.url, graph.pk)
    assert edges_of(spec) == {("start", "llm"), ("llm", "end")}
    at = {n["id"]: n["position"] for n in spec["nodes"]}
    assert at["start"]["x"] < at["llm"]["x"] < at["end"]["x"]
    # One undo step takes the insert back whole (the node and both rewired edges), redo repeats it.
    page.get_by_role("button", name="Undo").click()
    expect(page.locator(".react-flow__node")).to_have_count(2)
    wait_saved(page)
    assert edges_of(stored_spec(page, live_server.url, graph.pk)) == {("start", "end")}
    page.get_by_role("button", name="Redo").click()
    expect(node(page, "llm")).to_be_visible()
    wait_saved(page)
    assert edges_of(stored_spec(page, live_server.url, graph.pk)) == {("start", "llm"), ("llm", "end")}

    # The keyboard alone on the next "+": arrows move, Enter picks, Escape closes without adding.
    page.get_by_role("button", name="Add a node after llm").click()
    expect(picker).to_be_visible()
    page.keyboard.press("Escape")
    expect(picker).to_have_count(0)
    page.get_by_role("button", name="Add a node after llm").click()
    search.fill("transform")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(node(page, "transform")).to_be_visible()
    wait_saved(page)
    assert edges_of(stored_spec(page, live_server.url, graph.pk)) == {("start", "llm"), ("llm", "transform"), ("transform", "end")}


def test_an_edge_dropped_on_the_empty_canvas_opens_the_picker_and_connects(live_server, page):
    make_user("ola", "builders")
    spec = {"name": "dropped", "nodes": [{"id": "start", "kind": "start", "config": {}, "position": {"x": 0, "y": 0}}], "edges": []}
    graph_id = make_graph("dropped", spec)
    sign_in(page, live_server.url, "ola", "pw-ola-1")
    open_builder(page, live_server.url, graph_id)
    viewport_settled(page)
    handle = page.locator('.react-flow__handle.source[data-nodeid="start"]').first
    box = handle.bounding_box()
    assert box
    drop = {"x": box["x"] - 60, "y": box["y"] + 150}  # below Start, where the new card has room
    handle.hover()
    page.mouse.down()
    page.mouse.move(drop["x"], drop["y"], steps=12)
    page.mouse.up()
    picker = page.get_by_test_id("node-picker")
    expect(picker).to_be_visible()
    expect(picker).to_contain_text("Add a node after")
    screenshot(page, "builder-picker-edge-drop")
    picker.get_by_role("option", name=re.compile("^Transform")).click()
    expect(node(page, "transform")).to_be_visible()
    expect(page.locator(".react-flow__edge")).to_have_count(1)
    # The new card's input is where the edge was let go.
    card = node(page, "transform").bounding_box()
    assert card
    assert abs(card["x"] - drop["x"]) < 30 and card["y"] <= drop["y"] <= card["y"] + card["height"]
    wait_saved(page)
    assert edges_of(stored_spec(page, live_server.url, graph_id)) == {("start", "transform")}

    # Let go over a node instead of the pane: no picker.
    t = node(page, "transform").bounding_box()
    assert t
    handle.hover()
    page.mouse.down()
    page.mouse.move(t["x"] + t["width"] / 2, t["y"] + 8, steps=8)
    page.mouse.up()
    expect(picker).to_have_count(0)


def test_palette_and_side_panel_collapse_and_stay_so(live_server, page):
    make_user("pia", "builders")
    graph_id = make_graph("docks", example())
    sign_in(page, live_server.url, "pia", "pw-pia-1")
    page.set_viewport_size({"width": 1280, "height": 720})
    open_builder(page, live_server.url, graph_id)
    canvas = page.get_by_test_id("canvas")
    narrow = canvas.bounding_box()["width"]
    page.get_by_role("button", name="Hide node kinds").click()
    expect(page.locator(".palette")).to_have_count(0)
    page.get_by_role("button", name="Hide side panel").click()
    expect(page.get_by_role("complementary", name="Side panel", exact=True)).to_have_count(0)
    wide = canvas.bounding_box()["width"]
    assert wide > narrow + 450, (narrow, wide)
    screenshot(page, "builder-collapsed")

    # Kept in this browser: a reload opens collapsed.
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".palette")).to_have_count(0)
    expect(page.get_by_role("button", name="Show side panel")).to_be_visible()
    # With the palette hidden, the toolbar's "+ Node" opens the picker; the node lands on the canvas, clear of the overlays.
    page.get_by_role("button", name="+ Node").click()
    picker = page.get_by_test_id("node-picker")
    expect(picker).to_be_visible()
    picker.get_by_role("combobox", name="Search node kinds").fill("join")
    page.keyboard.press("Enter")
    expect(node(page, "join")).to_be_visible()
    joined = node(page, "join").bounding_box()
    pane = page.locator(".react-flow").bounding_box()
    assert joined and pane and pane["x"] <= joined["x"] and joined["x"] + joined["width"] <= pane["x"] + pane["width"]
    for overlay in (".react-flow__minimap", ".react-flow__controls", ".canvas-toolbar", ".problems"):
        assert not overlaps(joined, page.locator(overlay).bounding_box()), overlay
    page.get_by_role("button", name="Show node kinds").click()
    expect(page.locator(".palette")).to_be_visible()
    page.get_by_role("button", name="Show side panel").click()
    expect(page.get_by_role("complementary", name="Side panel", exact=True)).to_be_visible()


def test_the_refund_example_from_the_dialog_opens_readable_at_1280x720(live_server, page):
    make_user("ray", "builders")
    sign_in(page, live_server.url, "ray", "pw-ray-1")
    page.set_viewport_size({"width": 1280, "height": 720})
    graph = create_from_dialog(page, live_server.url, "my-refunds", start_from="Refund agent")
    spec = example("refund_agent")
    expect(page.locator(".react-flow__node")).to_have_count(len(spec["nodes"]))
    assert graph.draft["name"] == "my-refunds"
    assert len(graph.draft["nodes"]) == len(spec["nodes"])
    viewport_settled(page)
    assert canvas_zoom(page) >= 0.5
    # Opened from its start, which is on the canvas and under no overlay.
    start = node(page, next(n["id"] for n in spec["nodes"] if n["kind"] == "start")).bounding_box()
    pane = page.locator(".react-flow").bounding_box()
    assert start and pane and pane["x"] <= start["x"] and start["x"] + start["width"] <= pane["x"] + pane["width"]
    for overlay in (".react-flow__minimap", ".react-flow__controls", ".canvas-toolbar", ".problems"):
        assert not overlaps(start, page.locator(overlay).bounding_box()), overlay
    screenshot(page, "builder-refund-1280")


def test_problems_are_a_count_that_opens_a_list_and_a_drop_on_it_lands_clear(live_server, page):
    make_user("quin", "builders")
    spec = {"name": "half", "nodes": [{"id": "start", "kind": "start", "config": {}, "position": {"x": 0, "y": 0}},
                                      {"id": "t", "kind": "transform", "config": {}, "position": {"x": 300, "y": 0}}],
            "edges": [{"source": "start", "target": "t"}]}
    graph_id = make_graph("half", spec)
    sign_in(page, live_server.url, "quin", "pw-quin-1")
    open_builder(page, live_server.url, graph_id)
    toggle = page.locator(".errors-panel__toggle")
    expect(toggle).to_have_text(re.compile(r"\d+ problems?"))
    items = page.locator(".errors-panel__item")
    expect(items).to_have_count(0)  # a count, not a list over the canvas
    canvas_height = page.get_by_test_id("canvas").bounding_box()["height"]
    toggle.click()
    expect(items.first).to_be_visible()
    listed = page.locator(".errors-panel__list").bounding_box()
    assert listed and listed["height"] <= canvas_height / 2 + 1
    screenshot(page, "builder-problems-open")
    on_t = page.locator('.errors-panel__item[data-node="t"]')
    expect(on_t.first).to_be_visible()  # t leads nowhere: no End
    on_t.first.click()
    expect(items).to_have_count(0)  # picking closes the list
    expect(node(page, "t")).to_have_class(re.compile("selected"))
    # Escape closes an open list.
    toggle.click()
    expect(items.first).to_be_visible()
    page.keyboard.press("Escape")
    expect(items).to_have_count(0)

    # A kind dropped on the problems count is added, clear of it and of every overlay.
    viewport_settled(page)
    page.locator('.palette__item[data-kind="llm"]').drag_to(page.locator(".errors-panel__toggle"))
    expect(node(page, "llm")).to_be_visible()
    dropped = node(page, "llm").bounding_box()
    for overlay in (".problems", ".react-flow__minimap", ".react-flow__controls", ".canvas-toolbar"):
        assert not overlaps(dropped, page.locator(overlay).bounding_box()), overlay
