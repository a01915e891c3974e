"""The browser app's pages: anonymous visitors go to the login page, every signed-in user
gets the page with a context whose ``user.can`` follows the API's roles, and the account
pages (login, logout, password change) work for users who are not staff."""
from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.authentication import ROLES
from tests.support.specs import chain, graph, node, run_local, transform

pytestmark = pytest.mark.django_db

PAGES = ["/", "/graphs/", "/runs/"]


def make_user(username: str, *groups: str, staff: bool = False) -> User:
    user = User.objects.create_user(username, password="pw-1-secret", is_staff=staff)
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    user.groups.set(Group.objects.filter(name__in=groups))
    return user


def context_of(response) -> dict:
    """The page context JSON script tag of a rendered page."""
    match = re.search(r'<script id="ballast-context" type="application/json">(.*?)</script>', response.content.decode(), re.S)
    assert match, "no page context in the page"
    return json.loads(match.group(1))


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def finished_run():
    spec = graph([node("start", "start"), transform("double", y="x * 2"), node("end", "end")], chain("start", "double", "end"),
                 input_schema={"type": "object", "properties": {"x": {"type": "integer"}}})
    return run_local(spec, {"x": 1})


@pytest.mark.parametrize("path", [*PAGES, "/runs/1/", "/graphs/1/", "/accounts/password_change/"])
def test_anonymous_is_sent_to_the_apps_login_page(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


@pytest.mark.parametrize(("path", "page"), [("/", "home"), ("/graphs/", "graphs"), ("/runs/", "runs"), ("/costs/", "costs")])
def test_every_signed_in_user_gets_the_page(path, page):
    response = signed_in(make_user("nobody")).get(path)
    assert response.status_code == 200
    ctx = context_of(response)
    assert ctx["page"] == page
    assert ctx["user"]["username"] == "nobody"
    assert ctx["urls"]["graphs"] == "/graphs/" and ctx["urls"]["runs"] == "/runs/"
    assert ctx["csrf_token"]


@pytest.mark.parametrize(
    ("groups", "staff", "can"),
    [
        ((), False, {"build": False, "operate": False, "approve": False, "admin": False, "audit": False, "workers": False}),
        (("approvers",), False, {"build": False, "operate": False, "approve": True, "admin": False, "audit": False, "workers": False}),
        (("builders",), False, {"build": True, "operate": False, "approve": False, "admin": False, "audit": False, "workers": False}),
        (("operators",), False, {"build": False, "operate": True, "approve": False, "admin": False, "audit": False, "workers": True}),
        ((), True, {"build": True, "operate": True, "approve": True, "admin": True, "audit": True, "workers": True}),
    ],
)
def test_user_can_follows_the_roles(groups, staff, can):
    ctx = context_of(signed_in(make_user("u", *groups, staff=staff)).get("/"))
    assert ctx["user"]["can"] == can
    assert ctx["user"]["is_staff"] is staff


@pytest.mark.django_db(transaction=True)  # runs drive the engine, which commits
def test_run_page_names_the_run_and_unknown_runs_are_404(finished_run):
    client = signed_in(make_user("viewer", "operators"))  # operators read every run of a graph that names none
    ctx = context_of(client.get(f"/runs/{finished_run.pk}/"))
    assert ctx["page"] == "run"
    assert ctx["props"] == {"runId": finished_run.pk}
    assert client.get(f"/runs/{finished_run.pk + 1000}/").status_code == 404
    assert client.get("/graphs/999999/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_run_the_user_may_not_read_is_the_apps_own_404_page_even_with_debug_on(finished_run, settings):
    # With DEBUG on (make up's default), Http404 would show Django's technical page listing
    # every URL pattern; an approval email's link opened by the wrong user must not.
    settings.DEBUG = True
    client = signed_in(make_user("outsider"))
    for path, what in [(f"/runs/{finished_run.pk}/", f"run #{finished_run.pk}"), ("/runs/999999/", "run #999999"),
                       ("/graphs/999999/", "graph #999999"), ("/approvals/999999/", "approval #999999")]:
        response = client.get(path)
        assert response.status_code == 404, path
        assert "URLconf" not in response.content.decode()
        ctx = context_of(response)
        assert ctx["page"] == "notfound" and ctx["props"]["what"] == what


def test_login_page_is_the_apps_and_signs_in_a_user_who_is_not_staff():
    make_user("amal", "approvers")
    client = Client()
    page = client.get("/accounts/login/?next=/runs/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="ballast-context"' in html and "/static/assets/" in html  # the app's CSS, not admin's
    assert context_of(page)["user"] is None
    wrong = client.post("/accounts/login/", {"username": "amal", "password": "nope"})
    assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.content.decode()
    ok = client.post("/accounts/login/", {"username": "amal", "password": "pw-1-secret", "next": "/runs/"})
    assert ok.status_code == 302 and ok["Location"] == "/runs/"
    assert client.get("/runs/").status_code == 200
    # /admin/ stays for staff: this user is sent to the admin's own login.
    assert client.get("/admin/").status_code == 302


def test_logout_is_a_post_and_password_change_works_for_everyone():
    user = make_user("amal", "approvers")
    client = signed_in(user)
    form = client.get("/accounts/password_change/")
    assert form.status_code == 200 and context_of(form)["user"]["username"] == "amal"
    done = client.post("/accounts/password_change/", {
        "old_password": "pw-1-secret", "new_password1": "An0ther-long-pass", "new_password2": "An0ther-long-pass",
    })
    assert done.status_code == 302 and done["Location"] == "/accounts/password_change/done/"
    assert client.get("/accounts/password_change/done/").status_code == 200
    user.refresh_from_db()
    assert user.check_password("An0ther-long-pass")
    assert client.get("/accounts/logout/").status_code == 405  # a GET (a link preview) never signs out
    assert client.get("/").status_code == 200
    out = client.post("/accounts/logout/")
    assert out.status_code == 302 and out["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_password_reset_pages_render_for_anonymous_users(client):
    # Linked from the login page; Django's own views and templates (the admin's look).
    assert client.get("/accounts/password_reset/").status_code == 200
    sent = client.post("/accounts/password_reset/", {"email": "nobody@example.com"})
    assert sent.status_code == 302 and sent["Location"] == "/accounts/password_reset/done/"


def test_favicon_is_served_not_a_404() -> None:
    from django.contrib.staticfiles import finders

    client = Client()
    page = client.get("/accounts/login/")
    assert re.search(r'<link rel="icon" href="/static/favicon\.svg"', page.content.decode())
    icon = client.get("/favicon.ico")
    assert icon.status_code == 301 and icon["Location"] == "/static/favicon.svg"
    found = finders.find("favicon.svg")
    assert found and "<svg" in open(found).read()


@pytest.mark.parametrize(("path", "page", "groups", "staff"), [
    ("/audit/", "audit", (), True),
    ("/workers/", "workers", (), True),
    ("/workers/", "workers", ("operators",), False),
])
def test_report_pages_open_for_their_roles(path, page, groups, staff):
    response = signed_in(make_user("u", *groups, staff=staff)).get(path)
    assert response.status_code == 200 and context_of(response)["page"] == page


@pytest.mark.parametrize(("path", "groups"), [("/audit/", ("builders", "operators", "approvers")), ("/workers/", ("builders", "approvers"))])
def test_report_pages_refuse_other_roles_with_a_page_that_says_who_may(path, groups):
    response = signed_in(make_user("u", *groups)).get(path)
    assert response.status_code == 403
    ctx = context_of(response)
    assert ctx["page"] == "forbidden" and ctx["props"]["who"].startswith("administrators")
    # The advice names what opens the page: a group for the workers, staff status for the audit log (no group opens it).
    assert ctx["props"].get("group") == {"/audit/": None, "/workers/": "operators"}[path]


def test_mcp_servers_page_is_for_staff_with_the_allowed_stdio_commands(settings):
    settings.BALLAST_MCP_STDIO_COMMANDS = ["/usr/bin/python3", "npx"]
    response = signed_in(make_user("ada", staff=True)).get("/mcp-servers/")
    assert response.status_code == 200
    ctx = context_of(response)
    assert ctx["page"] == "mcpservers" and ctx["title"] == "MCP servers"
    assert ctx["props"] == {"stdioCommands": ["/usr/bin/python3", "npx"]}
    assert ctx["urls"]["mcp_servers"] == "/mcp-servers/"


@pytest.mark.parametrize("groups", [(), ("builders", "operators", "approvers")])
def test_mcp_servers_page_refuses_users_who_are_not_staff(groups):
    response = signed_in(make_user("u", *groups)).get("/mcp-servers/")
    assert response.status_code == 403
    ctx = context_of(response)
    assert ctx["page"] == "forbidden" and ctx["props"] == {"what": "the MCP servers", "who": "administrators"}
    assert "stdioCommands" not in response.content.decode()


def test_mcp_servers_page_sends_anonymous_visitors_to_sign_in(client):
    response = client.get("/mcp-servers/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/mcp-servers/"
