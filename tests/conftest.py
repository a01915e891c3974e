"""Shared fixtures: test tools registered, a side-effect log per test."""
from __future__ import annotations

import pytest

import tests.support.tools  # noqa: F401  (registers the test tools in this process)


@pytest.fixture
def effects_file(tmp_path, monkeypatch):
    """A fresh side-effect log for tools that record what they executed."""
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("BALLAST_EFFECTS_FILE", str(path))
    return path


@pytest.fixture(autouse=True, scope="session")
def _test_node_kinds():
    """Register the test-only node kinds (also passed to worker subprocesses by env)."""
    from django.conf import settings

    from runs.nodes import get_kind

    settings.BALLAST_NODE_KINDS.setdefault("spawner", "tests.support.kinds.SpawnerNode")
    settings.BALLAST_NODE_KINDS.setdefault("emit", "tests.support.kinds.EmitNode")
    get_kind.cache_clear()
    yield
