"""The top bar's Approvals count live in Chromium, against a real daphne (WebSockets): on the
run list, a run that reaches an approval gate raises the count, and cancelling it lowers it,
each within a few seconds and without a reload (the count used to wait for a 15 s poll). The
page opens one socket to ws/approvals/ (the page's shared inbox socket) beside the run
list's ws/runs/, and no more.

Screenshots: artifacts/topbar-live-count.png.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from runs.services import run_cancel
from tests.support.browser import COUNT_SOCKET_FRAMES, make_user, screenshot, sign_in, wait_for_socket_message
from tests.support.daphne import Daphne
from tests.support.specs import run_local
from tests.support.world import approval_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# Well under the 15 s fallback poll: only the live path can meet it (a loaded machine may
# need a few seconds for the page's fetch; an idle one takes well under one).
LIVE_MS = 6_000


def test_the_approvals_count_follows_a_gate_and_a_cancel_live_on_the_run_list(daphne: Daphne, page: Page) -> None:  # noqa: F811
    user = make_user("amal", "approvers", "operators")
    sign_in(page, daphne.url, user.username, f"pw-{user.username}-1")
    page.goto(f"{daphne.url}/runs/")
    live = page.get_by_role("status").filter(has_text="Live").first
    expect(live).to_be_visible(timeout=20_000)
    # The sockets of one load of the run list (the home page's, opened after sign-in, are not counted).
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.add_init_script(COUNT_SOCKET_FRAMES)
    page.reload()
    page.evaluate("window.__notReloaded = true")
    nav = page.get_by_role("navigation", name="Main")
    approvals = nav.get_by_role("link", name="Approvals")
    expect(live).to_be_visible(timeout=20_000)
    wait_for_socket_message(page, "/ws/approvals/")  # the inbox socket's first snapshot
    expect(approvals.locator(".topnav-count")).to_have_count(0)

    run = run_local(approval_spec(), {"name": "Ada"})
    assert run.status == "waiting", run.error
    expect(approvals.locator(".topnav-count")).to_have_text("1", timeout=LIVE_MS)
    expect(approvals.get_by_label("1 waiting for you")).to_be_visible()
    screenshot(page, "topbar-live-count")

    assert run_cancel(run=run, actor="tester")
    expect(approvals.locator(".topnav-count")).to_have_count(0, timeout=LIVE_MS)
    assert page.evaluate("window.__notReloaded") is True
    assert sorted(u.rsplit("/ws/", 1)[1] for u in sockets) == ["approvals/", "runs/"], sockets
