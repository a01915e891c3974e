"""JSON Schemas in a graph (input_schema, an approval's edit_schema, an LLM node's
output_schema) may only refer inside themselves: a remote $ref is a validation issue, a
dangling one too, and at run time no validator ever fetches one, even from a version
stored before validation refused it. A real listener on 127.0.0.1 must see no request."""
from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from approvals.nodes import ApprovalNode, edit_errors
from builder.validation import validate_spec
from graphs.models import GraphVersion
from runs.engine.store.graphs import compiled_graph
from runs.models import Run
from runs.nodes.llm import _parse_and_validate
from runs.sandbox.schemas import schema_problems, validator
from runs.vocabulary import NodeError
from tests.support.specs import chain, graph, node, publish

pytestmark = pytest.mark.usefixtures("fast_passwords")


class Listener:
    """An HTTP server on a free port of 127.0.0.1 that records every request it gets."""

    def __init__(self) -> None:
        seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                seen.append(self.path)
                body = b'{"type": "string"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.requests = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/schema.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener()
    yield served
    served.server.shutdown()
    served.server.server_close()
    assert served.requests == [], f"a schema $ref was fetched: {served.requests}"


def remote(url: str) -> dict:
    return {"type": "object", "properties": {"name": {"$ref": url}}}


def spec_with(input_schema: dict) -> dict:
    return graph([node("start", "start"), node("end", "end")], chain("start", "end"), input_schema=input_schema)


def test_schema_problems_refuse_remote_and_dangling_refs_and_keep_local_ones(listener):
    assert schema_problems({"$defs": {"n": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#"}}}) == []
    assert schema_problems({"$defs": {"n": {"$anchor": "name"}}, "properties": {"a": {"$ref": "#name"}}}) == []
    [(where, why)] = schema_problems(remote(listener.url))
    assert where == "properties.name.$ref" and why.startswith("remote $ref is not allowed")
    [(where, why)] = schema_problems({"properties": {"a": {"$ref": "#/nope"}}})
    assert where == "properties.a.$ref" and "does not point at anything" in why
    assert schema_problems({"properties": {"a": {"$ref": "other.json#/x"}}})[0][1].startswith("remote $ref")
    assert schema_problems({"const": {"$ref": "http://example.invalid/"}}) == []  # a value, not a schema


@pytest.mark.parametrize(("ref", "text"), [("URL", "remote $ref is not allowed"), ("#/nope", "does not point at anything")])
def test_an_input_schema_ref_is_a_validation_issue_with_its_path(listener, ref, text):
    result = validate_spec(spec_with(remote(listener.url if ref == "URL" else ref)))
    assert not result.ok
    [issue] = result.issues
    assert (issue.path, issue.code) == ("input_schema.properties.name.$ref", "invalid_input_schema") and text in issue.message


def test_edit_and_output_schema_refs_are_validation_issues(listener):
    gate = ApprovalNode.config_model.model_validate({"edit_schema": remote(listener.url)})
    [issue] = ApprovalNode().check("gate", gate, set())
    assert (issue.field, issue.code) == ("config.edit_schema.properties.name.$ref", "invalid_schema")
    assert "remote $ref is not allowed" in issue.message
    spec = graph(
        [node("start", "start"), node("ask", "llm", config={"prompt": "hi", "output_schema": remote("#/nope")}), node("end", "end")],
        chain("start", "ask", "end"),
    )
    [issue] = validate_spec(spec).issues
    assert issue.code == "invalid_config" and issue.path.startswith("nodes[1].config.output_schema")
    assert "does not point at anything" in issue.message


def test_validators_at_run_time_never_fetch_a_ref(listener):
    # A config or version stored before validation refused the ref: no fetch, a clear error.
    gate = ApprovalNode.config_model.model_validate({"edit_schema": remote(listener.url)})
    assert "cannot be applied" in edit_errors(gate, {"name": "x"})["values"][0]
    with pytest.raises(NodeError) as refused:
        _parse_and_validate('{"name": "x"}', validator(remote(listener.url)))
    assert (refused.value.code, refused.value.retryable) == ("invalid_config", False)


@pytest.mark.parametrize("ref", ["URL", "#/nope"])
def test_a_stored_version_with_a_bad_input_ref_is_a_400_that_fetches_nothing(world, listener, ref):
    version = publish(spec_with({"type": "object"}))
    bad = remote(listener.url if ref == "URL" else ref)
    GraphVersion.objects.filter(pk=version.pk).update(spec={**version.spec, "input_schema": bad})
    compiled_graph.cache_clear()
    before = Run.objects.count()
    response = world.clients["admin"].post("/api/v1/runs/", {"graph": version.graph_id, "input": {"name": "x"}}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == "version_invalid" and "input_schema" in response.json()["error"]["fields"]
    assert Run.objects.count() == before


def test_every_json_schema_validator_is_built_by_runs_schemas():
    # One function builds validators (with the registry that never retrieves): no other
    # module may construct one, or its $refs would be fetched again.
    root = Path(__file__).resolve().parents[3]
    pattern = re.compile(r"Draft\d+Validator|validator_for|RefResolver|import jsonschema")
    offenders = []
    for path in [*root.glob("runs/**/*.py"), *root.glob("builder/**/*.py"), *root.glob("approvals/**/*.py"), *root.glob("ballast/**/*.py")]:
        if path.name != "schemas.py" or path.parent.name != "sandbox":
            if pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(root)))
    assert offenders == [], offenders
