"""A database connection lost under an API request answers 503 with Retry-After in the API's
error shape, not a 500 (the chaos suite's database blips found the 500)."""
from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from tests.support.cluster import test_database_url
from tests.support.world import World


def test_a_request_whose_database_connection_was_terminated_gets_a_503_it_may_retry(world: World) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend: PostgreSQL's; SQLite has no connection to lose")
    client = world.clients["builder"]
    world.queued_run()
    assert client.get("/api/v1/runs/?page_size=5").status_code == 200
    # The request's connection (the test client runs in this thread, on this connection) is
    # terminated from another session, as a restart, a failover or a pooler would.
    backend = connection.cursor().connection.info.backend_pid
    with psycopg.connect(test_database_url(), autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [backend]).fetchone() == (True,)
    answer = client.get("/api/v1/runs/?page_size=5")
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == "1"
    error = answer.json()["error"]
    assert error["code"] == "database_unavailable" and error["fields"] == {} and error["retry_after"] == 1
    assert "connection was lost" in error["message"]
    # Django drops the broken connection at the request's end (the test client leaves that to
    # the test); the same request then answers.
    connection.close()
    assert client.get("/api/v1/runs/?page_size=5").status_code == 200
