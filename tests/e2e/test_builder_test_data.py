"""Issue 25, the build-test loop in a browser: test data pinned per node survives a reload (and Test node
starts from it), fields preview what they resolve to against it, and the variable picker inserts a name."""
from __future__ import annotations

import copy
import json

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from builder.services import graph_create
from graphs.models import Graph
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import SPEC, node, wait_saved

pytestmark = [pytest.mark.django_db(transaction=True)]
MOD = "Control"


def _spec() -> dict:
    """The panel demo plus an LLM step (mock provider) on the true branch: route -> ask -> high."""
    spec = copy.deepcopy(SPEC)
    spec["name"] = "Test data demo"
    spec["nodes"].append({"id": "ask", "kind": "llm", "label": "Summarise", "position": {"x": 650, "y": -200},
                          "config": {"prompt": "Summarise", "model": "mock-1", "max_tokens": 50}})
    spec["edges"] = [e for e in spec["edges"] if e.get("source_handle") != "true"]
    spec["edges"] += [{"source": "route", "source_handle": "true", "target": "ask"}, {"source": "ask", "target": "high"}]
    return spec


def _open(page: Page, base_url: str) -> int:
    user: User = make_user("pia", "builders", "operators")
    graph = graph_create(name="Test data demo", draft=_spec(), user=user)
    sign_in(page, base_url, "pia", "pw-pia-1")
    page.goto(f"{base_url}/graphs/{graph.pk}/")
    node(page, "route").wait_for()
    return graph.pk


def _replace_code(page: Page, dom_id: str, text: str) -> None:
    page.locator(f'[id="{dom_id}"]').click()
    page.keyboard.press(f"{MOD}+a")
    page.keyboard.type(text)


def test_pinned_data_survives_a_reload_and_feeds_test_node_and_the_preview(live_server, page: Page) -> None:
    graph_id = _open(page, live_server.url)
    panel = page.get_by_role("complementary", name="Side panel")
    node(page, "calc").click()
    panel.get_by_role("button", name="Test node").click()
    _replace_code(page, "test-state-calc", json.dumps({"ticket": "Printer on fire", "priority": 4}))
    panel.get_by_role("button", name="Run test").click()
    expect(panel.locator(".test-result")).to_contain_text('"score": 8')

    test_data = panel.get_by_role("region", name="Test data")
    expect(test_data).to_contain_text("From the last test input")
    test_data.get_by_role("button", name="Pin last test input").click()
    expect(test_data.get_by_label("Pinned data")).to_contain_text("Printer on fire")
    expect(node(page, "calc").get_by_role("img", name="pinned test data")).to_be_visible()
    assert Graph.objects.get(pk=graph_id).draft_pins == {"calc": {"ticket": "Printer on fire", "priority": 4}}
    # The transform's expression previews against the pinned data.
    expect(panel.get_by_test_id("value-preview").first).to_have_text("8")

    page.reload()
    node(page, "calc").wait_for()
    expect(node(page, "calc").get_by_role("img", name="pinned test data")).to_be_visible()
    expect(node(page, "route").get_by_role("img", name="pinned test data")).to_have_count(0)
    node(page, "calc").click()
    test_data = panel.get_by_role("region", name="Test data")
    expect(test_data).to_contain_text("Pinned: kept with the draft")
    expect(test_data.get_by_label("Pinned data")).to_contain_text("Printer on fire")
    expect(panel.get_by_test_id("value-preview").first).to_have_text("8")
    # Test node starts from the pinned data.
    panel.get_by_role("button", name="Test node").click()
    expect(page.locator('[id="test-state-calc"]')).to_contain_text("Printer on fire")
    expect(panel.get_by_role("region", name="Test node")).to_contain_text("Starts from the pinned test data")

    # Unpin: the marker goes, and the server forgets it.
    test_data.get_by_role("button", name="Unpin").click()
    expect(node(page, "calc").get_by_role("img", name="pinned test data")).to_have_count(0)
    expect(test_data).not_to_contain_text("Pinned: kept with the draft")
    assert Graph.objects.get(pk=graph_id).draft_pins == {}


def test_the_picker_inserts_a_variable_and_the_preview_shows_the_value(live_server, page: Page) -> None:
    graph_id = _open(page, live_server.url)
    panel = page.get_by_role("complementary", name="Side panel")
    # A condition: data written by hand and pinned; its expression previews true, then an error with its place.
    node(page, "route").click()
    test_data = panel.get_by_role("region", name="Test data")
    test_data.get_by_role("button", name="Write data").click()
    _replace_code(page, "pin-route", json.dumps({"ticket": "T-1", "priority": 4, "score": 8, "order": {"total": 12.5}}))
    test_data.get_by_role("button", name="Save pin").click()
    expect(test_data.get_by_label("Pinned data")).to_contain_text('"score": 8')
    expect(panel.get_by_test_id("value-preview")).to_have_text("true")
    _replace_code(page, "config.expression", "score > totl")
    expect(panel.locator(".value-preview--error")).to_contain_text("totl")
    expect(panel.locator(".value-preview--error")).to_contain_text("column")
    # The picker lists input fields by name and the test data's fields; it inserts the bare name in an expression.
    _replace_code(page, "config.expression", "")
    panel.get_by_role("button", name="Insert a variable into Expression").click()
    picker = panel.get_by_role("dialog", name="Insert a variable")
    expect(picker.get_by_role("option").first).to_contain_text("ticket")
    picker.get_by_role("searchbox", name="Search variables").fill("order.total")
    page.keyboard.press("Enter")
    expect(page.locator('[id="config.expression"]')).to_have_text("order.total")
    expect(panel.get_by_test_id("value-preview")).to_have_text("12.5")

    # An LLM prompt: typing {{ opens the picker; the pick is written {{ ticket }} and the prompt previews rendered.
    node(page, "ask").click()
    test_data = panel.get_by_role("region", name="Test data")
    test_data.get_by_role("button", name="Write data").click()
    _replace_code(page, "pin-ask", json.dumps({"ticket": "Printer on fire", "priority": 4, "score": 8}))
    test_data.get_by_role("button", name="Save pin").click()
    expect(test_data.get_by_label("Pinned data")).to_be_visible()
    _replace_code(page, "config.prompt", "Summarise {{")
    picker = panel.get_by_role("dialog", name="Insert a variable")
    expect(picker).to_be_visible()
    page.keyboard.type("ticket")
    screenshot(page, "builder-test-data-picker")
    page.keyboard.press("Enter")
    expect(page.locator('[id="config.prompt"]')).to_have_text("Summarise {{ ticket }}")
    preview = panel.get_by_test_id("value-preview")
    expect(preview).to_have_text("Summarise Printer on fire")
    # The whole panel at once for the screenshot: pinned data, the prompt's preview, the picker open.
    page.set_viewport_size({"width": 1440, "height": 1700})
    panel.get_by_role("region", name="Test data").scroll_into_view_if_needed()
    screenshot(page, "builder-test-data-preview")
    panel.get_by_role("button", name="Insert a variable into Prompt").click()
    expect(panel.get_by_role("dialog", name="Insert a variable")).to_be_visible()
    screenshot(page, "builder-test-data-panel")
    page.keyboard.press("Escape")
    wait_saved(page)
    stored = page.request.get(f"{live_server.url}/api/v1/graphs/{graph_id}/").json()
    ask = next(n for n in stored["spec"]["nodes"] if n["id"] == "ask")
    assert ask["config"]["prompt"] == "Summarise {{ ticket }}"
    assert set(stored["pins"]) == {"route", "ask"}
