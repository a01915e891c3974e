"""Graph and GraphVersion moved from builder to graphs: a database made under the old layout
(graphs, versions, test snapshots, runs, run alerts, who may approve and operate, the
permissions granted on the models and the admin's history of them) migrates without losing
a row, a foreign key or a content type, keeps working for the builder and the engine, and
migrates back."""
from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from accounts.models import RunAlertSubscription
from builder.services import graph_import
from graphs.models import Graph, GraphVersion
from graphs.spec import GraphSpec, content_hash
from runs.models import Run, RunStatus
from tests.support.migrations import applied_models, latest, migrate
from tests.support.specs import chain, node, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

# Unapplying graphs 0001 unapplies everything that depends on it (runs 0018, accounts
# 0003, builder 0004 and whatever came after them): the database as the old code left it.
BEFORE = [("graphs", None)]
TABLES = {"builder_graph", "builder_graphversion", "builder_graph_approvers", "builder_graph_operators", "builder_graph_operator_groups"}


def _spec(name: str, value: str = "1") -> dict[str, Any]:
    """A valid spec in its stored (normalised) form."""
    raw = {"name": name, "nodes": [node("start", "start"), transform("calc", y=value), node("end", "end")], "edges": chain("start", "calc", "end")}
    return GraphSpec.model_validate(raw).model_dump(mode="json", exclude_none=False)


def _old_database(old: Any) -> dict[str, Any]:
    """Rows as the pre-move code wrote them, through the historical models."""
    User = old.get_model("auth", "User")
    Group = old.get_model("auth", "Group")
    Permission = old.get_model("auth", "Permission")
    ContentType = old.get_model("contenttypes", "ContentType")
    OldGraph = old.get_model("builder", "Graph")
    OldVersion = old.get_model("builder", "GraphVersion")
    OldRun = old.get_model("runs", "Run")
    OldAlert = old.get_model("accounts", "RunAlertSubscription")
    OldLogEntry = old.get_model("admin", "LogEntry")

    alice = User.objects.create(username="alice", is_active=True)
    bob = User.objects.create(username="bob", is_active=True)
    ops = Group.objects.create(name="refund-ops")
    editors = Group.objects.create(name="graph-editors")
    spec = _spec("refunds")
    graph = OldGraph.objects.create(name="refunds", description="moves", draft=spec, draft_revision=3, created_by=alice, draft_updated_by=bob)
    graph.approvers.add(alice)
    graph.operators.add(bob)
    graph.operator_groups.add(ops)
    v1 = OldVersion.objects.create(graph=graph, number=1, spec=spec, content_hash=content_hash(spec), message="first", created_by=alice)
    snapshot_spec = _spec("refunds", "2")
    snapshot = OldVersion.objects.create(graph=graph, number=0, spec=snapshot_spec, content_hash=content_hash(snapshot_spec), is_test=True)
    run = OldRun.objects.create(graph_version=v1, status="succeeded", input={"a": 1}, created_by=bob)
    test_run = OldRun.objects.create(graph_version=snapshot, is_test=True, created_by=alice)
    alert = OldAlert.objects.create(user=alice, graph=graph)

    # The content types and grants on them, as an install that ran the old code has them
    # (the test database was made by the new code: unapplying graphs 0001 relabelled its types back).
    graph_type = ContentType.objects.get(app_label="builder", model="graph")
    version_type = ContentType.objects.get(app_label="builder", model="graphversion")
    assert not ContentType.objects.filter(app_label="graphs").exists()
    change_graph, _ = Permission.objects.get_or_create(content_type=graph_type, codename="change_graph", defaults={"name": "Can change graph"})
    view_version, _ = Permission.objects.get_or_create(
        content_type=version_type, codename="view_graphversion", defaults={"name": "Can view graph version"}
    )
    editors.permissions.add(change_graph)
    bob.groups.add(editors)
    alice.user_permissions.add(view_version)
    entry = OldLogEntry.objects.create(
        user=alice, content_type=graph_type, object_id=str(graph.pk), object_repr="refunds", action_flag=CHANGE, change_message="[]"
    )
    return {
        "graph": graph.pk, "v1": v1.pk, "snapshot": snapshot.pk, "run": run.pk, "test_run": test_run.pk, "alert": alert.pk,
        "graph_type": graph_type.pk, "version_type": version_type.pk, "entry": entry.pk, "spec": spec,
    }


