"""Issue 25, the build-test loop: from the graph list, a new graph gets an LLM step (the built-in
mock provider) through "+" and runs its draft with "Run draft": the output shows in the builder,
live, in at most 8 actions and with no publish, as n8n's and Dify's draft runs do.

Against daphne (the drawer follows the run over the WebSocket) and a real qcluster worker.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from graphs.models import Graph, GraphVersion
from runs.models import Run
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import node
from tests.support.daphne import Daphne
from tests.support.run_page import LIVE_TIMEOUT_MS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live, pytest.mark.timeout(240)]


class Actions:
    """Counts what a user does (clicks and fills), as the issue's target counts them."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.count += 1
        return fn(*args)


def test_a_new_graph_with_an_llm_runs_its_draft_and_shows_the_output_in_eight_actions(daphne: Daphne, page: Page, cluster_factory) -> None:  # noqa: F811
    make_user("nia", "builders", "operators")
    sign_in(page, daphne.url, "nia", "pw-nia-1")
    cluster_factory("draft").start()
    page.goto(f"{daphne.url}/graphs/")
    act = Actions()

    act(page.get_by_role("button", name="New graph").click)
    dialog = page.get_by_role("dialog", name="New graph")
    act(dialog.get_by_label("Name").fill, "hello-llm")
    act(dialog.get_by_role("button", name="Create and open").click)
    page.get_by_test_id("canvas").wait_for()
    graph = Graph.objects.get(name="hello-llm")
    # Never published: the note offers running the draft instead of asking for a publish.
    expect(page.get_by_role("note")).to_contain_text("run the draft to try it here")

    act(page.get_by_role("button", name="Add a node after start").click)
    act(page.get_by_test_id("node-picker").locator('[role="option"][data-kind="llm"]').click)
    expect(node(page, "llm")).to_be_visible()
    # The mock provider and its model are the node's defaults; the prompt is all it needs.
    prompt = page.locator('[id="config.prompt"]')
    act(prompt.fill, "Say hello to the builder")
    act(page.get_by_role("button", name="Run draft", exact=True).click)

    drawer = page.get_by_role("region", name="Draft run")
    expect(drawer).to_be_visible()
    output = drawer.get_by_label("Draft run output")
    expect(output).to_contain_text("Echo: Say hello to the builder", timeout=LIVE_TIMEOUT_MS)
    expect(drawer.locator(".status-badge").first).to_have_text("succeeded")
    steps = drawer.get_by_role("list", name="Steps")
    expect(steps.get_by_role("button")).to_have_count(3)
    for node_id in ("start", "llm", "end"):
        expect(steps.locator(f'[data-node="{node_id}"]')).to_contain_text("succeeded")
        # The canvas colours each node by the draft run's result, as a run's page does.
        expect(node(page, node_id).locator(".bnode")).to_have_attribute("data-state", "succeeded")
    assert act.count <= 8, f"{act.count} actions from the graph list to the draft's output"
    screenshot(page, "builder-draft-run")

    # Nothing was published; the run is a test run of the draft, kept out of the run list.
    assert not GraphVersion.objects.filter(graph=graph, is_test=False).exists()
    run = Run.objects.get(graph_version__graph=graph)
    assert run.is_test and run.source == "draft" and run.status == "succeeded"
    expect(drawer.get_by_role("link", name="Open run page")).to_have_attribute("href", f"/runs/{run.pk}/")
    # A step of the drawer selects its node on the canvas; the node panel shows, at its top,
    # Test node and the node's last input and output from that draft run, without scrolling.
    steps.locator('[data-node="llm"]').click()
    expect(node(page, "llm")).to_have_class(re.compile("selected"))
    panel = page.locator(".node-panel")
    last = panel.get_by_role("region", name="Last run of this node")
    expect(last).to_contain_text(f"Draft run #{run.pk}")
    expect(last.get_by_label("Last output")).to_contain_text("Echo: Say hello to the builder")
    expect(last.get_by_label("Last input")).to_contain_text('"input"')
    expect(panel.get_by_role("button", name="Test node")).to_be_in_viewport()
    expect(last.get_by_label("Last output")).to_be_in_viewport()
    screenshot(page, "builder-draft-run-last-data")

    # Test node at the top: its result shows without scrolling, and becomes the node's last run.
    panel.get_by_role("button", name="Test node").click()
    panel.get_by_role("button", name="Run test").click()
    result = panel.locator(".test-result")
    expect(result).to_contain_text("succeeded")
    expect(result.locator(".test-output").first).to_contain_text("Echo: Say hello to the builder")
    expect(result).to_be_in_viewport()
    expect(last).to_have_count(0)  # the test's own result stands in for it while shown
    screenshot(page, "builder-node-test-top")
    panel.get_by_role("button", name="Close").click()
    tested = Run.objects.filter(graph_version__graph=graph, is_test=True).exclude(pk=run.pk).get()
    expect(last).to_contain_text(f"Node test #{tested.pk}")
    # Closing the results takes the run's colours off the canvas.
    drawer.get_by_role("button", name="Close the draft run").click()
    expect(drawer).to_have_count(0)
    expect(node(page, "llm").locator(".bnode[data-state]")).to_have_count(0)
