"""Migrating the test database back to an old layout and forward again, for tests of migrations that move models between apps.

A target is ``(app, migration name)``, or ``(app, None)`` for "none of this app's
migrations applied" (Django's ``migrate app zero``). Models come back as the historical
models of a migration state (``apps.get_model("runs", "ApiToken")``), not the current ones.
"""
from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

Target = tuple[str, str | None]


def latest() -> list[tuple[str, str]]:
    """The newest migration of every app: migrating to these is ``manage.py migrate``."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def migrate(targets: list[Target]) -> None:
    """Apply or unapply migrations until the database is at ``targets`` (apps not named
    move only as far as the named ones' dependencies require)."""
    MigrationExecutor(connection).migrate(targets)


def models_at(targets: list[Target]) -> Apps:
    """The models as of ``targets`` (an app at None: not there), with auth and contenttypes
    at their latest (their early states do not match the tables any more)."""
    executor = MigrationExecutor(connection)
    contrib = [n for n in executor.loader.graph.leaf_nodes() if n[0] in ("auth", "contenttypes")]
    return executor.loader.project_state([t for t in targets if t[1] is not None] + contrib).apps


def applied_models() -> Apps:
    """The models as the migrations applied now define them (every app, where it stands)."""
    executor = MigrationExecutor(connection)  # a fresh loader: it reads what is applied now
    applied = [key for key in executor.loader.applied_migrations if key in executor.loader.graph.nodes]
    return executor.loader.project_state(applied).apps


def migrate_to(targets: list[Target]) -> Apps:
    """:func:`migrate` to ``targets`` and return :func:`models_at` them."""
    migrate(targets)
    return models_at(targets)
