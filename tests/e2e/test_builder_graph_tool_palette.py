"""Issue 26 item 9, the graph tool in the palette: "Graph tool" sits after Agent; dropped on an agent's card it adds a graph-tool row to that agent with the graph picker focused, dropped on the empty canvas it makes a new agent holding one.

The call itself (a draft run on a real qcluster, the child run linked) is tests/e2e/test_builder_graph_tool.py.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import ARTIFACTS, make_user, screenshot, sign_in
from tests.support.builder_steps import (
    drag_kind,
    make_graph,
    node,
    open_builder,
    stored_spec,
    viewport_settled,
    wait_saved,
)
from tests.support.specs import publish
from tests.support.subgraphs import child_spec, graph_tool_agent_spec

pytestmark = pytest.mark.django_db(transaction=True)


def nodes_of(spec: dict) -> dict[str, dict]:
    return {n["id"]: n for n in spec["nodes"]}


def test_a_graph_tool_dropped_on_an_agent_joins_it_and_on_the_canvas_makes_an_agent(live_server, page: Page) -> None:
    child = publish(child_spec(name="doubler"))
    user = make_user("gp", "builders")
    graph_id = make_graph("palette-graph-tool", graph_tool_agent_spec(), user)
    sign_in(page, live_server.url, "gp", "pw-gp-1")
    open_builder(page, live_server.url, graph_id)

    palette = page.get_by_role("complementary", name="Node kinds")
    kinds = palette.locator(".palette__item").evaluate_all("items => items.map((i) => i.dataset.kind)")
    assert kinds[kinds.index("agent") + 1] == "graph-tool", kinds
    entry = palette.locator('.palette__item[data-kind="graph-tool"]')
    expect(entry).to_contain_text("Graph tool")
    palette.screenshot(path=str(ARTIFACTS / "builder-palette-graph-tool.png"))

    # Onto the agent's card: the agent gets a row, its panel opens with the graph picker focused.
    viewport_settled(page)
    pane = page.locator(".react-flow__pane").bounding_box()
    card = node(page, "agent").bounding_box()
    assert pane and card
    drag_kind(page, "graph-tool", card["x"] - pane["x"] + card["width"] / 2, card["y"] - pane["y"] + card["height"] / 2)
    picker = page.locator('[id="config.graph_tools.0.graph"]')
    expect(picker).to_be_focused()
    expect(page.locator(".node-panel")).to_contain_text("Graph tool 1")
    screenshot(page, "builder-graph-tool-dropped")
    picker.select_option(label="doubler (v1)")
    expect(page.locator('[id="config.graph_tools.0.name"]')).to_have_value("doubler")
    wait_saved(page)
    spec = nodes_of(stored_spec(page, live_server.url, graph_id))
    assert len(spec) == 3, list(spec)
    assert spec["agent"]["config"]["graph_tools"] == [{"graph": child.graph_id, "version": "latest", "name": "doubler"}]

    # Onto the empty canvas, below the graph: a new agent holding one graph tool, still to pick.
    drag_kind(page, "graph-tool", pane["width"] / 2, pane["height"] - 120)
    expect(node(page, "agent_2")).to_be_visible()
    expect(page.locator('[id="config.graph_tools.0.graph"]')).to_be_focused()
    wait_saved(page)
    made = nodes_of(stored_spec(page, live_server.url, graph_id))["agent_2"]
    assert made["kind"] == "agent" and made["config"]["graph_tools"] == [{"version": "latest"}], made
