"""The audit log: what is audited (and as whom), hash chains per scope written in the
caller's transaction, verify_audit detecting edits, deletions, reordering and cut-off
ends, and on PostgreSQL a database that refuses UPDATE and DELETE."""
from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client

from audit.chain import GENESIS, audit, audit_verify
from audit.models import AuditChain, AuditEntry
from runs.models import Run, Step
from runs.nodes.base import NodeResult
from runs.services import run_start
from tests.support import engine
from tests.support.approvals import version_of
from tests.support.leases import begun
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.world import World, client_with_token, linear_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]
POSTGRES = connection.vendor == "postgresql"


@contextlib.contextmanager
def triggers_disabled() -> Iterator[None]:
    """Tamper as an attacker with table-owner rights would: on PostgreSQL the append-only
    triggers must be switched off first (on SQLite there are none)."""
    if not POSTGRES:
        yield
        return
    tables = {"runs_auditentry": "runs_auditentry_append_only", "runs_auditchain": "runs_auditchain_forward_only"}
    with connection.cursor() as cursor:
        for table, trigger in tables.items():
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for table, trigger in tables.items():
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")


def verify() -> tuple[bool, str]:
    """Run the management command: (intact, what it printed)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("verify_audit", stdout=out, stderr=err)
        return True, out.getvalue()
    except CommandError as exc:
        return False, err.getvalue() + str(exc)


def some_history(world: World) -> Run:
    """Publish, start, decide, retry, cancel through the API: several chains, one of them
    (the returned run's) with three entries: run.start, run.resume, run.cancel."""
    waiting = world.waiting_run()
    failed = world.failed_run()
    with engine.local_mode():
        world.clients["approver"].post(f"/api/v1/approvals/{world.approval_of(waiting).pk}/decide/", {"version": version_of(world.approval_of(waiting).pk), "decision": "approve"}, format="json")
        assert world.clients["operator"].post(f"/api/v1/runs/{failed.pk}/retry/", format="json").status_code == 200
        assert world.clients["operator"].post(f"/api/v1/runs/{failed.pk}/cancel/", {}, format="json").status_code == 200
    assert AuditEntry.objects.filter(scope=f"run:{failed.pk}").count() == 3
    return failed


# --------------------------------------------------------------------------- what is audited


def test_every_audited_action_is_recorded_with_its_actor(world: World) -> None:
    some_history(world)
    failed = world.failed_run()
    ok = world.succeeded_run()
    operator = world.clients["operator"]
    with engine.local_mode():
        operator.post(f"/api/v1/runs/{failed.pk}/retry/", format="json")
        operator.post(f"/api/v1/runs/{failed.pk}/cancel/", {}, format="json")
        operator.post(f"/api/v1/runs/{failed.pk}/resume/", {}, format="json")  # 409: cancelled, not audited
        operator.post(f"/api/v1/runs/{ok.pk}/fork/", {"step": world.step(ok, "start").pk}, format="json")
        world.clients["builder"].post("/api/v1/graphs/import/", {**linear_spec(), "name": "audited"}, format="json")
    Client().post("/admin/login/", {"username": "viewer", "password": "wrong"})
    client_with_token(None).get("/api/v1/graphs/", HTTP_AUTHORIZATION="Token bal_wrong")

    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert actions >= {
        "token.create", "graph.publish", "run.start", "approval.approve", "run.cancel", "run.resume", "run.fork", "auth.login_failed",
    }  # fmt: skip
    fork = AuditEntry.objects.get(action="run.fork")
    assert (fork.actor, fork.actor_type, fork.data["source_run"]) == ("operator", "token", ok.pk)
    assert fork.data["token"] == world.token("operator")[:12]  # which token, never the key
    assert AuditEntry.objects.filter(action="run.resume", object_id=str(failed.pk)).count() == 1
    login = AuditEntry.objects.filter(action="auth.login_failed").order_by("seq")
    assert [(e.actor, e.actor_type, e.scope) for e in login] == [("viewer", "anonymous", "auth"), ("bal_wrong", "anonymous", "auth")]
    assert login[0].data["ip"] == "127.0.0.1" and login[1].data["via"] == "token"
    assert "wrong" not in str(login[0].data)  # the password is never recorded
    assert verify()[0]


def test_worker_recovery_actions_are_audited_as_the_worker(world: World, effects_file) -> None:
    version = publish(graph([node("start", "start"), effect("pay", unsafe=True), node("end", "end")], chain("start", "pay", "end")))
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "livehost:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    pay = Step.objects.get(run=run, node_id="pay")
    begun(engine.step_claim(pay.pk, "deadhost:1:1"))
    Step.objects.filter(pk=pay.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    engine.recover_once()
    park = AuditEntry.objects.get(action="run.park")
    assert park.actor_type == "worker" and park.scope == f"run:{run.pk}" and park.seq == 2  # after run.start
    assert verify()[0]


def test_token_commands_create_and_revoke_audited_tokens(world: World) -> None:
    out = io.StringIO()
    call_command("create_token", "viewer", "--name", "ci", "--quiet", stdout=out)
    key = out.getvalue().strip()
    client = client_with_token(None)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/graphs/").status_code == 200
    call_command("revoke_token", key[:12], stdout=io.StringIO())
    assert client.get("/api/v1/graphs/").status_code == 401
    with pytest.raises(CommandError):
        call_command("revoke_token", key[:12], stdout=io.StringIO())  # already revoked
    entries = AuditEntry.objects.filter(scope=f"user:{world.users['viewer'].pk}", action__in=["token.create", "token.revoke"]).order_by("seq")
    assert [(e.action, e.actor_type, e.data["prefix"]) for e in entries][-2:] == [("token.create", "operator", key[:12]), ("token.revoke", "operator", key[:12])]
    assert key not in str(list(AuditEntry.objects.values_list("data", flat=True)))


# --------------------------------------------------------------------------- the chains


def test_entries_chain_per_scope_and_roll_back_with_their_transaction(world: World) -> None:
    run = some_history(world)
    entries = list(AuditEntry.objects.filter(scope=f"run:{run.pk}").order_by("seq"))
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1)) and len(entries) >= 2
    assert entries[0].prev_hash == GENESIS
    assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:], strict=False))
    head = AuditChain.objects.get(scope=f"run:{run.pk}")
    assert (head.seq, head.hash) == (entries[-1].seq, entries[-1].hash)

    count = AuditEntry.objects.count()
    with contextlib.suppress(RuntimeError), transaction.atomic():
        audit("someone", "run.cancel", run, reason="never happened")
        raise RuntimeError("the change failed, so its audit entry must vanish with it")
    assert AuditEntry.objects.count() == count and AuditChain.objects.get(scope=f"run:{run.pk}").seq == head.seq
    report = audit_verify()
    assert report.ok and report.entries == count and report.chains == AuditChain.objects.count()


