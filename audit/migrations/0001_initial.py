"""AuditEntry and AuditChain move from the runs app into audit: state only, the tables
``runs_auditentry`` and ``runs_auditchain``, their rows, indexes, constraint and (on
PostgreSQL) triggers stay as they are (runs 0019 drops the models from the runs state).
The content types move with the models, so permissions granted on them and admin log
entries that name them follow."""
import django.utils.timezone
from django.db import migrations, models

MODELS = ("auditentry", "auditchain")


def move_content_types(apps, schema_editor):
    _relabel(apps, "runs", "audit")


def restore_content_types(apps, schema_editor):
    _relabel(apps, "audit", "runs")


def _relabel(apps, old, new):
    # A type already under the new label (made by a migrate that ran before this one) is
    # left alone rather than collide with the unique (app_label, model).
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        # The migration that gave the tables their present shape (no later one touches them).
        ("runs", "0002_audit_chain_api_tokens"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("actor_type", models.CharField(max_length=16)),
                        ("actor", models.CharField(max_length=200)),
                        ("action", models.CharField(db_index=True, max_length=64)),
                        ("object_type", models.CharField(max_length=64)),
                        ("object_id", models.CharField(max_length=64)),
                        ("data", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ("scope", models.CharField(max_length=100)),
                        ("seq", models.PositiveBigIntegerField()),
                        ("prev_hash", models.CharField(max_length=64)),
                        ("hash", models.CharField(max_length=64)),
                    ],
                    options={
                        "db_table": "runs_auditentry",
                        "ordering": ["id"],
                        "verbose_name_plural": "audit entries",
                        "constraints": [models.UniqueConstraint(fields=("scope", "seq"), name="auditentry_unique_seq")],
                    },
                ),
                migrations.CreateModel(
                    name="AuditChain",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("scope", models.CharField(max_length=100, unique=True)),
                        ("seq", models.PositiveBigIntegerField(default=0)),
                        ("hash", models.CharField(default="", max_length=64)),
                    ],
                    options={"db_table": "runs_auditchain"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, restore_content_types),
    ]
