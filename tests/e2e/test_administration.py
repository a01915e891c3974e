"""Administration in the app, in a browser: staff create a user in a group and a token for them
(the key shown once), then name that user as an approval node's approver with the picker."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from accounts.models import ApiToken
from audit.models import AuditEntry
from builder.services import graph_create
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.world import approval_spec

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_staff_create_a_user_with_a_group_and_a_token_and_pick_them_as_approver(live_server, page: Page) -> None:
    make_user("ada", staff=True)
    Group.objects.get_or_create(name="finance")
    graph = graph_create(name="refunds", draft=approval_spec(name="refunds"))
    sign_in(page, live_server.url, "ada", "pw-ada-1")

    # Users: the top bar's Users page, a new user invited into the approvers group.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Users").click()
    expect(page.get_by_role("heading", name="Users and groups")).to_be_visible()
    expect(page.get_by_role("table", name="Users")).to_contain_text("ada")
    page.get_by_role("button", name="New user").click()
    dialog = page.get_by_role("dialog", name="New user")
    dialog.get_by_label("Username").fill("bea")
    dialog.get_by_label(re.compile("^Email")).fill("bea@example.org")
    dialog.get_by_label("approvers").check()
    screenshot(page, "admin-new-user-dialog")
    dialog.get_by_role("button", name="Create and get link").click()
    invite = page.get_by_role("dialog", name="Invite link for bea")
    link = invite.get_by_label("Invite link").input_value()
    assert "/accounts/reset/" in link
    screenshot(page, "admin-invite-link")
    invite.get_by_role("button", name="Done").click()
    row = page.get_by_role("row").filter(has_text="bea@example.org")
    expect(row).to_contain_text("approvers")
    expect(row).to_contain_text("Invited")
    screenshot(page, "admin-users")
    page.get_by_role("button", name="Edit bea").click()
    edit = page.get_by_role("dialog", name="Edit bea")
    expect(edit.get_by_role("button", name="Deactivate")).to_be_visible()
    screenshot(page, "admin-edit-user")
    edit.get_by_role("button", name="Cancel").click()
    bea = User.objects.get(username="bea")
    assert list(bea.groups.values_list("name", flat=True)) == ["approvers"] and not bea.has_usable_password()

    # Groups: finance gets bea as a member through the member picker.
    page.get_by_role("tab", name="Groups").click()
    page.get_by_role("button", name="Edit members of finance").click()
    members = page.get_by_role("dialog", name="Members of finance")
    members.get_by_role("combobox", name="Members").fill("be")
    members.get_by_role("option", name=re.compile("bea")).click()
    screenshot(page, "admin-group-members")
    members.get_by_role("button", name="Save members").click()
    expect(page.get_by_role("row").filter(has_text="finance")).to_contain_text("bea")
    screenshot(page, "admin-groups")

    # A token for bea: the key is shown once, then the list has only its prefix.
    page.get_by_role("button", name="Ada").click()
    page.get_by_role("menuitem", name="API tokens").click()
    page.get_by_role("button", name="New token").first.click()
    new = page.get_by_role("dialog", name="New API token")
    new.get_by_label("Name").fill("bea's script")
    new.get_by_label(re.compile("^For user")).fill("bea")
    screenshot(page, "admin-new-token-dialog")
    new.get_by_role("button", name="Create token").click()
    created = page.get_by_role("dialog", name="Token created")
    key = created.get_by_role("textbox").input_value()
    assert key.startswith("bal_")
    screenshot(page, "admin-token-created")
    created.get_by_role("button", name="Done").click()
    page.get_by_role("button", name="Everyone's").click()
    table = page.get_by_role("table", name="API tokens")
    expect(table).to_contain_text(key[:12])
    assert key not in page.content()
    screenshot(page, "admin-tokens")
    token = ApiToken.objects.get(prefix=key[:12])
    assert token.user == bea and token.created_by_name == "ada"
    assert page.request.get(f"{live_server.url}/api/v1/graphs/", headers={"Authorization": f"Token {key}"}).status == 200
    page.get_by_role("button", name="Revoke bea's script").click()
    screenshot(page, "admin-revoke-token")
    page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
    expect(table.get_by_role("row").filter(has_text=key[:12])).to_contain_text("Revoked")

    # The picker names bea as the approval node's approver; the spec stores her username.
    page.goto(f"{live_server.url}/graphs/{graph.pk}/")
    page.locator('.react-flow__node[data-id="review"]').click()
    panel = page.get_by_role("complementary", name="Side panel")
    panel.get_by_role("combobox", name="Approvers").fill("be")
    expect(panel.get_by_role("option", name=re.compile("bea"))).to_be_visible()
    screenshot(page, "admin-approvers-picker")
    panel.get_by_role("option", name=re.compile("bea")).click()
    expect(panel.get_by_role("button", name="Remove user bea")).to_be_visible()
    expect(page.locator(".save-status")).to_have_attribute("data-status", "saved")
    review = next(n for n in page.request.get(f"{live_server.url}/api/v1/graphs/{graph.pk}/").json()["spec"]["nodes"] if n["id"] == "review")
    assert review["config"]["approvers"] == ["bea"]

    # With nothing selected, the graph settings name its operators (saved to the graph).
    page.keyboard.press("Escape")
    page.locator(".react-flow__pane").click(position={"x": 5, "y": 5})
    panel.get_by_role("combobox", name="Operators").fill("fin")
    panel.get_by_role("option", name=re.compile("finance")).click()
    expect(panel.get_by_text("Saved.", exact=False)).to_be_visible()
    screenshot(page, "admin-graph-operators")
    assert list(graph.operator_groups.values_list("name", flat=True)) == ["finance"]
    actions = set(AuditEntry.objects.filter(actor="ada").values_list("action", flat=True))
    assert {"user.create", "group.members", "token.create", "token.revoke"} <= actions


def test_staff_add_a_provider_test_its_connection_and_rotate_its_key(live_server, page: Page, llm_server) -> None:
    from runs.models import ProviderCredential
    from tests.support.llm_server import TEST_KEY

    make_user("ada", staff=True)
    sign_in(page, live_server.url, "ada", "pw-ada-1")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Providers").click()
    expect(page.get_by_role("heading", name="LLM providers")).to_be_visible()
    page.get_by_role("button", name="Add provider").click()
    dialog = page.get_by_role("dialog", name="Add an LLM provider")
    dialog.get_by_label("Name").fill("local")
    dialog.get_by_label("Kind").select_option("openai_compatible")
    dialog.get_by_label("Base URL").fill(llm_server.openai_base_url)
    dialog.get_by_label(re.compile("^API key")).fill("sk-wrong-key")
    dialog.get_by_label("Default model").fill("local-7b")
    screenshot(page, "admin-add-provider")
    dialog.get_by_role("button", name="Add provider").click()
    row = page.get_by_role("row").filter(has_text="local-7b")
    expect(row).to_contain_text("added here")
    assert "sk-wrong-key" not in page.content()

    row.get_by_role("button", name="Test connection of local").click()
    expect(row.get_by_role("status")).to_contain_text("Failed")
    row.get_by_role("button", name="Rotate key of local").click()
    rotate = page.get_by_role("dialog", name="New API key for local")
    rotate.get_by_label("New API key").fill(TEST_KEY)
    screenshot(page, "admin-rotate-key")
    rotate.get_by_role("button", name="Replace key").click()
    expect(rotate).to_have_count(0)
    row.get_by_role("button", name="Test connection of local").click()
    expect(row.get_by_role("status")).to_contain_text("Connected")
    screenshot(page, "admin-providers")
    assert ProviderCredential.objects.get(name="local").has_key
    actions = list(AuditEntry.objects.filter(action__startswith="provider.").order_by("id").values_list("action", flat=True))
    assert actions == ["provider.create", "provider.update"]
    assert TEST_KEY not in str(list(AuditEntry.objects.values_list("data", flat=True)))
