"""The run page's graph, timeline and step inspector in Chromium, against a real daphne.

A run advances step by step from this process (claim, execute, commit: the engine's own
calls, as a worker makes them) while the page watches: each node's state on the canvas
changes without a reload; the inspector shows a step's attempts, idempotency key and the
state after it with what it changed. Screenshots of a running, finished, failed, fanned-out
and agent run go to artifacts/."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runs.engine import api as engine
from runs.engine import workers
from runs.models import Run, Step
from runs.services import run_start
from tests.api.conftest import failing_spec
from tests.e2e.conftest import screenshot
from tests.e2e.test_live_run_page import Daphne, admin_page, daphne  # noqa: F401 (fixture)
from tests.support.specs import chain, edge, effect, graph, node, publish, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)
EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "agent_tools.json").read_text())
# A lease owned by this (live) process: the page shows the step running, not interrupted.
WORKER = workers.worker_id(os.getpid())


def advance(run: Run, node_id: str, *, pause: float = 0.0) -> Step:
    """Claim, execute and commit ``node_id``'s pending step as a worker does (``pause``: seconds between claim and commit)."""
    step = Step.objects.get(run=run, node_id=node_id, status="pending")
    claimed = engine.step_claim(step.pk, WORKER)
    assert claimed is not None, node_id
    time.sleep(pause)
    result = engine.execute_node(claimed)
    outcome = engine.step_commit(claimed, result, keep_next=False) if not isinstance(result, Exception) else engine.step_fail(claimed, result)
    assert outcome.committed, node_id
    return Step.objects.get(pk=step.pk)


def canvas_node(page: Page, node_id: str, state: str):
    """A node on the canvas by its accessible name, "node <id>: <state>" (React Flow's node wrapper)."""
    return page.get_by_role("group", name=f"node {node_id}: {state}", exact=True)


def open_run(page: Page, daphne: Daphne, run: Run) -> None:
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_be_visible()
    expect(page.locator(".react-flow__node").first).to_be_visible(timeout=20_000)


def test_nodes_change_state_on_the_canvas_live_and_the_inspector_shows_state_and_diff(daphne: Daphne, page: Page) -> None:
    spec = graph(
        [node("start", "start"), transform("draft", reply="'Hello ' + name"), effect("pay"), node("end", "end")],
        chain("start", "draft", "pay", "end"),
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        name="pay-after-draft",
    )
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input={"name": "Ada"})
    admin_page(page, daphne)
    open_run(page, daphne, run)
    expect(canvas_node(page, "start", "pending")).to_be_visible()
    expect(canvas_node(page, "end", "pending")).to_be_visible()
    page.evaluate("window.__notReloaded = true")

    advance(run, "start")
    advance(run, "draft")
    expect(canvas_node(page, "draft", "succeeded")).to_be_visible()
    pay = Step.objects.get(run=run, node_id="pay")
    claimed = engine.step_claim(pay.pk, WORKER)  # the worker holds it: running, under a lease
    assert claimed is not None
    expect(canvas_node(page, "pay", "running")).to_be_visible()
    expect(page.locator(".timeline__bar[data-node='pay'][data-state='running']")).to_be_visible()
    screenshot(page, "run-page-running")

    result = engine.execute_node(claimed)
    assert engine.step_commit(claimed, result, keep_next=False).committed
    advance(run, "end")
    expect(canvas_node(page, "pay", "succeeded")).to_be_visible()
    expect(canvas_node(page, "end", "succeeded")).to_be_visible()
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_contain_text("succeeded")
    assert page.evaluate("window.__notReloaded") is True  # the same page throughout

    canvas_node(page, "draft", "succeeded").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector).to_be_visible()
    draft = Step.objects.get(run=run, node_id="draft")
    expect(inspector.get_by_label("Idempotency key")).to_have_text(draft.idempotency_key)
    expect(inspector.get_by_role("table", name="Attempts")).to_contain_text(WORKER)
    diff = inspector.get_by_role("table", name="State difference")
    expect(diff.locator("tr[data-key='reply']")).to_have_attribute("data-change", "added")
    expect(diff.locator("tr[data-key='reply']")).to_contain_text("Hello Ada")
    expect(inspector.get_by_label("State after this step")).to_contain_text("name")
    assert f"step={draft.pk}" in page.url  # the inspected step is in the address
    screenshot(page, "run-page-finished")

    # A timeline bar opens its step too; Escape-free close button clears it.
    page.locator(".timeline__bar[data-node='pay'] button").click()
    expect(inspector).to_have_attribute("data-step", str(pay.pk))
    inspector.get_by_role("button", name="Close the step inspector").click()
    expect(page.get_by_role("complementary", name="Step inspector")).to_have_count(0)


def test_parallel_branches_show_side_by_side_in_timeline_lanes(daphne: Daphne, page: Page) -> None:
    spec = graph(
        [node("start", "start"), transform("a", a="1"), transform("b", b="2"), transform("c", c="3"), node("join", "join"), node("end", "end")],
        [edge("start", "a"), edge("start", "b"), edge("start", "c"), edge("a", "join"), edge("b", "join"), edge("c", "join"), edge("join", "end")],
        name="fan-out-3",
    )
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input={})
    advance(run, "start")
    branches = {n: Step.objects.get(run=run, node_id=n) for n in ("a", "b", "c")}
    claims = {n: engine.step_claim(s.pk, WORKER) for n, s in branches.items()}  # three branches at once
    admin_page(page, daphne)
    open_run(page, daphne, run)
    for n in "abc":
        expect(canvas_node(page, n, "running")).to_be_visible()
    for n in "abc":
        time.sleep(0.4)
        claimed = claims[n]
        assert claimed is not None and engine.step_commit(claimed, engine.execute_node(claimed), keep_next=False).committed
    advance(run, "join")
    advance(run, "end")
    expect(canvas_node(page, "join", "succeeded")).to_be_visible()
    lanes = {n: page.locator(f".timeline__bar[data-node='{n}']").get_attribute("data-lane") for n in "abc"}
    assert len(set(lanes.values())) == 3, lanes  # side by side, not one after another
    expect(page.locator(".timeline__bar[data-node='join']")).to_have_attribute("data-lane", "0")
    screenshot(page, "run-page-fan-out")


def test_a_failed_run_and_an_agents_transcript(daphne: Daphne, page: Page) -> None:
    failed = run_local(failing_spec() | {"name": "divide-e2e"}, {"x": 1, "zero": 0})
    agent = run_local(EXAMPLE, {"question": "Can I get a refund?", "order_id": "A-1001"})
    assert failed.status == "failed" and agent.status == "succeeded", agent.error
    admin_page(page, daphne)
    open_run(page, daphne, failed)
    expect(canvas_node(page, "boom", "failed")).to_be_visible()
    expect(canvas_node(page, "end", "skipped")).to_be_visible()
    canvas_node(page, "boom", "failed").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector.get_by_role("alert")).to_contain_text("division by zero")
    expect(inspector.get_by_label("Step input")).to_contain_text('"zero": 0')
    screenshot(page, "run-page-failed")

    open_run(page, daphne, agent)
    canvas_node(page, "agent", "succeeded").click()
    transcript = page.get_by_role("list", name="Agent transcript")
    expect(transcript.locator(".transcript__item")).to_have_count(4)
    expect(transcript.locator("[data-child='tool-0-call_order']")).to_contain_text("order_lookup")
    expect(transcript.locator("[data-child='turn-1']")).to_contain_text("Order A-1001")
    screenshot(page, "run-page-agent")
