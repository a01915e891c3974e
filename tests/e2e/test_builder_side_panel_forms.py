"""The side panel without JSON: a tool's arguments as named fields, the run input as a list of
fields, settings only where a kind uses them, readable reducer choices, a prefilled test state."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.builder_steps import make_graph, make_user, node, open_builder, stored_spec, wait_saved
from tests.e2e.conftest import screenshot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def builder_user(db):
    return make_user("tia", "builders", "operators")


def search_graph() -> dict:
    return {
        "name": "search",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
        "nodes": [
            {"id": "start", "kind": "start", "position": {"x": 0, "y": 100}},
            {"id": "ask", "kind": "llm", "config": {"prompt": "Search words for {{ topic }}", "output_key": "query"}, "position": {"x": 260, "y": 100}},
            {"id": "search", "kind": "tool", "config": {"tool": "", "args": {}}, "position": {"x": 520, "y": 100}},
            {"id": "end", "kind": "end", "position": {"x": 780, "y": 100}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "search"}, {"source": "search", "target": "end"}],
    }


def test_tool_arguments_are_the_tools_named_fields(live_server, page, builder_user):
    graph_id = make_graph("search", search_graph(), builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    node(page, "search").click()
    panel = page.locator(".node-panel")
    page.locator('[id="config.tool"]').fill("kb_search")
    # The picked tool's arguments appear by name: no "newKey" row, no JSON.
    query = page.locator('[id="config.args.query"]')
    expect(query).to_be_visible()
    expect(panel.locator('label[for="config.args.query"]')).to_have_text("Query *")
    expect(panel.locator('label[for="config.args.limit"]')).to_have_text("Limit")
    expect(panel.get_by_text("newKey")).to_have_count(0)
    query.click()
    page.keyboard.type("{{ query }}")
    wait_saved(page)
    assert stored_spec(page, live_server.url, graph_id)["nodes"][2]["config"]["args"] == {"query": "{{ query }}"}
    # The picker's options are one readable sentence, not a docstring.
    labels = page.locator('[id="config.tool__choices"] option').evaluate_all("os => os.map(o => o.textContent)")
    http = next(label for label in labels if label.startswith("http_request"))
    assert http == "http_request — Send one HTTP request and return its status, a few headers and its body.", http
    screenshot(page, "builder-tool-args")
