"""Per-run event sequence numbers: RunEventCounter (the counter, a row per run) and
RunEvent.seq, numbered 1..n per run in id order for the events already written, then unique per run."""
import django.db.models.deletion
from django.db import migrations, models


def number_events(apps, schema_editor):
    # id order is the order the events were written (and committed: writers of one run
    # serialised on its row lock), so numbering by id keeps every existing cursor's meaning.
    RunEvent = apps.get_model("runs", "RunEvent")
    RunEventCounter = apps.get_model("runs", "RunEventCounter")
    counts: dict[int, int] = {}
    batch = []
    for pk, run_id in RunEvent.objects.order_by("run_id", "id").values_list("pk", "run_id").iterator(chunk_size=2000):
        counts[run_id] = counts.get(run_id, 0) + 1
        batch.append(RunEvent(pk=pk, seq=counts[run_id]))
        if len(batch) >= 2000:
            RunEvent.objects.bulk_update(batch, ["seq"])
            batch = []
    if batch:
        RunEvent.objects.bulk_update(batch, ["seq"])
    RunEventCounter.objects.bulk_create([RunEventCounter(run_id=run_id, last=n) for run_id, n in counts.items()], batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [("runs", "0011_state_per_key")]

    operations = [
        migrations.CreateModel(
            name="RunEventCounter",
            fields=[
                ("run", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="+", serialize=False, to="runs.run")),
                ("last", models.PositiveBigIntegerField(default=0)),
            ],
        ),
        migrations.AddField(model_name="runevent", name="seq", field=models.PositiveBigIntegerField(default=0), preserve_default=False),
        migrations.RunPython(number_events, migrations.RunPython.noop),
        migrations.AddConstraint(model_name="runevent", constraint=models.UniqueConstraint(fields=("run", "seq"), name="runevent_run_seq")),
    ]
