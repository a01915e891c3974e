"""A published graph as an agent's tool in the browser: the agent's form adds a graph tool picked from the published graphs (its name filled from the graph's), the draft runs on a real qcluster with the mock model calling it, and the run page and the agent's transcript link the tool call to its child run.

Against daphne and a real qcluster worker.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from runs.models import Run, Step
from tests.support.browser import ARTIFACTS, make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, open_builder, select_node, stored_spec, wait_saved
from tests.support.daphne import Daphne
from tests.support.run_page import LIVE_TIMEOUT_MS
from tests.support.specs import publish
from tests.support.subgraphs import child_spec, graph_tool_agent_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live, pytest.mark.timeout(240)]


def test_an_agent_gets_a_graph_tool_in_its_form_runs_it_and_links_the_child(
    daphne: Daphne, page: Page, cluster_factory
) -> None:
    child = publish(child_spec(name="doubler"))
    user = make_user("gt", "builders", "operators")
    graph_id = make_graph("agent-with-graph-tool", graph_tool_agent_spec(), user)
    cluster_factory("graph-tools").start()
    sign_in(page, daphne.url, "gt", "pw-gt-1")
    open_builder(page, daphne.url, graph_id)

    select_node(page, "agent")
    panel = page.locator(".node-panel")
    panel.get_by_role("button", name="Add graph tool").click()
    picker = page.locator('[id="config.graph_tools.0.graph"]')
    expect(picker.locator("option", has_text="doubler (v1)")).to_have_count(1)
    expect(picker.locator("option", has_text="agent-with-graph-tool")).to_have_count(0)  # never the graph being edited
    picker.select_option(label="doubler (v1)")
    expect(page.locator('[id="config.graph_tools.0.name"]')).to_have_value("doubler")
    expect(page.locator('[id="config.graph_tools.0.version"]')).to_have_value("latest")
    wait_saved(page)
    config = next(n for n in stored_spec(page, daphne.url, graph_id)["nodes"] if n["id"] == "agent")["config"]
    assert config["graph_tools"] == [{"graph": child.graph_id, "version": "latest", "name": "doubler"}], config
    panel.locator(".form-field-graph-tools").screenshot(path=str(ARTIFACTS / "builder-graph-tools.png"))

    page.get_by_role("button", name="Run draft", exact=True).click()
    drawer = page.get_by_role("region", name="Draft run")
    expect(drawer.locator(".status-badge").first).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    parent = Run.objects.get(graph_version__graph_id=graph_id)
    kid = Run.objects.get(parent_step__run=parent)
    assert kid.status == "succeeded" and kid.output == {"doubled": 42}
    assert parent.output == {"answer": "It is 42."}

    page.goto(f"{daphne.url}/runs/{parent.pk}/")
    children = page.get_by_role("region", name=re.compile("Child runs"))
    expect(children.locator(f'[data-child-run="{kid.pk}"]')).to_contain_text("doubler")
    page.locator(".run-graph .react-flow__node").first.wait_for()
    expect(page.locator(".child-run-link")).to_have_text(f"child run #{kid.pk}")  # on the tool call's row
    agent_step = Step.objects.get(run=parent, node_id="agent")
    page.goto(f"{daphne.url}/runs/{parent.pk}/?step={agent_step.pk}")
    transcript = page.get_by_role("list", name="Agent transcript")
    call = transcript.locator('[data-child="tool-0-c1"]')
    expect(call.locator(".child-run-link")).to_have_text(f"child run #{kid.pk}")
    expect(call).to_contain_text('{"doubled":42}')
    screenshot(page, "run-page-graph-tool")
    call.locator(".child-run-link").click()
    expect(page).to_have_url(re.compile(f"/runs/{kid.pk}/"))
    expect(page.locator(".run-parent")).to_contain_text("agent#0/tool-0-c1")
