"""The side panel without JSON: a tool's arguments as named fields, the run input as a list of
fields, settings only where a kind uses them, readable reducer choices, a prefilled test state."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from builder.services import graph_publish
from graphs.models import Graph
from tests.support.browser import ARTIFACTS, make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, node, open_builder, stored_spec, wait_saved

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
    panel.locator('section[aria-label="Configuration"]').screenshot(path=str(ARTIFACTS / "builder-tool-args-panel.png"))

    # Another tool: its own fields; the argument it refuses stays visible, with a way to remove it.
    page.locator('[id="config.tool"]').fill("http_request")
    expect(panel.locator('label[for="config.args.url"]')).to_have_text("Url *")
    expect(panel.get_by_text("One of: GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE.")).to_be_visible()
    expect(panel.get_by_role("button", name="Remove query")).to_be_visible()
    panel.locator('section[aria-label="Configuration"]').screenshot(path=str(ARTIFACTS / "builder-tool-args-http.png"))


def test_run_input_fields_without_json_feed_the_start_run_form(live_server, page, builder_user):
    spec = {
        "name": "input",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string", "maxLength": 200}}},
        "nodes": [{"id": "start", "kind": "start", "position": {"x": 0, "y": 100}}, {"id": "end", "kind": "end", "position": {"x": 300, "y": 100}}],
        "edges": [{"source": "start", "target": "end"}],
    }
    graph_id = make_graph("input", spec, builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    settings = page.locator(".graph-settings")
    topic = settings.get_by_role("listitem", name="Input field topic")
    expect(topic.get_by_label("Type")).to_have_value("string")
    expect(topic.get_by_text("Also checked: maxLength 200")).to_be_visible()
    # click, then wait: the side panel renders from a deferred copy of the builder state, so the
    # controlled checkbox shows the new value a render after the click (check() asserts at once).
    topic.get_by_label("Required").click()
    expect(topic.get_by_label("Required")).to_be_checked()
    topic.get_by_label("Description").fill("What to research")
    settings.get_by_role("button", name="Add input field").click()
    added = settings.get_by_role("listitem", name="Input field field")
    added.get_by_label("Field name").fill("depth")
    added.get_by_label("Field name").press("Enter")
    depth = settings.get_by_role("listitem", name="Input field depth")
    depth.get_by_label("Allowed values").fill("quick\nthorough")
    depth.get_by_label("Default").select_option("quick")
    wait_saved(page)
    screenshot(page, "builder-input-fields")
    settings.locator('section[aria-label="Input"]').screenshot(path=str(ARTIFACTS / "builder-input-fields-panel.png"))
    assert stored_spec(page, live_server.url, graph_id)["input_schema"] == {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "maxLength": 200, "description": "What to research"},
            "depth": {"type": "string", "enum": ["quick", "thorough"], "default": "quick"},
        },
        "required": ["topic"],
    }

    # The start-run form is built from what the list wrote.
    graph_publish(graph=Graph.objects.get(pk=graph_id), user=builder_user, message="fields")
    page.reload()
    page.get_by_test_id("canvas").wait_for()
    page.get_by_role("button", name="Run", exact=True).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.locator('[id="input.topic"]')).to_be_visible()
    expect(dialog.get_by_text("What to research")).to_be_visible()
    expect(dialog.locator('[id="input.depth"] option:checked')).to_have_text("quick")
    screenshot(page, "builder-input-fields-run-dialog")


def test_start_node_offers_only_what_applies(live_server, page, builder_user):
    graph_id = make_graph("search", search_graph(), builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    node(page, "start").click()
    panel = page.locator(".node-panel")
    expect(panel.get_by_label("Label")).to_be_visible()
    for gone in ("Timeout (seconds)", "Max iterations", "Safe to repeat"):
        expect(panel.get_by_label(gone)).to_have_count(0)
    expect(panel.get_by_role("button", name="Test node")).to_have_count(0)
    panel.screenshot(path=str(ARTIFACTS / "builder-start-panel.png"))

    node(page, "ask").click()
    expect(panel.get_by_label("Timeout (seconds)")).to_be_visible()
    options = panel.get_by_label("Safe to repeat").locator("option").all_text_contents()
    assert options == ["As the kind says", "Yes: run it again after a crash", "No: park the run for a person after a crash"], options


def test_state_keys_read_well(live_server, page, builder_user):
    spec = search_graph()
    spec["state"] = {
        "notes": {"reducer": "append", "default": []},
        "total": {"reducer": "add", "default": 0},
        "title": {"reducer": "replace", "default": "Untitled"},
    }
    graph_id = make_graph("state", spec, builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    section = page.locator('section[aria-label="State keys"]')
    total = section.get_by_role("group", name="State key total")
    expect(total.get_by_label("Reducer").locator("option:checked")).to_have_text("Add")
    expect(total.get_by_text("Writes are summed (numbers).")).to_be_visible()
    expect(total.get_by_label("Default")).to_have_attribute("type", "number")
    title = section.get_by_role("group", name="State key title")
    expect(title.get_by_label("Default (text)")).to_have_value("Untitled")
    title.get_by_label("Default (text)").fill("Draft")
    wait_saved(page)
    assert stored_spec(page, live_server.url, graph_id)["state"]["title"] == {"reducer": "replace", "default": "Draft"}
    section.screenshot(path=str(ARTIFACTS / "builder-state-keys.png"))


def test_test_node_state_has_upstream_keys_and_errors_read_well(live_server, page, builder_user):
    spec = search_graph()
    spec["nodes"][2]["config"] = {"tool": "kb_search", "args": {"query": "{{ query }}"}}
    graph_id = make_graph("search", spec, builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    node(page, "search").click()
    panel = page.locator(".node-panel")
    panel.get_by_role("button", name="Test node").click()
    state = panel.locator('[id="test-state-search"]')
    # The LLM before it writes `query` (text): offered empty, next to the run input's topic.
    expect(state).to_contain_text('"query": ""')
    expect(state).to_contain_text('"topic": null')
    panel.locator(".node-test").screenshot(path=str(ARTIFACTS / "builder-test-node-state.png"))
    state.click()
    page.keyboard.press("Control+a")
    page.keyboard.type('{"topic": "refunds"}')
    panel.get_by_role("button", name="Run test").click()
    expect(panel.get_by_role("alert")).to_have_text(
        "config.args.query: the template uses `query`, which is not in the state (known: input, topic)"
    )
    panel.locator(".node-test").screenshot(path=str(ARTIFACTS / "builder-test-node-error.png"))


def test_condition_example_fits_the_keys_kind(live_server, page, builder_user):
    spec = {
        "name": "research",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
        "state": {"articles": {"reducer": "append", "default": []}},
        "nodes": [
            {"id": "start", "kind": "start", "position": {"x": 0, "y": 100}},
            {"id": "check", "kind": "condition", "config": {"expression": ""}, "position": {"x": 260, "y": 100}},
            {"id": "end", "kind": "end", "position": {"x": 520, "y": 100}},
        ],
        "edges": [{"source": "start", "target": "check"}, {"source": "check", "source_handle": "true", "target": "end"}],
    }
    graph_id = make_graph("research", spec, builder_user)
    sign_in(page, live_server.url, "tia", "pw-tia-1")
    open_builder(page, live_server.url, graph_id)

    node(page, "check").click()
    config = page.locator('.node-panel section[aria-label="Configuration"]')
    # articles is a list: the example measures it instead of comparing it with 0.5.
    expect(config.locator(".cm-placeholder").first).to_have_text("e.g. len(articles) > 0")
    config.screenshot(path=str(ARTIFACTS / "builder-condition-placeholder.png"))
