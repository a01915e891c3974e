"""Providers added in the app: the key encrypted at rest (and rotated), never logged or audited, resolved by name for validation and runs, and the connection test, against the local OpenAI/Anthropic protocol server."""
from __future__ import annotations

import json
import logging
import os
import stat

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection

from audit.models import AuditEntry
from builder.validation import validate_spec
from runs.models import ProviderCredential, Step
from runs.providers import UnknownProvider, get_provider, services
from runs.providers import credentials as store
from tests.support.llm_server import TEST_KEY, Fault, LLMServer, Reply
from tests.support.specs import edge, graph, node, run_local

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def credentials_key(settings):
    """A fresh Fernet key per test (no generated key file in var/)."""
    key = Fernet.generate_key().decode()
    settings.BALLAST_CREDENTIALS_KEY = key
    return key


def add(name="local-openai", *, server=None, kind="openai", api_key=TEST_KEY, **fields):
    base_url = fields.pop("base_url", None)
    if base_url is None and server is not None:
        base_url = server.anthropic_base_url if kind == "anthropic" else server.openai_base_url
    data = {"name": name, "kind": kind, "api_key": api_key, "base_url": base_url or "", "default_model": fields.pop("default_model", "gpt-4o-mini")}
    data.update(fields)
    return services.provider_credential_create(data=data)


def raw_row(name):
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM runs_providercredential WHERE name = %s", [name])
        return cursor.fetchone()


def llm_graph(provider, model="gpt-4o-mini", **config):
    return graph(
        [node("start", "start"), node("ask", "llm", config={"provider": provider, "model": model, "prompt": "Say hi to {{ who }}", "max_tokens": 20, **config}), node("end", "end", config={"output": ["reply"]})],
        [edge("start", "ask"), edge("ask", "end")],
        input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
    )


# --------------------------------------------------------------------------- at rest


def test_the_key_is_encrypted_at_rest_and_bound_to_its_name():
    credential = add()
    row = raw_row("local-openai")
    assert not any(TEST_KEY in str(value) for value in row)
    assert credential.api_key_encrypted.startswith("gAAAAA")  # a Fernet token
    assert store.decrypt_api_key(ProviderCredential.objects.get(name="local-openai")) == TEST_KEY
    # The ciphertext moved onto another row does not decrypt there.
    other = add("other", api_key="sk-other-key-0123456789")
    ProviderCredential.objects.filter(pk=other.pk).update(api_key_encrypted=credential.api_key_encrypted)
    with pytest.raises(store.CredentialUnreadable):
        store.decrypt_api_key(ProviderCredential.objects.get(pk=other.pk))


def test_rotation_with_several_keys(settings, credentials_key):
    add()
    before = raw_row("local-openai")
    new = Fernet.generate_key().decode()
    settings.BALLAST_CREDENTIALS_KEY = f"{new},{credentials_key}"  # new key first: encrypts; old one still decrypts
    assert store.decrypt_api_key(ProviderCredential.objects.get(name="local-openai")) == TEST_KEY
    call_command("rotate_credentials", stdout=open(os.devnull, "w"))
    assert raw_row("local-openai") != before
    settings.BALLAST_CREDENTIALS_KEY = new  # the old key dropped: the rotated row still reads
    assert store.decrypt_api_key(ProviderCredential.objects.get(name="local-openai")) == TEST_KEY
    settings.BALLAST_CREDENTIALS_KEY = Fernet.generate_key().decode()  # a key that never encrypted it
    with pytest.raises(store.CredentialUnreadable):
        store.decrypt_api_key(ProviderCredential.objects.get(name="local-openai"))
    # Validation still works; a call fails with a clear, non-retryable credentials error.
    provider = get_provider("local-openai")
    with pytest.raises(store.ProviderError) as caught:
        provider.api_key(None)
    assert caught.value.code == "credentials" and not caught.value.retryable


def test_a_malformed_key_setting_is_refused_without_echoing_it(settings):
    settings.BALLAST_CREDENTIALS_KEY = "not-a-fernet-key-but-secret"
    with pytest.raises(ImproperlyConfigured) as caught:
        store.cipher()
    assert "not-a-fernet-key-but-secret" not in str(caught.value) and "key 1" in str(caught.value)


