"""Steps the builder browser tests share: graphs, opening the canvas, dragging kinds, drawing edges."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from builder.services import graph_create
from tests.support.browser import wait_until_still

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MOD = "Control"


def example(name: str = "support_triage") -> dict[str, Any]:
    """An example graph spec from examples/<name>.json."""
    return json.loads((EXAMPLES / f"{name}.json").read_text())


def make_graph(name: str, spec: dict[str, Any] | None = None, user: User | None = None) -> int:
    """A graph whose draft is ``spec`` (an empty canvas by default); returns its id."""
    draft = spec if spec is not None else {"name": name, "nodes": [], "edges": []}
    return graph_create(name=name, draft=draft, user=user).pk


def open_builder(page: Page, base_url: str, graph_id: int) -> None:
    """Open the canvas and wait until it is drawn and the first validation came back."""
    page.goto(f"{base_url}/graphs/{graph_id}/")
    page.get_by_test_id("canvas").wait_for()
    page.locator(".errors-panel__toggle").filter(has_not_text="Checking").wait_for()


def node(page: Page, node_id: str):
    """The React Flow node element of ``node_id``."""
    return page.locator(f'.react-flow__node[data-id="{node_id}"]')


_TWO_FRAMES = """() => new Promise((done) => requestAnimationFrame(() => setTimeout(() =>
    requestAnimationFrame(() => setTimeout(done, 0)), 0)))"""


def wait_saved(page: Page, after: int | None = None) -> None:
    """Wait until the save indicator says every change is saved; with ``after`` (a revision
    from :func:`saved_revision` read before the edit), until a save newer than it is done.

    An edit that React has not rendered yet still shows the old "saved": two animation
    frames are let pass first (React renders, then runs the effect that marks the draft
    unsaved), and ``after`` makes it certain where a test reads the server's copy next."""
    page.evaluate(_TWO_FRAMES)
    status = page.locator(".save-status")
    if after is not None:
        expect(status).not_to_have_attribute("data-revision", str(after))
    expect(status).to_have_attribute("data-status", "saved")


def saved_revision(page: Page) -> int:
    """The draft revision the builder last saved (or loaded)."""
    return int(page.locator(".save-status").get_attribute("data-revision") or 0)


def drag_node(page: Page, node_id: str, dx: float, dy: float) -> None:
    """Move ``node_id`` by (dx, dy) screen pixels, again (at most three times) until it moved.

    On a loaded machine a press that lands mid-animation or before React Flow measured the
    node selects it without dragging, as a user's first try sometimes does."""
    target = node(page, node_id)
    for _attempt in range(3):
        viewport_settled(page)
        box = target.bounding_box()
        assert box, node_id
        page.mouse.move(box["x"] + 40, box["y"] + 12)
        page.mouse.down()
        page.mouse.move(box["x"] + 40 + dx, box["y"] + 12 + dy, steps=6)
        page.mouse.up()
        moved = target.bounding_box()
        if moved and (abs(moved["x"] - box["x"]) > abs(dx) / 2 or abs(moved["y"] - box["y"]) > abs(dy) / 2):
            return
    raise AssertionError(f"node {node_id} did not move after three drags")


def stored_spec(page: Page, base_url: str, graph_id: int) -> dict[str, Any]:
    """The draft as the server stores it (GET /api/v1/graphs/<id>/)."""
    body = page.request.get(f"{base_url}/api/v1/graphs/{graph_id}/").json()
    return body.get("spec", body.get("draft"))


def drag_kind(page: Page, kind: str, x: float, y: float) -> None:
    """Drag ``kind`` from the palette onto the canvas at (x, y) relative to the canvas pane."""
    pane = page.locator(".react-flow__pane")
    page.locator(f'.palette__item[data-kind="{kind}"]').drag_to(pane, target_position={"x": x, "y": y})


def viewport_settled(page: Page, timeout_ms: int = 3_000) -> None:
    """Wait until the canvas's pan and zoom stop changing (fit view, auto-layout and a
    selection's centring animate it; a drag aimed at handles measured mid-animation misses)."""
    wait_until_still(page, ".react-flow__viewport", measure="style", quiet_ms=100, timeout_ms=timeout_ms)


