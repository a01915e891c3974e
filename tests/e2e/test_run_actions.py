"""Run actions in Chromium: fork a run from a step with edited state after seeing the preview
(the editor flags an unknown key by its path as you type), retry a failed run after its
preview, cancel, and compare two runs side by side (from the run list's selection).

Screenshots: artifacts/run-actions-header.png, run-fork-dialog.png, run-fork-dialog-error.png,
run-retry-dialog.png, run-resume-dialog.png, run-cancel-dialog.png, run-compare-dialog.png, runs-compare.png,
runs-compare-state.png, run-actions-viewer.png.
"""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from runs.models import Run, RunStateKey, Step
from tests.support.browser import login, make_user, screenshot
from tests.support.specs import continue_local, publish, run_local
from tests.support.world import priced_spec

pytestmark = pytest.mark.django_db(transaction=True)


def replace_editor_text(page: Page, text: str) -> None:
    """Type ``text`` into the fork's CodeMirror editor in place of what it holds."""
    editor = page.locator("#fork-state")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def test_fork_from_a_step_with_edited_state_after_the_preview(page: Page, live_server) -> None:
    operator = make_user("opal", "operators")
    version = publish(priced_spec())
    source = run_local(version, {"x": 1, "zero": 2, "name": "Ada"}, user=operator)
    assert source.status == "succeeded", source.error
    draft = Step.objects.get(run=source, node_id="draft")
    login(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/{source.pk}/")
    expect(page.get_by_role("button", name="Fork…")).to_be_visible()
    expect(page.get_by_role("button", name="Retry from failed step")).to_have_count(0)  # not failed
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)  # ended
    screenshot(page, "run-actions-header")

    page.get_by_role("button", name="Fork…").click()
    dialog = page.get_by_role("dialog", name=f"Fork run #{source.pk}")
    dialog.get_by_label("Fork after step").select_option(str(draft.pk))
    expect(dialog.get_by_role("list", name="Kept steps")).to_contain_text("draft")
    expect(dialog.get_by_role("list", name="Steps that run")).to_contain_text("boom")
    expect(dialog.get_by_role("list", name="Steps that run")).to_contain_text("ask")
    expect(dialog.get_by_label("Estimated cost")).to_contain_text(re.compile(r"up to \$[0-9.]+ · [0-9,]+ tokens"))

    # A typo'd key is flagged by its path as it is typed, and the fork cannot be sent.
    replace_editor_text(page, '{"greeting": "Hi Ada", "name": "Ada", "x": 1, "zero": 2, "y": 0.5, "answer": null, "greetng": "Hey"}')
    problems = dialog.get_by_role("list", name="Problems in the state")
    expect(problems).to_contain_text("greetng: not a state key of this graph")
    expect(dialog.get_by_role("button", name=re.compile("^Fork"))).to_be_disabled()
    screenshot(page, "run-fork-dialog-error")

    state = RunStateKey.state_at(source.pk, draft.state_seq)[0]
    edited = {k: v for k, v in state.items() if k != "input"} | {"greeting": "Hello there", "zero": 4}
    replace_editor_text(page, json.dumps(edited, indent=2))
    expect(problems).to_have_count(0)
    fork_button = dialog.get_by_role("button", name="Fork with 2 edited keys")
    expect(fork_button).to_be_enabled()
    expect(dialog.get_by_text("Not carried over from run")).to_contain_text("boom")
    screenshot(page, "run-fork-dialog")
    fork_button.click()

    page.wait_for_url(lambda url: re.search(r"/runs/(\d+)/$", url) is not None and not url.endswith(f"/runs/{source.pk}/"))
    new_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    forked = Run.objects.get(pk=new_id)
    assert forked.forked_from_id == source.pk and forked.forked_from_step_id == draft.pk
    assert list(Step.objects.filter(run=forked).values_list("node_id", flat=True)) == ["boom"]  # what the preview said starts
    forked = continue_local(forked, list(Step.objects.filter(run=forked).values_list("id", flat=True)))
    assert forked.status == "succeeded", forked.error
    assert forked.state["greeting"] == "Hello there" and forked.state["y"] == 0.25
    page.reload()
    expect(page.get_by_role("heading", name=re.compile(f"Run #{new_id}"))).to_contain_text("succeeded")


