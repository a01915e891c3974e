"""The engine's one clock: times read back from raw SQL, and the database's now."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone


def db_time(value: Any) -> datetime | None:
    """A timestamp the engine read back through raw SQL, as an aware UTC datetime.

    ``value``: None, a datetime, or ISO text (PostgreSQL's ``json_build_array`` gives
    text with an offset; SQLite's driver hands a ``datetime`` column back as a NAIVE
    datetime, and a JSON path as naive text). Naive values are UTC (the engine stores UTC
    on every database), so the result compares with any aware engine time. Every raw read
    of a time goes through here: a naive time compared with an aware one raises TypeError
    (issue 23: a branch committing beside a sibling in retry backoff, on SQLite).
    """
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
