"""AuditEntry and AuditChain moved from runs to the audit app (audit 0001, runs 0019):
a database with chains written under the old layout migrates without losing or changing an
entry, its chains still verify and keep growing, the content types (and the permissions
granted on them) follow the models, and the move reverses."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from audit.chain import GENESIS, audit, audit_verify, entry_hash
from audit.models import AuditChain, AuditEntry
from tests.support.migrations import latest, migrate, migrate_to, models_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

# Before the move: runs with the audit models (its latest migration before 0019), no audit app.
BEFORE = [("runs", "0017_host_heartbeats"), ("audit", None)]
MODELS = ("auditentry", "auditchain")


def _old_chains(old) -> dict[str, list[str]]:
    """Write three chains through the old state's models, hashed as the old writer hashed
    them (audit.chain.entry_hash is that function, unchanged: test_audit_app checks it
    against vectors computed by the old module). Returns each chain's hashes in order."""
    Entry = old.get_model("runs", "AuditEntry")
    Chain = old.get_model("runs", "AuditChain")
    assert (Entry._meta.db_table, Chain._meta.db_table) == ("runs_auditentry", "runs_auditchain")
    start = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    chains: dict[str, list[str]] = {}
    rows = [
        ("run:5", "worker", "host:1:2", "run.start", "run", "5", {"graph_version": 1}),
        ("auth", "anonymous", "ada", "auth.login_failed", "", "", {"ip": "10.0.0.1", "path": "/admin/login/"}),
        ("run:5", "token", "ada", "run.cancel", "run", "5", {"token": "bal_ab12cd34", "reason": "é ☃"}),
        ("user:7", "operator", "operator", "token.create", "apitoken", "3", {"prefix": "bal_ab12cd34"}),
        ("auth", "anonymous", "bal_wrong", "auth.login_failed", "", "", {"via": "token", "n": [1, 2.5, None]}),
        ("run:5", "system", "system", "step.deadline", "step", "9", {}),
    ]
    for i, (scope, actor_type, actor, action, object_type, object_id, data) in enumerate(rows):
        hashes = chains.setdefault(scope, [])
        fields = dict(
            scope=scope, seq=len(hashes) + 1, prev_hash=hashes[-1] if hashes else GENESIS, actor_type=actor_type, actor=actor,
            action=action, object_type=object_type, object_id=object_id, data=data, created_at=start + timedelta(seconds=i),
        )
        digest = entry_hash(**fields)
        Entry.objects.create(**fields, hash=digest)
        hashes.append(digest)
    for scope, hashes in chains.items():
        Chain.objects.create(scope=scope, seq=len(hashes), hash=hashes[-1])
    return chains


def test_entries_chains_and_content_types_survive_the_move_to_audit():
    old = migrate_to(BEFORE)
    try:
        chains = _old_chains(old)
        entries = list(old.get_model("runs", "AuditEntry").objects.order_by("id").values_list("id", "scope", "seq", "hash"))
        # The content types and a permission granted on one, as an existing install has them.
        OldType = old.get_model("contenttypes", "ContentType")
        OldType.objects.filter(app_label="audit", model__in=MODELS).delete()
        old_types = {m: OldType.objects.get_or_create(app_label="runs", model=m)[0].pk for m in MODELS}
        Permission = old.get_model("auth", "Permission")
        permission, _ = Permission.objects.get_or_create(
            content_type_id=old_types["auditentry"], codename="view_auditentry", defaults={"name": "Can view audit entry"}
        )
        group = old.get_model("auth", "Group").objects.create(name="auditors")
        group.permissions.add(permission)
    finally:
        new = migrate_to(latest())

    # The rows are the rows they were, read through the moved models.
    assert AuditEntry._meta.db_table == "runs_auditentry" and AuditChain._meta.db_table == "runs_auditchain"
    assert list(AuditEntry.objects.order_by("id").values_list("id", "scope", "seq", "hash")) == entries
    assert {c.scope: (c.seq, c.hash) for c in AuditChain.objects.all()} == {s: (len(h), h[-1]) for s, h in chains.items()}
    report = audit_verify()
    assert report.ok, [str(p) for p in report.problems]
    assert (report.entries, report.chains) == (6, 3)

    # The content types moved (same rows, same ids): the permission granted follows.
    ContentType.objects.clear_cache()
    assert {m: ContentType.objects.get_for_model(model).pk for m, model in (("auditentry", AuditEntry), ("auditchain", AuditChain))} == old_types
    assert not ContentType.objects.filter(app_label="runs", model__in=MODELS).exists()
    granted = new.get_model("auth", "Group").objects.get(name="auditors").permissions.get()
    assert (granted.content_type.app_label, granted.codename) == ("audit", "view_auditentry")

    # The chains go on where they stopped.
    entry = audit("bal_again", "auth.login_failed", None, actor_type="anonymous")
    assert (entry.scope, entry.seq, entry.prev_hash) == ("auth", 3, chains["auth"][-1])
    assert audit_verify().ok


def test_the_move_reverses():
    migrate(BEFORE)
    try:
        old = models_at(BEFORE)
        assert old.get_model("runs", "AuditEntry")._meta.db_table == "runs_auditentry"
        assert old.get_model("runs", "AuditChain")._meta.db_table == "runs_auditchain"
        with pytest.raises(LookupError):
            old.get_model("audit", "AuditEntry")
        # Back under runs, the content types are runs' again.
        types = old.get_model("contenttypes", "ContentType").objects
        assert not types.filter(app_label="audit", model__in=MODELS).exists()
        assert set(types.filter(app_label="runs", model__in=MODELS).values_list("model", flat=True)) == set(MODELS)
        chains = _old_chains(old)
    finally:
        new = migrate_to(latest())
    assert new.get_model("audit", "AuditEntry")._meta.db_table == "runs_auditentry"
    assert set(ContentType.objects.filter(app_label="audit", model__in=MODELS).values_list("model", flat=True)) == set(MODELS)
    assert audit_verify().ok and AuditChain.objects.get(scope="run:5").hash == chains["run:5"][-1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the append-only triggers exist on PostgreSQL only")
def test_the_append_only_triggers_stay_on_the_moved_tables():
    # The move renamed nothing in the database: runs 0002's triggers still guard the tables.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal AND tgrelid::regclass::text IN ('runs_auditentry', 'runs_auditchain') ORDER BY 1"
        )
        assert cursor.fetchall() == [("runs_auditchain", "runs_auditchain_forward_only"), ("runs_auditentry", "runs_auditentry_append_only")]