def test_concurrent_appends_to_one_chain_stay_a_chain(world: World) -> None:
    run = world.queued_run()
    errors: list[BaseException] = []

    def append(n: int) -> None:
        try:
            for i in range(10):
                with transaction.atomic():
                    audit(f"thread-{n}", "test.append", run, i=i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    seqs = list(AuditEntry.objects.filter(scope=f"run:{run.pk}").order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 32))  # run.start + 30 appends, no gap, no fork
    assert audit_verify(scope=f"run:{run.pk}").ok


# --------------------------------------------------------------------------- tampering


def tamper_and_verify(sql: str, params: list) -> tuple[bool, str]:
    assert verify()[0]
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        assert cursor.rowcount >= 1
    return verify()


def _middle(run: Run) -> AuditEntry:
    """The second of the three entries of ``run``'s chain."""
    return AuditEntry.objects.get(scope=f"run:{run.pk}", seq=2)


def test_verify_audit_detects_an_edited_entry(world: World) -> None:
    some_history(world)
    target = AuditEntry.objects.filter(action="approval.approve").get()
    intact, output = tamper_and_verify("UPDATE runs_auditentry SET actor = %s WHERE id = %s", ["someone-else", target.pk])
    assert not intact and f"entry {target.pk}" in output and "edited" in output


def test_verify_audit_detects_edited_data_even_with_a_recomputed_plain_hash(world: World) -> None:
    """Rewriting the hash too needs the HMAC key, which the database does not hold."""
    import hashlib

    some_history(world)
    target = AuditEntry.objects.filter(action="approval.approve").get()
    forged = hashlib.sha256(b"anything an attacker can compute").hexdigest()
    intact, output = tamper_and_verify("UPDATE runs_auditentry SET data = %s, hash = %s WHERE id = %s", ['{"comment": "forged"}', forged, target.pk])
    assert not intact and "edited" in output


def test_verify_audit_detects_a_deleted_entry(world: World) -> None:
    victim = _middle(some_history(world))
    intact, output = tamper_and_verify("DELETE FROM runs_auditentry WHERE id = %s", [victim.pk])
    assert not intact and victim.scope in output and "deleted" in output


def test_verify_audit_detects_reordered_entries(world: World) -> None:
    second = _middle(some_history(world))
    third = AuditEntry.objects.get(scope=second.scope, seq=3)
    # Swap the positions of two entries (three statements: (scope, seq) is unique).
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE runs_auditentry SET seq = 1000000 WHERE id = %s", [second.pk])
        cursor.execute("UPDATE runs_auditentry SET seq = 2 WHERE id = %s", [third.pk])
        cursor.execute("UPDATE runs_auditentry SET seq = 3 WHERE id = %s", [second.pk])
    intact, output = verify()
    assert not intact and "reordered" in output


def test_verify_audit_detects_entries_cut_from_the_end(world: World) -> None:
    run = some_history(world)
    last = AuditEntry.objects.filter(scope=f"run:{run.pk}").order_by("-seq").first()
    intact, output = tamper_and_verify("DELETE FROM runs_auditentry WHERE id = %s", [last.pk])
    assert not intact and "cut from the end" in output


def test_verify_audit_detects_a_whole_chain_deleted(world: World) -> None:
    run = some_history(world)
    intact, output = tamper_and_verify("DELETE FROM runs_auditentry WHERE scope = %s", [f"run:{run.pk}"])
    assert not intact and f"run:{run.pk}" in output and "no entries" in output
    assert audit_verify(scope=f"run:{run.pk}").problems and audit_verify(scope="auth").ok


@pytest.mark.skipif(not POSTGRES, reason="the append-only triggers exist on PostgreSQL only")
def test_postgres_refuses_update_and_delete_of_audit_entries(world: World) -> None:
    some_history(world)
    entry = AuditEntry.objects.order_by("id").first()
    head = AuditChain.objects.get(scope=entry.scope)
    statements = [
        ("UPDATE runs_auditentry SET actor = 'x' WHERE id = %s", [entry.pk]),
        ("DELETE FROM runs_auditentry WHERE id = %s", [entry.pk]),
        ("DELETE FROM runs_auditchain WHERE id = %s", [head.pk]),
        ("UPDATE runs_auditchain SET seq = seq - 1 WHERE id = %s", [head.pk]),
    ]
    for sql, params in statements:
        with pytest.raises(DatabaseError, match="append-only|cannot be deleted|only advance"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            AuditEntry.objects.filter(pk=entry.pk).update(action="nothing")
    assert verify()[0]
