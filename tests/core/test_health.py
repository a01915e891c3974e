"""core.health's database checks against a database that does not answer: both fail, within a bound, without raising."""
from __future__ import annotations

import pytest
from django.db import connections

from core import health
from tests.support.bounded import TIME_SLACK, finishes_within
from tests.support.redis_server import free_port


@pytest.mark.every_db
def test_an_unreachable_database_fails_both_database_checks(django_db_blocker, tmp_path) -> None:
    # The configured database's engine, where nothing answers: PostgreSQL on a closed
    # port, SQLite in a directory that does not exist.
    conf = dict(connections["default"].settings_dict)
    if conf["ENGINE"].endswith("sqlite3"):
        conf["NAME"] = str(tmp_path / "no-such-dir" / "db.sqlite3")
    else:
        conf["PORT"] = str(free_port())
    connections.settings["down"] = conf
    try:
        with django_db_blocker.unblock(), finishes_within(5 * TIME_SLACK, "a probe of a closed database"):
            database, migrations = health.database_checks(using="down")
    finally:
        connections["down"].close()
        del connections["down"]
        del connections.settings["down"]
    assert not database.ok and database.error.startswith("OperationalError"), database.error
    assert (migrations.ok, migrations.error) == (False, "database unreachable")
