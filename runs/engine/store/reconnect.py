"""Riding out a lost database connection: close it, reconnect, and do the same fenced write again."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, InternalError, OperationalError, connections

log = logging.getLogger("ballast.engine")

T = TypeVar("T")

# What a lost connection raises through Django: "terminating connection due to
# administrator command" (pg_terminate_backend, a restart, a failover), "server closed the
# connection unexpectedly", "the connection is closed" on the next use, a refused
# reconnect while the server is down, and InternalError "terminating connection due to
# idle-in-transaction timeout" (SQLSTATE 25P03: a worker host's commit that stalled past
# connections.bound_idle_transactions). Each is retried only when the connection is gone.
LOST_CONNECTION_ERRORS = (OperationalError, InterfaceError, InternalError)

# The first pause between tries and the longest (seconds): a blip is over in well under
# a second, a restart takes a few seconds.
_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0


def connection_lost(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether this thread's connection ``alias`` is gone (closed by Django after a failed
    rollback, never reopened because the server refused, or no longer answering
    ``SELECT 1``), as opposed to a database error on a live connection (a lock timeout,
    SQLite's "database is locked"). Never inside a transaction the caller holds: that
    transaction is lost with its connection, and only its owner may end it."""
    conn = connections[alias]
    if conn.in_atomic_block:
        return False
    return conn.connection is None or not conn.is_usable()


def retry_on_lost_connection(write: Callable[[], T], *, what: str, seconds: float | None = None) -> T:
    """``write()``, tried again on a fresh connection for as long as the connection it
    used was lost, for at most ``seconds`` (default ``settings.BALLAST_COMMIT_RETRY_SECONDS``)
    with pauses growing from 0.05 s to 1 s; returns what it returns.

    ``write`` must be safe to repeat: a fenced commit is (same attempt, same lease: a
    commit that landed before its reply was lost finds its fence gone and writes nothing;
    the caller tells that apart). Re-raises the last error when the time is up, and at
    once any error that did not lose the connection. ``what`` names the write in logs.
    """
    budget = float(getattr(settings, "BALLAST_COMMIT_RETRY_SECONDS", 30)) if seconds is None else seconds
    deadline = time.monotonic() + budget
    pause = _FIRST_PAUSE
    tries = 0
    while True:
        try:
            result = write()
        except LOST_CONNECTION_ERRORS as exc:
            if not connection_lost():
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.error("%s: the database connection is still lost after %gs; giving up: %s", what, budget, exc)
                raise
            tries += 1
            if tries == 1:
                log.warning("%s: the database connection was lost (%s); reconnecting and trying again for up to %gs", what, str(exc).strip(), budget)
            connections[DEFAULT_DB_ALIAS].close()
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _LONGEST_PAUSE)
            continue
        if tries:
            log.warning("%s: done after %d reconnect(s)", what, tries)
        return result
