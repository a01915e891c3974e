"""One style for error field paths everywhere (``core.fields.field_path``): keys joined
by dots, list positions in brackets, as the validator writes ``nodes[0].config.x``. API
field errors, graph import errors, run input errors, node config errors, tool arguments
and provider options all use it."""
from __future__ import annotations

from typing import Any

import pytest

from builder.validation import validate_spec
from core.api import flatten_errors
from core.fields import field_path
from runs.nodes.tool import ToolNode
from runs.providers import get_provider
from tests.support.specs import chain, graph, node, publish, transform
from tests.support.world import World

pytestmark = pytest.mark.usefixtures("fast_passwords")


def test_field_path():
    assert field_path(("cases", 0, "expression")) == "cases[0].expression"
    assert field_path(("cases", 0, "expression"), "config") == "config.cases[0].expression"
    assert field_path((0, 1)) == "[0][1]" and field_path((), "config.args") == "config.args"
    assert field_path(("flag", True)) == "flag.True"  # a bool is a key, not a position


def test_drf_errors_flatten_to_the_same_style():
    detail = {"items": [{}, {"sku": ["required"]}], "tags": {1: ["too long"]}, "name": ["blank"]}
    assert flatten_errors(detail) == {"items[1].sku": ["required"], "tags[1]": ["too long"], "name": ["blank"]}


def test_node_config_and_tool_argument_errors():
    spec = graph(
        [
            node("start", "start"),
            node("pick", "condition", config={"cases": [{"handle": "a", "expression": "1"}, {"handle": 3}]}),
            node("end", "end"),
        ],
        chain("start", "pick", "end"),
    )
    paths = {i.path for i in validate_spec(spec).issues}
    assert {"nodes[1].config.cases[1].expression", "nodes[1].config.cases[1].handle"} <= paths
    config = ToolNode.config_model.model_validate({"tool": "http_request", "args": {"url": "http://x", "headers": {"a": 1}}})
    issues = ToolNode().check("call", config, set())
    assert [(i.field, i.code) for i in issues] == [("config.args.headers.a", "tool_arguments")]
    config = ToolNode.config_model.model_validate(
        {"tool": "send_email", "args": {"to": ["a@example.com", 5], "subject": "s", "body": "b"}}
    )
    assert [i.field for i in ToolNode().check("mail", config, set())] == ["config.args.to[1]"]


def test_provider_option_errors():
    problems = get_provider("mock").validate_options({"script": [{"reply": "ok"}, {"turn": -1, "reply": "x"}]})
    assert problems and problems[0].startswith("script[1].turn: ")


@pytest.mark.django_db(transaction=True)
def test_api_graph_import_and_run_input_errors(world: World) -> None:
    builder = world.clients["builder"]
    broken = graph(
        [node("start", "start"), transform("calc", total="price * qty"), node("end", "end")],
        chain("start", "calc", "end"),
        name="broken-import",
    )
    response = builder.post("/api/v1/graphs/import/", broken, format="json")
    assert response.status_code == 400
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "graph_invalid"
    assert error["fields"]["nodes[1].config.set.total"] == ["unknown variable 'price': declare 'price' in Graph settings → State keys, or use input.price", "unknown variable 'qty': declare 'qty' in Graph settings → State keys, or use input.qty"]

    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}},
    }
    version = publish(graph([node("start", "start"), node("end", "end")], chain("start", "end"), name="typed", input_schema=schema))
    bad = world.clients["operator"].post(
        "/api/v1/runs/", {"graph": version.graph_id, "input": {"items": [{"sku": "a"}, {"sku": 7}]}}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "input_invalid"
    assert list(bad.json()["error"]["fields"]) == ["input.items[1].sku"]
