"""Version history in the builder: compare two published versions on the canvas, open one read-only, restore one as the draft."""
from __future__ import annotations

import copy
import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from builder.services import graph_create, graph_draft_save, graph_publish
from graphs.models import Graph
from tests.support.browser import screenshot, sign_in
from tests.support.builder_steps import SPEC

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def builder_user(db) -> User:
    user = User.objects.create_user("hana", password="pw-hana-1")
    for name in ("builders", "operators"):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def two_versions(user: User) -> int:
    """The demo graph published twice; v2 changes ``calc`` and puts a new ``audit`` node on the way to ``high``."""
    graph = graph_create(name="History demo", draft={**SPEC, "name": "History demo"}, user=user)
    graph_publish(graph=Graph.objects.get(pk=graph.pk), user=user, message="first")
    v2 = copy.deepcopy({**SPEC, "name": "History demo"})
    v2["nodes"][1]["config"] = {"set": {"score": "priority * 3"}}
    v2["nodes"].append({"id": "audit", "kind": "transform", "config": {"set": {"audited": "True"}}, "position": {"x": 620, "y": -200}})
    v2["edges"] = [e for e in v2["edges"] if e.get("source_handle") != "true"]
    v2["edges"] += [{"source": "route", "source_handle": "true", "target": "audit"}, {"source": "audit", "target": "high"}]
    g = Graph.objects.get(pk=graph.pk)
    graph_draft_save(graph=g, spec=v2, base_revision=g.draft_revision, user=user)
    graph_publish(graph=Graph.objects.get(pk=graph.pk), user=user, message="triple the score, audit urgent tickets")
    return graph.pk


def node(page: Page, node_id: str):
    return page.locator(f'.react-flow__node[data-id="{node_id}"] .bnode')


def test_compare_open_and_restore_versions(live_server, page: Page, builder_user):
    graph_id = two_versions(builder_user)
    base = live_server.url
    sign_in(page, base, "hana", "pw-hana-1")
    page.goto(f"{base}/graphs/{graph_id}/")
    node(page, "audit").wait_for()

    page.get_by_role("button", name="History").click()
    history = page.get_by_role("region", name="Version history")
    expect(history.get_by_text("triple the score, audit urgent tickets")).to_be_visible()
    history.get_by_label("Compare version 1").check()
    history.get_by_label("Compare version 2").check()
    history.get_by_role("button", name="Compare v1 and v2").click()

    legend = page.get_by_role("region", name="Comparison legend")
    expect(legend).to_contain_text("Comparing version 1 → 2")
    expect(node(page, "calc")).to_have_attribute("data-diff", "changed")
    expect(node(page, "audit")).to_have_attribute("data-diff", "added")
    expect(node(page, "start")).not_to_have_attribute("data-diff", re.compile(".*"))
    expect(legend).to_contain_text("added: 1 node, 2 edges")
    expect(legend).to_contain_text("changed: 1 node")
    expect(legend).to_contain_text("removed: 1 edge")
    # The changed field is listed too, old and new value side by side.
    expect(history).to_contain_text("priority * 3")
    screenshot(page, "builder-history-diff")

    # Closing the comparison from the legend brings the draft back, unmarked.
    legend.get_by_role("button", name="Close comparison").click()
    expect(legend).to_have_count(0)
    expect(node(page, "calc")).not_to_have_attribute("data-diff", re.compile(".*"))

    # Open version 1 read-only: the page says so and has no edit controls.
    history.get_by_role("button", name="Open version 1").click()
    page.wait_for_url(re.compile(r"\?version=1&history=1$"))
    expect(page.get_by_text("Version 1 · read-only")).to_be_visible()
    node(page, "calc").wait_for()
    expect(node(page, "audit")).to_have_count(0)
    expect(page.get_by_role("button", name="Publish", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Run version 1")).to_be_enabled()
    expect(page.get_by_role("region", name="Version history")).to_contain_text("Viewing version 1")
    expect(page.get_by_role("button", name="Open version 2")).to_be_visible()
    screenshot(page, "builder-history-version-1")
    page.get_by_role("region", name="Version history").get_by_role("button", name="Back to the draft").click()
    page.wait_for_url(re.compile(rf"/graphs/{graph_id}/\?history=1$"))
    node(page, "audit").wait_for()

    # Restore version 1 as the draft: the canvas reloads it and autosave builds on it.
    history = page.get_by_role("region", name="Version history")
    history.get_by_role("button", name="Restore version 1").click()
    history.get_by_role("alertdialog").get_by_role("button", name="Restore version 1").click()
    expect(node(page, "audit")).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="Restored")).to_be_visible()
    stored = page.request.get(f"{base}/api/v1/graphs/{graph_id}/").json()
    calc = next(n for n in stored["spec"]["nodes"] if n["id"] == "calc")
    assert calc["config"] == {"set": {"score": "priority * 2"}}
    assert stored["latest_version"] == 2  # a restore makes a draft, not a version

    # An edit after the restore saves on top of it (no conflict with the restored revision).
    box = node(page, "high").bounding_box()
    def saved(response) -> bool:
        return response.request.method == "PATCH" and response.url.endswith(f"/api/v1/graphs/{graph_id}/")

    with page.expect_response(saved) as patch:
        page.mouse.move(box["x"] + 60, box["y"] + 20)
        page.mouse.down()
        page.mouse.move(box["x"] + 60, box["y"] + 120, steps=8)
        page.mouse.up()
        page.keyboard.press("Control+s")
    assert patch.value.status == 200
    expect(page.locator(".save-status")).to_have_attribute("data-status", "saved")
    after = page.request.get(f"{base}/api/v1/graphs/{graph_id}/").json()
    assert after["revision"] == stored["revision"] + 1
    high = next(n for n in after["spec"]["nodes"] if n["id"] == "high")
    assert high["position"]["y"] > -80
    assert [n["id"] for n in after["spec"]["nodes"]] == [n["id"] for n in SPEC["nodes"]]
