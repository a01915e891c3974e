"""Host heartbeats: one row per worker host, beaten by its qcluster main process on the database clock."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_step_effect_attempt"),
    ]

    operations = [
        migrations.CreateModel(
            name="HostHeartbeat",
            fields=[
                ("host", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("beat_at", models.DateTimeField()),
                ("up_since", models.DateTimeField()),
            ],
        ),
    ]
