"""Run state kept per key (RunStateKey, one row per version of a key) instead of one JSON column.

Each run's current state becomes version ``run.version`` of each of its keys, with the
contributions of order-sensitive reducers moved out of ``Run.scheduler`` into those keys'
rows; steps committed before keep ``state_seq`` None (their state is replayed from their
writes). Reversible: the state column is filled back from the latest versions.
"""

import json

import django.db.models.deletion
from django.db import migrations, models


def _size(value):
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def split_state(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    RunStateKey = apps.get_model("runs", "RunStateKey")
    for run in Run.objects.only("id", "version", "state", "scheduler").iterator(chunk_size=200):
        book = dict(run.scheduler or {})
        contrib = book.pop("contrib", None) or {}
        rows = [
            RunStateKey(run_id=run.pk, key=key, seq=run.version, value=value, size=_size(value), contrib=contrib.get(key))
            for key, value in (run.state or {}).items()
        ]
        RunStateKey.objects.bulk_create(rows, batch_size=500)
        if "contrib" in (run.scheduler or {}):
            Run.objects.filter(pk=run.pk).update(scheduler=book)


def join_state(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    RunStateKey = apps.get_model("runs", "RunStateKey")
    for run in Run.objects.only("id", "scheduler").iterator(chunk_size=200):
        state, contrib = {}, {}
        for row in RunStateKey.objects.filter(run_id=run.pk).order_by("key", "seq"):
            state[row.key] = row.value  # the last version of each key wins
            if row.contrib is not None:
                contrib[row.key] = row.contrib
            else:
                contrib.pop(row.key, None)
        book = dict(run.scheduler or {})
        if contrib:
            book["contrib"] = contrib
        Run.objects.filter(pk=run.pk).update(state=state, scheduler=book)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0010_step_due_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='step',
            name='state_seq',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='RunStateKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.TextField()),
                ('seq', models.PositiveBigIntegerField()),
                ('value', models.JSONField(blank=True, null=True)),
                ('size', models.PositiveIntegerField(default=0)),
                ('contrib', models.JSONField(blank=True, null=True)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='state_keys', to='runs.run')),
            ],
            options={
                'indexes': [models.Index(fields=['run', 'seq'], name='runstatekey_run_seq')],
                'constraints': [models.UniqueConstraint(fields=('run', 'key', 'seq'), name='runstatekey_unique_version')],
            },
        ),
        migrations.RunPython(split_state, join_state),
        migrations.RemoveField(
            model_name='run',
            name='state',
        ),
    ]
