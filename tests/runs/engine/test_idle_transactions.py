"""A worker host's sessions idle inside a transaction are ended by PostgreSQL (connections.bound_idle_transactions).

A host SIGSTOPped or cut off mid-commit kept its row locks and held its own takeover up
until it came back (the 1,000-run chaos run of 2026-12-07: 9-10 s after a 9-10 s stop).
"""
from __future__ import annotations

import copy
import threading

import pytest
from django.db import connection, connections, transaction

from runs.engine.store import connections as store_connections
from runs.engine.store import reconnect
from tests.support.bounded import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a server-side setting: SQLite has no server"),
]


@pytest.fixture
def bounded_sessions():
    db = connections.settings["default"]
    saved = copy.deepcopy(db.get("OPTIONS", {}))
    assert store_connections.bound_idle_transactions(0.5)
    assert store_connections.bound_idle_transactions(0.5)  # once only, however often called
    yield
    db["OPTIONS"] = saved


def _backend_alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0] == 1


def test_a_session_idle_in_a_transaction_is_ended_and_its_next_statement_fails(bounded_sessions):
    seen: dict[str, object] = {}
    began, ended = threading.Event(), threading.Event()

    def stalled_commit() -> None:  # a new thread: a new connection, made with the option
        try:
            with transaction.atomic():
                with connections["default"].cursor() as cursor:
                    cursor.execute("SHOW idle_in_transaction_session_timeout")
                    seen["setting"] = cursor.fetchone()[0]
                    cursor.execute("SELECT pg_backend_pid()")
                    seen["pid"] = cursor.fetchone()[0]
                began.set()
                ended.wait(60)  # stopped mid-transaction, as a SIGSTOPped host is
                with connections["default"].cursor() as cursor:
                    cursor.execute("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - recorded, asserted below
            seen["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=stalled_commit)
    thread.start()
    try:
        assert began.wait(30)
        assert seen["setting"] == "500ms"
        wait_until(lambda: not _backend_alive(int(seen["pid"])), 30, "the server to end the idle transaction's session")
    finally:
        ended.set()
        thread.join(30)
    # What the commit path rides out: the connection is gone, so it is tried again on a fresh one.
    assert isinstance(seen.get("error"), reconnect.LOST_CONNECTION_ERRORS), repr(seen.get("error"))


def test_nothing_is_set_for_a_zero_bound():
    assert store_connections.bound_idle_transactions(0) is False
