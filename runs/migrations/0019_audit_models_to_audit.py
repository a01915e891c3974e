"""AuditEntry and AuditChain now belong to the audit app (audit 0001): drop them from the
runs state only; the tables ``runs_auditentry`` and ``runs_auditchain`` and their rows are
kept and used by audit."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0018_graph_fks_to_graphs"),
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="AuditEntry"),
                migrations.DeleteModel(name="AuditChain"),
            ],
            database_operations=[],
        ),
    ]
