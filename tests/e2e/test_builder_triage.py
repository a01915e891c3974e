"""From an empty canvas, build the support-triage example by drag and drop, fix the error shown on a node, publish, run, reload."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import (
    connect_until_drawn,
    drag_kind,
    example,
    make_graph,
    node,
    open_builder,
    stored_spec,
    viewport_settled,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)

# The node forms come from the side panel (frontend/src/builder/panel/NodePanel.tsx, built on
# its own branch); until it is merged the page has a placeholder panel without forms.
PANEL = Path(__file__).resolve().parents[2] / "frontend" / "src" / "builder" / "panel" / "NodePanel.tsx"
needs_panel = pytest.mark.skipif(not PANEL.exists(), reason="the side panel's node forms are not merged yet")

# examples/support_triage.json's nodes: (id the canvas gives, kind, drop point on the canvas).
DROPS = [
    ("start", "start", 110, 60), ("llm", "llm", 370, 60), ("condition", "condition", 630, 60),
    ("tool", "tool", 110, 200), ("tool_2", "tool", 370, 200), ("llm_2", "llm", 630, 200),
    ("approval", "approval", 110, 340), ("tool_3", "tool", 370, 340), ("transform", "transform", 630, 340),
    ("end", "end", 110, 480),
]


def fill_code(page: Page, field_id: str, text: str) -> None:
    """Type ``text`` into a side-panel field (a plain input or a code editor) by its form id."""
    box = page.locator(f'[id="{field_id}"]')
    box.click()
    box.fill(text)


def add_entry(page: Page, field_id: str, key: str, value: str) -> None:
    """Set ``key: value`` in an object field of the side panel (tool args, transform set)."""
    if field_id == "config.set":  # State key | Expression rows: Add focuses the new row's key
        page.locator(f'[id="{field_id}"]').get_by_role("button", name="Add", exact=True).click()
        page.keyboard.type(key)
        fill_code(page, f"{field_id}.{key}", value)
        return
    # A tool's arguments: the picked tool's schema gives each its own named field.
    fill_code(page, f"{field_id}.{key}", value)


def _overlaps(a: dict, b: dict | None) -> bool:
    return bool(b) and not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                            or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def in_view(page: Page, node_id: str) -> None:
    """Zoom out with the canvas controls (at most 6 clicks) until ``node_id`` is on the canvas, clear of its overlays.

    Fit view shows a graph too wide for 50 % from its start, so its far end can be off the
    canvas (or under the minimap); a user zooms out to reach it.
    """
    overlays = [".react-flow__minimap", ".react-flow__controls", ".canvas-toolbar"]
    for _ in range(6):
        pane, box = page.locator(".react-flow").bounding_box(), node(page, node_id).bounding_box()
        assert pane and box, node_id
        on_canvas = (pane["x"] <= box["x"] and box["x"] + box["width"] <= pane["x"] + pane["width"]
                     and pane["y"] <= box["y"] and box["y"] + box["height"] <= pane["y"] + pane["height"])
        if on_canvas and not any(_overlaps(box, page.locator(o).bounding_box()) for o in overlays):
            return
        page.locator(".react-flow__controls-zoomout").click()
        viewport_settled(page)


def select_node(page: Page, node_id: str) -> None:
    in_view(page, node_id)
    node(page, node_id).click()
    expect(page.locator(".side-panel")).to_contain_text(node_id)


@needs_panel
def test_build_support_triage_by_drag_and_drop(live_server, page):
    make_user("bea", "builders", "operators")
    graph_id = make_graph("Support ticket triage")
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(0)
    screenshot(page, "builder-empty")

    for i, (node_id, kind, x, y) in enumerate(DROPS):
        drag_kind(page, kind, x, y)
        expect(page.locator(".react-flow__node")).to_have_count(i + 1)
        expect(node(page, node_id)).to_have_attribute("data-id", node_id)
    # The condition routes by cases: "urgent", else "default" (as in the example).
    select_node(page, "condition")
    page.locator(".side-panel").get_by_role("button", name="Add").first.click()  # not a card's "Add a node after …"
    fill_code(page, "config.cases.0.handle", "urgent")
    fill_code(page, "config.cases.0.expression", "ticket['subject'].startswith('URGENT')")
    expect(page.locator('.react-flow__handle[data-nodeid="condition"][data-handleid="urgent"]')).to_have_count(1)
    expect(page.locator('.react-flow__handle[data-nodeid="condition"][data-handleid="default"]')).to_have_count(1)

    wires = [("start", "llm", None), ("llm", "condition", None), ("condition", "tool", "urgent"),
             ("condition", "tool_2", "default"), ("tool", "llm_2", None), ("tool_2", "llm_2", None),
             ("llm_2", "approval", None), ("approval", "tool_3", "approved"), ("approval", "transform", "rejected"),
             ("tool_3", "end", None)]  # transform -> end is left out on purpose
    for n, (source, target, handle) in enumerate(wires, start=1):
        connect_until_drawn(page, source, target, handle, n)
    expect(page.locator(".react-flow__edge")).to_have_count(len(wires))
    page.get_by_role("button", name="Auto-layout").click()
    # Fill in what each node needs, in the side panel.
    for node_id, fields in [
        ("llm", {"config.prompt": "Classify this ticket as urgent or normal: {{ input }}", "config.output_key": "triage"}),
        ("llm_2", {"config.prompt": "Write a short reply to: {{ input }}", "config.output_key": "reply"}),
    ]:
        select_node(page, node_id)
        for field_id, text in fields.items():
            fill_code(page, field_id, text)
    email = {"to": "oncall@example.com", "subject": "Urgent ticket", "body": "{{ input }}"}
    for node_id, tool, args in [("tool", "send_email", email), ("tool_2", "kb_search", {"query": "{{ input }}"}),
                                ("tool_3", "send_email", {**email, "to": "customer@example.com", "body": "{{ reply }}"})]:
        select_node(page, node_id)
        fill_code(page, "config.tool", tool)
        for key, value in args.items():
            add_entry(page, "config.args", key, value)
    select_node(page, "condition")
    fill_code(page, "config.cases.0.expression", "'urgent' in triage")
    select_node(page, "transform")
    add_entry(page, "config.set", "sent", "None")
    wait_saved(page)

    # One problem is left: the transform is not connected onward, and the canvas says so on it.
    # The problems are a count over the canvas; the list opens from it.
    expect(page.locator(".errors-panel__toggle")).to_have_text("1 problem")
    expect(page.locator(".errors-panel__item")).to_have_count(0)
    page.locator(".errors-panel__toggle").click()
    expect(page.locator(".errors-panel__item")).to_have_count(1)
    badge = node(page, "transform").locator(".bnode__errors")
    expect(badge).to_have_text("1")
    expect(node(page, "transform")).to_contain_text("no outgoing edges")
    expect(page.get_by_role("button", name="Publish", exact=True)).to_be_disabled()
    screenshot(page, "builder-triage-error")
    page.locator(".errors-panel__item").click()
    expect(node(page, "transform")).to_have_class(re.compile("selected"))

    # The laid-out graph is fitted whole at 50 % or more, or shown from its start at 50 % when
    # that is not enough, so its far end can be off the canvas or under an overlay: zoom out
    # until both ends are in view, as a user would; the edge is drawn once the view settled
    # (clicking the problem centres its node with an animation).
    in_view(page, "transform")
    in_view(page, "end")
    connect_until_drawn(page, "transform", "end", None, 11)
    expect(page.locator(".errors-panel__toggle")).to_contain_text("No problems")
    expect(badge).to_have_count(0)
    page.get_by_role("button", name="Auto-layout").click()
    wait_saved(page)
    screenshot(page, "builder-triage-built")

    built = stored_spec(page, live_server.url, graph_id)
    mine = {n["id"]: n["kind"] for n in built["nodes"]}
    theirs = sorted(n["kind"] for n in example()["nodes"])
    assert sorted(mine.values()) == theirs  # the example's kinds, node for node
    routed = {(e["source"], e.get("source_handle")) for e in built["edges"] if e.get("source_handle")}
    assert routed == {("condition", "urgent"), ("condition", "default"), ("approval", "approved"), ("approval", "rejected")}

    page.get_by_role("button", name="Publish", exact=True).click()
    page.get_by_label("What changed?").fill("First version: triage with approval")
    page.get_by_role("dialog").get_by_role("button", name="Publish", exact=True).click()
    expect(page.locator(".builder__meta")).to_have_text("Latest version 1")

    page.get_by_role("button", name="Run", exact=True).click()
    run_button = page.get_by_role("dialog").get_by_role("button", name=re.compile("Start"))
    run_button.click()
    page.wait_for_url(re.compile(r"/runs/\d+/"))
    run_id = int(re.search(r"/runs/(\d+)/", page.url).group(1))
    run = page.request.get(f"{live_server.url}/api/v1/runs/{run_id}/").json()
    assert run["graph"] == graph_id and run["version"] == 1

    page.goto(f"{live_server.url}/graphs/{graph_id}/")
    page.get_by_test_id("canvas").wait_for()
    expect(page.locator(".react-flow__node")).to_have_count(10)
    expect(page.locator(".react-flow__edge")).to_have_count(11)
    assert stored_spec(page, live_server.url, graph_id) == built
    screenshot(page, "builder-triage-reloaded")