def test_graphs_versions_runs_and_content_types_survive_the_move() -> None:
    migrate(BEFORE)
    old = applied_models()  # BEFORE names only graphs: every other app stands where its absence leaves it
    try:
        assert old.get_model("runs", "Run")._meta.get_field("graph_version").related_model._meta.label == "builder.GraphVersion"
        made = _old_database(old)
    finally:
        migrate(latest())
    ContentType.objects.clear_cache()

    # The tables are the old ones, and no new one was made.
    assert (Graph._meta.db_table, GraphVersion._meta.db_table) == ("builder_graph", "builder_graphversion")
    tables = set(connection.introspection.table_names())
    assert TABLES <= tables and not {t for t in tables if t.startswith("graphs_")}

    graph = Graph.objects.get(pk=made["graph"])
    assert (graph.name, graph.description, graph.draft, graph.draft_revision) == ("refunds", "moves", made["spec"], 3)
    assert (graph.created_by.username, graph.draft_updated_by.username) == ("alice", "bob")
    assert [u.username for u in graph.approvers.all()] == ["alice"]
    assert [u.username for u in graph.operators.all()] == ["bob"]
    assert [g.name for g in graph.operator_groups.all()] == ["refund-ops"]
    versions = {v.pk: (v.number, v.is_test, v.message) for v in graph.versions.all()}
    assert versions == {made["v1"]: (1, False, "first"), made["snapshot"]: (0, True, "")}
    assert graph.latest_version().pk == made["v1"]

    # Foreign keys from the other apps reach the same rows through the moved models.
    run = Run.objects.select_related("graph_version__graph").get(pk=made["run"])
    assert (run.graph_version_id, run.graph_version.graph.name, run.status, run.input) == (made["v1"], "refunds", RunStatus.SUCCEEDED, {"a": 1})
    assert Run.objects.get(pk=made["test_run"]).graph_version_id == made["snapshot"]
    assert sorted(GraphVersion.objects.get(pk=made["v1"]).runs.values_list("pk", flat=True)) == [made["run"]]
    assert RunAlertSubscription.objects.get(pk=made["alert"]).graph_id == graph.pk
    assert list(graph.run_alerts.values_list("user__username", flat=True)) == ["alice"]

    # The content types were relabelled in place (same ids): permissions and the admin's history follow.
    assert ContentType.objects.get_for_model(Graph).pk == made["graph_type"]
    assert ContentType.objects.get_for_model(GraphVersion).pk == made["version_type"]
    assert not ContentType.objects.filter(app_label="builder", model__in=["graph", "graphversion"]).exists()
    User = get_user_model()
    assert User.objects.get(username="bob").has_perm("graphs.change_graph")
    assert User.objects.get(username="alice").has_perm("graphs.view_graphversion")
    assert Permission.objects.filter(content_type_id=made["graph_type"], codename="change_graph").count() == 1
    assert LogEntry.objects.get(pk=made["entry"]).get_edited_object() == graph

    # The builder and the engine work on the migrated rows: an equal import is the same
    # version, a changed one the next number, and a run of the old version runs.
    assert graph_import(spec=made["spec"]).version.pk == made["v1"]
    assert graph_import(spec=_spec("refunds", "3")).version.number == 2
    finished = run_local(GraphVersion.objects.get(pk=made["v1"]))
    assert finished.status == RunStatus.SUCCEEDED and finished.graph_version_id == made["v1"]


def test_the_move_reverses() -> None:
    graph = graph_import(spec=_spec("reversible")).version.graph
    ContentType.objects.get_for_model(Graph)  # the type exists, as after any migrate
    graph_type = ContentType.objects.get(app_label="graphs", model="graph").pk
    migrate(BEFORE)
    old = applied_models()
    try:
        OldGraph = old.get_model("builder", "Graph")
        assert OldGraph._meta.db_table == "builder_graph"
        assert list(OldGraph.objects.values_list("name", flat=True)) == ["reversible"]
        with pytest.raises(LookupError):
            old.get_model("graphs", "Graph")
        OldContentType = old.get_model("contenttypes", "ContentType")
        assert OldContentType.objects.get(app_label="builder", model="graph").pk == graph_type
        assert not OldContentType.objects.filter(app_label="graphs").exists()
    finally:
        migrate(latest())
        new = applied_models()
    ContentType.objects.clear_cache()
    assert new.get_model("graphs", "Graph").objects.get().pk == graph.pk
    assert ContentType.objects.get_for_model(Graph).pk == graph_type
