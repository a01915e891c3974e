"""A number too large for a float (1e999: the JSON body parser reads it as Infinity) is
not a JSON number: wherever a spec or a run's input is accepted it is a validation issue
or a 400 field error naming its path, never a 500 from the JSON column."""
from __future__ import annotations

import pytest

from graphs.models import Graph
from runs.models import Run

pytestmark = pytest.mark.usefixtures("fast_passwords")

GOOD_NODES = '[{"id":"start","kind":"start"},{"id":"end","kind":"end"}]'
EDGES = '[{"source":"start","target":"end"}]'


def spec_text(name: str, *, nodes: str = GOOD_NODES, extra: str = "") -> str:
    return '{"name":"' + name + '","nodes":' + nodes + ',"edges":' + EDGES + extra + "}"


CASES = [
    ('[{"id":"start","kind":"start","position":{"x":1e999,"y":0}},{"id":"end","kind":"end"}]', "", "nodes[0].position.x"),
    (GOOD_NODES, ',"notes":[{"id":"n1","position":{"x":0,"y":-1e999}}]', "notes[0].position.y"),
    (GOOD_NODES, ',"state":{"total":{"default":1e999}}', "state.total.default"),
]


def post_raw(world, path: str, body: str, method: str = "POST"):
    return world.clients["admin"].generic(method, path, body, content_type="application/json")


@pytest.mark.parametrize(("nodes", "extra", "path"), CASES)
def test_validate_and_import_name_the_number_that_is_not_finite(world, nodes, extra, path):
    graphs = Graph.objects.count()
    checked = post_raw(world, "/api/v1/graphs/validate/", spec_text("inf", nodes=nodes, extra=extra))
    assert checked.status_code == 200 and checked.json()["valid"] is False
    [error] = checked.json()["errors"]
    assert (error["path"], error["code"]) == (path, "invalid_spec") and "Infinity is not a JSON number" in error["message"]
    imported = post_raw(world, "/api/v1/graphs/import/", spec_text("inf", nodes=nodes, extra=extra))
    assert imported.status_code == 400, imported.content[:300]
    body = imported.json()["error"]
    assert body["code"] == "graph_invalid" and [i["path"] for i in body["issues"]] == [path]
    assert Graph.objects.count() == graphs


def test_a_draft_with_a_number_that_is_not_finite_is_a_field_error(world):
    graphs = Graph.objects.count()
    created = post_raw(world, "/api/v1/graphs/", '{"name":"inf-draft","draft":' + spec_text("inf-draft", nodes=CASES[0][0]) + "}")
    assert created.status_code == 400, created.content[:300]
    assert created.json()["error"]["fields"]["draft"] == [
        "nodes[0].position.x: Infinity is not a JSON number (a number too large for a float, such as 1e999, reads as Infinity)"
    ]
    assert Graph.objects.count() == graphs
    graph = Graph.objects.get(pk=world.approval_version.graph_id)
    saved = post_raw(
        world, f"/api/v1/graphs/{graph.pk}/",
        '{"base_revision":' + str(graph.draft_revision) + ',"spec":' + spec_text(graph.name, extra=',"state":{"t":{"default":1e999}}') + "}",
        method="PATCH",
    )
    assert saved.status_code == 400 and "state.t.default" in saved.json()["error"]["fields"]["spec"][0]


def test_a_run_input_with_a_number_that_is_not_finite_is_a_field_error(world):
    runs = Run.objects.count()
    body = '{"graph":' + str(world.approval_version.graph_id) + ',"input":{"name":"x","n":[1,1e999]}}'
    response = post_raw(world, "/api/v1/runs/", body)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["fields"]["input"][0].startswith("n[1]: Infinity is not a JSON number")
    assert Run.objects.count() == runs
