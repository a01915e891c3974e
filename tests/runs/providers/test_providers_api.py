"""The provider API: the catalogue (settings, environment, app; never a key), staff-only create/update/delete with audit entries, structured errors, and the connection test against the local protocol server."""
from __future__ import annotations

import json

import pytest
from django.db import connection

from audit.models import AuditEntry
from runs.models import ProviderCredential
from tests.support.llm_server import TEST_KEY, Fault, LLMServer
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


def body(server, **fields):
    data = {"name": "local", "kind": "openai", "base_url": server.openai_base_url, "api_key": TEST_KEY, "default_model": "gpt-4o-mini"}
    data.update(fields)
    return data


def post(world, role, path, data=None):
    return world.clients[role].post(path, data if data is not None else {}, format="json")


def test_the_catalogue_lists_every_source_and_never_a_key(world: World, server, settings) -> None:
    settings.BALLAST_PROVIDERS = {**settings.BALLAST_PROVIDERS, "ollama": "runs.providers.openai_provider.OpenAIProvider"}
    settings.BALLAST_PROVIDER_SETTINGS = {**settings.BALLAST_PROVIDER_SETTINGS, "ollama": {"base_url": "http://127.0.0.1:11434/v1", "api_key_required": False, "models": ["llama3.2"]}}
    settings.BALLAST_PROVIDERS_FROM_ENV = ["ollama"]
    created = post(world, "admin", "/api/v1/providers/", body(server, models=["gpt-4o-mini", "gpt-4o"], label="Local proxy"))
    assert created.status_code == 201, created.json()
    response = world.clients["viewer"].get("/api/v1/providers/")
    assert response.status_code == 200
    items = {item["name"]: item for item in response.json()}
    assert {"mock", "openai", "anthropic", "ollama", "local"} <= set(items)
    assert items["mock"] == {
        "name": "mock", "kind": "mock", "label": "Mock (offline)", "models": ["mock-1", "mock-large"],
        "default_model": "mock-1", "base_url": None, "source": "settings", "ready": True,
    }  # fmt: skip
    assert items["ollama"]["source"] == "environment" and items["ollama"]["kind"] == "openai_compatible"
    assert items["ollama"]["models"] == ["llama3.2"] and items["ollama"]["ready"] is True
    assert items["openai"]["kind"] == "openai" and items["openai"]["source"] == "settings"
    assert items["local"] == {
        "name": "local", "kind": "openai", "label": "Local proxy", "models": ["gpt-4o-mini", "gpt-4o"],
        "default_model": "gpt-4o-mini", "base_url": server.openai_base_url, "source": "app", "ready": True,
    }  # fmt: skip
    for answer in (created, response):
        assert TEST_KEY not in answer.content.decode() and "api_key" not in answer.content.decode()


def test_create_stores_the_key_encrypted_and_audits_without_it(world: World, server) -> None:
    response = post(world, "admin", "/api/v1/providers/", body(server))
    assert response.status_code == 201 and response.json()["source"] == "app"
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM runs_providercredential")
        rows = cursor.fetchall()
    assert len(rows) == 1 and not any(TEST_KEY in str(value) for value in rows[0])
    entry = AuditEntry.objects.get(action="provider.create")
    assert entry.actor == "admin" and entry.actor_type == "token" and entry.data["name"] == "local"
    assert TEST_KEY not in json.dumps(entry.data)
    assert ProviderCredential.objects.get(name="local").created_by == world.users["admin"]


@pytest.mark.parametrize(
    ("fields", "status", "code", "field"),
    [
        ({"kind": "openai_compatible", "base_url": ""}, 400, "invalid", "base_url"),
        ({"base_url": "http://me:secret@127.0.0.1:1/v1"}, 400, "invalid", "base_url"),
        ({"models": ["gpt-4o"]}, 400, "invalid", "models"),
        ({"api_key": ""}, 400, "invalid", "api_key"),
        ({"name": "has space"}, 400, "invalid", "name"),
        ({"kind": "azure"}, 400, "invalid", "kind"),
        ({"default_model": None}, 400, "invalid", "default_model"),
        ({"name": "openai"}, 409, "name_taken", "name"),
        ({"name": "mock"}, 409, "name_taken", "name"),
    ],
)
def test_bad_input_gets_a_structured_error(world: World, server, fields, status, code, field) -> None:
    response = post(world, "admin", "/api/v1/providers/", body(server, **fields))
    assert response.status_code == status, response.json()
    error = response.json()["error"]
    assert error["code"] == code and field in error["fields"], error
    assert TEST_KEY not in response.content.decode()


def test_a_second_provider_with_the_same_name_is_a_conflict(world: World, server) -> None:
    assert post(world, "admin", "/api/v1/providers/", body(server)).status_code == 201
    again = post(world, "admin", "/api/v1/providers/", body(server))
    assert again.status_code == 409 and again.json()["error"]["code"] == "name_taken"


