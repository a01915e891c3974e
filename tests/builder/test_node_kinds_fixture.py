"""The browser app's node-kind fixture (frontend/src/test/fixtures/node-kinds.json) is what GET /api/v1/node-kinds/ serves.

The front end's unit tests draw forms, palettes and handles from that catalogue; a copy
written by hand drifts from the node kinds' pydantic configs. This test makes it from the
API (the product's kinds only, not the test-only ones tests/conftest.py registers) and
fails when the kept copy differs; ``BALLAST_UPDATE_FIXTURES=1`` rewrites it instead.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from runs.nodes import get_kind

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "frontend" / "src" / "test" / "fixtures" / "node-kinds.json"
UPDATE = os.environ.get("BALLAST_UPDATE_FIXTURES") == "1"


def fixture_text(body: Any) -> str:
    """The fixture's text: the API's answer as indented JSON, one final newline."""
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.django_db
def test_the_front_ends_node_kind_fixture_is_what_the_api_serves(settings: Any) -> None:
    # The product's kinds only: tests/conftest.py adds test kinds (spawner, emit) to the registry.
    settings.BALLAST_NODE_KINDS = {k: v for k, v in settings.BALLAST_NODE_KINDS.items() if not v.startswith("tests.")}
    get_kind.cache_clear()
    client = Client()
    client.force_login(get_user_model().objects.create_user("fixture-reader"))
    response = client.get("/api/v1/node-kinds/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [k["kind"] for k in body["kinds"]] == list(settings.BALLAST_NODE_KINDS)
    fresh = fixture_text(body)
    if UPDATE:
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(fresh, encoding="utf-8")
    kept = FIXTURE.read_text(encoding="utf-8") if FIXTURE.exists() else ""
    assert kept == fresh, (
        f"{FIXTURE.relative_to(REPO)} is stale (a node kind's config, title or handles changed): "
        "run BALLAST_UPDATE_FIXTURES=1 .venv/bin/pytest tests/builder/test_node_kinds_fixture.py and commit it"
    )
