"""The builder canvas in a browser: undo/redo of a deleted node with its edges, of drags, copy/paste, import/export, read-only."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.support.browser import make_user, screenshot, sign_in, wait_until_still
from tests.support.builder_steps import (
    MOD,
    connect,
    csrf_headers,
    example,
    make_graph,
    node,
    open_builder,
    stored_spec,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def builder_user(db):
    return make_user("bea", "builders", "operators")


def test_undo_redo_deleted_node_with_its_edges(live_server, page, builder_user):
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(10)
    expect(page.locator(".react-flow__edge")).to_have_count(11)
    screenshot(page, "builder-triage")

    node(page, "route").click()
    page.keyboard.press("Delete")
    expect(node(page, "route")).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(8)  # route had one edge in and two out
    wait_saved(page)
    assert "route" not in {n["id"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}

    page.keyboard.press(f"{MOD}+z")
    expect(node(page, "route")).to_have_count(1)
    expect(page.locator(".react-flow__edge")).to_have_count(11)
    wait_saved(page)
    restored = stored_spec(page, live_server.url, graph_id)
    assert [n["id"] for n in restored["nodes"]] == [n["id"] for n in spec["nodes"]]
    assert restored["edges"] == spec["edges"]

    page.keyboard.press(f"{MOD}+Shift+z")
    expect(node(page, "route")).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(8)
    page.keyboard.press(f"{MOD}+z")
    page.keyboard.press(f"{MOD}+y")
    expect(node(page, "route")).to_have_count(0)
    page.keyboard.press(f"{MOD}+z")
    expect(node(page, "route")).to_have_count(1)


def _corner(page, node_id: str) -> tuple[float, float]:
    box = node(page, node_id).bounding_box()
    assert box is not None, f"node {node_id} is not drawn"
    return box["x"], box["y"]


def _drag(page, node_id: str, dx: float, dy: float) -> None:
    """Drag ``node_id`` by (dx, dy) screen px (a first 2 px move starts the drag: React Flow moves nodes from there)."""
    x, y = _corner(page, node_id)
    page.mouse.move(x + 40, y + 12)
    page.mouse.down()
    page.mouse.move(x + 42, y + 12)
    page.mouse.move(x + 42 + dx, y + 12 + dy, steps=6)
    page.mouse.up()


def _near(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return abs(a[0] - b[0]) <= 2 and abs(a[1] - b[1]) <= 2


def test_drags_land_where_dropped_and_undo_one_step_each(live_server, page, builder_user):
    """React Flow holds the positions while a drag lasts; the spec gets them at the drop, as one undo step.

    The first drag starts on an unselected node (the selection flips mid-drag, and the canvas
    hands React Flow a new node array then); the second drags a two-node selection.
    """
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    start = {n: _corner(page, n) for n in ("classify", "route")}
    stored_at_start = {n["id"]: n["position"] for n in spec["nodes"]}

    _drag(page, "classify", 100, 60)
    wait_until_still(page, '.react-flow__node[data-id="classify"]', quiet_ms=300)  # a snap back would come with the next render
    first = _corner(page, "classify")
    assert _near(first, (start["classify"][0] + 100, start["classify"][1] + 60)), (start, first)
    wait_saved(page)
    after_one = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}
    assert after_one["classify"] != stored_at_start["classify"] and after_one["route"] == stored_at_start["route"]

    page.keyboard.down("Shift")
    node(page, "route").click()
    page.keyboard.up("Shift")
    expect(page.locator(".react-flow__node.selected")).to_have_count(2)
    _drag(page, "route", -80, 40)
    wait_until_still(page, '.react-flow__node[data-id="classify"]', quiet_ms=300)
    wait_until_still(page, '.react-flow__node[data-id="route"]', quiet_ms=300)
    assert _near(_corner(page, "classify"), (first[0] - 80, first[1] + 40))
    assert _near(_corner(page, "route"), (start["route"][0] - 80, start["route"][1] + 40))
    wait_saved(page)
    after_two = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}
    assert after_two["classify"] != after_one["classify"] and after_two["route"] != after_one["route"]

    page.keyboard.press(f"{MOD}+z")  # the selection's drag, both nodes at once
    expect(page.locator(".save-status")).not_to_have_attribute("data-status", "saved")
    wait_saved(page)
    undone = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}
    assert undone == after_one
    assert _near(_corner(page, "classify"), first) and _near(_corner(page, "route"), start["route"])

    page.keyboard.press(f"{MOD}+z")  # the first drag
    wait_saved(page)
    assert {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]} == stored_at_start
    assert _near(_corner(page, "classify"), start["classify"])

    page.keyboard.press(f"{MOD}+Shift+z")
    page.keyboard.press(f"{MOD}+Shift+z")
    expect(page.locator(".save-status")).not_to_have_attribute("data-status", "saved")
    wait_saved(page)
    assert {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]} == after_two


def test_arrow_keys_move_the_selection_and_save_one_undo_step_a_press(live_server, page, builder_user):
    """React Flow moves selected nodes 5 flow px per arrow press; each press reaches the spec (saved, undoable)."""
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    before = {n["id"]: n["position"] for n in spec["nodes"]}["classify"]
    node(page, "classify").click()
    expect(page.locator(".react-flow__node.selected")).to_have_count(1)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    wait_saved(page)
    moved = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}["classify"]
    assert (moved["x"] - before["x"], moved["y"] - before["y"]) == (10, 5), (before, moved)
    page.keyboard.press(f"{MOD}+z")  # the last press only
    expect(page.locator(".save-status")).not_to_have_attribute("data-status", "saved")
    wait_saved(page)
    undone = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}["classify"]
    assert (undone["x"] - before["x"], undone["y"] - before["y"]) == (10, 0), (before, undone)


def test_copy_paste_three_nodes_one_undo_step_and_across_tabs(live_server, context, page, builder_user):
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    node(page, "route").click()
    node(page, "page_oncall").click(modifiers=["Shift"])
    node(page, "search_kb").click(modifiers=["Shift"])
    expect(page.locator(".react-flow__node.selected")).to_have_count(3)
    page.keyboard.press(f"{MOD}+c")
    page.keyboard.press(f"{MOD}+v")
    expect(page.locator(".react-flow__node")).to_have_count(13)
    for new_id in ("route_2", "page_oncall_2", "search_kb_2"):
        expect(node(page, new_id)).to_have_count(1)
    expect(page.locator(".react-flow__edge")).to_have_count(13)  # the two edges inside the selection
    wait_saved(page)
    saved = stored_spec(page, live_server.url, graph_id)
    pasted_edges = [e for e in saved["edges"] if e["source"].endswith("_2")]
    assert pasted_edges == [
        {"source": "route_2", "source_handle": "urgent", "target": "page_oncall_2"},
        {"source": "route_2", "source_handle": "default", "target": "search_kb_2"},
    ]
    pasted = {n["id"]: n for n in saved["nodes"]}
    assert pasted["route_2"]["config"] == pasted["route"]["config"]
    screenshot(page, "builder-pasted")

    page.keyboard.press(f"{MOD}+z")  # the whole paste is one step
    expect(page.locator(".react-flow__node")).to_have_count(10)
    expect(page.locator(".react-flow__edge")).to_have_count(11)

    # Another tab of the same browser pastes the same fragment into another graph.
    other_id = make_graph("Scratch", None, builder_user)
    tab = context.new_page()
    open_builder(tab, live_server.url, other_id)
    tab.locator(".react-flow__pane").click()
    tab.keyboard.press(f"{MOD}+v")
    expect(tab.locator(".react-flow__node")).to_have_count(3)
    expect(tab.locator(".react-flow__edge")).to_have_count(2)
    expect(node(tab, "route")).to_have_count(1)  # ids are free in that graph, so they stay
    wait_saved(tab)
    tab.close()


def test_import_then_export_gives_the_same_spec(live_server, page, builder_user, tmp_path):
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    spec = example()
    resp = page.request.post(f"{live_server.url}/api/v1/graphs/import/", data=json.dumps(spec), headers=csrf_headers(page))
    assert resp.ok, resp.text()
    body = resp.json()
    graph_id = body.get("graph") or body.get("id") or body["graph_id"]
    before = page.request.get(f"{live_server.url}/api/v1/graphs/{graph_id}/export/").json()

    open_builder(page, live_server.url, graph_id)
    # Move a node (autosaves), then undo (autosaves the original back): a real round trip.
    box = node(page, "classify").bounding_box()
    page.mouse.move(box["x"] + 40, box["y"] + 12)
    page.mouse.down()
    page.mouse.move(box["x"] + 140, box["y"] + 90, steps=6)
    page.mouse.up()
    wait_saved(page)
    moved = {n["id"]: n for n in stored_spec(page, live_server.url, graph_id)["nodes"]}["classify"]
    assert moved["position"] != {"x": 220, "y": 200}
    page.keyboard.press(f"{MOD}+z")
    wait_saved(page)

    with page.expect_download() as dl:
        page.get_by_role("link", name="Export").click()
    path = tmp_path / "export.json"
    dl.value.save_as(path)
    exported = json.loads(path.read_text())
    draft = stored_spec(page, live_server.url, graph_id)
    assert draft["nodes"] == spec["nodes"] and draft["edges"] == spec["edges"]
    assert exported == before  # the canvas changed nothing the export shows
    assert_contains(exported, spec)  # and the export is the imported file (plus defaults it spells out)


def assert_contains(big, small, path="spec"):
    """``big`` equals ``small`` except for dict keys only ``big`` has (defaults the server spells out)."""
    if isinstance(small, dict):
        assert isinstance(big, dict), path
        for key, value in small.items():
            assert key in big, f"{path}.{key} missing"
            assert_contains(big[key], value, f"{path}.{key}")
    elif isinstance(small, list):
        assert isinstance(big, list) and len(big) == len(small), path
        for i, (a, b) in enumerate(zip(big, small, strict=True)):
            assert_contains(a, b, f"{path}[{i}]")
    else:
        assert big == small, f"{path}: {big!r} != {small!r}"


def test_read_only_user_sees_no_edit_controls(live_server, page, builder_user):
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    make_user("otto", "approvers")
    sign_in(page, live_server.url, "otto", "pw-otto-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(10)
    expect(page.locator(".palette")).to_have_count(0)
    expect(page.get_by_role("button", name="Publish", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Auto-layout")).to_have_count(0)
    expect(page.get_by_role("button", name="Undo")).to_have_count(0)
    node(page, "route").click()
    page.keyboard.press("Delete")
    expect(node(page, "route")).to_have_count(1)
    screenshot(page, "builder-read-only")


def test_new_edge_between_named_handles(live_server, page, builder_user):
    spec = example()
    spec["edges"] = [e for e in spec["edges"] if not (e["source"] == "route" and e.get("source_handle") == "default")]
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    expect(node(page, "route").locator(".bnode__errors")).to_be_visible()
    expect(page.get_by_role("button", name="Publish", exact=True)).to_be_disabled()
    connect(page, "route", "search_kb", "default")
    expect(page.locator(".react-flow__edge")).to_have_count(11)
    expect(node(page, "route").locator(".bnode__errors")).to_have_count(0)
    expect(page.get_by_role("button", name="Publish", exact=True)).to_be_enabled()
    wait_saved(page)
    edges = stored_spec(page, live_server.url, graph_id)["edges"]
    assert {"source": "route", "source_handle": "default", "target": "search_kb"} in edges
