"""Graphs that call graphs in the browser: a "Call graph" node added after start picks a published graph from a list, shows that graph's input as named fields, runs as a draft on a real qcluster, and the run page links the parent to its child run and back, with the child's cost rolled up.

Against daphne and a real qcluster worker.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from runs.models import Run
from tests.support.browser import ARTIFACTS, make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, node, open_builder, stored_spec, wait_saved
from tests.support.daphne import Daphne
from tests.support.run_page import LIVE_TIMEOUT_MS
from tests.support.specs import publish
from tests.support.subgraphs import child_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live, pytest.mark.timeout(240)]


def caller_spec() -> dict:
    return {
        "name": "caller",
        "nodes": [{"id": "start", "kind": "start", "position": {"x": 0, "y": 100}}, {"id": "end", "kind": "end", "position": {"x": 400, "y": 100}}],
        "edges": [{"source": "start", "target": "end"}],
    }


def test_a_call_graph_node_picks_a_graph_runs_it_and_links_to_the_child_run(daphne: Daphne, page: Page, cluster_factory) -> None:
    child = publish(child_spec(name="doubler"))
    user = make_user("cal", "builders", "operators")
    graph_id = make_graph("caller", caller_spec(), user)
    cluster_factory("calls").start()
    sign_in(page, daphne.url, "cal", "pw-cal-1")
    open_builder(page, daphne.url, graph_id)

    page.get_by_role("button", name="Add a node after start").click()
    page.get_by_test_id("node-picker").locator('[role="option"][data-kind="subgraph"]').click()
    expect(node(page, "subgraph")).to_be_visible()
    panel = page.locator(".node-panel")
    expect(panel.locator(".panel-subtitle")).to_contain_text("Call graph")
    picker = page.locator('[id="config.graph"]')
    # Only published graphs are offered, never the graph being edited.
    expect(picker.locator("option").first).to_have_text("Pick a published graph…")
    expect(picker.locator("option", has_text="doubler (v1)")).to_have_count(1)
    expect(picker.locator("option", has_text="caller")).to_have_count(0)
    picker.select_option(label="doubler (v1)")
    # The picked graph's input becomes named fields, as a tool's arguments do.
    expect(panel.get_by_role("group", name="Input of doubler")).to_be_visible()
    expect(panel.locator('label[for="config.input.n"]')).to_have_text("n *")
    page.locator('[id="config.input.n"]').click()
    page.keyboard.type("{{ 21 }}")
    wait_saved(page)
    config = next(n for n in stored_spec(page, daphne.url, graph_id)["nodes"] if n["kind"] == "subgraph")["config"]
    assert config["graph"] == child.graph_id and config["input"] == {"n": "{{ 21 }}"}, config
    expect(page.locator('[id="config.version"]')).to_have_value("latest")
    screenshot(page, "builder-call-graph")
    panel.locator('section[aria-label="Configuration"]').screenshot(path=str(ARTIFACTS / "builder-call-graph-panel.png"))

    page.get_by_role("button", name="Run draft", exact=True).click()
    drawer = page.get_by_role("region", name="Draft run")
    expect(drawer.locator(".status-badge").first).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    parent = Run.objects.get(graph_version__graph_id=graph_id)
    kid = Run.objects.get(parent_step__run=parent)
    assert kid.status == "succeeded" and kid.output == {"doubled": 42}

    page.goto(f"{daphne.url}/runs/{parent.pk}/")
    children = page.get_by_role("region", name=re.compile("Child runs"))
    expect(children.locator(f'[data-child-run="{kid.pk}"]')).to_contain_text("doubler")
    expect(children.locator(f'[data-child-run="{kid.pk}"]')).to_contain_text("succeeded")
    page.locator(".run-graph .react-flow__node").first.wait_for()
    link = page.locator(".child-run-link")
    expect(link).to_have_text(f"child run #{kid.pk}")
    screenshot(page, "run-page-child-runs")
    link.click()
    expect(page).to_have_url(re.compile(f"/runs/{kid.pk}/"))
    back = page.locator(".run-parent a")
    expect(back).to_have_text(f"run #{parent.pk}")
    expect(page.locator(".run-parent")).to_contain_text("step subgraph")
    page.locator(".run-graph .react-flow__node").first.wait_for()
    screenshot(page, "run-page-called-by")
    back.click()
    expect(page).to_have_url(re.compile(f"/runs/{parent.pk}/\\?step="))
