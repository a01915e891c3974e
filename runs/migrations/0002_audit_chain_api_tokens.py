"""Audit hash chains (scope, seq, prev_hash, hash + chain heads), API tokens, and on
PostgreSQL the triggers that make the audit table append-only.

Existing audit rows (written before chains existed) are chained, in id order, into the
``legacy`` scope before the unique constraint and the triggers arrive.
"""
import hashlib
import hmac
import json
from datetime import UTC

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

# Frozen copy of the audit writer's hashing as it was when this migration was written
# (then runs.engine.audit, now audit.chain): history replays with the code it was written
# against, whatever becomes of the writer. Both hash the same content the same way.
GENESIS = "0" * 64


def _key():
    secret = getattr(settings, "BALLAST_AUDIT_KEY", None) or settings.SECRET_KEY
    return hashlib.sha256(b"ballast-audit:" + str(secret).encode()).digest()


def _timestamp(value):
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def entry_hash(*, scope, seq, prev_hash, actor_type, actor, action, object_type, object_id, data, created_at):
    content = _canonical([scope, seq, prev_hash, actor_type, actor, action, object_type, object_id, data, _timestamp(created_at)])
    return hmac.new(_key(), content.encode(), hashlib.sha256).hexdigest()


APPEND_ONLY_SQL = """
CREATE OR REPLACE FUNCTION ballast_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'runs_auditentry is append-only: % refused', TG_OP;
END
$$;
DROP TRIGGER IF EXISTS runs_auditentry_append_only ON runs_auditentry;
CREATE TRIGGER runs_auditentry_append_only BEFORE UPDATE OR DELETE ON runs_auditentry
    FOR EACH ROW EXECUTE FUNCTION ballast_audit_append_only();

CREATE OR REPLACE FUNCTION ballast_audit_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'runs_auditchain heads cannot be deleted';
    END IF;
    IF NEW.scope <> OLD.scope OR NEW.seq <> OLD.seq + 1 THEN
        RAISE EXCEPTION 'runs_auditchain head % may only advance by one entry', OLD.scope;
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS runs_auditchain_forward_only ON runs_auditchain;
CREATE TRIGGER runs_auditchain_forward_only BEFORE UPDATE OR DELETE ON runs_auditchain
    FOR EACH ROW EXECUTE FUNCTION ballast_audit_head_forward_only();
"""

DROP_SQL = """
DROP TRIGGER IF EXISTS runs_auditentry_append_only ON runs_auditentry;
DROP FUNCTION IF EXISTS ballast_audit_append_only();
DROP TRIGGER IF EXISTS runs_auditchain_forward_only ON runs_auditchain;
DROP FUNCTION IF EXISTS ballast_audit_head_forward_only();
"""


def chain_existing_entries(apps, schema_editor):
    AuditEntry = apps.get_model("runs", "AuditEntry")
    AuditChain = apps.get_model("runs", "AuditChain")
    prev, seq = GENESIS, 0
    for e in AuditEntry.objects.order_by("id"):
        seq += 1
        e.scope, e.seq, e.prev_hash = "legacy", seq, prev
        e.hash = entry_hash(
            scope=e.scope, seq=e.seq, prev_hash=prev, actor_type=e.actor_type, actor=e.actor, action=e.action,
            object_type=e.object_type, object_id=e.object_id, data=e.data, created_at=e.created_at,
        )
        e.save(update_fields=["scope", "seq", "prev_hash", "hash"])
        prev = e.hash
    if seq:
        AuditChain.objects.create(scope="legacy", seq=seq, hash=prev)


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY_SQL, params=None)  # None: the SQL has literal % signs


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_SQL, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditChain",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("scope", models.CharField(max_length=100, unique=True)),
                ("seq", models.PositiveBigIntegerField(default=0)),
                ("hash", models.CharField(default="", max_length=64)),
            ],
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
        ),
        migrations.AddField(model_name="auditentry", name="scope", field=models.CharField(default="legacy", max_length=100), preserve_default=False),
        migrations.AddField(model_name="auditentry", name="seq", field=models.PositiveBigIntegerField(default=0), preserve_default=False),
        migrations.AddField(model_name="auditentry", name="prev_hash", field=models.CharField(default="", max_length=64), preserve_default=False),
        migrations.AddField(model_name="auditentry", name="hash", field=models.CharField(default="", max_length=64), preserve_default=False),
        migrations.RunPython(chain_existing_entries, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="auditentry",
            constraint=models.UniqueConstraint(fields=("scope", "seq"), name="auditentry_unique_seq"),
        ),
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                ("prefix", models.CharField(db_index=True, editable=False, max_length=16)),
                ("key_hash", models.CharField(editable=False, max_length=64, unique=True)),
                ("created_by_name", models.CharField(blank=True, default="", editable=False, max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("last_used_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("revoked_by_name", models.CharField(blank=True, default="", editable=False, max_length=200)),
                (
                    "user",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="api_tokens", to=settings.AUTH_USER_MODEL),
                ),
            ],
            options={"verbose_name": "API token", "ordering": ["-id"]},
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
