from django.db import migrations, models


def mark_running_attempts(apps, schema_editor):
    # A step running when this migrates was started by code that marked nothing: count
    # its attempt as begun, so recovery keeps parking it if it is not safe to repeat.
    Step = apps.get_model("runs", "Step")
    Step.objects.filter(status="running").update(effect_attempt=models.F("attempt"))


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0015_drop_fk_indexes_covered_by_composites"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="effect_attempt",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(mark_running_attempts, migrations.RunPython.noop),
    ]
