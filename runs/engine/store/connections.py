"""This thread's database connections for the layers above the store: close, drop a broken one, keep them across tasks, run after commit.

The orchestration (loop, recovery, cluster, api) decides when: around a fork, at a
thread's end, between steps, after a commit. How is the store's, so that no engine
module above it imports ``django.db``.
"""
from __future__ import annotations

import os
from collections.abc import Callable

from django.db import DataError, connections, transaction

__all__ = [
    "DataError", "bound_idle_transactions", "close_all", "close_before_fork", "close_obsolete", "drop_broken", "in_transaction", "is_postgresql",
    "keep_for", "on_commit",
]


def bound_idle_transactions(seconds: float) -> bool:
    """Have PostgreSQL end this process's sessions that sit inside a transaction without a
    statement for ``seconds`` (``idle_in_transaction_session_timeout``, set at connect
    through libpq's ``options``: connections opened after this call; the URL's own
    ``-c`` settings still win). True when set; False on SQLite, behind a transaction
    pooler (preparing off: pgbouncer refuses ``options``) or for ``seconds`` <= 0.

    Why a worker host wants it: a host that is SIGSTOPped or cut off in the middle of a
    commit keeps that transaction's row locks (the run row, the step) on the server, and
    the takeover of its steps (runs.engine.store.recovery_queries.step_recover locks the
    run) waited for them until the host came back: 9-10 s after a stop of that length in
    the 1,000-run chaos run, past the 5 s takeover target. Ended by the server, the
    stalled commit fails on the host's next statement and is tried again on a fresh
    connection with the same fence (runs.engine.store.reconnect), which a takeover
    meanwhile has taken: refused, as every late commit is.
    """
    db = connections.settings["default"]
    if seconds <= 0 or not db["ENGINE"].endswith("postgresql") or db.get("DISABLE_SERVER_SIDE_CURSORS"):
        return False
    options = db.setdefault("OPTIONS", {})
    setting = f"-c idle_in_transaction_session_timeout={int(seconds * 1000)}"
    if setting not in str(options.get("options", "")):
        options["options"] = f"{setting} {options.get('options', '')}".strip()
    return True


def close_all() -> None:
    """Close this thread's connections (a thread's end, a failed pass: the next query reconnects)."""
    connections.close_all()


def close_obsolete() -> None:
    """Close this thread's connections that are unusable or older than ``CONN_MAX_AGE``
    (0, outside workers: every one), as Django does at a request's end: what a step
    thread does when its chain is over, so a worker's step threads keep theirs between
    tasks (runs.engine.cluster sets their age) and no other process is left holding any."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


def in_transaction() -> bool:
    """Whether this thread's default connection is inside a transaction (``atomic``): work
    it starts must then stay on this thread, since no other connection sees its writes."""
    return bool(connections["default"].in_atomic_block)


def drop_broken() -> None:
    """Close this thread's connections that had a database error and no longer answer
    (what ``close_old_connections()`` checks, without closing a healthy connection for
    its age), so a step's broken connection is replaced before the next query."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred and not conn.in_atomic_block:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()


def close_before_fork(main_pid: int) -> None:
    """Close the forking thread's database connections before the main process forks the
    sentinel or the sentinel forks a worker, monitor or pusher (runs.engine.cluster says why).

    Any other fork (a worker's expression sandbox) keeps them: its child never uses them,
    and closing would cost the worker a reconnect. A thread inside a transaction keeps
    its connection (closing it would lose the transaction); django-q2 forks from none."""
    if os.getpid() != main_pid and os.getppid() != main_pid:
        return
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


def keep_for(max_age: float | None) -> None:
    """Let this process's database connections live for ``max_age`` seconds (None: for
    the process's lifetime; 0: closed after each task) with health checks, instead of
    being closed by django-q2's ``close_old_connections()`` after every task and queue
    poll. Read by Django when a connection is opened; the settings dict is the process's
    own copy after a fork."""
    for alias in connections:
        connections.settings[alias]["CONN_MAX_AGE"] = max_age
        connections.settings[alias]["CONN_HEALTH_CHECKS"] = max_age != 0


def is_postgresql() -> bool:
    """Whether the default database is PostgreSQL (host heartbeats, the one-statement paths)."""
    return bool(connections["default"].vendor == "postgresql")


def on_commit(callback: Callable[[], object]) -> None:
    """Call ``callback`` after the current transaction commits (at once outside one)."""
    transaction.on_commit(callback)