def select_node(page: Page, node_id: str) -> None:
    """Click ``node_id`` once the canvas stopped moving and wait until React Flow shows it
    selected (its side panel opens), clicking again if a click on a loaded machine landed
    while fit view still moved it (the click then selects nothing)."""
    target = node(page, node_id)
    for _ in range(3):
        viewport_settled(page)
        target.click()
        try:
            expect(target).to_have_class(re.compile(r"\bselected\b"), timeout=5_000)
            return
        except AssertionError:
            continue
    expect(target).to_have_class(re.compile(r"\bselected\b"))


def connect(page: Page, source: str, target: str, handle: str | None = None) -> None:
    """Draw an edge from ``source``'s handle (its unnamed output when None) to ``target``'s input."""
    viewport_settled(page)
    if handle is None:
        src = page.locator(f'.react-flow__handle.source[data-nodeid="{source}"]:not([data-handleid])').first
        if src.count() == 0:
            src = page.locator(f'.react-flow__handle.source[data-nodeid="{source}"]').first
    else:
        src = page.locator(f'.react-flow__handle.source[data-nodeid="{source}"][data-handleid="{handle}"]')
    dst = page.locator(f'.react-flow__handle.target[data-nodeid="{target}"]').first
    a, b = src.bounding_box(), dst.bounding_box()
    assert a and b, (source, target, handle)
    src.hover()
    page.mouse.down()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2, steps=12)
    page.mouse.move(b["x"] + b["width"] / 2 + 1, b["y"] + b["height"] / 2)
    page.mouse.up()


def connect_until_drawn(page: Page, source: str, target: str, handle: str | None, edges: int) -> None:
    """``connect``, made again (at most three times) until the canvas holds ``edges`` edges.

    A handle that appeared a moment ago (a case just typed, once the server's check answered)
    is measured by React Flow on a later frame; on a loaded machine a drag can come before it
    and draw nothing, as a user's first try sometimes does."""
    for attempt in range(3):
        connect(page, source, target, handle)
        try:
            expect(page.locator(".react-flow__edge")).to_have_count(edges, timeout=3_000 * (attempt + 1))
            return
        except AssertionError:
            if attempt == 2:
                raise


def edge_count(page: Page) -> int:
    """How many edges the canvas draws."""
    return page.locator(".react-flow__edge").count()


def csrf_headers(page: Page) -> dict[str, str]:
    """The CSRF header the session needs for unsafe API calls made from the test."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    return {"X-CSRFToken": token, "Content-Type": "application/json"}


SPEC: dict[str, Any] = {
    "name": "Panel demo",
    "input_schema": {
        "type": "object",
        "required": ["ticket"],
        "properties": {"ticket": {"type": "string", "title": "Ticket"}, "priority": {"type": "integer", "default": 3}},
    },
    "nodes": [
        {"id": "start", "kind": "start", "config": {}, "position": {"x": 0, "y": 0}},
        {"id": "calc", "kind": "transform", "config": {"set": {"score": "priority * 2"}}, "position": {"x": 250, "y": 0}},
        {"id": "route", "kind": "condition", "config": {"expression": "score > 4"}, "position": {"x": 500, "y": 0}},
        {"id": "high", "kind": "end", "config": {}, "position": {"x": 750, "y": -80}},
        {"id": "low", "kind": "end", "config": {}, "position": {"x": 750, "y": 80}},
    ],
    "edges": [
        {"source": "start", "target": "calc"},
        {"source": "calc", "target": "route"},
        {"source": "route", "source_handle": "true", "target": "high"},
        {"source": "route", "source_handle": "false", "target": "low"},
    ],
}


def sample_input(schema: dict) -> object:
    """A value ``schema`` accepts: its required properties only, strings matching the examples' one pattern."""
    if schema.get("type") == "object":
        return {
            k: sample_input(v) for k, v in (schema.get("properties") or {}).items() if k in schema.get("required", [])
        }
    if "pattern" in schema:
        return "A-1001"  # the refund example's order id
    return {"number": 1, "integer": 1, "boolean": True, "array": []}.get(
        schema.get("type", "string"), "ada@example.com"
    )


def canvas_zoom(page: Page) -> float:
    """The canvas's zoom (React Flow's viewport scale, 1 = 100 %)."""
    transform = page.locator(".react-flow__viewport").get_attribute("style") or ""
    found = re.search(r"scale\(([\d.]+)\)", transform)
    assert found, transform
    return float(found.group(1))


def overlaps(a: dict[str, float] | None, b: dict[str, float] | None) -> bool:
    """Whether two Playwright bounding boxes intersect (False when either is missing)."""
    if not a or not b:
        return False
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]