def test_without_a_key_setting_one_is_generated_once_into_the_key_file(settings, tmp_path):
    settings.BALLAST_CREDENTIALS_KEY = ""
    settings.BALLAST_CREDENTIALS_KEY_FILE = tmp_path / "credentials-key.txt"
    credential = add()
    key_file = tmp_path / "credentials-key.txt"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    generated = key_file.read_text().strip()
    Fernet(generated)  # a real Fernet key
    store.cipher.cache_clear()  # another process: reads the same file, makes no new key
    assert store.decrypt_api_key(credential) == TEST_KEY
    assert key_file.read_text().strip() == generated


# --------------------------------------------------------------------------- names and validation


def test_names_configured_in_settings_cannot_be_taken(settings):
    settings.BALLAST_PROVIDERS = {**settings.BALLAST_PROVIDERS, "ollama": "runs.providers.openai_provider.OpenAIProvider"}
    settings.BALLAST_PROVIDERS_FROM_ENV = ["ollama"]
    for name in ("mock", "openai", "anthropic", "ollama"):
        with pytest.raises(store.CredentialInvalid) as caught:
            add(name)
        assert caught.value.code == "name_taken", name
    assert "environment" in caught.value.fields["name"][0]
    add("mine")
    with pytest.raises(store.CredentialInvalid) as caught:
        add("mine")
    assert caught.value.code == "name_taken"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "bad name"}, "name"),
        ({"kind": "azure"}, "kind"),
        ({"kind": "openai_compatible", "base_url": ""}, "base_url"),
        ({"base_url": "http://user:pw@127.0.0.1:1/v1"}, "base_url"),
        ({"base_url": "ftp://127.0.0.1/v1"}, "base_url"),
        ({"base_url": "http://[::1/v1"}, "base_url"),
        ({"api_key": ""}, "api_key"),
        ({"api_key": "sk has spaces"}, "api_key"),
        ({"default_model": ""}, "default_model"),
        ({"model_names": ["gpt-4o"]}, "model_names"),
    ],
)
def test_bad_fields_are_refused_by_field(fields, field):
    with pytest.raises(store.CredentialInvalid) as caught:
        add(**fields)
    assert field in caught.value.fields
    assert "sk has spaces" not in str(caught.value)


def test_validation_knows_stored_names_their_models_and_refuses_key_variables(llm_server):
    add(server=llm_server, model_names=["gpt-4o-mini", "gpt-4o"])
    assert validate_spec(llm_graph("local-openai")).ok
    issues = {(i.node_id, i.field, i.code) for i in validate_spec(llm_graph("local-openai", model="gpt-nope")).issues}
    assert ("ask", "config.model", "unknown_model") in issues
    issues = {(i.node_id, i.field) for i in validate_spec(llm_graph("local-openai", api_key_env="OPENAI_API_KEY")).issues}
    assert ("ask", "config.api_key_env") in issues  # a stored provider reads no environment variable
    services.provider_credential_delete(credential=ProviderCredential.objects.get(name="local-openai"))
    issues = {(i.node_id, i.field, i.code) for i in validate_spec(llm_graph("local-openai")).issues}
    assert ("ask", "config.provider", "unknown_provider") in issues
    with pytest.raises(UnknownProvider):
        get_provider("local-openai")


# --------------------------------------------------------------------------- runs


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "openai_compatible"])
def test_a_run_through_a_stored_credential(llm_server, monkeypatch, kind):
    # No key in the environment: the only key is the stored one.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = "claude-haiku-4-5" if kind == "anthropic" else "gpt-4o-mini"
    add("stored", server=llm_server, kind=kind, default_model=model)
    llm_server.set_script([Reply(text="Hi Ada!", usage={"input": 12, "output": 3})])
    run = run_local(llm_graph("stored", model=model), {"who": "Ada"})
    assert run.status == "succeeded", run.error
    assert run.output == {"reply": "Hi Ada!"}
    (call,) = llm_server.calls()
    sent = call.headers.get("x-api-key") or call.headers["authorization"].removeprefix("Bearer ")
    assert sent == TEST_KEY
    assert call.path == ("/v1/messages" if kind == "anthropic" else "/v1/chat/completions")
    step = Step.objects.get(run=run, node_id="ask")
    assert step.output["provider"] == "stored"
    if kind == "openai_compatible":
        assert "max_tokens" in call.body  # a compatible server gets the classic parameter
    elif kind == "openai":
        assert "max_completion_tokens" in call.body and step.cost_usd is not None  # priced as OpenAI's model


