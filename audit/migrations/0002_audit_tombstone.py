"""Audit retention: the tombstone of a pruned chain, and on PostgreSQL the append-only
triggers (runs 0002) let a prune delete a whole chain: only inside a transaction that set
``ballast.audit_prune`` (audit.chain.audit_prune_chains does, with SET LOCAL semantics),
never an UPDATE. Anyone who can run SQL could drop the trigger anyway; it stops the
application's own writes from rewriting history by mistake, which it still does."""
from django.db import migrations, models

PRUNABLE_SQL = """
CREATE OR REPLACE FUNCTION ballast_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('ballast.audit_prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'runs_auditentry is append-only: % refused', TG_OP;
END
$$;

CREATE OR REPLACE FUNCTION ballast_audit_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('ballast.audit_prune', true) = 'on' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'runs_auditchain heads cannot be deleted';
    END IF;
    IF NEW.scope <> OLD.scope OR NEW.seq <> OLD.seq + 1 THEN
        RAISE EXCEPTION 'runs_auditchain head % may only advance by one entry', OLD.scope;
    END IF;
    RETURN NEW;
END
$$;
"""

STRICT_SQL = """
CREATE OR REPLACE FUNCTION ballast_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'runs_auditentry is append-only: % refused', TG_OP;
END
$$;

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
"""


def prunable(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PRUNABLE_SQL, params=None)  # None: the SQL has literal % signs


def strict(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(STRICT_SQL, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditTombstone",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("scope", models.CharField(max_length=100, unique=True)),
                ("last_seq", models.PositiveBigIntegerField()),
                ("last_hash", models.CharField(max_length=64)),
                ("count", models.PositiveBigIntegerField()),
                ("pruned_at", models.DateTimeField()),
                ("hash", models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(prunable, strict),
    ]
