"""Step.due_at: when a pending step became claimable; doorbells claim the oldest first."""

from django.db import migrations, models
from django.db.models import F
from django.db.models.functions import Coalesce


def backfill(apps, schema_editor):
    # Pending steps already handed to the queue become claimable in the order they were
    # released (a retry's backoff end, else the hand-off, else creation).
    Step = apps.get_model("runs", "Step")
    Step.objects.filter(status="pending", dispatched_at__isnull=False).update(
        due_at=Coalesce(F("available_at"), F("dispatched_at"), F("created_at"))
    )


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_run_state_sizes'),
    ]

    operations = [
        migrations.AddField(
            model_name='step',
            name='due_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='step',
            index=models.Index(fields=['status', 'due_at'], name='step_status_due'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
