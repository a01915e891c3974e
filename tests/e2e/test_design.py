"""One design system in a real browser: every page scanned by axe-core in the light and the dark
theme (0 serious or critical violations, WCAG 2.1 A and AA rules), the theme switch kept across
pages, and the inbox used at phone width (390 x 844): the top bar folds into a Menu button and
an approval link is decided there.

Screenshots: artifacts/design-<page>-<theme>.png and design-phone-*.png."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.models import ApprovalRequest
from graphs.models import Graph
from runs.models import Run
from tests.support.browser import PATIENT_MS, make_user, screenshot, sign_in
from tests.support.specs import chain, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
# The rules axe runs: WCAG 2.0 and 2.1, levels A and AA (colour contrast among them).
AXE_RUN = """async () => {
  const r = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
  return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
    id: v.id, impact: v.impact,
    nodes: v.nodes.slice(0, 4).map((n) => n.target.join(" ") + " :: " + (n.failureSummary || "").slice(0, 160)),
  }));
}"""


# The elements that stick out past a 390 px phone screen's right edge (what makes a page scroll sideways).
WIDE_JS = """() => [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > 390.5)
  .map((el) => el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " " + Math.round(el.getBoundingClientRect().right)).slice(0, 12)"""


def refund_waiting() -> Run:
    spec = json.loads((ROOT / "examples" / "refund_agent.json").read_text())
    run = run_local(spec, {"order_id": "A-1002", "reason": "arrived broken"})
    assert run.status == "waiting", run.error
    return run


def finished_run() -> Run:
    spec = graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")],
        chain("start", "double", "end"),
        name="doubler",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    return run_local(spec, {"x": 2})


def settle(page: Page) -> None:
    """Wait until the page's code and data arrived: no skeleton or loading line left, the network quiet."""
    page.wait_for_load_state("networkidle")
    expect(page.locator("[aria-busy='true'], .page-loading")).to_have_count(0)


