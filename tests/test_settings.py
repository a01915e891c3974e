"""DATABASE_URL parsing (ballast.settings.database_from_url): the options the engine relies on."""
from __future__ import annotations

import pytest

from ballast.settings import PREPARE_THRESHOLD, database_from_url


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
