"""The builder as an n8n or Dify user meets it: row editors for a transform and an end node,
labels from the catalogue, paste at the pointer, fit view on a long chain, estimates on cards."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import make_user, next_paint, screenshot, sign_in
from tests.support.builder_steps import (
    MOD,
    example,
    make_graph,
    node,
    open_builder,
    stored_spec,
    viewport_settled,
    wait_saved,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def builder_user(db):
    return make_user("bea", "builders", "operators")


def small_graph() -> dict:
    return {
        "name": "forms",
        "input_schema": {"type": "object", "properties": {"price": {"type": "number"}, "quantity": {"type": "integer"}}},
        "nodes": [
            {"id": "start", "kind": "start", "position": {"x": 0, "y": 100}},
            {"id": "calc", "kind": "transform", "config": {"set": {"subtotal": "price * quantity"}}, "position": {"x": 260, "y": 100}},
            {"id": "ask", "kind": "llm", "config": {"prompt": "Price {{ subtotal }}"}, "position": {"x": 520, "y": 100}},
            {"id": "end", "kind": "end", "position": {"x": 780, "y": 100}},
        ],
        "edges": [{"source": "start", "target": "calc"}, {"source": "calc", "target": "ask"}, {"source": "ask", "target": "end"}],
    }


def test_transform_rows_end_output_and_catalogue_labels(live_server, page, builder_user):
    graph_id = make_graph("forms", small_graph(), builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)

    node(page, "calc").click()
    rows = page.get_by_role("group", name="State keys to set")
    expect(rows.get_by_text("State key", exact=True)).to_be_visible()
    expect(rows.get_by_text("Expression", exact=True)).to_be_visible()
    page.locator('[id="config.set"]').get_by_role("button", name="Add", exact=True).click()
    new_key = rows.get_by_label("State key").nth(1)
    expect(new_key).to_be_focused()
    expect(new_key).to_have_value("")
    page.keyboard.type("total")
    page.locator('[id="config.set.total"]').click()
    page.keyboard.type("subtotal * 1.2")
    wait_saved(page)
    assert stored_spec(page, live_server.url, graph_id)["nodes"][1]["config"]["set"] == {"subtotal": "price * quantity", "total": "subtotal * 1.2"}
    # An expression naming something unknown is flagged in its editor as you type.
    page.locator('[id="config.set.total"]').click()
    page.keyboard.press("End")
    page.keyboard.type(" + tax")
    expect(page.locator(".node-panel").get_by_text(re.compile(r"unknown.*tax")).first).to_be_visible()
    screenshot(page, "builder-transform-rows")

    node(page, "end").click()
    output = page.locator('[id="config.output"]')
    expect(output).to_contain_text("Output state keys")
    expect(output).to_contain_text("Leave empty to return the whole state")
    output.get_by_role("button", name="Add").click()
    expect(output.get_by_label("State key")).to_be_focused()
    # Whatever the new row set off has finished: the debounced validation ("checking…"
    # while a POST is out) and the autosave.
    next_paint(page)
    expect(page.get_by_role("region", name="Problems").last).not_to_contain_text("checking…")
    wait_saved(page)
    expect(output.locator(".field-errors")).to_have_count(0)
    expect(page.locator(".node-panel .panel-issues")).to_have_count(0)
    screenshot(page, "builder-end-output")

    node(page, "ask").click()
    panel = page.locator(".node-panel")
    expect(panel.get_by_text("API key environment variable", exact=True)).to_be_visible()
    expect(panel.get_by_text("Maximum output tokens", exact=True)).to_be_visible()
    expect(panel.get_by_text("Api Key Env", exact=True)).to_have_count(0)
    # The estimate on the node card reads like the one in the panel (one formatter).
    card_cost = node(page, "ask").locator(".bnode__cost")
    expect(card_cost).to_have_text(re.compile(r"^(\$[0-9.]+|—) · [0-9,]+ tokens$"))
    expect(panel.locator(".panel-estimate strong")).to_have_text(card_cost.inner_text())
    screenshot(page, "builder-llm-labels")


def test_paste_lands_at_the_pointer_and_is_selected(live_server, page, builder_user):
    spec = example()
    graph_id = make_graph(spec["name"], spec, builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    node(page, "route").click()
    page.keyboard.press(f"{MOD}+c")
    original = node(page, "route").bounding_box()
    pane = page.locator(".react-flow__pane").bounding_box()
    assert original and pane
    # Far from the original, on the other half of the canvas (clear of the controls and the minimap).
    # The builder opens the example at 50 % from its start, so the original may sit anywhere.
    left = original["x"] + original["width"] / 2 > pane["x"] + pane["width"] / 2
    target = (pane["x"] + (80 if left else pane["width"] - 300), pane["y"] + 60)
    page.mouse.move(*target)
    page.keyboard.press(f"{MOD}+v")
    pasted = node(page, "route_2")
    expect(pasted).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator(".react-flow__node.selected")).to_have_count(1)
    box = pasted.bounding_box()
    # Measured from the canvas's pane, both read at once: the pasted copy has errors, so the
    # "publishing is disabled" note may appear above the canvas at any moment and move the
    # pane (and the node) down.
    at = page.evaluate(
        """() => { const n = document.querySelector('.react-flow__node[data-id="route_2"]').getBoundingClientRect();
        const p = document.querySelector('.react-flow__pane').getBoundingClientRect(); return [n.x - p.x, n.y - p.y]; }"""
    )
    assert box
    wanted = (target[0] - pane["x"], target[1] - pane["y"])
    assert abs(at[0] - wanted[0]) < 4 and abs(at[1] - wanted[1]) < 4, (at, wanted)
    assert abs(box["x"] - original["x"]) > 100  # not over the original
    screenshot(page, "builder-paste-at-pointer")
    # Without the pointer on the canvas, two pastes do not stack on each other either.
    page.mouse.move(5, 5)
    page.keyboard.press(f"{MOD}+v")
    page.keyboard.press(f"{MOD}+v")
    expect(node(page, "route_4")).to_have_count(1)
    wait_saved(page)
    positions = {n["id"]: n["position"] for n in stored_spec(page, live_server.url, graph_id)["nodes"]}
    assert len({(p["x"], p["y"]) for k, p in positions.items() if k.startswith("route")}) == 4


def chain_spec(n: int) -> dict:
    ids = ["start", *[f"step_{i}" for i in range(n - 2)], "end"]
    nodes = [{"id": i, "kind": "transform", "config": {"set": {f"v{k}": f"{k}"}}, "position": {"x": k * 240, "y": 0}} for k, i in enumerate(ids)]
    nodes[0] = {"id": "start", "kind": "start", "position": {"x": 0, "y": 0}}
    nodes[-1] = {"id": "end", "kind": "end", "position": {"x": (n - 1) * 240, "y": 0}}
    edges = [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]
    return {"name": "long chain", "nodes": nodes, "edges": edges}


def viewport_zoom(page) -> float:
    transform = page.locator(".react-flow__viewport").evaluate("el => getComputedStyle(el).transform")
    return float(re.match(r"matrix\(([^,]+)", transform).group(1))


def test_fit_view_keeps_a_300_node_chain_readable(live_server, page, builder_user):
    graph_id = make_graph("long chain", chain_spec(300), builder_user)
    sign_in(page, live_server.url, "bea", "pw-bea-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Fit", exact=True).click()
    viewport_settled(page)  # the fit animates for 200 ms
    assert viewport_zoom(page) >= 0.5 - 1e-6
    page.keyboard.press("f")
    viewport_settled(page)
    assert viewport_zoom(page) >= 0.5 - 1e-6
    # Readable: a node's label is drawn at least at half its size.
    visible = page.locator(".react-flow__node .bnode__label").first
    assert visible.bounding_box()["height"] >= 7
    screenshot(page, "builder-fit-long-chain")