def scan(page: Page) -> list[dict]:
    """axe-core's serious and critical violations of the page as it is now."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN)


def pages_of(run: Run, approval: ApprovalRequest) -> dict[str, str]:
    """Name -> path of every page of the app (staff see them all)."""
    return {
        "home": "/", "graphs": "/graphs/", "builder": f"/graphs/{run.graph_version.graph_id}/",
        "runs": "/runs/", "run": f"/runs/{run.pk}/", "inbox": "/approvals/", "approval": f"/approvals/{approval.pk}/",
        "costs": "/costs/", "audit": "/audit/", "workers": "/workers/", "users": "/users/", "providers": "/providers/",
        "mcp-servers": "/mcp-servers/", "tokens": "/tokens/", "password": "/accounts/password_change/", "not-found": "/no-such-page/",
    }


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_has_no_serious_accessibility_violation(live_server, browser: Browser, theme: str) -> None:
    assert AXE.exists(), "axe-core is missing: make frontend/node_modules/.installed"
    make_user("ada", "approvers", staff=True)
    waiting = refund_waiting()
    approval = ApprovalRequest.objects.get(run=waiting)
    done = finished_run()
    # The system's theme (prefers-color-scheme), as a visitor gets it before touching the switch;
    # bypass_csp lets axe's script in (the app's CSP refuses inline scripts, as it should).
    ctx = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=theme, bypass_csp=True)
    ctx.set_default_timeout(PATIENT_MS)
    page = ctx.new_page()
    found: dict[str, list[dict]] = {}
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        found["sign-in"] = scan(page)
        screenshot(page, f"design-sign-in-{theme}")
        sign_in(page, live_server.url, "ada", "pw-ada-1")
        for name, path in pages_of(done, approval).items():
            page.goto(f"{live_server.url}{path}")
            settle(page)
            if name == "builder":
                expect(page.locator(".react-flow__node").first).to_be_visible()
            if name == "run":
                page.get_by_role("button", name="double").first.click()  # the step inspector open too
                settle(page)
            found[name] = scan(page)
            screenshot(page, f"design-{name}-{theme}")
        assert page.evaluate("getComputedStyle(document.documentElement).colorScheme") in (theme, "light dark")
    finally:
        ctx.close()
    bad = {name: v for name, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)


def test_the_theme_switch_overrides_the_system_and_is_kept(live_server, browser: Browser) -> None:
    make_user("ada", staff=True)
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
    ctx.set_default_timeout(PATIENT_MS)
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, "ada", "pw-ada-1")
        background = lambda: page.evaluate("getComputedStyle(document.documentElement).backgroundColor")  # noqa: E731
        light = background()
        bar = page.get_by_role("banner")
        bar.get_by_role("button", name="System theme (switch to light theme)").click()
        bar.get_by_role("button", name="Light theme (switch to dark theme)").click()
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert background() != light
        page.goto(f"{live_server.url}/runs/")  # another page: the choice holds
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        expect(bar.get_by_role("button", name="Dark theme (switch to system theme)")).to_be_visible()
        assert background() != light
        screenshot(page, "design-switch-dark")
        bar.get_by_role("button", name="Dark theme (switch to system theme)").click()
        expect(page.locator("html")).not_to_have_attribute("data-theme", "dark")
        assert background() == light
    finally:
        ctx.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_approval_link_is_decided_on_a_phone(live_server, browser: Browser, theme: str) -> None:
    make_user("amal", "approvers")
    run = refund_waiting()
    approval = ApprovalRequest.objects.get(run=run)
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=theme, has_touch=True, is_mobile=True)
    ctx.set_default_timeout(PATIENT_MS)
    page = ctx.new_page()
    overflow = "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
    wide = lambda: page.evaluate(WIDE_JS)  # noqa: E731
    try:
        sign_in(page, live_server.url, "amal", "pw-amal-1")
        # The approval email's link: /approvals/<id>/ opens the inbox with that request.
        page.goto(f"{live_server.url}/approvals/{approval.pk}/")
        settle(page)
        bar = page.get_by_role("banner")
        expect(bar.get_by_role("link", name="Runs")).to_be_hidden()  # folded into the menu
        detail = page.get_by_role("region", name="Request")
        expect(detail.get_by_text("issue_refund")).to_be_visible()
        # The request the link names comes first: the list waits behind "All requests", so
        # nothing stands between the top of the page and the decision.
        lists = page.get_by_role("region", name="Inbox")
        expect(lists).to_be_hidden()
        back = detail.get_by_role("button", name="All requests")
        expect(back).to_be_visible()
        top = detail.evaluate("e => e.getBoundingClientRect().top + window.scrollY")
        assert top < 844 / 3, top
        # ... and for this request (the refund example) its decision is on the first screen.
        first = detail.get_by_role("button", name="Approve", exact=True).bounding_box()
        assert first is not None and first["y"] + first["height"] <= 844, first
        assert page.evaluate(overflow) <= 0, wide()
        screenshot(page, f"design-phone-approval-{theme}")
        bar.get_by_role("button", name="Menu").click()
        expect(bar.get_by_role("link", name="Runs")).to_be_visible()
        screenshot(page, f"design-phone-menu-{theme}")
        page.keyboard.press("Escape")
        expect(bar.get_by_role("link", name="Runs")).to_be_hidden()
        detail.get_by_label("Comment").fill("ok from my phone")
        approve = detail.get_by_role("button", name="Approve", exact=True)
        approve.scroll_into_view_if_needed()
        box = approve.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 32
        approve.tap()
        expect(page.get_by_text("Approved. The run continues on its own.")).to_be_visible()
        assert page.evaluate(overflow) <= 0, wide()
        screenshot(page, f"design-phone-approved-{theme}")
        # "All requests" shows the list (the request is decided: it is under "Decided by me"),
        # and tapping a row opens that request again in its place.
        back.tap()
        expect(lists).to_be_visible()
        expect(detail).to_be_hidden()
        lists.get_by_role("tab", name="Decided by me").tap()
        lists.get_by_role("list").get_by_role("button").first.tap()
        expect(detail.get_by_text("approved this on")).to_be_visible()
        expect(lists).to_be_hidden()
        # The inbox itself at phone width: the lists above the request, nothing cut off.
        page.goto(f"{live_server.url}/approvals/")
        settle(page)
        assert page.evaluate(overflow) <= 0, wide()
        screenshot(page, f"design-phone-inbox-{theme}")
    finally:
        ctx.close()
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name) == ("approved", "amal")
    assert Graph.objects.count() == 1, list(Graph.objects.values_list("id", "name", "created_at"))
