"""The builder's Run dialog in a browser: the first click on Start run starts the run, and the
dialog says plainly when the draft is not what runs (unpublished changes, problems, no version)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_publish
from graphs.models import Graph
from tests.support.browser import make_user, screenshot, sign_in, wait_until_still
from tests.support.builder_steps import example, make_graph, open_builder, viewport_settled

pytestmark = pytest.mark.django_db(transaction=True)


def refund_graph(publish: bool = True) -> int:
    user = make_user("pat", "builders", "operators")
    graph_id = make_graph("Refund agent", example("refund_agent"), user=user)
    if publish:
        graph_publish(graph=Graph.objects.get(pk=graph_id), user=user, message="first")
    return graph_id


def open_run_dialog(page: Page, base_url: str, graph_id: int):
    """Pat signs in, opens the graph's builder and clicks Run; the dialog's locator."""
    sign_in(page, base_url, "pat", "pw-pat-1")
    open_builder(page, base_url, graph_id)
    page.get_by_role("button", name="Run", exact=True).click()
    return page.get_by_role("dialog")


def test_first_click_on_start_run_starts_the_refund_run(live_server, page: Page) -> None:
    graph_id = refund_graph()
    dialog = open_run_dialog(page, live_server.url, graph_id)
    # As the new user did: type the order id, move to the reason, type it, click Start run
    # while the reason still has focus (its blur used to re-validate and move the button).
    dialog.locator('[id="input.order_id"]').click()
    page.keyboard.type("A-1002", delay=20)
    dialog.locator('[id="input.reason"]').click()
    page.keyboard.type("arrived broken", delay=20)
    expect(dialog.get_by_text("must have required property")).to_have_count(0)
    screenshot(page, "run-dialog-refund-filled")
    dialog.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    run = page.request.get(f"{live_server.url}/api/v1/runs/{run_id}/").json()
    assert run["input"] == {"order_id": "A-1002", "reason": "arrived broken"}


def test_run_dialog_says_the_draft_is_not_what_runs(live_server, page: Page) -> None:
    graph_id = refund_graph()
    dialog = open_run_dialog(page, live_server.url, graph_id)
    expect(dialog.get_by_text("Runs version 1 (the same as your draft).")).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()

    # A valid edit not yet published.
    graph = Graph.objects.get(pk=graph_id)
    draft = graph.draft
    draft["description"] = "changed after publishing"
    Graph.objects.filter(pk=graph_id).update(draft=draft)
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Run", exact=True).click()
    note = page.get_by_role("dialog").get_by_role("note")
    expect(note).to_contain_text("Runs version 1, not your draft: the draft has unpublished changes")
    screenshot(page, "run-dialog-unpublished-changes")
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    # An invalid draft: the dialog counts its problems.
    draft["edges"] = [e for e in draft["edges"] if e["source"] != "start"]
    Graph.objects.filter(pk=graph_id).update(draft=draft)
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Run", exact=True).click()
    note = page.get_by_role("dialog").get_by_role("note")
    expect(note).to_contain_text(re.compile(r"Runs version 1, not your draft: the draft has \d+ problems? and unpublished changes"))
    screenshot(page, "run-dialog-invalid-draft")


def test_run_is_disabled_with_its_reason_when_nothing_is_published(live_server, page: Page) -> None:
    graph_id = refund_graph(publish=False)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.get_by_role("button", name="Run", exact=True)).to_be_disabled()
    # One note, not one per disabled button: the Problems list carries the problems.
    notes = page.get_by_role("note")
    expect(notes).to_have_count(1)
    expect(notes).to_contain_text("Never published: run the draft to try it here; publish it to make a version that triggers and others can run.")
    # The note offers the way to run it now: the draft itself, without a publish.
    expect(notes.get_by_role("button", name="Run the draft now")).to_be_enabled()
    screenshot(page, "builder-run-disabled-never-published")


def test_reading_an_undeclared_input_key_is_warned_in_the_problems_bar(live_server, page: Page) -> None:
    user = make_user("pat", "builders", "operators")
    spec = {
        "name": "Hello",
        "nodes": [
            {"id": "start", "kind": "start", "config": {}, "position": {"x": 0, "y": 0}},
            {"id": "greet", "kind": "transform", "config": {"set": {"greeting": "'Hello, ' + input.name"}}, "position": {"x": 260, "y": 0}},
            {"id": "end", "kind": "end", "config": {}, "position": {"x": 520, "y": 0}},
        ],
        "edges": [{"source": "start", "target": "greet"}, {"source": "greet", "target": "end"}],
    }
    graph_id = make_graph("Hello", spec, user=user)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    bar = page.get_by_role("region", name="Problems").last
    expect(bar.locator(".errors-panel__toggle")).to_have_text(re.compile(r"No problems · 1 warning"))
    bar.locator(".errors-panel__toggle").click()  # the count opens the list
    expect(bar).to_contain_text("reads input.name, but the input schema does not declare 'name'")
    expect(page.get_by_role("button", name="Publish", exact=True)).to_be_enabled()  # a warning blocks nothing
    screenshot(page, "builder-undeclared-input-warning")


def test_a_loop_back_edge_is_drawn_as_a_detour_below_the_nodes(live_server, page: Page) -> None:
    user = make_user("pat", "builders", "operators")
    graph_id = make_graph("Refund agent", example("refund_agent"), user=user)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Auto-layout").click()
    loop = page.locator("path.bedge-loop")
    expect(loop.first).to_be_attached()
    # The layout animates the nodes and the fit: measure once both have stopped.
    viewport_settled(page)
    wait_until_still(page, '.react-flow__node[data-id="lookup"]')
    wait_until_still(page, "path.bedge-loop", measure="d")
    # The refund example retries the lookup: found --false--> lookup goes back left.
    box = loop.first.bounding_box()
    lookup = page.locator('.react-flow__node[data-id="lookup"]').bounding_box()
    assert box and lookup
    assert box["y"] + box["height"] > lookup["y"] + lookup["height"] + 5, (box, lookup)
    screenshot(page, "builder-loop-back-edge")


def test_publish_is_disabled_while_the_draft_equals_the_latest_version(live_server, page: Page) -> None:
    graph_id = refund_graph()
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    publish = page.get_by_role("button", name="Publish", exact=True)
    expect(publish).to_be_disabled()
    expect(publish).to_have_attribute("title", "No changes since version 1")
    # No banner for the usual state: only problems get a note.
    expect(page.get_by_role("note").filter(has_text="Publishing is disabled")).to_have_count(0)
    screenshot(page, "builder-publish-unchanged")

    graph = Graph.objects.get(pk=graph_id)
    draft = graph.draft
    draft["description"] = "changed after publishing"
    Graph.objects.filter(pk=graph_id).update(draft=draft)
    open_builder(page, live_server.url, graph_id)
    expect(page.get_by_role("button", name="Publish", exact=True)).to_be_enabled()
