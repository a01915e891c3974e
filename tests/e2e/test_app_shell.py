"""The app around the builder in a real browser: sign-in per role, top bar, home, graph list, runs.

Screenshots of every page go to artifacts/ (login, home empty and with data, graphs,
runs, run page, password change) so a person can look at them.
"""
from __future__ import annotations

import json

import pytest
from django.urls import NoReverseMatch, reverse
from playwright.sync_api import expect

from graphs.models import Graph
from tests.support.browser import login, make_user, screenshot, sign_in
from tests.support.specs import chain, graph, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)


def linear(name: str) -> dict:
    return graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")],
        chain("start", "double", "end"),
        name=name,
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )


def has_duplicate_api() -> bool:
    try:
        reverse("graph-duplicate", kwargs={"graph_id": 1})
    except NoReverseMatch:
        return False
    return True


def test_approver_who_is_not_staff_signs_in_and_sees_no_edit_controls(live_server, page):
    run_local(linear("triage"), {"x": 2})
    approver = make_user("amal", "approvers")
    page.goto(f"{live_server.url}/graphs/")
    assert "/accounts/login/" in page.url  # anonymous -> the app's own login page
    screenshot(page, "login")
    login(page, live_server, approver)

    bar = page.get_by_role("banner")
    # The top bar is drawn by the app after the page loads: a Tab pressed before that
    # lands on an empty document (CI pressed it first under load), so wait for the app.
    expect(page.get_by_role("heading", name="Welcome, amal")).to_be_visible()
    # Keyboard first: Tab reaches the logo, then the nav, with a visible focus ring.
    page.keyboard.press("Tab")
    expect(bar.get_by_role("link", name="Ballast")).to_be_focused()
    page.keyboard.press("Tab")
    expect(bar.get_by_role("link", name="Graphs")).to_be_focused()
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    screenshot(page, "focus-visible")
    expect(bar.get_by_role("link", name="Graphs")).to_be_visible()
    expect(bar.get_by_role("link", name="Runs")).to_be_visible()
    expect(bar.get_by_role("link", name="Admin")).to_have_count(0)
    expect(page.get_by_role("heading", name="Welcome, amal")).to_be_visible()
    expect(page.get_by_role("region", name="Graphs").get_by_role("link", name="triage")).to_be_visible()
    expect(page.get_by_role("button", name="New graph")).to_have_count(0)
    expect(page.get_by_role("button", name="Import JSON")).to_have_count(0)

    bar.get_by_role("link", name="Graphs").click()
    row = page.locator("tr", has_text="triage")
    expect(row.get_by_role("button", name="Export triage")).to_be_visible()
    for name in ("Duplicate triage", "Delete triage"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    for name in ("New graph", "Import JSON"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(bar.get_by_role("link", name="Graphs")).to_have_attribute("aria-current", "page")

    # The user menu: keyboard-operable, shows the roles, change password, sign out (POST).
    menu_button = bar.get_by_role("button", name="amal")
    menu_button.focus()
    page.keyboard.press("Enter")
    menu = page.get_by_role("menu", name="Account")
    expect(menu).to_contain_text("approvers")
    page.keyboard.press("Escape")
    expect(menu).to_have_count(0)
    menu_button.click()
    menu.get_by_role("menuitem", name="Change password").click()
    page.wait_for_url("**/accounts/password_change/")
    expect(page.get_by_role("banner").get_by_role("link", name="Runs")).to_be_visible()  # the top bar is here too
    screenshot(page, "password-change")
    page.get_by_label("Old password").fill("pw-amal-1")
    page.get_by_label("New password", exact=True).fill("Tr1cky-new-pass")
    page.get_by_label("New password confirmation").fill("Tr1cky-new-pass")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("heading", name="Password changed")).to_be_visible()
    page.get_by_role("banner").get_by_role("button", name="amal").click()
    page.get_by_role("menuitem", name="Sign out").click()
    page.wait_for_url("**/accounts/login/")
    sign_in(page, live_server.url, "amal", "Tr1cky-new-pass")

    # The server refuses what the page does not offer.
    graph_id = Graph.objects.get(name="triage").pk
    status = page.evaluate(
        """async (id) => (await fetch(`/api/v1/graphs/${id}/`, {method: "DELETE",
             headers: {"X-CSRFToken": JSON.parse(document.getElementById("ballast-context").textContent).csrf_token}})).status""",
        graph_id,
    )
    assert status == 403
    assert Graph.objects.filter(pk=graph_id).exists()


def test_graph_list_create_duplicate_delete_import_export(live_server, page, tmp_path):
    builder = make_user("bea", "builders", "operators")
    login(page, live_server, builder)
    expect(page.get_by_text("No graphs yet")).to_be_visible()
    screenshot(page, "home-empty")

    # Create: a name, then the builder opens on the new graph.
    page.get_by_role("button", name="Create your first graph").click()
    dialog = page.get_by_role("dialog", name="New graph")
    dialog.get_by_label("Name").fill("drafted")
    dialog.get_by_role("button", name="Create and open").click()
    created = None
    page.wait_for_url(lambda url: "/graphs/" in url and url.rstrip("/").split("/")[-1].isdigit())
    created = Graph.objects.get(name="drafted")
    assert page.url.endswith(f"/graphs/{created.pk}/")

    # A graph with a run cannot be deleted: the dialog says so up front, with no delete button.
    run_local(linear("pinned"), {"x": 1})
    page.goto(f"{live_server.url}/graphs/")
    page.get_by_role("button", name="Delete pinned").click()
    dialog = page.get_by_role("dialog", name="“pinned” cannot be deleted")
    expect(dialog).to_contain_text("It has 1 run")
    expect(dialog.get_by_role("button", name="Delete graph")).to_have_count(0)
    screenshot(page, "graphs-delete-refused")
    dialog.get_by_role("button", name="Close").click()
    assert Graph.objects.filter(name="pinned").exists()

    # Creating a name that exists shows the field's error.
    page.get_by_role("button", name="New graph").click()
    page.get_by_role("dialog").get_by_label("Name").fill("pinned")
    page.get_by_role("dialog").get_by_role("button", name="Create and open").click()
    expect(page.get_by_role("dialog").get_by_role("alert")).to_contain_text("already exists")
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    # Delete without runs.
    page.get_by_role("button", name="Delete drafted").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete graph").click()
    expect(page.get_by_role("status").filter(has_text="Deleted")).to_contain_text("Deleted “drafted”")
    expect(page.get_by_role("link", name="drafted")).to_have_count(0)
    assert not Graph.objects.filter(name="drafted").exists()

    # Import a file with errors: nothing saved, the errors listed by path.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(graph([node("start", "start"), node("x", "no_such_kind"), node("end", "end")], chain("start", "x", "end"), name="broken")))
    page.get_by_test_id("import-file").set_input_files(str(bad))
    errors = page.get_by_role("alert", name="Import errors")
    expect(errors).to_contain_text("bad.json was not imported")
    expect(errors.locator("li", has_text="no_such_kind")).to_contain_text("nodes[1].kind (node x)")
    screenshot(page, "graphs-import-errors")
    assert not Graph.objects.filter(name="broken").exists()
    notjson = tmp_path / "notjson.json"
    notjson.write_text("{nope")
    page.get_by_test_id("import-file").set_input_files(str(notjson))
    expect(errors).to_contain_text("notjson.json is not valid JSON")

    # Import a good file, then export it: the same spec comes back.
    spec = linear("imported")
    good = tmp_path / "imported.json"
    good.write_text(json.dumps(spec))
    page.get_by_test_id("import-file").set_input_files(str(good))
    expect(page.get_by_role("status").filter(has_text="Imported")).to_contain_text("Imported “imported” as version 1")
    expect(errors).to_have_count(0)
    with page.expect_download() as info:
        page.get_by_role("button", name="Export imported").click()
    download = info.value
    assert download.suggested_filename == "imported.json"
    exported = json.loads(open(download.path()).read())
    assert exported == Graph.objects.get(name="imported").latest_version().spec
    assert [(n["id"], n["kind"], n["config"]) for n in exported["nodes"]] == [(n["id"], n["kind"], n["config"]) for n in spec["nodes"]]

    # Search narrows the list.
    page.get_by_role("searchbox", name="Search graphs").fill("imp")
    expect(page.get_by_role("link", name="pinned")).to_have_count(0)
    expect(page.get_by_role("link", name="imported")).to_be_visible()
    page.get_by_role("searchbox", name="Search graphs").fill("zzz")
    expect(page.get_by_text("No graph matches “zzz”.")).to_be_visible()
    page.get_by_role("searchbox", name="Search graphs").fill("")

    if has_duplicate_api():  # POST /graphs/<id>/duplicate/ lands with the builder API branch
        page.get_by_role("button", name="Duplicate imported").click()
        dialog = page.get_by_role("dialog")
        expect(dialog.get_by_label("Name of the copy")).to_have_value("imported copy")
        dialog.get_by_role("button", name="Duplicate").click()
        expect(page.get_by_role("status").filter(has_text="Duplicated")).to_contain_text("imported copy")
        expect(page.get_by_role("link", name="imported copy")).to_be_visible()
        assert Graph.objects.filter(name="imported copy").exists()


def test_screenshots_of_home_graphs_runs_and_run_page(live_server, page):
    admin = make_user("root", staff=True)
    ok = run_local(linear("linear-double"), {"x": 21})
    failing = graph(
        [node("start", "start"), transform("boom", y="x / zero"), node("end", "end")],
        chain("start", "boom", "end"),
        name="divide",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}},
    )
    bad = run_local(failing, {"x": 1, "zero": 0})
    assert ok.status == "succeeded" and bad.status == "failed"
    login(page, live_server, admin)
    expect(page.get_by_role("banner").get_by_role("link", name="Admin")).to_be_visible()
    expect(page.get_by_role("region", name="Latest runs").get_by_role("link", name=f"#{ok.pk}")).to_be_visible()
    screenshot(page, "home-with-data")

    page.get_by_role("banner").get_by_role("link", name="Graphs").click()
    expect(page.get_by_role("link", name="linear-double")).to_be_visible()
    screenshot(page, "graphs")

    page.get_by_role("banner").get_by_role("link", name="Runs").click()
    expect(page.get_by_role("link", name=f"#{bad.pk}")).to_be_visible()
    expect(page.locator("tr", has_text=f"#{bad.pk}")).to_contain_text("failed")
    screenshot(page, "runs")

    page.get_by_role("link", name=f"#{ok.pk}").click()
    page.wait_for_url(f"**/runs/{ok.pk}/")
    expect(page.get_by_role("heading", name=f"Run #{ok.pk}")).to_contain_text("succeeded")
    expect(page.get_by_role("region", name="Steps", exact=True)).to_contain_text("double")
    expect(page.get_by_label("Run output")).to_contain_text("42")
    # The version the run ran, read-only in the builder (which links back to the draft).
    expect(page.get_by_role("link", name="Open graph")).to_have_attribute("href", f"/graphs/{ok.graph_version.graph_id}/?version={ok.graph_version.number}")
    screenshot(page, "run")

    page.goto(f"{live_server.url}/runs/{bad.pk}/")
    expect(page.get_by_role("alert")).to_contain_text("The run failed")
    screenshot(page, "run-failed")

    # A run that does not exist is the app's own page with a way on, not Django's 404.
    page.goto(f"{live_server.url}/runs/999999/")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_text("There is no run #999999 you may see")).to_be_visible()
    expect(page.get_by_role("link", name="All runs")).to_have_attribute("href", "/runs/")
    screenshot(page, "not-found")

    # An API error shows its message, not a blank page.
    page.route("**/api/v1/runs/?*", lambda route: route.fulfill(
        status=503, content_type="application/json",
        body=json.dumps({"error": {"code": "unavailable", "message": "The database is restarting.", "fields": {}}})))
    page.goto(f"{live_server.url}/runs/")
    expect(page.get_by_role("alert")).to_contain_text("The database is restarting.")
    screenshot(page, "runs-error")
