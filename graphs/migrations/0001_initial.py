"""Graph and GraphVersion move from the builder app into graphs: state only, the tables
``builder_graph``, ``builder_graphversion`` and the graph's many-to-many tables keep their
names and rows (runs 0018 and accounts 0003 point their foreign keys here, builder 0004
drops the models from the builder state). The content types are relabelled, so the
permissions granted on them and the admin's history follow the models."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("graph", "graphversion")


def _relabel(apps, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        # A type already under the new label (made by hand) keeps its place; the old one
        # then stays as it is, as remove_stale_contenttypes would find it.
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def move_content_types(apps, schema_editor):
    _relabel(apps, "builder", "graphs")


def restore_content_types(apps, schema_editor):
    _relabel(apps, "graphs", "builder")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("builder", "0003_graph_operators"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Graph",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("description", models.TextField(blank=True, default="")),
                        ("draft", models.JSONField(blank=True, default=dict)),
                        ("draft_revision", models.PositiveBigIntegerField(default=1)),
                        ("draft_updated_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "approvers",
                            models.ManyToManyField(blank=True, related_name="approvable_graphs", to=settings.AUTH_USER_MODEL),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "draft_updated_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        ("operator_groups", models.ManyToManyField(blank=True, related_name="operable_graphs", to="auth.group")),
                        (
                            "operators",
                            models.ManyToManyField(blank=True, related_name="operable_graphs", to=settings.AUTH_USER_MODEL),
                        ),
                    ],
                    options={"db_table": "builder_graph", "ordering": ["name"]},
                ),
                migrations.CreateModel(
                    name="GraphVersion",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("number", models.PositiveIntegerField()),
                        ("spec", models.JSONField()),
                        ("content_hash", models.CharField(max_length=64)),
                        ("message", models.CharField(blank=True, default="", max_length=500)),
                        ("is_test", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "graph",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="versions", to="graphs.graph"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "builder_graphversion",
                        "ordering": ["graph", "-number"],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("is_test", False)), fields=("graph", "number"), name="graphversion_unique_number"
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("is_test", False)),
                                fields=("graph", "content_hash"),
                                name="graphversion_unique_content",
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("is_test", True)),
                                fields=("graph", "content_hash"),
                                name="graphversion_unique_test_content",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, restore_content_types),
    ]
