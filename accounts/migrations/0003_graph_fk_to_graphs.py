"""A run alert's graph is now graphs.Graph (graphs 0001): state only, the column and its
foreign key still point at the same table, ``builder_graph``."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_run_alert_subscription"),
        ("graphs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="runalertsubscription",
                    name="graph",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="run_alerts", to="graphs.graph"),
                ),
            ],
            database_operations=[],
        ),
    ]
