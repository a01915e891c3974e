"""The MCP servers page in a browser: staff add a stdio server running the test MCP server (a bad name refused at its field first), Test connection lists its tools with their hints; others are refused."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from audit.models import AuditEntry
from runs.models import McpServer
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.mcp_servers import PYTHON, seen, stdio_args

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_staff_add_a_stdio_mcp_server_and_test_connection_lists_its_tools(live_server, page: Page, settings, tmp_path) -> None:
    # The live server runs in this process: the allow-list set here is the one it checks.
    settings.BALLAST_MCP_STDIO_COMMANDS = [PYTHON]
    log = tmp_path / "calls.jsonl"
    make_user("ada", staff=True)
    sign_in(page, live_server.url, "ada", "pw-ada-1")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="MCP servers").click()
    expect(page.get_by_role("heading", name="MCP servers")).to_be_visible()
    expect(page.get_by_text("No MCP servers yet")).to_be_visible()
    screenshot(page, "mcp-servers-empty")

    page.get_by_role("button", name="Add MCP server").click()
    dialog = page.get_by_role("dialog", name="Add an MCP server")
    dialog.get_by_label("Name").fill("test files")
    expect(dialog.get_by_label("Command", exact=True)).to_have_value(PYTHON)
    dialog.get_by_label("Arguments").fill("\n".join(stdio_args(log)))
    dialog.get_by_label("Trust its annotations").check()
    dialog.get_by_role("button", name="Add server").click()
    expect(dialog.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    expect(dialog.locator(".field-error")).to_contain_text("letters, digits or '-'")
    screenshot(page, "mcp-servers-add-field-error")
    assert not McpServer.objects.exists()

    dialog.get_by_label("Name").fill("testfiles")
    dialog.get_by_role("button", name="Add server").click()
    expect(dialog).to_have_count(0)
    row = page.get_by_role("row", name="MCP server testfiles")
    expect(row).to_contain_text("stdio")
    expect(row).to_contain_text(PYTHON)
    expect(row).to_contain_text("Trusted")
    # Adding lists the tools once already: four of them.
    expect(row.get_by_role("button", name="the tools of testfiles")).to_have_text("4")

    row.get_by_role("button", name="Test connection of testfiles").click()
    detail = page.get_by_role("region", name="Connection of testfiles")
    expect(detail.get_by_role("status")).to_contain_text("Connected")
    tools = detail.get_by_role("table", name="Tools of testfiles")
    expect(tools.get_by_role("row")).to_have_count(5)
    add = tools.get_by_role("row").filter(has_text="mcp__testfiles__add")
    expect(add).to_contain_text("Add two integers.")
    # add says it is read-only and idempotent, and the server's hints are trusted: safe to repeat.
    expect(add.get_by_role("cell")).to_have_text(["addmcp__testfiles__add", "Add two integers.", "yes", "yes", "yes"])
    expect(tools.get_by_role("row").filter(has_text="mcp__testfiles__record").get_by_role("cell").nth(2)).to_have_text("no")
    screenshot(page, "mcp-servers-test-connection")
    server = McpServer.objects.get()
    assert server.command == PYTHON and server.args == stdio_args(log) and server.trust_annotations
    assert sorted(t["name"] for t in server.tools) == ["add", "fail", "record", "slow"]
    assert seen(log) == []  # listing tools calls none of them
    assert AuditEntry.objects.filter(action="mcp_server.create", actor="ada").count() == 1

    # An HTTP server that does not answer still saves, with the failure shown; its header is never shown again.
    page.get_by_role("button", name="Add MCP server").click()
    dialog = page.get_by_role("dialog", name="Add an MCP server")
    dialog.get_by_label("Name").fill("remote")
    dialog.get_by_label("Streamable HTTP (a remote endpoint)").check()
    dialog.get_by_label("URL").fill("http://127.0.0.1:9/mcp")
    dialog.get_by_label("Header 1 name").fill("Authorization")
    dialog.get_by_label("Header 1 value").fill("Bearer s3cret-token")
    dialog.get_by_role("button", name="Add server").click()
    expect(dialog).to_have_count(0)
    remote = page.get_by_role("row", name="MCP server remote")
    expect(remote).to_contain_text("headers set")
    expect(remote).to_contain_text("Last listing failed")
    remote.get_by_role("button", name="Test connection of remote").click()
    expect(page.get_by_role("region", name="Connection of remote").get_by_role("status")).to_contain_text("Failed")
    assert "s3cret-token" not in page.content()
    remote.get_by_role("button", name="Edit remote").click()
    edit = page.get_by_role("dialog", name="Edit remote")
    expect(edit.get_by_label("Keep the stored headers")).to_be_checked()
    screenshot(page, "mcp-servers-edit-http")
    edit.get_by_label("Remove them").check()
    edit.get_by_role("button", name="Save changes").click()
    expect(edit).to_have_count(0)
    expect(remote).not_to_contain_text("headers set")
    assert not McpServer.objects.get(name="remote").has_headers
    screenshot(page, "mcp-servers-list")

    row.get_by_role("button", name="Remove testfiles").click()
    confirm = page.get_by_role("dialog", name="Remove testfiles?")
    confirm.get_by_role("button", name="Remove server").click()
    expect(row).to_have_count(0)
    assert list(McpServer.objects.values_list("name", flat=True)) == ["remote"]


def test_a_user_who_is_not_staff_has_no_link_and_is_refused(live_server, page: Page) -> None:
    make_user("bob", "builders", "operators")
    sign_in(page, live_server.url, "bob", "pw-bob-1")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Graphs")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="MCP servers")).to_have_count(0)
    response = page.goto(f"{live_server.url}/mcp-servers/")
    assert response is not None and response.status == 403
    expect(page.get_by_text("the MCP servers")).to_be_visible()
