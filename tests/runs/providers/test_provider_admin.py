"""Providers in the admin: the key field is write-only (never rendered back), saves are audited, "Test connection" shows the provider's answer (key redacted), and non-staff users are refused."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from audit.models import AuditEntry
from runs.models import ProviderCredential
from runs.providers.credentials import decrypt_api_key
from tests.support.llm_server import TEST_KEY, Fault, LLMServer
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def admin_browser(world: World) -> Client:
    browser = Client()
    browser.force_login(world.users["admin"])
    return browser


def form(server, **fields):
    data = {"name": "local", "kind": "openai", "label": "", "base_url": server.openai_base_url, "default_model": "gpt-4o-mini", "models_text": "gpt-4o-mini\ngpt-4o", "api_key": TEST_KEY}
    data.update(fields)
    return data


def test_add_keeps_the_key_write_only_and_audits(world: World, server) -> None:
    browser = admin_browser(world)
    assert 'type="password"' in browser.get("/admin/runs/providercredential/add/").content.decode()
    response = browser.post("/admin/runs/providercredential/add/", form(server), follow=True)
    assert response.status_code == 200 and not (response.context.get("errors") if response.context else None)
    credential = ProviderCredential.objects.get(name="local")
    assert decrypt_api_key(credential) == TEST_KEY and credential.model_names == ["gpt-4o-mini", "gpt-4o"]
    assert credential.created_by == world.users["admin"]
    page = browser.get(f"/admin/runs/providercredential/{credential.pk}/change/").content.decode()
    assert TEST_KEY not in page and credential.api_key_encrypted not in page
    assert "A key is stored" in page and "Test connection" in page
    entry = AuditEntry.objects.get(action="provider.create")
    assert (entry.actor, entry.actor_type) == ("admin", "user") and TEST_KEY not in str(entry.data)


def test_change_with_an_empty_key_keeps_it_and_a_new_one_replaces_it(world: World, server) -> None:
    browser = admin_browser(world)
    browser.post("/admin/runs/providercredential/add/", form(server))
    credential = ProviderCredential.objects.get(name="local")
    url = f"/admin/runs/providercredential/{credential.pk}/change/"
    browser.post(url, form(server, api_key="", label="Renamed"))
    credential.refresh_from_db()
    assert credential.label == "Renamed" and decrypt_api_key(credential) == TEST_KEY
    browser.post(url, form(server, api_key="sk-replaced-0123456789"))
    credential.refresh_from_db()
    assert decrypt_api_key(credential) == "sk-replaced-0123456789"
    changed = [e.data["changed"] for e in AuditEntry.objects.filter(action="provider.update").order_by("id")]
    assert changed == [["label"], ["label", "api_key"]]


def test_a_bad_form_shows_errors_and_not_the_key(world: World, server) -> None:
    browser = admin_browser(world)
    response = browser.post("/admin/runs/providercredential/add/", form(server, models_text="gpt-4o", base_url="ftp://x"))
    assert response.status_code == 200  # the form again, with errors
    page = response.content.decode()
    assert "must include the default model" in page and "http:// or https://" in page
    assert TEST_KEY not in page and not ProviderCredential.objects.exists()


def test_test_connection_button_shows_success_and_the_providers_error(world: World, server) -> None:
    browser = admin_browser(world)
    browser.post("/admin/runs/providercredential/add/", form(server))
    credential = ProviderCredential.objects.get(name="local")
    url = f"/admin/runs/providercredential/{credential.pk}/test/"
    assert browser.get(url).status_code == 405  # spending a token takes a POST
    ok = browser.post(url, follow=True)
    assert ok.redirect_chain[-1][0].endswith(f"/{credential.pk}/change/")
    assert any("connection works" in m for m in messages_of(ok)), messages_of(ok)
    server.fail(Fault(status=401, message=f"Incorrect API key provided: {TEST_KEY}"))
    failed = browser.post(url, follow=True)
    shown = messages_of(failed)
    assert any("connection failed (provider_rejected)" in m and "Incorrect API key provided" in m for m in shown), shown
    assert TEST_KEY not in failed.content.decode() and not any(TEST_KEY in m for m in shown)


def test_non_staff_users_cannot_reach_the_provider_admin(world: World, server) -> None:
    browser = admin_browser(world)
    browser.post("/admin/runs/providercredential/add/", form(server))
    credential = ProviderCredential.objects.get(name="local")
    for role in ("viewer", "builder", "operator", "approver"):
        other = Client()
        other.force_login(world.users[role])
        for path in ("/admin/runs/providercredential/", f"/admin/runs/providercredential/{credential.pk}/test/"):
            response = other.post(path) if path.endswith("/test/") else other.get(path)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], (role, path)
    assert server.calls() == []  # nobody's attempt reached the provider
