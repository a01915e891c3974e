"""Importing a graph file (the CLI's run_graph, the API's and browser's import, load_examples)
publishes it and never throws away a draft's unpublished edits: the draft follows the import
only when it holds nothing a published version does not."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.services import draft_has_unpublished_edits, graph_draft_save, graph_import
from graphs.models import Graph, GraphVersion
from tests.support.cluster import REPO_ROOT, test_database_url
from tests.support.specs import chain, graph, node, transform

pytestmark = pytest.mark.django_db


def spec_v1() -> dict:
    return graph([node("start", "start"), transform("t", x="1"), node("end", "end")], chain("start", "t", "end"))


def with_note(spec: dict) -> dict:
    edited = copy.deepcopy(spec)
    edited["notes"] = [{"id": "n1", "text": "ask legal about refunds over $100", "position": {"x": 0, "y": 200}}]
    return edited


def test_a_new_graph_and_an_unedited_draft_follow_the_import() -> None:
    spec = spec_v1()
    first = graph_import(spec=spec)
    graph_row = first.version.graph
    assert not first.draft_kept and first.version.number == 1 and not draft_has_unpublished_edits(graph_row)
    changed = {**spec, "description": "second file"}
    second = graph_import(spec=changed)
    graph_row.refresh_from_db()
    assert not second.draft_kept and second.version.number == 2
    assert graph_row.draft["description"] == "second file" and graph_row.draft_revision == 2


def test_a_draft_with_unpublished_edits_is_kept_and_the_file_published_beside_it() -> None:
    spec = spec_v1()
    graph_row = graph_import(spec=spec).version.graph
    edited = with_note(spec)
    graph_row = graph_draft_save(graph=graph_row, spec=edited, base_revision=graph_row.draft_revision)
    assert draft_has_unpublished_edits(graph_row)
    revision = graph_row.draft_revision

    again = graph_import(spec=spec)  # the same file as version 1: e.g. the README's run_graph command
    graph_row.refresh_from_db()
    assert again.draft_kept and again.version.number == 1
    assert graph_row.draft == edited and graph_row.draft_revision == revision

    newer = graph_import(spec={**spec, "description": "from the file"})
    graph_row.refresh_from_db()
    assert newer.draft_kept and newer.version.number == 2 and newer.version.spec["description"] == "from the file"
    assert graph_row.draft == edited and graph_row.draft_revision == revision


def test_a_never_published_draft_with_nodes_is_kept_but_an_empty_one_is_not() -> None:
    spec = spec_v1()
    Graph.objects.create(name=spec["name"], draft=with_note(spec))
    kept = graph_import(spec=spec)
    assert kept.draft_kept and Graph.objects.get(name=spec["name"]).draft == with_note(spec)

    empty = graph([], [])
    Graph.objects.create(name=empty["name"], draft={"name": empty["name"], "nodes": [], "edges": []})
    full = {**spec_v1(), "name": empty["name"]}
    replaced = graph_import(spec=full)
    assert not replaced.draft_kept and Graph.objects.get(name=empty["name"]).draft == full


def test_an_invalid_draft_counts_as_edits() -> None:
    spec = spec_v1()
    graph_row = graph_import(spec=spec).version.graph
    broken = copy.deepcopy(spec)
    broken["nodes"].append(node("orphan", "transform", config={"set": {"z": "nope +"}}))
    graph_draft_save(graph=graph_row, spec=broken, base_revision=graph_row.draft_revision)
    graph_row.refresh_from_db()
    assert draft_has_unpublished_edits(graph_row)
    assert graph_import(spec=spec).draft_kept
    graph_row.refresh_from_db()
    assert graph_row.draft == broken


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
@pytest.mark.process
def test_run_graph_runs_the_file_and_leaves_an_edited_draft_alone(tmp_path: Path) -> None:
    spec = spec_v1()
    graph_row = graph_import(spec=spec).version.graph
    edited = with_note(spec)
    graph_draft_save(graph=graph_row, spec=edited, base_revision=graph_row.draft_revision)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(spec))
    env = {"DATABASE_URL": test_database_url(), "DJANGO_SETTINGS_MODULE": "ballast.settings", "BALLAST_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "manage.py", "run_graph", str(path), "--wait", "--in-process"],
        cwd=REPO_ROOT, env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, **env},
        capture_output=True, text=True, timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert "its draft has unpublished edits, left as they are; this file runs as version 1" in done.stderr
    graph_row.refresh_from_db()
    assert graph_row.draft == edited
    assert GraphVersion.objects.filter(graph=graph_row, is_test=False).count() == 1
