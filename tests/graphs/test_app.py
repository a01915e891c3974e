"""The graphs app owns the graph format: its models keep the builder's old tables, and its
content types, permissions and model labels are graphs'."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

from graphs.models import Graph, GraphVersion


def test_the_models_belong_to_graphs_and_keep_their_tables() -> None:
    assert apps.get_model("graphs", "Graph") is Graph and apps.get_model("graphs", "GraphVersion") is GraphVersion
    assert (Graph._meta.label, GraphVersion._meta.label) == ("graphs.Graph", "graphs.GraphVersion")
    assert (Graph._meta.db_table, GraphVersion._meta.db_table) == ("builder_graph", "builder_graphversion")
    through = {f.name: f.remote_field.through._meta.db_table for f in Graph._meta.many_to_many}
    assert through == {"approvers": "builder_graph_approvers", "operators": "builder_graph_operators",
                       "operator_groups": "builder_graph_operator_groups"}
    assert not [m for m in apps.get_app_config("builder").get_models()]
    # Every foreign key to them elsewhere names the graphs models.
    related = sorted(f.related_model._meta.label for f in apps.get_model("runs", "Run")._meta.fields if f.name == "graph_version")
    related += [apps.get_model("accounts", "RunAlertSubscription")._meta.get_field("graph").related_model._meta.label]
    assert related == ["graphs.GraphVersion", "graphs.Graph"]


@pytest.mark.django_db
def test_permissions_are_named_after_graphs() -> None:
    graph_type = ContentType.objects.get_for_model(Graph)
    assert (graph_type.app_label, graph_type.model) == ("graphs", "graph")
    user = get_user_model().objects.create_user("editor")
    user.user_permissions.add(Permission.objects.get(content_type=graph_type, codename="change_graph"))
    user = get_user_model().objects.get(pk=user.pk)
    assert user.has_perm("graphs.change_graph") and not user.has_perm("builder.change_graph")
