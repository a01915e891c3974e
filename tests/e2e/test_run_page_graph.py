"""The run page's graph, timeline and step inspector in Chromium, against a real daphne.

A run advances step by step from this process (claim, execute, commit: the engine's own
calls, as a worker makes them) while the page watches: each node's state on the canvas
changes without a reload; the inspector shows a step's attempts, idempotency key and the
state after it with what it changed; a finished fan-out shows its branches in lanes side by
side, each node in its state's colour. Screenshots of a running, waiting, failed and finished
fan-out run at 1400 and 1024 px wide (run-page-<kind>-<width>.png), and of an agent's
transcript, go to artifacts/."""
from __future__ import annotations

import json
import os
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from core.build import build
from runs.engine import workers
from runs.models import Run, Step, StepAttempt
from runs.services import run_start
from runs.vocabulary import NodeError
from tests.support import engine
from tests.support.browser import admin_page, screenshot, wait_until_still
from tests.support.daphne import Daphne
from tests.support.specs import chain, edge, effect, graph, node, publish, run_local, transform
from tests.support.world import approval_spec, failing_spec

pytestmark = pytest.mark.django_db(transaction=True)
EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "agent_tools.json").read_text())
# A lease owned by this (live) process: the page shows the step running, not interrupted.
WORKER = workers.worker_id(os.getpid())
ROOT = Path(__file__).resolve().parents[2]
# The colour of each node state, read from the front end's one set of status tokens (statusTokens.ts).
STATE_COLOURS = dict(re.findall(r'^\s*(\w+): \{ accent: "#([0-9a-f]{6})"', (ROOT / "frontend/src/lib/statusTokens.ts").read_text(), re.M))
WIDTHS = (1400, 1024)


def rgb(hex6: str) -> str:
    """``#16a34a`` as the browser reports a computed colour: ``rgb(22, 163, 74)``."""
    return "rgb({}, {}, {})".format(*(int(hex6[i : i + 2], 16) for i in (0, 2, 4)))


def expect_colour(page: Page, node_id: str, state: str) -> None:
    """The node's card on the canvas is framed in ``state``'s colour (its heavy top border)."""
    card = canvas_node(page, node_id, state).locator(".bnode")
    expect(card).to_have_css("border-top-color", rgb(STATE_COLOURS[state]))


def screenshots(page: Page, name: str) -> None:
    """Full-page screenshots of the page at each of WIDTHS (artifacts/run-page-<name>-<width>.png),
    then back to the context's viewport."""
    before = page.viewport_size
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        wait_until_still(page, ".react-flow__viewport", measure="style")  # React Flow fits the graph to its new size
        screenshot(page, f"run-page-{name}-{width}")
    if before:
        page.set_viewport_size(before)


def advance(run: Run, node_id: str, *, pause: float = 0.0) -> Step:
    """Claim, execute and commit ``node_id``'s pending step as a worker does (``pause``: seconds between claim and commit)."""
    step = Step.objects.get(run=run, node_id=node_id, status="pending")
    claimed = engine.step_claim(step.pk, WORKER)
    assert claimed is not None, node_id
    time.sleep(pause)  # scenario: the step runs this long, so the page has a duration to show
    result = engine.execute_node(claimed)
    outcome = engine.step_commit(claimed, result, keep_next=False) if not isinstance(result, Exception) else engine.step_fail(claimed, result)
    assert outcome.committed, node_id
    return Step.objects.get(pk=step.pk)


def canvas_node(page: Page, node_id: str, state: str):
    """A node on the canvas by its accessible name, "node <id>: <state>" (React Flow's node wrapper)."""
    return page.get_by_role("group", name=f"node {node_id}: {state}", exact=True)


def open_run(page: Page, daphne: Daphne, run: Run) -> None:  # noqa: F811 (the daphne fixture)
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_be_visible()
    expect(page.locator(".react-flow__node").first).to_be_visible(timeout=20_000)


