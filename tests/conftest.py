"""Shared fixtures: test tools registered, a side-effect log per test; the test tiers.

Tiers (README, Tests; the Makefile's test targets select them by marker):

- ``process``: tests that start real processes (``manage.py`` commands, qcluster workers,
  daphne, a private redis-server, a fresh interpreter). Besides the tests marked by hand,
  every test that uses a process fixture (``PROCESS_FIXTURES``) and every ``crash`` or
  ``chaos`` test is marked here.
- Database-only passes: with ``BALLAST_TEST_DB_ONLY=1`` (the Makefile's PostgreSQL pass),
  tests that use no database (no ``django_db`` marker, no ``db`` / ``transactional_db``
  fixture) and start no process are deselected, since their behaviour cannot depend on
  which database the suite runs on; they run in the SQLite pass (which leaves the process
  tier, but for crash tests, to this one). A test that opens no test database but
  still depends on the configured one (say, which driver a worker imports) is marked
  ``every_db`` and kept.
"""
from __future__ import annotations

import os

import pytest

import tests.support.tools  # noqa: F401  (registers the test tools in this process)

# Fixtures that tests in several directories use, from tests/support/ (one module each):
# the API tests' world of users and runs, real qcluster process groups, the local
# OpenAI/Anthropic protocol server, the local HTTP server of the http_request tool, a private
# redis-server. A test asks for one by name; none is autouse.
pytest_plugins = [
    "tests.support.world",
    "tests.support.cluster",
    "tests.support.llm_server",
    "tests.support.http_server",
    "tests.support.callback_receiver",
    "tests.support.redis_server",
]

# Fixtures that start real processes: a test using one is in the ``process`` tier.
PROCESS_FIXTURES = frozenset({"cluster_factory", "private_redis", "daphne"})
# Fixtures that give a test the database (pytest-django's; item.fixturenames is the closure,
# so a fixture built on ``db`` counts too).
DB_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"})


def uses_database(item: pytest.Item) -> bool:
    """Whether the test opens the test database (a django_db marker or a database fixture)."""
    return item.get_closest_marker("django_db") is not None or bool(DB_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("crash") or item.get_closest_marker("chaos"):
            item.add_marker(pytest.mark.process)
    if os.environ.get("BALLAST_TEST_DB_ONLY") == "1":
        keep, dropped = [], []
        for item in items:
            (keep if uses_database(item) or item.get_closest_marker("every_db") or item.get_closest_marker("process") else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


@pytest.fixture
def effects_file(tmp_path, monkeypatch):
    """A fresh side-effect log for tools that record what they executed."""
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("BALLAST_EFFECTS_FILE", str(path))
    return path


@pytest.fixture(autouse=True, scope="session")
def _quick_flush():
    """Transactional tests end with DELETEs, not Django's TRUNCATE and post_migrate (tests/support/flush.py)."""
    from tests.support import flush

    if os.environ.get("BALLAST_SKIP_QUICK_FLUSH") != "1":
        flush.install()
    yield


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
def _fast_passwords(request):
    """Every test in this process hashes passwords with MD5: PBKDF2 at full strength costs
    about 0.3 s per user created or signed in, hundreds of seconds over the suite, and no
    test checks the hasher. Not in tests that start processes (marker ``process``): a
    daphne or qcluster of their own checks passwords with the product's hashers, which
    know no MD5."""
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _fresh_version_caches(request):
    """The engine caches each graph version's compiled spec and state keys by id, for the
    life of the process (a committed version never changes). A test's rolled-back
    transaction can hand its ids out again on SQLite (the AUTOINCREMENT counter rolls back
    with it), so after every database test these caches are emptied: a later test in the
    same process (an xdist worker runs files in any order) must not read another test's
    graph under its own version's id."""
    yield
    if uses_database(request.node):
        from runs.engine.store.graphs import compiled_graph, state_keys

        compiled_graph.cache_clear()
        state_keys.cache_clear()


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
