"""Run list indexes (runlist branch): keyset pages by status, graph version and starter
(run_status_id, run_version_id, run_starter_id), and on PostgreSQL a trigram index on the
input's JSON text so the list's input search (runs.selectors.RunFilter.search_q, an
``UPPER(input::text) LIKE``) does not read every run."""
from django.conf import settings
from django.db import migrations, models

TRGM_INDEX = "run_input_text_trgm"


def add_trigram_index(apps, schema_editor):
    # PostgreSQL only; pg_trgm is a trusted extension (PG 13+): a database owner may create it.
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {TRGM_INDEX} ON runs_run USING gin ((UPPER(("input")::text)) gin_trgm_ops)')


def drop_trigram_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {TRGM_INDEX}")


class Migration(migrations.Migration):

    dependencies = [
        ("builder", "0003_graph_operators"),
        ("runs", "0013_deadlines"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(model_name="run", index=models.Index(fields=["status", "-id"], name="run_status_id")),
        migrations.AddIndex(model_name="run", index=models.Index(fields=["graph_version", "-id"], name="run_version_id")),
        migrations.AddIndex(model_name="run", index=models.Index(fields=["created_by", "-id"], name="run_starter_id")),
        migrations.RunPython(add_trigram_index, drop_trigram_index),
    ]