@pytest.mark.django_db(transaction=True)
def test_a_changed_key_is_used_by_the_next_call(llm_server):
    credential = add(server=llm_server, api_key="sk-old-key-0123456789")
    bad = run_local(llm_graph("local-openai"), {"who": "Ada"})
    assert bad.status == "failed" and bad.error["code"] == "provider_rejected"
    assert "sk-old-key-0123456789" not in json.dumps(bad.error)
    services.provider_credential_update(credential=credential, data={"api_key": TEST_KEY})
    good = run_local(llm_graph("local-openai"), {"who": "Ada"})
    assert good.status == "succeeded", good.error


# --------------------------------------------------------------------------- never shown


def test_audit_entries_record_changes_without_the_key():
    credential = add(label="Local")
    services.provider_credential_update(credential=credential, data={"api_key": "sk-second-key-0123456789", "label": "Renamed"})
    services.provider_credential_update(credential=credential, data={"label": "Renamed"})  # no change: no entry
    services.provider_credential_delete(credential=credential)
    entries = list(AuditEntry.objects.filter(scope="provider:local-openai").order_by("seq"))
    assert [e.action for e in entries] == ["provider.create", "provider.update", "provider.delete"]
    assert sorted(entries[1].data["changed"]) == ["api_key", "label"]
    assert entries[0].data["has_key"] is True and entries[0].data["name"] == "local-openai"
    text = json.dumps([e.data for e in AuditEntry.objects.all()])
    assert TEST_KEY not in text and "sk-second-key-0123456789" not in text


@pytest.mark.django_db(transaction=True)
def test_the_key_is_never_logged(llm_server, caplog):
    caplog.set_level(logging.DEBUG)  # SDK and HTTP client debug logs included
    credential = add(server=llm_server)
    run_local(llm_graph("local-openai"), {"who": "Ada"})
    store.stored_connection_test(credential)
    llm_server.fail(Fault(status=401, message=f"Incorrect API key provided: {TEST_KEY}"))
    store.stored_connection_test(credential)
    assert caplog.records  # the SDKs did log
    assert TEST_KEY not in caplog.text


# --------------------------------------------------------------------------- connection test


def test_connection_test_success(llm_server):
    credential = add(server=llm_server)
    result = store.stored_connection_test(credential)
    assert result.ok, result.message
    assert result.error is None and "gpt-4o-mini" in result.message
    (call,) = llm_server.calls()
    assert call.body["max_completion_tokens"] == 1 and call.body["model"] == "gpt-4o-mini"


def test_anthropic_connection_test_success_and_failure(llm_server):
    credential = add("claude", server=llm_server, kind="anthropic", default_model="claude-haiku-4-5")
    assert store.stored_connection_test(credential).ok
    llm_server.fail(Fault(status=404, message="model: claude-nope not found"))
    failed = store.stored_connection_test(credential, model="claude-nope")
    assert not failed.ok and failed.error == {"code": "provider_rejected", "status": 404}
    assert "claude-nope not found" in failed.message


def test_connection_test_shows_the_providers_error_with_the_key_redacted(llm_server):
    wrong = "sk-wrong-key-0123456789abcdef"
    credential = add(server=llm_server, api_key=wrong)
    result = store.stored_connection_test(credential)
    assert not result.ok and result.error == {"code": "provider_rejected", "status": 401}
    assert "Incorrect API key provided" in result.message
    assert wrong not in result.message and "[REDACTED]" in result.message


def test_connection_test_times_out(llm_server, settings):
    settings.BALLAST_PROVIDER_TEST_TIMEOUT = 0.3
    credential = add(server=llm_server)
    llm_server.fail(Fault(delay=30))  # then it would answer normally: "timeout" means we gave up first
    result = store.stored_connection_test(credential)
    assert not result.ok and result.error["code"] == "timeout"
    assert "0.3s" in result.message


def test_connection_test_of_an_unreachable_server():
    with LLMServer() as server:
        url = server.openai_base_url
    credential = add(base_url=url)  # the server is stopped: nothing listens there
    result = store.stored_connection_test(credential)
    assert not result.ok and result.error["code"] in ("provider_error", "timeout")
