"""drive_local keeps the thread's database connection across in-process runs (issue 11 item 5).

With ``CONN_MAX_AGE=0`` Django's ``close_old_connections()`` closed it after every
burst of steps: a new connection per run, and the fast path's commit prepared and
planned again on it. Only a connection that broke is replaced.
"""
from __future__ import annotations

import pytest
from django.db import OperationalError, connection

from runs.engine import api as engine
from runs.engine.store.connections import drop_broken as _drop_broken_connections
from runs.services import run_start
from tests.support.specs import chain, graph, node, publish, transform

pytestmark = pytest.mark.django_db(transaction=True)


def _linear(n: int):
    ids = [f"t{i}" for i in range(n)]
    nodes = [node("start", "start"), *[transform(i, x="x + 1") for i in ids], node("end", "end")]
    return graph(nodes, chain("start", *ids, "end"), state={"x": {"default": 0}})


def _drive(version) -> None:
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        assert engine.drive_local(run.pk, queue=queue, timeout=60) == "succeeded"


def test_in_process_runs_share_one_connection():
    n = 4
    version = publish(_linear(n))
    _drive(version)
    session = connection.connection
    assert session is not None
    for _ in range(3):
        _drive(version)
    assert connection.connection is session
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                ["%new_step AS (%"],
            )
            # The commit statement, prepared once for the four runs' start, t0 .. t3 commits.
            assert cursor.fetchall() == [(4 * (n + 1),)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a server-side session to end")
def test_a_broken_connection_is_replaced_between_steps():
    import psycopg

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.errors_occurred
    _drop_broken_connections()
    assert connection.connection is None
    _drive(publish(_linear(1)))  # a new connection, and the run completes on it


def test_a_healthy_connection_with_an_error_is_kept():
    connection.ensure_connection()
    session = connection.connection
    connection.errors_occurred = True  # e.g. a statement the database refused
    _drop_broken_connections()
    assert connection.connection is session and not connection.errors_occurred
