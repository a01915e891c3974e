"""Graph and GraphVersion now belong to the graphs app (graphs 0001): drop them from the
builder state only, once every foreign key points at graphs (runs 0018, accounts 0003);
the tables and their rows stay and are used by graphs."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("builder", "0003_graph_operators"),
        ("graphs", "0001_initial"),
        ("runs", "0018_graph_fks_to_graphs"),
        ("accounts", "0003_graph_fk_to_graphs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="GraphVersion"),
                migrations.DeleteModel(name="Graph"),
            ],
            database_operations=[],
        ),
    ]
