"""The audit app on its own: the same hashes as before the move (fixed vectors computed by
the old runs.engine.audit), the frozen copy in runs migration 0002 hashing alike, the run
row locked before a run's chain (the lock runs registers), principals, and the old admin
URLs answering 301 to the new ones."""
from __future__ import annotations

import importlib
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction
from django.test import Client, override_settings

from audit.chain import GENESIS, audit, audit_in, audit_verify, entry_hash, register_scope_lock, scope_lock, scope_of
from audit.models import AuditEntry
from audit.principals import acting_as
from runs.engine.api import run_lock_for_audit
from runs.models import Run, Step
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.usefixtures("fast_passwords")

VECTOR = dict(
    scope="run:42", seq=3, prev_hash="ab" * 32, actor_type="token", actor="ada", action="run.cancel", object_type="run",
    object_id="42", data={"token": "bal_ab12cd34", "n": [1, 2.5, None, True], "s": "é☃"},
)
# What runs.engine.audit.entry_hash (main at 7ad3fb7, before the move) returned for VECTOR.
OLD_HASH_SECRET_KEY = "7c6add826ac23db3b2505e3b2ba035120e9e25489573b67ac8e8a28fb46f9441"
OLD_HASH_AUDIT_KEY = "ea9aa76625e9cf0f76947e93fc30786f8be3abc6d7770b79473c8310979d22d9"
WHEN = datetime(2026, 12, 6, 1, 2, 3, 456789, tzinfo=UTC)


def _run() -> Run:
    spec = graph([node("start", "start"), node("calc", "transform", config={"set": {"y": "1 + 1"}}), node("end", "end")], chain("start", "calc", "end"))
    return run_local(spec)


@override_settings(SECRET_KEY="vector-secret", BALLAST_AUDIT_KEY=None)
def test_hashes_are_the_ones_the_old_writer_computed():
    assert entry_hash(**VECTOR, created_at=WHEN) == OLD_HASH_SECRET_KEY
    # The same instant in another zone is the same content.
    assert entry_hash(**VECTOR, created_at=WHEN.astimezone(timezone(timedelta(hours=1)))) == OLD_HASH_SECRET_KEY
    with override_settings(BALLAST_AUDIT_KEY="audit-key"):
        # A naive time is read as UTC; BALLAST_AUDIT_KEY wins over SECRET_KEY.
        assert entry_hash(**VECTOR, created_at=WHEN.replace(tzinfo=None)) == OLD_HASH_AUDIT_KEY


@override_settings(SECRET_KEY="vector-secret", BALLAST_AUDIT_KEY=None)
def test_the_frozen_copy_in_runs_0002_hashes_alike():
    frozen = importlib.import_module("runs.migrations.0002_audit_chain_api_tokens")
    assert frozen.GENESIS == GENESIS
    assert frozen.entry_hash(**VECTOR, created_at=WHEN) == OLD_HASH_SECRET_KEY
    with override_settings(BALLAST_AUDIT_KEY="audit-key"):
        assert frozen.entry_hash(**VECTOR, created_at=WHEN.replace(tzinfo=None)) == OLD_HASH_AUDIT_KEY


def test_runs_registers_the_run_row_as_the_lock_of_a_run_chain():
    assert scope_lock("run") is run_lock_for_audit
    assert scope_lock("graph") is None and scope_lock("auth") is None


@pytest.mark.django_db
def test_scopes_are_what_they_were():
    run = _run()
    step = Step.objects.filter(run=run).first()
    assert scope_of(run) == f"run:{run.pk}" and scope_of(step) == f"run:{run.pk}"
    assert scope_of(run.graph_version) == f"graph:{run.graph_version.graph_id}"
    assert scope_of(run.graph_version.graph) == f"graph:{run.graph_version.graph_id}"
    assert scope_of(None) == "auth"
    user = get_user_model().objects.create_user("someone")
    assert scope_of(user) == f"user:{user.pk}"


@pytest.mark.django_db
def test_a_registered_lock_is_taken_first_with_the_scope_key():
    calls: list[str] = []
    previous = scope_lock("probe")
    register_scope_lock("probe", calls.append)
    try:
        with transaction.atomic():
            audit_in("probe:abc", "tester", "test.probe", None, actor_type="system")
            audit_in("probe", "tester", "test.probe", None, actor_type="system")  # no key: no lock
            audit_in("other:abc", "tester", "test.probe", None, actor_type="system")
    finally:
        if previous is None:
            from audit import chain

            chain._scope_locks.pop("probe", None)
        else:
            register_scope_lock("probe", previous)
    assert calls == ["abc"]
    assert audit_verify().ok


@pytest.mark.django_db
def test_a_user_entry_inside_acting_as_is_recorded_as_the_principal():
    with acting_as("token", token="bal_ab12cd34"):
        entry = audit("ada", "test.principal", None, note="x")
        system = audit("ada", "test.principal", None, actor_type="system")
    after = audit("ada", "test.principal", None)
    assert (entry.actor_type, entry.data) == ("token", {"token": "bal_ab12cd34", "note": "x"})
    assert (system.actor_type, system.data) == ("system", {})
    assert (after.actor_type, after.data) == ("user", {})
    assert audit_verify(scope="auth").ok


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises every writer; only PostgreSQL has row locks")
@pytest.mark.django_db(transaction=True)
def test_an_append_to_a_run_chain_waits_for_the_run_row():
    # The engine locks the run row before anything else of the run; an audited service
    # must take it before the chain's head, or the two could deadlock.
    run = _run()
    other = AuditEntry.objects.filter(scope=f"run:{run.pk}").count()
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Run.objects.select_for_update(no_key=True).filter(pk=run.pk))
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            audit("tester", "test.locked", run)
        with transaction.atomic():  # another chain does not wait for the run row
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            audit_in("user:1", "tester", "test.unlocked", run)
    finally:
        release.set()
        holder.join(30)
    assert AuditEntry.objects.filter(scope=f"run:{run.pk}").count() == other
    audit("tester", "test.unlocked", run)
    assert audit_verify().ok


@pytest.mark.django_db
def test_the_old_admin_urls_answer_301_to_the_audit_app():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    cases = {
        "/admin/runs/auditentry/": "/admin/audit/auditentry/",
        "/admin/runs/auditentry/?action__exact=run.start&q=ada": "/admin/audit/auditentry/?action__exact=run.start&q=ada",
        "/admin/runs/auditentry/12/change/": "/admin/audit/auditentry/12/change/",
        "/admin/runs/auditentry/12/history/": "/admin/audit/auditentry/12/history/",
    }
    for old, new in cases.items():
        response = client.get(old)
        assert (response.status_code, response["Location"]) == (301, new), old
    entry = audit("ada", "test.admin", None)
    assert client.get(f"/admin/runs/auditentry/{entry.pk}/change/", follow=True).redirect_chain == [
        (f"/admin/audit/auditentry/{entry.pk}/change/", 301)
    ]
    assert client.get(f"/admin/audit/auditentry/{entry.pk}/change/").status_code == 200
    assert client.get("/admin/runs/run/").status_code == 200  # the rest of runs' admin did not move
