"""Unknown URLs: the app's own 404 page for page URLs and the API's JSON 404 under /api/, signed in or not, whatever DEBUG says."""
from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PAGE_URLS = ["/nope/", "/graphs/1/nope/", "/runs/abc/", "/favicon.png", "/accounts/nope/"]
API_URLS = ["/api/nope/", "/api/v1/nope/", "/api/v1/runs/abc/", "/api/v2/graphs/"]


def _clients() -> list[tuple[str, Client]]:
    signed = Client()
    signed.force_login(User.objects.create_user("nia", password="pw-1-secret"))
    return [("anonymous", Client()), ("signed in", signed)]


def _context(html: str) -> dict:
    match = re.search(r'<script id="ballast-context" type="application/json">(.*?)</script>', html, re.S)
    assert match, "not the app's page"
    return json.loads(match.group(1))


@pytest.mark.parametrize("debug", [True, False])
def test_unknown_page_urls_are_the_apps_404_page(settings, debug: bool) -> None:
    settings.DEBUG = debug
    for who, client in _clients():
        for url in PAGE_URLS:
            response = client.get(url)
            html = response.content.decode()
            assert response.status_code == 404, (who, url)
            assert "URLconf" not in html and "urlpatterns" not in html, (who, url)
            ctx = _context(html)
            assert ctx["page"] == "notfound" and ctx["props"] == {"address": url}, (who, url)
            assert (ctx["user"] is None) == (who == "anonymous")


@pytest.mark.parametrize("debug", [True, False])
def test_unknown_api_urls_are_the_apis_json_404(settings, debug: bool) -> None:
    settings.DEBUG = debug
    for who, client in _clients():
        for url in API_URLS:
            for method in (client.get, client.post):
                response = method(url)
                assert response.status_code == 404, (who, url)
                assert response["Content-Type"] == "application/json", (who, url)
                assert response.json() == {"error": {"code": "not_found", "message": "No such API endpoint.", "fields": {}}}, (who, url)


def test_a_page_url_without_its_slash_still_redirects_to_the_page() -> None:
    # The catch-all route makes every path resolve, so CommonMiddleware's APPEND_SLASH
    # redirect is the 404 view's to make.
    response = Client().get("/graphs?q=x")
    assert response.status_code == 301 and response["Location"] == "/graphs/?q=x"
    assert Client().get("/nope").status_code == 404
