"""Audit retention for long-lived chains: the checkpoint a cut leaves (audit.chain.audit_cut_chain).
The append-only triggers already let a transaction that set ``ballast.audit_prune`` delete
entries (audit 0002); a cut deletes entries only, never a head."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0002_audit_tombstone"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("scope", models.CharField(max_length=100)),
                ("cut_seq", models.PositiveBigIntegerField()),
                ("cut_hash", models.CharField(max_length=64)),
                ("count", models.PositiveBigIntegerField()),
                ("prev", models.CharField(max_length=64)),
                ("cut_at", models.DateTimeField()),
                ("hash", models.CharField(max_length=64)),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("scope", "cut_seq"), name="auditcheckpoint_unique_cut")],
            },
        ),
    ]
