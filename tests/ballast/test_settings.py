"""DATABASE_URL parsing (ballast.settings.database_from_url): the options the engine relies on."""
from __future__ import annotations

import pytest

from ballast.settings import (
    PG_NETWORK_TIMEOUT_SECONDS,
    PREPARE_THRESHOLD,
    database_from_url,
    orm_broker_class,
    pg_network_options,
)


def test_postgres_connections_may_prepare_by_default():
    # Django's own default is None, and then psycopg prepares nothing (TRAPS.md).
    options = database_from_url("postgres://u@h:5432/db")["OPTIONS"]
    assert options["prepare_threshold"] == PREPARE_THRESHOLD


@pytest.mark.parametrize(("query", "expected"), [("prepare_threshold=none", None), ("prepare_threshold=0", 0), ("prepare_threshold=12", 12)])
def test_prepare_threshold_from_the_url(query, expected):
    options = database_from_url(f"postgres://u@h/db?{query}&sslmode=disable")["OPTIONS"]
    assert options["prepare_threshold"] == expected
    assert options["sslmode"] == "disable"  # other query options pass through


def test_a_bad_prepare_threshold_names_the_option():
    with pytest.raises(ValueError, match="prepare_threshold='often'"):
        database_from_url("postgres://u@h/db?prepare_threshold=often")


def test_behind_a_transaction_pooler_no_server_side_cursor_and_no_listen():
    # pgbouncer in transaction mode ends the transaction a named cursor lives in (the audit
    # export hung, verify failed with InvalidCursorName) and drops LISTEN's notifications.
    pooled = database_from_url("postgres://u@h/db?prepare_threshold=none")
    direct = database_from_url("postgres://u@h/db")
    assert pooled["DISABLE_SERVER_SIDE_CURSORS"] is True and direct["DISABLE_SERVER_SIDE_CURSORS"] is False
    assert orm_broker_class(pooled) == "runs.engine.dispatch.ReconnectingOrmBroker"
    assert orm_broker_class(direct) == "runs.engine.dispatch.NotifyingOrmBroker"
    assert orm_broker_class(database_from_url("sqlite:///var/x.sqlite3")) == "runs.engine.dispatch.ReconnectingOrmBroker"


def test_postgres_connections_fail_on_a_silent_network_instead_of_hanging():
    # A cut host's libpq sockets hung for minutes (kernel retransmissions) without these.
    options = database_from_url("postgres://u@h:5432/db")["OPTIONS"]
    assert PG_NETWORK_TIMEOUT_SECONDS == 5
    assert options["keepalives"] == 1
    assert options["tcp_user_timeout"] == 5000
    assert options["keepalives_idle"] + options["keepalives_interval"] * options["keepalives_count"] == 5
    assert options["connect_timeout"] == 5


def test_network_timeouts_from_the_url_win_and_zero_means_none():
    options = database_from_url("postgres://u@h/db?tcp_user_timeout=20000&keepalives_idle=9")["OPTIONS"]
    assert (options["tcp_user_timeout"], options["keepalives_idle"]) == ("20000", "9")
    assert options["keepalives_count"] == pg_network_options(PG_NETWORK_TIMEOUT_SECONDS)["keepalives_count"]
    assert pg_network_options(0) == {}
    assert pg_network_options(2.5)["tcp_user_timeout"] == 2500
    assert pg_network_options(1)["connect_timeout"] == 2  # libpq's minimum


def test_the_server_side_of_a_connection_drops_a_silent_client_too():
    # A cut host's backend sat idle in its transaction, holding row locks, until the host came back.
    options = database_from_url("postgres://u@h/db?options=-c%20tcp_keepalives_idle%3D9")["OPTIONS"]
    assert options["options"].startswith("-c tcp_keepalives_idle=1 ")
    assert options["options"].endswith("-c tcp_keepalives_idle=9")  # the URL's own win (last)
    assert "-c tcp_user_timeout=5000" in options["options"]
    assert "options" not in database_from_url("postgres://u@h/db?prepare_threshold=none")["OPTIONS"]  # a pooler


@pytest.mark.django_db
def test_postgresql_sessions_run_with_the_server_side_network_timeouts():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's session settings")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('tcp_keepalives_idle'), current_setting('tcp_user_timeout')")
        assert cursor.fetchone() == ("1", "5000")  # milliseconds
