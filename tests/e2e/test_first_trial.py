"""Browser tests of what a new user's first trial with only the README ran into: a run waiting
at an approval gave no way to its decision; at phone width the request's run state and the run
page's facts pushed the page sideways; the run header's started and finished lines ran into each
other; the phone's Menu button hid the approvals count.

Screenshots: artifacts/trial-<page>-<width>-<theme>.png."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.models import ApprovalRequest
from builder.services import graph_publish
from graphs.models import Graph
from runs.models import Run
from tests.support.browser import PATIENT_MS, make_user, screenshot, sign_in
from tests.support.builder_steps import example, make_graph
from tests.support.specs import chain, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
# How far the page scrolls sideways (0: it fits its viewport).
OVERFLOW = "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
# What sticks out past the viewport's right edge, to name in a failure.
WIDE_JS = """() => [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5)
  .map((el) => el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " " + Math.round(el.getBoundingClientRect().right)).slice(0, 12)"""
# The cells of the run's facts whose content is wider than the cell (it runs into the next one).
CLIPPED_FACTS_JS = """() => [...document.querySelectorAll(".facts > div")].filter((d) => d.scrollWidth > d.clientWidth + 1)
  .map((d) => d.textContent)"""


def refund_waiting() -> Run:
    spec = json.loads((ROOT / "examples" / "refund_agent.json").read_text())
    run = run_local(spec, {"order_id": "A-1002", "reason": "arrived broken"})
    assert run.status == "waiting", run.error
    return run


def finished_run() -> Run:
    spec = graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")], chain("start", "double", "end"), name="doubler",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    return run_local(spec, {"x": 2})


def settle(page: Page) -> None:
    page.wait_for_load_state("networkidle")
    expect(page.locator("[aria-busy='true'], .page-loading")).to_have_count(0)


def _page(browser: Browser, width: int, theme: str = "light") -> Page:
    ctx = browser.new_context(viewport={"width": width, "height": 844 if width < 600 else 800}, color_scheme=theme)
    ctx.set_default_timeout(PATIENT_MS)
    return ctx.new_page()


def test_a_waiting_run_links_to_its_decision_for_whoever_may_read_it(live_server, page: Page) -> None:
    make_user("amal", "approvers")
    make_user("bo", "builders")
    run = refund_waiting()
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    sign_in(page, live_server.url, "amal", "pw-amal-1")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    notice = page.get_by_role("status", name="Waiting at approval")
    decide = notice.get_by_role("link", name="Decide…")
    expect(decide).to_have_attribute("href", f"/approvals/{approval.pk}/")
    # The step inspector of the approval node links to it too; its attempt waits with the step.
    page.get_by_role("button", name=f"Inspect step {approval.node_id}").click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector.get_by_role("link", name="Decide…")).to_have_attribute("href", f"/approvals/{approval.pk}/")
    expect(inspector.get_by_role("table", name="Attempts").locator("tbody tr").first).to_contain_text("waiting")
    screenshot(page, "trial-run-waiting-1280-light")
    decide.click()
    page.wait_for_url(f"**/approvals/{approval.pk}/")
    expect(page.get_by_role("region", name="Request").get_by_role("button", name="Approve", exact=True)).to_be_visible()
    screenshot(page, "trial-approval-1280-light")
    # A builder reads the run but may not decide: the link opens the request's page instead.
    page.context.clear_cookies()
    sign_in(page, live_server.url, "bo", "pw-bo-1")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    notice = page.get_by_role("status", name="Waiting at approval")
    expect(notice.get_by_role("link", name="Open approval request")).to_have_attribute("href", f"/approvals/{approval.pk}/")
    expect(notice.get_by_role("link", name="Decide…")).to_have_count(0)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_at_phone_width_the_request_and_the_run_page_stay_390_px_wide(live_server, browser: Browser, theme: str) -> None:
    make_user("amal", "approvers")
    run = refund_waiting()
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    page = _page(browser, 390, theme)
    try:
        sign_in(page, live_server.url, "amal", "pw-amal-1")
        # The Menu button carries the waiting count (the top bar's Approvals link is folded into the menu).
        expect(page.get_by_role("banner").get_by_role("button", name="Menu, 1 approval waiting")).to_be_visible()
        page.goto(f"{live_server.url}/approvals/{approval.pk}/")
        settle(page)
        detail = page.get_by_role("region", name="Request")
        state = detail.locator("details.inbox-state")
        if state.get_attribute("open") is None:
            state.locator("summary").click()
        pre = state.locator("pre")
        expect(pre).to_be_visible()
        assert page.evaluate(OVERFLOW) <= 0, page.evaluate(WIDE_JS)
        # The JSON scrolls inside its own box; the prompt and the date keep to the screen.
        assert pre.evaluate("e => e.scrollWidth > e.clientWidth"), "the run state should be wider than its box here"
        box = pre.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, box
        asked = detail.get_by_text("asked", exact=False).first
        dates = asked.locator(".nowrap").evaluate_all("els => els.map((e) => e.getClientRects().length)")
        assert dates and all(n == 1 for n in dates), dates
        screenshot(page, f"trial-approval-390-{theme}")
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        settle(page)
        expect(page.get_by_role("status", name="Waiting at approval")).to_be_visible()
        assert page.evaluate(OVERFLOW) <= 0, page.evaluate(WIDE_JS)
        assert page.evaluate(CLIPPED_FACTS_JS) == []
        screenshot(page, f"trial-run-390-{theme}")
    finally:
        page.context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_run_header_keeps_started_and_finished_apart_at_1280(live_server, browser: Browser, theme: str) -> None:
    make_user("amal", "approvers", staff=True)
    run = finished_run()
    page = _page(browser, 1280, theme)
    try:
        sign_in(page, live_server.url, "amal", "pw-amal-1")
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        settle(page)
        fact = lambda name: page.locator(".facts > div").filter(has=page.locator("dt", has_text=re.compile(f"^{name}$")))  # noqa: E731
        started, finished = fact("Started").locator(".when__rel"), fact("Finished").locator(".when__rel")
        expect(finished).to_contain_text("ago")
        a, b = started.bounding_box(), finished.bounding_box()
        assert a is not None and b is not None and a["x"] + a["width"] < b["x"], (a, b)
        assert page.evaluate(CLIPPED_FACTS_JS) == []
        screenshot(page, f"trial-run-1280-{theme}")
    finally:
        page.context.close()


# The minimap's out-of-view mask over its background, as the eye sees it: the relative luminance
# of the mask's fill composited on the minimap's background colour.
MASK_LUMINANCE_JS = """() => {
  const mask = document.querySelector(".react-flow__minimap-mask");
  const box = document.querySelector(".react-flow__minimap");
  if (!mask || !box) return null;
  const rgba = (c) => { const m = c.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const [r, g, b, a] = rgba(getComputedStyle(mask).fill);
  const [br, bg, bb] = rgba(getComputedStyle(box).backgroundColor);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const mix = (f, k) => f * a + k * (1 - a);
  return 0.2126 * lin(mix(r, br)) + 0.7152 * lin(mix(g, bg)) + 0.0722 * lin(mix(b, bb));
}"""


def test_the_minimap_mask_is_dark_in_the_dark_theme(live_server, browser: Browser) -> None:
    make_user("amal", "builders", staff=True)
    run = finished_run()
    for theme, dark in (("dark", True), ("light", False)):
        page = _page(browser, 1280, theme)
        try:
            sign_in(page, live_server.url, "amal", "pw-amal-1")
            for path in (f"/runs/{run.pk}/", f"/graphs/{run.graph_version.graph_id}/"):
                page.goto(f"{live_server.url}{path}")
                expect(page.locator(".react-flow__minimap-mask")).to_have_count(1)
                luminance = page.evaluate(MASK_LUMINANCE_JS)
                # A light-grey slab (about 0.35 on the dark panel) before; the light theme keeps its light tint.
                assert (luminance < 0.08) if dark else (luminance > 0.6), (theme, path, luminance)
                screenshot(page, f"trial-minimap-{path.strip('/').replace('/', '-')}-{theme}")
        finally:
            page.context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_run_form_shows_valid_values_and_home_words_the_weeks_spend(live_server, browser: Browser, theme: str) -> None:
    user = make_user("pat", "builders", "operators")
    graph_id = make_graph("Refund agent", example("refund_agent"), user=user)
    graph_publish(graph=Graph.objects.get(pk=graph_id), user=user, message="first")
    for width in (1280, 390):
        page = _page(browser, width, theme)
        try:
            sign_in(page, live_server.url, "pat", "pw-pat-1")
            # The week's card words its figure as the week's (on a Monday it said "today (UTC day)").
            week = page.get_by_role("region", name="Spend this week").locator("p.muted")
            expect(week).to_contain_text(re.compile(r"this week(, since|: Monday)"))
            expect(week).not_to_contain_text("today (")
            settle(page)
            screenshot(page, f"trial-home-{width}-{theme}")
            page.goto(f"{live_server.url}/graphs/{graph_id}/")
            page.get_by_role("button", name="Run", exact=True).click()
            dialog = page.get_by_role("dialog")
            # The shipped example's schema gives its example as the placeholder and its pattern as help.
            expect(dialog.locator('[id="input.order_id"]')).to_have_attribute("placeholder", "e.g. A-1002")
            expect(dialog).to_contain_text("Must match ^[A-Z]-[0-9]{4}$.")
            assert page.evaluate(OVERFLOW) <= 0, page.evaluate(WIDE_JS)
            screenshot(page, f"trial-run-form-{width}-{theme}")
        finally:
            page.context.close()