def test_nodes_change_state_on_the_canvas_live_and_the_inspector_shows_state_and_diff(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
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
    # The run page's canvas has no shortcut help of its own: no "?" button that would do nothing.
    expect(page.get_by_role("button", name="Fit view").first).to_be_visible()
    expect(page.get_by_role("button", name="Keyboard shortcuts")).to_have_count(0)
    page.evaluate("window.__notReloaded = true")

    advance(run, "start")
    advance(run, "draft")
    expect(canvas_node(page, "draft", "succeeded")).to_be_visible()
    pay = Step.objects.get(run=run, node_id="pay")
    claimed = engine.step_claim(pay.pk, WORKER)  # the worker holds it: running, under a lease
    assert claimed is not None
    expect(canvas_node(page, "pay", "running")).to_be_visible()
    expect(page.locator(".timeline__bar[data-node='pay'][data-state='running']")).to_be_visible()
    expect_colour(page, "pay", "running")
    expect_colour(page, "draft", "succeeded")
    expect_colour(page, "end", "pending")
    screenshots(page, "running")

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
    expect(inspector.get_by_label("State after this step", exact=True)).to_contain_text("name")
    assert f"step={draft.pk}" in page.url  # the inspected step is in the address
    screenshot(page, "run-page-finished")

    # A timeline bar opens its step too; Escape-free close button clears it.
    page.locator(".timeline__bar[data-node='pay'] button").click()
    expect(inspector).to_have_attribute("data-step", str(pay.pk))
    inspector.get_by_role("button", name="Close the step inspector").click()
    expect(page.get_by_role("complementary", name="Step inspector")).to_have_count(0)


def fan_out_spec() -> dict:
    """start -> a, b, c in parallel -> join -> end; b retries once (no backoff)."""
    return graph(
        [node("start", "start"), transform("a", a="1"), node("b", "transform", config={"set": {"b": "2"}}, retry={"max_attempts": 2, "backoff_seconds": 0}),
         transform("c", c="3"), node("join", "join"), node("end", "end")],
        [edge("start", "a"), edge("start", "b"), edge("start", "c"), edge("a", "join"), edge("b", "join"), edge("c", "join"), edge("join", "end")],
        state={"a": {"default": 0}, "b": {"default": 0}, "c": {"default": 0}},
        name="fan-out-3",
    )


def test_a_finished_fan_out_shows_branches_side_by_side_colours_attempts_and_the_state_diff(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    with engine.local_mode():
        run = run_start(version=publish(fan_out_spec()), run_input={})
    advance(run, "start")
    branches = {n: Step.objects.get(run=run, node_id=n) for n in ("a", "b", "c")}
    claims = {n: engine.step_claim(s.pk, WORKER) for n, s in branches.items()}  # three branches at once
    assert all(claims.values()), claims
    # b's first attempt fails (a 503 from upstream): it is retried at once, while a and c still run.
    assert engine.step_fail(claims["b"], NodeError("upstream answered 503", code="http_error")).committed
    time.sleep(0.2)  # scenario: the failed attempt and the retry are apart in time, as the page draws them
    claims["b"] = engine.step_claim(branches["b"].pk, WORKER)
    assert claims["b"] is not None and claims["b"].attempt == 2
    for n in "abc":
        time.sleep(0.3)  # scenario: the branches finish one after another, with durations to show
        claimed = claims[n]
        assert claimed is not None and engine.step_commit(claimed, engine.execute_node(claimed), keep_next=False).committed, n
    advance(run, "join")
    advance(run, "end")
    run.refresh_from_db()
    assert run.status == "succeeded", run.error

    admin_page(page, daphne)
    open_run(page, daphne, run)
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_contain_text("succeeded")
    for n in ("start", "a", "b", "c", "join", "end"):
        expect_colour(page, n, "succeeded")
    expect(canvas_node(page, "b", "succeeded")).to_contain_text("attempt 2 of 2")

    # Lanes: the three branches each in their own lane, overlapping in time (side by side).
    bars = {n: page.locator(f".timeline__bar[data-node='{n}']") for n in ("start", "a", "b", "c", "join", "end")}
    lanes = {n: bars[n].get_attribute("data-lane") for n in "abc"}
    assert len(set(lanes.values())) == 3, lanes
    boxes = {n: bars[n].bounding_box() for n in "abc"}
    assert all(boxes.values()), boxes
    assert len({round(b["y"]) for b in boxes.values()}) == 3  # one above the other ...
    latest_start = max(b["x"] for b in boxes.values())
    earliest_end = min(b["x"] + b["width"] for b in boxes.values())
    assert latest_start < earliest_end, boxes  # ... over a common stretch of time
    expect(bars["join"]).to_have_attribute("data-lane", "0")
    expect(bars["start"]).to_have_attribute("data-lane", "0")
    # b's row draws both attempts, each its own bar (the failed one hatched, its error code in its title).
    expect(bars["b"].locator(".timeline__attempt")).to_have_count(2)
    expect(bars["b"].locator(".timeline__attempt--failed")).to_have_attribute("title", re.compile(r"attempt 1 of 2: failed \(http_error\)"))

    # The inspector on b: both attempts with their worker, and the state b changed.
    bars["b"].locator(".timeline__attempt--succeeded").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector).to_have_attribute("data-step", str(branches["b"].pk))
    attempts = inspector.get_by_role("table", name="Attempts").locator("tbody tr")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text("failed")
    expect(attempts.nth(0)).to_contain_text("upstream answered 503")
    expect(attempts.nth(1)).to_contain_text("succeeded")
    expect(attempts.nth(1)).to_contain_text(WORKER)
    expect(attempts.nth(1)).to_contain_text(f"build {build()}")  # the build that ran it (this process's: core.build)
    diff = inspector.get_by_role("table", name="State difference")
    expect(diff.locator("tbody tr")).to_have_count(1)  # b wrote b alone, whatever a and c did beside it
    expect(diff.locator("tr[data-key='b']")).to_have_attribute("data-change", "changed")
    expect(diff.locator("tr[data-key='b'] .diff-before")).to_have_text("0")
    expect(diff.locator("tr[data-key='b'] .diff-after")).to_have_text("2")
    expect(inspector.get_by_label("Step input")).to_contain_text('"b": 0')
    screenshots(page, "fan-out")


def test_a_waiting_run_shows_its_gate_waiting(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    run = run_local(publish(approval_spec()), {"name": "Ada"})
    assert run.status == "waiting"
    admin_page(page, daphne)
    open_run(page, daphne, run)
    expect(canvas_node(page, "review", "waiting")).to_be_visible()
    expect_colour(page, "review", "waiting")
    expect_colour(page, "send", "pending")
    expect(page.locator(".timeline__bar[data-node='review'][data-state='waiting']")).to_be_visible()
    canvas_node(page, "review", "waiting").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector.get_by_label("Step input")).to_contain_text("Hello Ada")  # the state the gate was given
    screenshots(page, "waiting")


def test_a_long_approval_wait_is_drawn_short_and_the_steps_around_it_stay_readable(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    run = run_local(publish(approval_spec()), {"name": "Ada"})
    assert run.status == "waiting"
    # The reviewer took 48 s: everything before the decision happened 48 s earlier.
    earlier = timedelta(seconds=48)
    for s in Step.objects.filter(run=run):
        Step.objects.filter(pk=s.pk).update(started_at=s.started_at - earlier, finished_at=s.finished_at and s.finished_at - earlier)
    for a in StepAttempt.objects.filter(step__run=run):
        StepAttempt.objects.filter(pk=a.pk).update(started_at=a.started_at - earlier, finished_at=a.finished_at and a.finished_at - earlier)
    Run.objects.filter(pk=run.pk).update(created_at=run.created_at - earlier, started_at=run.started_at - earlier)
    with engine.local_mode() as queue:
        approval_decide(approval_id=ApprovalRequest.objects.get(run=run, status="pending").pk, decision="approve", actor="tester")
        engine.drive_local(run.pk, queue=queue, timeout=30)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error

    admin_page(page, daphne)
    open_run(page, daphne, run)
    # One break, with the wait's real length on it; the gate's bar says its real duration.
    expect(page.locator(".timeline__break")).to_have_count(1)
    expect(page.locator(".timeline__break-label")).to_have_text(re.compile(r"^4[89]\.\d s waiting$"))
    expect(page.locator(".timeline__bar[data-node='review'] .timeline__dur")).to_have_text(re.compile(r"^4[89]\.\d s$"))
    lanes = page.locator(".timeline__lanes").bounding_box()
    review = page.locator(".timeline__bar[data-node='review']").bounding_box()
    wait = page.locator(".timeline__break").bounding_box()
    # The 48 s are drawn a small share of the chart (BREAK_SHARE of the time steps worked).
    # The gate's bar is the break plus what around it is drawn to scale: a worker's pickup of
    # up to 2 s on a loaded machine is, so its width alone says less; to scale it would fill
    # about 97% of the chart.
    assert lanes and review and wait and wait["width"] < 0.25 * lanes["width"], (wait, lanes)
    assert review["width"] < 0.9 * lanes["width"], (review, lanes)
    # The steps of a few ms around it are wide enough to read, not slivers.
    for node_id in ("draft", "send"):
        bar = page.locator(f".timeline__bar[data-node='{node_id}']").bounding_box()
        assert bar and bar["width"] >= 8, (node_id, bar)
    # Ticks that would read alike after the break are one: each time on the axis is written once.
    ticks = [t for t in page.locator(".timeline__axis span:not(.timeline__break-label)").all_inner_texts()]
    assert len(ticks) == len(set(ticks)), ticks
    screenshot(page, "run-page-long-wait")


def test_a_failed_run_and_an_agents_transcript(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    failed = run_local(failing_spec() | {"name": "divide-e2e"}, {"x": 1, "zero": 0})
    agent = run_local(EXAMPLE, {"question": "Can I get a refund?", "order_id": "A-1001"})
    assert failed.status == "failed" and agent.status == "succeeded", agent.error
    admin_page(page, daphne)
    open_run(page, daphne, failed)
    expect(canvas_node(page, "boom", "failed")).to_be_visible()
    expect(canvas_node(page, "end", "skipped")).to_be_visible()
    expect_colour(page, "boom", "failed")
    expect_colour(page, "end", "skipped")
    canvas_node(page, "boom", "failed").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector.get_by_role("alert")).to_contain_text("division by zero")
    expect(inspector.get_by_label("Step input")).to_contain_text('"zero": 0')
    expect(inspector.get_by_text("The step failed: it changed no state.")).to_be_visible()
    screenshots(page, "failed")

    open_run(page, daphne, agent)
    canvas_node(page, "agent", "succeeded").click()
    transcript = page.get_by_role("list", name="Agent transcript")
    expect(transcript.locator(".transcript__item")).to_have_count(4)
    expect(transcript.locator("[data-child='tool-0-call_order']")).to_contain_text("order_lookup")
    expect(transcript.locator("[data-child='turn-1']")).to_contain_text("Order A-1001")
    screenshot(page, "run-page-agent")
