"""Drop four foreign-key indexes whose column already leads a composite index (issue 11
item 5: fewer index entries per node commit): runs_step.run_id (step_unique_iteration,
step_run_status), runs_stepattempt.step_id (stepattempt_unique_number),
runs_runevent.run_id (runevent_run_cursor, runevent_run_seq) and runs_runstatekey.run_id
(runstatekey_unique_version, runstatekey_run_seq). A sequential node commit inserts a
step, updates one (never HOT: status is indexed), inserts an attempt and three events:
six index entries fewer per node.

Only the indexes are dropped (``DROP INDEX``, the same name on both databases): Django's
own AlterField would drop and re-add each foreign key on PostgreSQL, validating every
row of four large tables under lock, and rebuild the tables on SQLite."""
from django.db import migrations, models

# (model, field, table, column, Django's index name for that field)
DROPPED = [
    ("runevent", "run", "runs_runevent", "run_id", "runs_runevent_run_id_8bd13aa7"),
    ("runstatekey", "run", "runs_runstatekey", "run_id", "runs_runstatekey_run_id_ed7f30d7"),
    ("step", "run", "runs_step", "run_id", "runs_step_run_id_2764751d"),
    ("stepattempt", "step", "runs_stepattempt", "step_id", "runs_stepattempt_step_id_1b9966ea"),
]
TARGETS = {"run": "runs.run", "step": "runs.step"}
RELATED = {"runevent": "events", "runstatekey": "state_keys", "step": "steps", "stepattempt": "attempts"}


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_run_list_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}")',
                )
                for _, _, table, column, index in DROPPED
            ],
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name=field,
                    field=models.ForeignKey(
                        db_index=False, on_delete=models.deletion.CASCADE, related_name=RELATED[model], to=TARGETS[field]
                    ),
                )
                for model, field, _, _, _ in DROPPED
            ],
        ),
    ]