def test_retry_and_cancel_after_their_dialogs_and_hidden_for_a_viewer(page: Page, live_server, browser) -> None:
    operator = make_user("opal", "operators")
    failed = run_local(publish(priced_spec()), {"x": 1, "zero": 0, "name": "Ada"}, user=operator)
    assert failed.status == "failed"
    login(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/{failed.pk}/")
    retry = page.get_by_role("button", name="Retry from failed step")
    # A division by zero comes back on a retry: Retry is offered but not highlighted, and the failure says why.
    expect(retry).to_be_visible()
    expect(retry).not_to_have_class(re.compile(r"\bbtn-primary\b"))
    expect(page.locator(".retry-advice")).to_contain_text("this error (expression) is not a passing one")
    screenshot(page, "run-failed-deterministic")
    retry.click()
    dialog = page.get_by_role("dialog", name=re.compile("Retry run"))
    expect(dialog.get_by_role("list", name="Kept steps")).to_contain_text("draft")
    expect(dialog.get_by_role("list", name="Steps that run")).to_contain_text("boom")
    screenshot(page, "run-retry-dialog")
    dialog.get_by_role("button", name="Retry", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.get_by_role("heading", name=re.compile(f"Run #{failed.pk}"))).to_contain_text("running")
    assert Step.objects.get(run=failed, node_id="boom").status == "pending"
    assert Step.objects.get(run=failed, node_id="draft").status == "succeeded"

    page.get_by_role("button", name="Cancel run").click()
    cancel = page.get_by_role("dialog", name=f"Cancel run #{failed.pk}?")
    cancel.get_by_label("Reason (optional)").fill("wrong input")
    screenshot(page, "run-cancel-dialog")
    cancel.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_role("heading", name=re.compile(f"Run #{failed.pk}"))).to_contain_text("cancelled")
    assert Run.objects.get(pk=failed.pk).status == "cancelled"

    viewer = make_user("vera", "builders")  # reads every run, operates none
    other = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        second = other.new_page()
        login(second, live_server, viewer)
        second.goto(f"{live_server.url}/runs/{failed.pk}/")
        expect(second.get_by_role("button", name="Compare…")).to_be_visible()
        expect(second.get_by_role("button", name=re.compile("Fork|Retry|Resume|Cancel run"))).to_have_count(0)
        screenshot(second, "run-actions-viewer")
    finally:
        other.close()


def test_compare_two_runs_from_the_run_list_and_the_run_page(page: Page, live_server) -> None:
    operator = make_user("opal", "operators")
    version = publish(priced_spec())
    a = run_local(version, {"x": 1, "zero": 1, "name": "Ada"}, user=operator)
    b = run_local(version, {"x": 1, "zero": 2, "name": "Bob"}, user=operator)
    login(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/")
    page.get_by_label(f"Select run {a.pk}").check()
    page.get_by_label(f"Select run {b.pk}").check()
    page.get_by_role("button", name=re.compile("^Compare #")).click()
    page.wait_for_url(re.compile(r"/runs/compare/\?a=\d+&b=\d+"))
    nodes = page.get_by_role("table", name="Nodes compared")
    expect(nodes.locator('tr[data-node="boom"]')).to_contain_text("different output")
    expect(nodes.locator('tr[data-node="start"]')).to_contain_text("same")
    ask_cost = Step.objects.get(run=a, node_id="ask").cost_usd
    assert ask_cost and ask_cost > 0
    expect(nodes.locator('tr[data-node="ask"]')).to_contain_text("$")
    state = page.get_by_role("table", name="State compared")
    expect(state.locator('tr[data-key="zero"]')).to_contain_text("changed")
    expect(state.locator('tr[data-key="x"]')).to_have_count(0)  # unchanged keys hidden until asked for
    screenshot(page, "runs-compare")
    page.get_by_label(re.compile("Show unchanged keys")).check()
    expect(state.locator('tr[data-key="x"]')).to_contain_text("same")
    nodes.locator('tr[data-node="boom"] summary').click()
    screenshot(page, "runs-compare-state")

    # From a run page: Compare… lists the graph's other runs.
    page.goto(f"{live_server.url}/runs/{b.pk}/")
    page.get_by_role("button", name="Compare…").click()
    dialog = page.get_by_role("dialog", name=f"Compare run #{b.pk} with…")
    expect(dialog.get_by_role("list", name="Latest runs of this graph")).to_contain_text(f"#{a.pk}")
    screenshot(page, "run-compare-dialog")
    dialog.get_by_role("button", name=re.compile(f"^#{a.pk}")).click()
    page.wait_for_url(re.compile(rf"/runs/compare/\?a={b.pk}&b={a.pk}$"))
    expect(page.get_by_role("heading", name=re.compile("Compare"))).to_contain_text(f"#{b.pk}")


def test_resume_a_parked_run_after_its_preview(page: Page, live_server, effects_file) -> None:
    from tests.support.world import parked_run

    operator = make_user("opal", "operators")
    run, _request = parked_run()
    pay = Step.objects.get(run=run, node_id="pay")
    login(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.get_by_role("button", name="Retry from failed step")).to_have_count(0)  # not failed
    page.get_by_role("button", name="Resume").click()
    dialog = page.get_by_role("dialog", name=f"Resume run #{run.pk}")
    expect(dialog.get_by_role("list", name="Kept steps")).to_contain_text("start")
    expect(dialog.get_by_role("list", name="Steps that run")).to_contain_text("pay")
    expect(dialog).to_contain_text("re-queued")
    screenshot(page, "run-resume-dialog")
    dialog.get_by_role("button", name="Resume", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.get_by_role("heading", name=re.compile(f"Run #{run.pk}"))).to_contain_text("running")
    assert Step.objects.get(pk=pay.pk).status == "pending"
