"""ApiToken moves from the runs app into accounts: state only, the table ``runs_apitoken``
and its rows stay as they are (runs 0007 drops the model from the runs state)."""
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    # Permissions granted on API tokens hang off the content type: relabel it rather than
    # leave the grants on a type no model has any more.
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="accounts", model="apitoken").exists():
        ContentType.objects.filter(app_label="runs", model="apitoken").update(app_label="accounts")


def restore_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="runs", model="apitoken").exists():
        ContentType.objects.filter(app_label="accounts", model="apitoken").update(app_label="runs")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("runs", "0004_cost_precision"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
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
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"verbose_name": "API token", "ordering": ["-id"], "db_table": "runs_apitoken"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, restore_content_type),
    ]
