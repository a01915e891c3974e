"""The run page's timeline tells every attempt and every backoff, and its times read to the millisecond, in Chromium against a real daphne.

A graph whose tool step fails once (the flaky test tool) and is retried after a 1.5 s backoff
runs to the end in this process (the engine's local mode, its own backoff and release); the
page draws that step's row as two attempt bars, the failed one titled with its attempt number,
outcome and error code, and between them a dashed segment "backoff 1.5 s". The steps table and
the event log show times as HH:MM:SS.mmm in the browser's time zone with their offset from the
run's start. Screenshots of the run page and the run list go to artifacts/.
"""
from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect

from runs.models import RunEvent, Step
from tests.support.browser import admin_page, screenshot, wait_until_still
from tests.support.daphne import Daphne
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)


def clock(when: datetime, zone: str) -> str:
    """``when`` as the front end's formatClock writes it: HH:MM:SS.mmm in the browser's zone."""
    local = when.astimezone(ZoneInfo(zone))
    return local.strftime("%H:%M:%S.") + f"{local.microsecond // 1000:03d}"


def test_a_retried_step_shows_both_attempts_its_backoff_and_times_to_the_millisecond(daphne: Daphne, page: Page) -> None:  # noqa: F811 (the daphne fixture)
    spec = graph(
        [
            node("start", "start"),
            node("fetch", "tool", config={"tool": "flaky", "args": {"fail_times": 1}}, retry={"max_attempts": 2, "backoff_seconds": 1.5}),
            node("end", "end"),
        ],
        chain("start", "fetch", "end"),
        name="flaky-fetch",
    )
    run = run_local(spec, {})
    assert run.status == "succeeded", run.error
    fetch = Step.objects.get(run=run, node_id="fetch")
    assert list(fetch.attempts.order_by("number").values_list("status", flat=True)) == ["failed", "succeeded"]

    admin_page(page, daphne)
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_contain_text("succeeded")

    # Two attempt bars in fetch's row: the failed one says which attempt, how it ended and its error code.
    row = page.locator(".timeline__bar[data-node='fetch']")
    attempts = row.locator(".timeline__attempt")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_have_attribute("data-status", "failed")
    expect(attempts.nth(0)).to_have_attribute("title", re.compile(r"^fetch · attempt 1 of 2: failed \(flaky\) · \d\d:\d\d:\d\d\.\d{3} → \d\d:\d\d:\d\d\.\d{3}"))
    expect(attempts.nth(1)).to_have_attribute("data-status", "succeeded")
    expect(attempts.nth(1)).to_have_attribute("title", re.compile(r"attempt 2 of 2: succeeded · .* from run start"))
    # Between them the backoff, its own labelled segment, from the failed attempt's end to the retry's due time.
    backoff = row.locator(".timeline__backoff")
    expect(backoff).to_have_count(1)
    expect(backoff).to_have_text("backoff 1.5 s")
    expect(backoff).to_have_attribute("title", re.compile(r"^backoff 1\.5 s after attempt 1: attempt 2 due \d\d:\d\d:\d\d\.\d{3}"))
    first, gap, second = attempts.nth(0).bounding_box(), backoff.bounding_box(), attempts.nth(1).bounding_box()
    assert first and gap and second
    # In time order, side by side: the backoff starts where the failed attempt ended (an
    # instant failure's bar is drawn at its least width from the same x) and ends where the
    # retry starts.
    assert first["x"] <= gap["x"] < second["x"], (first, gap, second)
    assert gap["x"] + gap["width"] <= second["x"] + 1, (gap, second)
    assert gap["width"] > 60, gap  # 1.5 s of a run of about 1.5 s: wide enough for its label
    # Steps that did not retry have one bar and no backoff.
    expect(page.locator(".timeline__bar[data-node='start'] .timeline__attempt")).to_have_count(1)
    expect(page.locator(".timeline__backoff")).to_have_count(1)

    # Times to the millisecond in the browser's zone, with their offset from the run's start.
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    steps = page.get_by_role("table").filter(has=page.get_by_role("button", name="Inspect step fetch"))
    started = steps.locator("tr", has=page.get_by_role("button", name="Inspect step fetch")).locator("time")
    expect(started).to_have_text(clock(fetch.started_at, zone))
    expect(steps.locator("tr", has=page.get_by_role("button", name="Inspect step fetch")).locator(".when__rel")).to_have_text(re.compile(r"^\+1\.\d{3} s$"))
    retrying = RunEvent.objects.get(run=run, kind="step_retrying")
    event = page.get_by_role("table", name="Run events").locator(f"tr[data-seq='{retrying.seq}']")
    expect(event.locator("time")).to_have_text(clock(retrying.created_at, zone))
    expect(event.locator(".when__rel")).to_have_text(re.compile(r"^\+0\.\d{3} s$"))

    # The inspector's attempts say the backoff too.
    attempts.nth(1).click()
    inspector = page.get_by_role("complementary", name="Step inspector")
    expect(inspector.get_by_role("table", name="Attempts").locator("tbody tr").nth(0)).to_contain_text("backoff 1.5 s")
    wait_until_still(page, ".react-flow__viewport", measure="style")
    screenshot(page, "run-page-retry-backoff")
    page.goto(f"{daphne.url}/runs/")
    expect(page.locator(f"tr[data-run='{run.pk}'] time").first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$"))
    screenshot(page, "run-list-times")
