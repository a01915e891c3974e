"""The store conformance suite's backends: every store test runs once per commit path.

A test of the store (claims, commits, state, child steps, fan-out, values) lives in this
folder and takes the ``store_path`` fixture, so it runs over the portable path and the
fast path of the database under test; the few that exercise one path's own statements
say so (test_fanout's one-statement branches, PostgreSQL's one-statement claim in
tests/runs/engine/test_fast_claim.py, which compares it with the portable claim).

- ``portable``: the ORM commit alone (``BALLAST_FAST_COMMIT = False``), on any database;
- ``postgresql``: the one-statement fast path for sequential commits (PostgreSQL only);
- ``sqlite``: the fixed-statement fast path (SQLite only).

As LangGraph's checkpointer backends share one suite, the paths must agree on every
observable effect: rows, events, versions, what is dispatched. A test that relies on a
sequential commit checks through :meth:`StorePath.assert_took` that the path it names
really wrote it, so a parametrization that silently fell back would fail.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.conformance import BRANCH_MARKER, PARALLEL_MARKER

# Text that only the fast paths' fixed SQL contains (the ORM quotes its identifiers).
FAST_MARKERS = {"postgresql": "WITH locked_run AS", "sqlite": "UPDATE runs_run SET state"}


@dataclass(frozen=True)
class StorePath:
    name: str
    fast: bool

    def took(self, queries: CaptureQueriesContext) -> str:
        """Which path wrote the commit whose statements ``queries`` captured."""
        marker = FAST_MARKERS.get(connection.vendor, "")
        return "fast" if marker and any(marker in q["sql"] for q in queries.captured_queries) else "portable"

    def assert_took(self, queries: CaptureQueriesContext) -> None:
        """A sequential commit went through this backend's path."""
        expected = "fast" if self.fast else "portable"
        assert self.took(queries) == expected, [q["sql"][:80] for q in queries.captured_queries]

    def assert_took_parallel(self, queries: CaptureQueriesContext) -> None:
        """A fan-out or branch commit went through this backend's parallel fast path (its
        run lock and its fixed writes, or a branch's one statement from its snapshot), or,
        on the portable path, through neither: a parallel commit that silently fell back to
        the portable one fails here. The ORM commit's run lock is ``SELECT ... FOR NO KEY
        UPDATE`` on quoted identifiers."""
        sqls = [q["sql"] for q in queries.captured_queries]
        locked = any(PARALLEL_MARKER in q or BRANCH_MARKER in q for q in sqls)
        portable_lock = any('FROM "runs_run"' in q and "FOR NO KEY UPDATE" in q for q in sqls)
        if self.fast:
            assert locked and self.took(queries) == "fast" and not portable_lock, [q[:80] for q in sqls]
        else:
            assert not locked and self.took(queries) == "portable", [q[:80] for q in sqls]


def pytest_generate_tests(metafunc: Any) -> None:
    # The portable path, and the fast path of the database under test.
    if "store_path" in metafunc.fixturenames:
        paths = ["portable"] + ([connection.vendor] if connection.vendor in FAST_MARKERS else [])
        metafunc.parametrize("store_path", paths, indirect=True)


@pytest.fixture
def store_path(request: Any, settings: Any) -> Iterator[StorePath]:
    """The commit path under test."""
    name = request.param
    settings.BALLAST_FAST_COMMIT = name != "portable"
    yield StorePath(name, fast=name != "portable")
