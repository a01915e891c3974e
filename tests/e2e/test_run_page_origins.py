"""What a run page says about where its run came from, in Chromium: a node-test run is a test
of one node from the builder (its one node drawn, no version 0, no retry, and its audit entry's
snapshot link opens the graph's builder), a fork names its source run and step and draws the nodes it
kept as kept, and "Open graph" opens the version the run ran.

Screenshots: artifacts/run-page-test-run.png, run-page-test-run-succeeded.png, run-page-fork.png, run-page-fork-kept-node.png, run-page-open-version.png,
audit-test-snapshot.png.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_node_test
from runs.models import Run, Step
from runs.services import run_fork
from tests.support.browser import login, make_user, screenshot
from tests.support.specs import continue_local, publish, run_local
from tests.support.world import failing_draft, priced_spec

pytestmark = pytest.mark.django_db(transaction=True)


def canvas_node(page: Page, name: str):
    return page.locator(f'.react-flow__node[role="group"][aria-label="{name}"]')


def test_a_node_test_runs_page_says_what_it_tested_draws_that_node_and_offers_no_retry(page: Page, live_server) -> None:
    admin = make_user("ada", "operators", staff=True)
    graph = failing_draft()
    run = graph_node_test(graph=graph, node_id="boom", state={"x": 1, "zero": 0}, user=admin)
    assert run.is_test and run.status == "failed"
    login(page, live_server, admin)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.get_by_role("heading", name=re.compile(f"Test run #{run.pk}"))).to_contain_text("failed")
    subtitle = page.locator(".page-subtitle")
    expect(subtitle).to_contain_text(f"A test of node boom of graph {graph.name}")
    expect(subtitle).to_contain_text("not a published version")
    expect(subtitle).not_to_contain_text("version 0")
    expect(canvas_node(page, "node boom: failed")).to_be_visible()
    expect(page.locator('.react-flow__node[aria-label^="node test_end"]')).to_have_count(0)
    expect(page.get_by_text("The graph could not be loaded")).to_have_count(0)
    expect(page.get_by_text("v0", exact=True)).to_have_count(0)
    for name in ("Retry from failed step", "Resume", "Fork…", "Compare…"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.get_by_role("link", name="Open graph in the builder")).to_have_attribute("href", f"/graphs/{graph.pk}/")
    screenshot(page, "run-page-test-run")

    # A test that succeeded ran the harness's end node too: it is no node of the graph, not listed.
    ok = graph_node_test(graph=graph, node_id="boom", state={"x": 4, "zero": 2}, user=admin)
    assert ok.status == "succeeded" and Step.objects.filter(run=ok, node_id="test_end").exists()
    page.goto(f"{live_server.url}/runs/{ok.pk}/")
    expect(canvas_node(page, "node boom: succeeded")).to_be_visible()
    expect(page.get_by_role("region", name="Steps", exact=True)).to_contain_text("boom")
    expect(page.get_by_role("region", name="Steps", exact=True)).not_to_contain_text("test_end")
    expect(page.get_by_role("button", name="Fork…")).to_have_count(0)
    screenshot(page, "run-page-test-run-succeeded")

    # The audit log's snapshot link opens the graph's builder, not a version that does not exist.
    page.goto(f"{live_server.url}/audit/")
    link = page.get_by_role("link", name=f"{graph.name} test snapshot").last
    expect(link).to_have_attribute("href", f"/graphs/{graph.pk}/")
    screenshot(page, "audit-test-snapshot")
    link.click()
    expect(page.get_by_role("link", name="← Graphs")).to_be_visible()
    expect(page.get_by_text("Could not open this graph")).to_have_count(0)
    expect(page.locator(".react-flow__node").first).to_be_visible()


def test_a_forked_runs_page_names_its_source_and_draws_kept_nodes_and_open_graph_opens_its_version(page: Page, live_server) -> None:
    operator = make_user("opal", "operators")
    version = publish(priced_spec())
    source = run_local(version, {"x": 1, "zero": 2, "name": "Ada"}, user=operator)
    draft = Step.objects.get(run=source, node_id="draft")
    forked = run_fork(run=source, step_id=draft.pk, state_patch={"zero": 4}, user=operator)
    forked = continue_local(Run.objects.get(pk=forked.pk), list(Step.objects.filter(run=forked).values_list("id", flat=True)))
    assert forked.status == "succeeded", forked.error
    login(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/{forked.pk}/")
    subtitle = page.locator(".page-subtitle")
    expect(subtitle).to_contain_text(f"Forked from run #{source.pk} (at draft)")
    expect(subtitle.get_by_role("link", name=f"run #{source.pk}")).to_have_attribute("href", f"/runs/{source.pk}/?step={draft.pk}")
    expect(page.get_by_role("list", name="Node states")).to_contain_text(f"kept from run #{source.pk}")
    expect(canvas_node(page, "node start: kept")).to_be_visible()
    expect(canvas_node(page, "node draft: kept")).to_be_visible()
    expect(canvas_node(page, "node boom: succeeded")).to_be_visible()
    expect(page.locator('.react-flow__node[aria-label$=": skipped"]')).to_have_count(0)
    expect(canvas_node(page, "node start: kept").locator(".bnode")).to_contain_text("kept")
    screenshot(page, "run-page-fork")
    # A kept node has no step here: its inspector says where its result came from.
    canvas_node(page, "node draft: kept").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector).to_contain_text(f"its result was kept from run #{source.pk}")
    expect(inspector.get_by_role("link", name=f"run #{source.pk}")).to_have_attribute("href", f"/runs/{source.pk}/?step={draft.pk}")
    screenshot(page, "run-page-fork-kept-node")

    # "Open graph" opens the version the run ran, read-only, with the way back to the draft.
    open_graph = page.get_by_role("link", name="Open graph", exact=True)
    expect(open_graph).to_have_attribute("href", f"/graphs/{version.graph_id}/?version={version.number}")
    open_graph.click()
    expect(page.get_by_text(f"Version {version.number} · read-only")).to_be_visible()
    expect(page.get_by_role("link", name="back to the draft")).to_be_visible()
    screenshot(page, "run-page-open-version")
