"""The store's commit paths behind one interface: the portable path, and this database's fast path.

Every claim and commit can take the portable path: the ORM under row locks (claims,
commit, operations), on any database. A fast path writes the same rows with fixed
statements, from the worker's snapshot where it can (runs.engine.store.fastpath decides
in Python and writes through :func:`fast_path`):

- fastpath_sqlite: fixed statements in one IMMEDIATE transaction (SQLite, and any
  database without a fast path of its own);
- fastpath_postgresql: each commit as ONE fenced data-modifying CTE in autocommit; also
  the first claim and a run's creation as one statement (:func:`postgresql`).

Both paths pass one conformance suite (tests/runs/engine/conformance, parametrized over
the portable path and the fast path of the database under test).
``settings.BALLAST_FAST_COMMIT = False`` keeps every write on the portable path.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from runs.engine.store import fastpath_sqlite


class FastPath(Protocol):
    """What a database's fast path offers (module-level functions of fastpath_sqlite and
    fastpath_postgresql; the parameters are runs.engine.store.fastpath's). Each write
    returns None, having written nothing, when its fence fails (the run moved, the lease
    is gone): the portable path then decides."""

    # Whether a parallel branch can commit from its worker's snapshot in one statement
    # (fenced by the run version and the run's active steps); else it locks the run first.
    BRANCH_FROM_SNAPSHOT: bool

    def commit(self, params: dict[str, Any]) -> tuple[int, int, list[int]] | None:
        """A sequential commit that leases its one successor to the same worker."""

    def finish(self, params: dict[str, Any]) -> tuple[int, list[int]] | None:
        """A sequential commit that finishes the run (the end step)."""

    def lock(self, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """A parallel commit's first write: the run row, locked, if the lease is ours."""

    def read(self, params: dict[str, Any]) -> tuple[int | None, list[list[Any]], dict[str, list[Any]]]:
        """A parallel commit's reads under that lock: fence, active steps, latest state keys."""

    def parallel(self, params: dict[str, Any]) -> tuple[int, list[list[Any]], dict[str, int], list[Any] | None] | None:
        """A parallel (fan-out, join or branch) commit's writes."""


def enabled() -> bool:
    """Whether claims and commits try the fast path (settings.BALLAST_FAST_COMMIT, default on)."""
    return bool(getattr(settings, "BALLAST_FAST_COMMIT", True))


def is_postgresql() -> bool:
    """Whether this thread's database is PostgreSQL (the one-statement paths)."""
    return bool(connection.vendor == "postgresql")


def postgresql() -> ModuleType:
    """fastpath_postgresql, imported on first use: psycopg costs a worker about 0.25 s of
    CPU at start, and a worker on SQLite never needs it. Only for PostgreSQL."""
    from runs.engine.store import fastpath_postgresql  # the driver, lazily (see the docstring)

    return fastpath_postgresql


def fast_path() -> FastPath:
    """This database's fast path."""
    return postgresql() if is_postgresql() else fastpath_sqlite
