"""POST /graphs/<id>/nodes/<node>/test/ takes only state the graph knows, as documented:
a key the draft does not know is 400 unknown_state_key, a state.input that is not an
object a 400 field error (it was silently replaced by {}); nothing is recorded."""
from __future__ import annotations

import pytest

from builder.services import graph_create
from runs.models import Run
from tests.support.specs import chain, graph, node, transform

pytestmark = pytest.mark.usefixtures("fast_passwords")


def draft_graph():
    spec = graph(
        [node("start", "start"), transform("calc", total="base + len(items)"), node("end", "end")],
        chain("start", "calc", "end"),
        state={"items": {"reducer": "append", "default": ["seed"]}},
        input_schema={"type": "object", "properties": {"base": {"type": "integer"}}},
    )
    return graph_create(name=spec["name"], draft=spec)


def test_known_state_and_an_object_input_still_run(world):
    gid = draft_graph().pk
    response = world.clients["builder"].post(
        f"/api/v1/graphs/{gid}/nodes/calc/test/", {"state": {"base": 1, "items": [], "input": {"base": 1}}}, format="json"
    )
    assert response.status_code == 200, response.content[:300]
    assert response.json()["status"] == "succeeded" and response.json()["state"]["total"] == 1


def test_an_unknown_state_key_is_400_unknown_state_key_and_records_nothing(world):
    gid = draft_graph().pk
    runs = Run.objects.count()
    response = world.clients["builder"].post(f"/api/v1/graphs/{gid}/nodes/calc/test/", {"state": {"base": 1, "nope": 1}}, format="json")
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "unknown_state_key" and error["fields"] == {"state.nope": ["not a state key of this graph"]}
    assert Run.objects.count() == runs


def test_a_state_input_that_is_not_an_object_is_a_400_field_error(world):
    gid = draft_graph().pk
    runs = Run.objects.count()
    response = world.clients["builder"].post(f"/api/v1/graphs/{gid}/nodes/calc/test/", {"state": {"base": 1, "input": "notobj"}}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["fields"] == {"state.input": ["must be a JSON object (the run input)"]}
    assert Run.objects.count() == runs
