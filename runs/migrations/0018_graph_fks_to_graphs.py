"""A run's graph version is now graphs.GraphVersion (graphs 0001): state only, the column
and its foreign key still point at the same table, ``builder_graphversion``."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0001_initial"),
        ("runs", "0017_host_heartbeats"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="graph_version",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="runs", to="graphs.graphversion"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
