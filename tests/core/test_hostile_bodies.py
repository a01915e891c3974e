"""Oversized, over-deep and over-large inputs get a 4xx in the error shape, never a 500."""
from __future__ import annotations

import json

import pytest

from builder.validation import validate_spec

pytestmark = pytest.mark.usefixtures("fast_passwords")


def post_raw(world, path: str, body: str):
    return world.clients["admin"].generic("POST", path, body, content_type="application/json")


def test_body_over_the_upload_limit_is_413(world, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = post_raw(world, "/api/v1/graphs/validate/", json.dumps({"spec": {"name": "x" * 20_000}}))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_deeply_nested_run_input_is_400(world):
    deep = "[" * 500 + "]" * 500
    body = f'{{"graph": {world.approval_version.graph_id}, "input": {{"name": "x", "d": {deep}}}}}'
    response = post_raw(world, "/api/v1/runs/", body)
    assert response.status_code == 400, response.content[:300]
    assert "nests deeper" in json.dumps(response.json())


def test_graph_size_is_bounded_before_graph_checks():
    nodes = [{"id": f"n{i}", "kind": "transform", "config": {"set": {"x": "1"}}} for i in range(600)]
    result = validate_spec({"name": "huge", "nodes": nodes, "edges": []})
    assert not result.ok and result.issues[0].field == "nodes"
