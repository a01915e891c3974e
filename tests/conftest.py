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


@pytest.fixture(autouse=True)
def _fresh_throttle_counters(request):
    """Throttle counters live in the shared cache, a database table that a transactional
    test's flush does not empty (it is no model's): after such a test, empty it, so no
    test inherits another's counts. (Other tests roll it back with their transaction.)"""
    yield
    marker = request.node.get_closest_marker("django_db")
    transactional = {"transactional_db", "live_server"} & set(request.fixturenames) or (marker and marker.kwargs.get("transaction"))
    if transactional:
        from django.core.cache import cache

        blocker = request.getfixturevalue("django_db_blocker")
        with blocker.unblock():
            cache.clear()
