"""ApiToken now belongs to the accounts app (accounts 0001): drop it from the runs state
only; the table ``runs_apitoken`` and its rows are kept and used by accounts."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_provider_credential"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
