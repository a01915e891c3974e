"""The engine's one clock: times read back from raw SQL, and the database's now."""
from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError, connection
from django.utils import timezone

log = logging.getLogger("ballast.engine")


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


# How often a process re-reads the database's clock (seconds of its monotonic clock).
# In between, now() is the last reading advanced by the monotonic clock: a host whose
# wall clock is skewed or jumps (NTP step, faketime) does not move it, and a monotonic
# clock drifts by far less than a millisecond a second.
_RESYNC_SECONDS = 1.0
_anchor: tuple[datetime, float] | None = None  # (database time, time.monotonic() when read)


def now() -> datetime:
    """The database's current time, as an aware UTC datetime: the time every lease,
    heartbeat, due time, backoff and deadline of the engine is written and judged with.

    On SQLite (one host) this is the host's clock. On PostgreSQL it is
    ``clock_timestamp()``, read at most once a second per process (one ``SELECT`` on the
    default connection, unseen by Django's query log) and advanced by ``time.monotonic()`` in between: a worker whose
    wall clock runs a minute ahead writes and compares the same times as the database
    and every other host (issue 23: such a worker took over a live step 4 s into its
    30 s lease). The reading is skipped inside a transaction already in error (it would
    fail); when no reading was ever possible the host clock is used and logged.
    """
    global _anchor
    if connection.vendor != "postgresql":
        return timezone.now()
    mono = time.monotonic()
    anchor = _anchor
    if anchor is None or mono - anchor[1] >= _RESYNC_SECONDS:
        if not connection.needs_rollback:
            try:
                # On the driver's connection under Django's: the reading is not one of
                # the engine's statements (the pinned statement counts, the fault
                # injectors' execute wrappers do not see it).
                connection.ensure_connection()
                with connection.wrap_database_errors, connection.connection.cursor() as cursor:
                    # From here, not from before a reconnect: the round trip alone brackets the reading.
                    mono = time.monotonic()
                    cursor.execute("SELECT clock_timestamp()")
                    row = cursor.fetchone()
                read = db_time(row[0]) if row else None
                if read is not None:
                    # The reading was taken somewhere in the round trip: its middle.
                    after = time.monotonic()
                    anchor = _anchor = (read, (mono + after) / 2)
            except DatabaseError:
                if anchor is None:
                    raise
        if anchor is None:  # pragma: no cover - a broken transaction before any reading
            log.warning("the database clock could not be read: using this host's clock")
            return timezone.now()
    return anchor[0] + timedelta(seconds=time.monotonic() - anchor[1])


# How far past a process's reading of the database's clock a due time still counts as
# reached by a claim (a step's ``due_at`` and backoff, a waiting step's deadline, a due
# source's row). Each process reads that clock only to within its own round trip (longer
# when its GIL is busy or the host is loaded), so a worker answering a doorbell rung the
# instant a writer committed a step "due now" can read a time a few milliseconds before
# the writer's: without the slack its claim finds nothing, the doorbell is spent, and the
# step waits STALE_DISPATCH_SECONDS (30 s) for recovery to ring again (seen: a run queued
# 30 s under a worker with spinning step threads). A backoff or deadline so ends up to
# this much early, never late.
DUE_SLACK = timedelta(seconds=0.25)


def due_by(now: datetime) -> datetime:
    """The latest due time a claim made at ``now`` (this process's :func:`now`) takes as
    reached: ``now + DUE_SLACK``."""
    return now + DUE_SLACK


def forget() -> None:
    """Drop the last reading of the database's clock (tests that move the database's or
    this process's clock; the next :func:`now` reads it again)."""
    global _anchor
    _anchor = None