def test_update_replaces_fields_and_the_key_write_only(world: World, server) -> None:
    post(world, "admin", "/api/v1/providers/", body(server))
    before = ProviderCredential.objects.get(name="local").api_key_encrypted
    admin = world.clients["admin"]
    changed = admin.patch("/api/v1/providers/local/", {"models": ["gpt-4o-mini", "gpt-4o"], "label": "Proxy"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["models"] == ["gpt-4o-mini", "gpt-4o"] and changed.json()["label"] == "Proxy"
    assert ProviderCredential.objects.get(name="local").api_key_encrypted == before  # absent key: kept
    rekeyed = admin.patch("/api/v1/providers/local/", {"api_key": "sk-new-key-0123456789abc"}, format="json")
    assert rekeyed.status_code == 200 and "sk-new-key" not in rekeyed.content.decode()
    assert ProviderCredential.objects.get(name="local").api_key_encrypted != before
    updates = list(AuditEntry.objects.filter(action="provider.update").order_by("id"))
    assert [sorted(e.data["changed"]) for e in updates] == [["label", "models"], ["api_key"]]
    assert "sk-new-key" not in json.dumps([e.data for e in updates])
    renamed = admin.patch("/api/v1/providers/local/", {"name": "other"}, format="json")
    assert renamed.status_code == 400 and "name" in renamed.json()["error"]["fields"]
    unkeyed = admin.patch("/api/v1/providers/local/", {"api_key": ""}, format="json")
    assert unkeyed.status_code == 400 and "api_key" in unkeyed.json()["error"]["fields"]  # OpenAI needs a key
    assert admin.patch("/api/v1/providers/openai/", {"label": "x"}, format="json").json()["error"]["code"] == "configured_in_settings"
    assert admin.patch("/api/v1/providers/nothing-here/", {"label": "x"}, format="json").status_code == 404


def test_delete_removes_the_provider_and_is_audited(world: World, server) -> None:
    post(world, "admin", "/api/v1/providers/", body(server))
    admin = world.clients["admin"]
    assert admin.delete("/api/v1/providers/local/").status_code == 204
    assert admin.delete("/api/v1/providers/local/").status_code == 404
    assert admin.delete("/api/v1/providers/mock/").status_code == 409
    assert "local" not in {item["name"] for item in admin.get("/api/v1/providers/").json()}
    entry = AuditEntry.objects.get(action="provider.delete")
    assert entry.data["name"] == "local" and entry.scope == "provider:local"


def test_connection_test_success_and_failure(world: World, server) -> None:
    post(world, "admin", "/api/v1/providers/", body(server))
    ok = post(world, "admin", "/api/v1/providers/local/test/")
    assert ok.status_code == 200 and ok.json()["ok"] is True, ok.json()
    assert ok.json()["model"] == "gpt-4o-mini" and ok.json()["error"] is None
    server.fail(Fault(status=401, message=f"Incorrect API key provided: {TEST_KEY}"))
    failed = post(world, "admin", "/api/v1/providers/local/test/", {"model": "gpt-4o"})
    assert failed.status_code == 200
    result = failed.json()
    assert result["ok"] is False and result["error"] == {"code": "provider_rejected", "status": 401}
    assert "Incorrect API key provided" in result["message"] and TEST_KEY not in failed.content.decode()
    assert [c.body["model"] for c in server.calls()] == ["gpt-4o-mini", "gpt-4o"]


def test_connection_test_of_settings_providers(world: World) -> None:
    mock = post(world, "admin", "/api/v1/providers/mock/test/")
    assert mock.status_code == 200 and mock.json()["ok"] is True and mock.json()["model"] == "mock-1"
    no_model = post(world, "admin", "/api/v1/providers/openai/test/")
    assert no_model.status_code == 400 and "model" in no_model.json()["error"]["fields"]
    assert post(world, "admin", "/api/v1/providers/unknown-one/test/").status_code == 404


def test_the_model_catalogue_offers_stored_providers(world: World, server) -> None:
    post(world, "admin", "/api/v1/providers/", body(server, models=["gpt-4o-mini", "gpt-4o"]))
    post(world, "admin", "/api/v1/providers/", body(server, name="any-model", kind="openai_compatible", api_key="", default_model="local-7b"))
    providers = {p["provider"]: p for p in world.clients["viewer"].get("/api/v1/models/").json()["providers"]}
    assert [m["id"] for m in providers["local"]["models"]] == ["gpt-4o", "gpt-4o-mini"]
    assert providers["local"]["accepts_any_model"] is False
    assert providers["any-model"]["accepts_any_model"] is True
