"""A transactional test's teardown that empties the tables without rebuilding them.

Django empties the database after every transactional test (``transactional_db``,
``live_server``) with the ``flush`` command: on PostgreSQL one ``TRUNCATE`` of every table,
which gives each of them and each of their ~210 indexes a new file and fsyncs them
(wait event ``DataFileImmediateSync``), then the ``post_migrate`` signal, which writes the
content types and permissions again. Under the suite's load that costs 0.3-1 s per test,
hundreds of tests. Here the same tables are emptied with ``DELETE`` in one transaction (the
foreign keys Django creates are ``DEFERRABLE INITIALLY DEFERRED``, so the order does not
matter; the audit tables' append-only triggers let the rows go with ``ballast.audit_prune``
on, as audit's own prune does) and the rows migrations and ``post_migrate`` put there,
which no test changes, stay: what the next test sees is what Django's flush would have left.

``install()`` swaps ``TransactionTestCase._fixture_teardown``; a test case that narrows
``available_apps`` or asks for a serialized rollback keeps Django's own teardown.
"""
from __future__ import annotations

from django.db import connections, transaction
from django.test import TransactionTestCase

# Written by migrations and post_migrate, read by every test, changed by none.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


def empty_tables(alias: str) -> None:
    """Delete every row of the project's model tables on ``alias`` but ``KEPT_TABLES``.

    Raises whatever the database raises (a test that left a transaction open, say), as
    Django's flush would.
    """
    connection = connections[alias]
    tables = [t for t in connection.introspection.django_table_names(only_existing=True, include_views=False) if t not in KEPT_TABLES]
    if not tables:
        return
    deletes = [f"DELETE FROM {connection.ops.quote_name(table)}" for table in tables]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One round trip: psycopg sends a parameterless string of statements at once.
            cursor.execute("; ".join(["SET CONSTRAINTS ALL DEFERRED", "SELECT set_config('ballast.audit_prune', 'on', true)", *deletes]))
        else:
            for statement in deletes:
                cursor.execute(statement)


def install() -> None:
    """Make every transactional test's teardown ``empty_tables`` (idempotent)."""
    if getattr(TransactionTestCase._fixture_teardown, "_ballast_quick", False):
        return
    django_teardown = TransactionTestCase._fixture_teardown

    def _fixture_teardown(self: TransactionTestCase) -> None:
        if self.available_apps is not None or self.serialized_rollback:
            django_teardown(self)
            return
        for alias in self._databases_names(include_mirrors=False):
            empty_tables(alias)

    _fixture_teardown._ballast_quick = True  # type: ignore[attr-defined]
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]
