"""Fit view: a graph readable at 50 % or more is fitted whole; a wider one opens at 50 % from its start node."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.builder_steps import example, make_graph, make_user, node, open_builder
from tests.e2e.conftest import screenshot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def chain(n: int) -> dict:
    """start -> t1 -> ... -> end, ``n`` nodes in one row 260 px apart."""
    ids = ["start", *[f"t{i}" for i in range(1, n - 1)], "end"]
    nodes = [
        {
            "id": nid,
            "kind": "start" if nid == "start" else "end" if nid == "end" else "transform",
            "config": {"set": {"i": "i + 1"}} if nid.startswith("t") else {},
            "position": {"x": 260 * k, "y": 0},
        }
        for k, nid in enumerate(ids)
    ]
    edges = [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]
    return {"name": f"chain-{n}", "state": {"i": {"reducer": "max", "default": 0}}, "nodes": nodes, "edges": edges}


def zoom(page: Page) -> float:
    transform = page.locator(".react-flow__viewport").get_attribute("style") or ""
    found = re.search(r"scale\(([\d.]+)\)", transform)
    assert found, transform
    return float(found.group(1))


def inside(page: Page, node_id: str) -> bool:
    """Whether ``node_id``'s whole box is within the canvas."""
    pane, box = page.locator(".react-flow").bounding_box(), node(page, node_id).bounding_box()
    assert pane and box
    return (
        pane["x"] <= box["x"]
        and box["x"] + box["width"] <= pane["x"] + pane["width"]
        and pane["y"] <= box["y"]
        and box["y"] + box["height"] <= pane["y"] + pane["height"]
    )


def test_long_chain_opens_at_its_start(live_server, page):
    make_user("fay", "builders")
    graph_id = make_graph("chain", chain(300))
    sign_in(page, live_server.url, "fay", "pw-fay-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(300)
    assert zoom(page) == pytest.approx(0.5)
    assert inside(page, "start")  # at the left edge, not mid-chain
    pane, start = page.locator(".react-flow").bounding_box(), node(page, "start").bounding_box()
    assert start["x"] - pane["x"] < 0.15 * pane["width"]
    # Centred on it, in the band between the canvas toolbar (56 px) and the minimap (170 px).
    band_centre = pane["y"] + 56 + (pane["height"] - 56 - 170) / 2
    assert abs((start["y"] + start["height"] / 2) - band_centre) < 4
    assert not inside(page, "end")
    screenshot(page, "builder-fit-chain-300")

    # The Fit button, F and the controls' fit button come back to the same view after a pan.
    view = page.locator(".react-flow__viewport").get_attribute("style")
    for fit in (
        lambda: page.get_by_role("button", name="Fit", exact=True).click(),
        lambda: page.keyboard.press("f"),
        lambda: page.locator(".react-flow__controls-fitview").click(),
    ):
        page.mouse.move(pane["x"] + pane["width"] / 2, pane["y"] + 40)
        page.mouse.down()
        page.mouse.move(pane["x"] + pane["width"] / 2 - 300, pane["y"] + 140, steps=4)
        page.mouse.up()
        expect(page.locator(".react-flow__viewport")).not_to_have_attribute("style", view)
        page.locator(".react-flow__pane").click(position={"x": 5, "y": 5})
        fit()
        expect(page.locator(".react-flow__viewport")).to_have_attribute("style", view)


def test_triage_example_opens_at_its_start_and_a_short_chain_whole(live_server, page):
    # The support-triage example (10 nodes, 1 720 px wide) needs about 44 % in this canvas.
    make_user("gus", "builders")
    graph_id = make_graph("triage", example())
    sign_in(page, live_server.url, "gus", "pw-gus-1")
    open_builder(page, live_server.url, graph_id)
    expect(page.locator(".react-flow__node")).to_have_count(10)
    assert zoom(page) == pytest.approx(0.5)
    for node_id in ("start", "classify", "route", "page_oncall", "search_kb"):
        assert inside(page, node_id), node_id
    screenshot(page, "builder-fit-triage")

    short = make_graph("short", chain(5))
    open_builder(page, live_server.url, short)
    expect(page.locator(".react-flow__node")).to_have_count(5)
    assert 0.5 <= zoom(page) <= 1.2
    for node_id in ("start", "t1", "t2", "t3", "end"):
        assert inside(page, node_id), node_id
